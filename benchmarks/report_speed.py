"""How fast a 10,000-sample evidence renders and opens.

    python benchmarks/report_speed.py [--samples 10000] [--keep DIR]

Prints render time (read + validate + render HTML), file size, and Chromium's load-event time.
Targets: render < 3 s, file <= 10 MB, load < 2 s. Exit 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the evidence builders the test suite uses (tests/support)

from fasttrack.evidence import read_evidence_dict, write_evidence
from fasttrack.kinds.registry import KINDS
from fasttrack.report.html import write_html
from support.evidence_fixtures import build_evidence

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
TARGET_RENDER_S, TARGET_BYTES, TARGET_OPEN_S = 3.0, 10 * 1000 * 1000, 2.0


def open_time(html: Path) -> float | None:
    """Seconds from navigation start to the load event in headless Chromium (None: no Chromium)."""
    if not Path(CHROMIUM).exists():
        return None
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        page = browser.new_page()
        page.goto("about:blank")
        page.goto(html.as_uri(), wait_until="load")
        ms = page.evaluate(
            "() => { const n = performance.getEntriesByType('navigation')[0]; return n.loadEventEnd - n.startTime; }"
        )
        browser.close()
    return ms / 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10_000, help="eval samples per task at the main scope point")
    parser.add_argument("--keep", type=Path, help="write the evidence and report here instead of a temporary directory")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.keep or Path(tmp)
        evidence_path = out / "evidence.json"
        write_evidence(build_evidence("kimi-k3-latency", "fail", samples=args.samples), evidence_path)
        n_samples = sum(
            len((c["measurements"] or {}).get("samples") or []) for c in read_evidence_dict(evidence_path)["checks"]
        )
        start = time.perf_counter()
        data = read_evidence_dict(evidence_path)
        html = write_html(
            data, hashlib.sha256(evidence_path.read_bytes()).hexdigest(), out / "report.html", kinds=KINDS
        )
        render_s = time.perf_counter() - start
        size = html.stat().st_size
        load_s = open_time(html)
        evidence_mb = evidence_path.stat().st_size / 1e6
    print(f"evidence: {evidence_mb:.1f} MB, {n_samples} eval samples")
    print(f"render:   {render_s:.2f} s (target < {TARGET_RENDER_S} s)")
    print(f"size:     {size / 1e6:.2f} MB (target <= {TARGET_BYTES / 1e6:.0f} MB)")
    print(
        f"open:     {'n/a (no chromium)' if load_s is None else f'{load_s:.2f} s'} (target < {TARGET_OPEN_S} s, load event)"
    )
    missed = render_s >= TARGET_RENDER_S or size > TARGET_BYTES or (load_s is not None and load_s >= TARGET_OPEN_S)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
