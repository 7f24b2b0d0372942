"""A static site over many runs: one index listing every optimisation with its latest verdict,
history and trend, linking to each run's own report (rendered into the site), and every speed-up
or eval mean that dropped beyond both intervals against the run before it (`fasttrack.history`)."""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from markupsafe import Markup

from fasttrack.errors import UsageError
from fasttrack.evidence import read_evidence_dict
from fasttrack.fileio import atomic_write
from fasttrack.history import Measured, drops_over
from fasttrack.report import charts
from fasttrack.report.format import WORKLOAD_DIMENSIONS, as_map
from fasttrack.report.html import write_html
from fasttrack.report.sections import Reported, of_kind
from fasttrack.report.templating import environment, static_assets


class _Kind(Reported, Measured, Protocol):
    """What the dashboard needs of a check kind: its report section and its measurements."""


Kinds = Mapping[str, _Kind]  # the registry, as the dashboard receives it
DASHBOARD_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; script-src 'none'; base-uri 'none'; form-action 'none'"


@dataclass(frozen=True)
class Run:
    evidence: Mapping[str, Any]
    digest: str
    source: Path
    href: str  # report path relative to the site root
    key_eval: str | None
    key_diff: float | None

    @property
    def verdict(self) -> str:
        return self.evidence["verdict"]["status"]

    @property
    def started(self) -> str:
        return self.evidence["run"]["started_at"]


@dataclass(frozen=True)
class Site:
    index: Path
    optimisations: int
    runs: int


def find_evidence(inputs: Sequence[Path]) -> list[Path]:
    found: list[Path] = []
    for item in inputs:
        item = Path(item)
        if item.is_dir():
            found += sorted(item.rglob("evidence.json"))
        elif item.is_file():
            found.append(item)
        else:
            raise UsageError(f"{item}: no such file or directory")
    if not found:
        raise UsageError("no evidence.json found in " + ", ".join(str(i) for i in inputs))
    return list(dict.fromkeys(p.resolve() for p in found))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or "run"


def key_eval(evidence: Mapping[str, Any], kinds: Kinds) -> tuple[str | None, float | None]:
    """The value of the run's trend line: the first kind's (in registry order) that has one (the
    evals': the first declared eval's mean paired difference over its outcomes)."""
    checks = list(evidence.get("checks", ()))
    for name, kind in kinds.items():
        section = kind.report
        if section is not None and section.trend is not None:
            return section.trend(evidence, of_kind(checks, name))
    return None, None


HARDWARE_KEYS = ("accelerator", "device_count", "tensor_parallel")


def engine_dimensions(evidence: Mapping[str, Any]) -> str:
    """'kv_cache_dtype: auto, fp8_e4m3; attention_backend: FLASHINFER_MLA' from the scope points
    (every dimension other than hardware and workload), or '' when the scope has none."""
    values: dict[str, set[str]] = defaultdict(set)
    for p in evidence.get("scope_points", ()):
        for k, v in as_map(as_map(p).get("dims")).items():
            if k not in HARDWARE_KEYS and k not in WORKLOAD_DIMENSIONS:
                values[k].add(str(v))
    return "; ".join(f"{k}: {', '.join(sorted(v))}" for k, v in sorted(values.items()))


def build_site(inputs: Sequence[Path], out_dir: Path, kinds: Kinds) -> Site:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    runs: dict[str, list[Run]] = defaultdict(list)
    used: set[str] = set()
    for path in find_evidence(inputs):
        evidence = read_evidence_dict(path, kinds=kinds)
        digest = hashlib.sha256(path.read_bytes()).hexdigest()
        opt = evidence["manifest"]["optimisation_id"]
        href = f"runs/{_slug(opt)}/{_slug(evidence['run']['id'])}.html"
        if href in used:
            href = href.removesuffix(".html") + f"-{digest[:8]}.html"
        used.add(href)
        write_html(evidence, digest, out / href, kinds=kinds)
        task, diff = key_eval(evidence, kinds)
        runs[opt].append(Run(evidence, digest, path, href, task, diff))
    rows = []
    for opt, history in sorted(runs.items()):
        history.sort(key=lambda r: r.started)
        latest = history[-1]
        dropped = drops_over([r.evidence for r in history], kinds)
        rows.append(
            {
                "id": opt,
                "title": latest.evidence["manifest"]["title"],
                "model": latest.evidence["manifest"]["model_id"],
                "latest": latest,
                "history": history,
                "trend": charts.sparkline([r.verdict for r in history], [r.key_diff for r in history]),
                "key_eval": latest.key_eval,
                # against the run before, on the same hardware: values that dropped beyond both intervals
                "drops": [
                    f"{run.started[:10]}: {c.now.name} at {c.now.id.split('@', 1)[-1]}: {c.sentence()}"
                    for run, found in zip(history, dropped)
                    for c in found
                ],
                "engine_dims": engine_dimensions(latest.evidence),
            }
        )
    css, _ = static_assets()
    html = (
        environment()
        .get_template("dashboard.html.j2")
        .render(rows=rows, css=Markup(css), csp=DASHBOARD_CSP, total=sum(len(h) for h in runs.values()))
    )
    index = out / "index.html"
    atomic_write(index, html.encode("utf-8"))
    return Site(index, len(runs), sum(len(h) for h in runs.values()))
