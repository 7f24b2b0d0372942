"""The self-contained HTML report: one file, inline CSS/SVG/JS, a strict Content-Security-Policy.

Model outputs are data, never markup: the jinja environment autoescapes everything, data for the
script travels as JSON in a non-executable <script type="application/json"> (``tojson`` escapes
``<``, ``>``, ``&`` and ``'``), and the script inserts text with textContent only. The one inline
script is allowed by its sha256, so nothing else can run even if escaping ever failed.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from fasttrack import __version__
from fasttrack.fileio import atomic_write
from fasttrack.report import charts
from fasttrack.report import view as view_mod
from fasttrack.report.format import human, num, short_point
from fasttrack.report.reasons import first_screen
from fasttrack.report.templating import environment, static_assets

if TYPE_CHECKING:
    from fasttrack.report.sections import Kinds

DIRECTIONS = {
    "right_to_wrong": "right → wrong",
    "wrong_to_right": "wrong → right",
    "changed": "changed",
    "same": "unchanged",
}


def script_hash(script: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")


def content_security_policy(script: str) -> str:
    return (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src '{script_hash(script)}'; base-uri 'none'; form-action 'none'"
    )


def _environment_rows(env: Mapping[str, Any]) -> list[tuple[str, str]]:
    rows = []
    accs = env.get("accelerators")
    count = env.get("accelerator_count", env.get("device_count", len(accs) if isinstance(accs, list) else None))
    name = env.get("accelerator", "unknown")
    hardware = (
        "cpu, no GPU" if str(name).lower() == "cpu" and not count else f"{count if count is not None else '?'} × {name}"
    )
    archs = (
        sorted({str(a["arch"]) for a in accs if isinstance(a, Mapping) and a.get("arch")})
        if isinstance(accs, list)
        else []
    )
    if archs:  # AMD GPUs: their gfx target
        hardware += f" ({', '.join(archs)})"
    rows.append(("accelerator", f"{hardware} · interconnect {env.get('interconnect', 'unknown')}"))
    for key in ("cpu_model", "cpu_count", "os", "python", "cuda_driver", "accelerator_source"):
        if env.get(key) is not None:
            rows.append((key.replace("_", " "), str(env[key])))
    packages = env.get("packages") or {}
    if isinstance(packages, Mapping) and packages:
        rows.append(("packages", ", ".join(f"{k} {val or 'absent'}" for k, val in sorted(packages.items()))))
    return rows


def _build_rows(record: Any) -> list[tuple[str, str]]:
    """Provenance rows of the engine build (evidence ``engine_build``): declared, per side, conflicts."""
    if not isinstance(record, Mapping) or not record:
        return [("engine build", "not recorded (declare target.engine_build.command; servers' /version is read)")]
    rows = []
    for key in ("declared", "baseline", "candidate"):
        build = record.get(key)
        if not isinstance(build, Mapping):
            continue
        if build.get("error"):
            text = f"unknown ({build['error']})"
        else:
            parts = [f"{f.replace('_', ' ')} {build[f]}" for f in ("version", "commit", "image_digest") if build.get(f)]
            text = ", ".join(parts) or "unknown"
        rows.append((f"engine build ({key})", f"{text} · from {build.get('source', '?')}"))
    for conflict in record.get("conflicts") or ():
        rows.append(
            ("engine build CONFLICT", f"{conflict.get('side')} changed build during the run at {conflict.get('check')}")
        )
    return rows


def _dependency_rows(record: Any) -> list[tuple[str, str]]:
    """Provenance rows of the dependency builds (evidence ``dependencies``): one per name, with
    the manifest's requirement and, where the build did not meet it, why."""
    if not isinstance(record, Mapping):
        return []
    rows = []
    for name, build in sorted(record.items()):
        if not isinstance(build, Mapping):
            continue
        if build.get("error"):
            text = f"unknown ({build['error']})"
        elif not build.get("version") and not build.get("commit"):
            text = "not installed"
        else:
            text = ", ".join(f"{f} {build[f]}" for f in ("version", "commit") if build.get(f))
        if build.get("required"):
            text += f" · requires {build['required']}" + (f": NOT MET, {build['unmet']}" if build.get("unmet") else "")
        rows.append((f"dependency {name}", f"{text} · from {build.get('source', '?')}"))
    return rows


def render_html(evidence: Mapping[str, Any], digest: str, *, kinds: Kinds) -> str:
    """Render the report for already-read evidence (a plain dict) whose file sha256 is ``digest``;
    each check kind of ``kinds`` gives its part."""
    v = view_mod.build_view(evidence, digest, kinds)
    items = v.section("evals").get("flipped")
    css, script = static_assets()
    template = environment().get_template("report.html.j2")
    return template.render(
        v=v,
        css=Markup(css),  # our own stylesheet, not data
        script=Markup(script),  # our own script; its hash is in the CSP
        csp=content_security_policy(script),
        kinds=view_mod.kinds_table(evidence.get("checks", ())),
        letters=v.letters,
        items_json=[it.as_row() for it in items.shown] if items else [],
        directions=DIRECTIONS,
        audits_bad=any(c["status"] != "passed" for c in v.audits),
        screen=first_screen(evidence, kinds),
        speed_legend=charts.SPEED_LEGEND,
        env_rows=_build_rows(evidence.get("engine_build"))
        + _dependency_rows(evidence.get("dependencies"))
        + _environment_rows(evidence.get("environment") or {}),
        point=short_point,
        num=num,
        human=human,
        version=__version__,
    )


def write_html(evidence: Mapping[str, Any], digest: str, path: Path, *, kinds: Kinds) -> Path:
    path = Path(path)
    atomic_write(path, render_html(evidence, digest, kinds=kinds).encode("utf-8"))
    return path
