"""`fasttrack check` on the Kimi K3 manifest, on a machine without GB300s: the claims lint runs
anyway, and the evidence, the summary and the reports show its flags and labels."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from fasttrack.evidence import validate_evidence_dict

ROOT = Path(__file__).resolve().parents[2]


def test_kimi_claims_lint_is_evidence_and_in_every_report(tmp_path):
    out = tmp_path / "k"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "fasttrack",
            "check",
            "examples/kimi-k3-latency/fasttrack.yaml",
            "-q",
            "--out",
            str(out),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 3, done.stdout + done.stderr  # the GB300 checks cannot run here
    evidence = json.loads((out / "evidence.json").read_text())
    validate_evidence_dict(evidence)
    claims = {c["name"]: c for c in evidence["checks"] if c["kind"] == "claims"}
    assert len(claims) == 7 and all(c["status"] in ("passed", "not_run") for c in claims.values())
    agentx, headline = claims["agentx-p90-224-to-403"], claims["dspark-842"]
    assert (agentx["status"], agentx["reason_code"]) == ("not_run", "not_comparable")
    assert {"synthetic_acceptance", "prefill_excluded"} <= set(headline["measurements"]["labels"])
    # The summary lists the lint; the verdict is not changed by it (claims are not required).
    assert "claim 'agentx-p90-224-to-403' (agentx-interactivity): not comparable (gpus: 8 vs 16)" in done.stdout
    assert (
        "claim 'dspark-842' (dspark-synthetic-acceptance): labelled synthetic_acceptance, prefill_excluded"
        in done.stdout
    )
    assert evidence["verdict"]["counts"]["passed"] == 0
    markdown = (out / "summary.md").read_text()
    assert "### Benchmark claims" in markdown and "synthetic_acceptance, prefill_excluded" in markdown
    html = (out / "report.html").read_text()
    assert "<td>agentx-p90-224-to-403</td>" in html and "<td>not comparable</td>" in html
    for label in ("not comparable", "synthetic acceptance", "prefill excluded"):
        assert f'<span class="badge label">{label}</span>' in html
