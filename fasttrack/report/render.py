"""Render every report of one evidence file: what `fasttrack check` calls at the end and what
`fasttrack report` calls with explicit paths."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from fasttrack.errors import EvidenceError
from fasttrack.evidence import read_evidence_dict


@dataclass(frozen=True)
class Rendered:
    html: Path | None
    markdown: Path | None
    junit: Path | None
    verdict: str
    annotations: tuple[str, ...] = ()


def load(evidence_path: Path) -> tuple[dict[str, Any], str]:
    """The evidence (schema-validated) and the sha256 of its file's bytes."""
    path = Path(evidence_path)
    if path.is_dir():
        path = path / "evidence.json"
    data = read_evidence_dict(path)
    return data, hashlib.sha256(path.read_bytes()).hexdigest()


def render_reports(
    evidence_path: Path,
    *,
    html: Path | None = None,
    markdown: Path | None = None,
    junit: Path | None = None,
    annotate: bool = True,
    echo: Callable[[str], None] = print,
) -> Rendered:
    from fasttrack.report import annotations
    from fasttrack.report.html import write_html
    from fasttrack.report.junit import write_junit
    from fasttrack.report.markdown import render_markdown, write_markdown

    evidence, digest = load(evidence_path)
    try:
        md_text = render_markdown(evidence, digest, report_link=html.name if html else None)
        html_path = write_html(evidence, digest, html) if html else None
        junit_path = write_junit(evidence, junit) if junit else None
    except (KeyError, TypeError, ValueError) as err:  # schema-valid but not what reporters expect
        raise EvidenceError(f"{evidence_path}: cannot render a report from this evidence: {err!r}") from None
    write_markdown(md_text, markdown)
    done = annotations.emit(evidence, md_text, echo=echo) if annotate else []
    return Rendered(html_path, Path(markdown) if markdown else None, junit_path, evidence["verdict"]["status"], tuple(done))


def render_all(evidence_path: Path, out_dir: Path, *, annotate: bool = True, attest: bool = True) -> Rendered:
    """What `fasttrack check` writes at the end: report.html, summary.md and junit.xml in
    ``out_dir``, the step summary and CI annotations, and (unsigned) the digest sidecar and in-toto
    attestation beside the evidence, so `fasttrack verify` works on the output as it is."""
    out = Path(out_dir)
    rendered = render_reports(evidence_path, html=out / "report.html", markdown=out / "summary.md", junit=out / "junit.xml",
                              annotate=annotate)
    if attest:
        from fasttrack.attest import attest as write_attestation

        write_attestation(Path(evidence_path))
    return rendered


