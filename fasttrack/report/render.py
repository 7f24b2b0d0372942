"""Render every report of one evidence file: what `fasttrack check` and `fasttrack merge` call
after the run and what `fasttrack report` calls with explicit paths."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fasttrack.errors import EvidenceError
from fasttrack.evidence import read_evidence_dict

if TYPE_CHECKING:
    from fasttrack.report.sections import Kinds


@dataclass(frozen=True)
class Rendered:
    html: Path | None
    markdown: Path | None
    junit: Path | None
    verdict: str
    annotations: tuple[str, ...] = ()
    summary: str = ""  # the text summary (summary.txt), also printed by the CLI

    @property
    def paths(self) -> tuple[Path, ...]:
        return tuple(p for p in (self.html, self.markdown, self.junit) if p)


def load(evidence_path: Path, kinds: Kinds) -> tuple[dict[str, Any], str]:
    """The evidence (schema-validated for ``kinds``) and the sha256 of its file's bytes."""
    path = Path(evidence_path)
    if path.is_dir():
        path = path / "evidence.json"
    data = read_evidence_dict(path, kinds=kinds)
    return data, hashlib.sha256(path.read_bytes()).hexdigest()


def render_reports(
    evidence_path: Path,
    *,
    kinds: Kinds,
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

    evidence, digest = load(evidence_path, kinds)
    try:
        md_text = render_markdown(evidence, digest, report_link=html.name if html else None, kinds=kinds)
        html_path = write_html(evidence, digest, html, kinds=kinds) if html else None
        junit_path = write_junit(evidence, junit) if junit else None
    except (KeyError, TypeError, ValueError) as err:  # schema-valid but not what reporters expect
        raise EvidenceError(f"{evidence_path}: cannot render a report from this evidence: {err!r}") from None
    write_markdown(md_text, markdown)
    done = annotations.emit(evidence, md_text, echo=echo) if annotate else []
    return Rendered(
        html_path, Path(markdown) if markdown else None, junit_path, evidence["verdict"]["status"], tuple(done)
    )


def render_all(
    evidence_path: Path, out_dir: Path, *, kinds: Kinds, reports: bool = True, annotate: bool = True
) -> Rendered:
    """What `fasttrack check` and `fasttrack merge` write after the run: summary.txt always; with
    ``reports`` also report.html, summary.md and junit.xml in ``out_dir``, the step summary and CI
    annotations."""
    from fasttrack.evidence import read_evidence
    from fasttrack.fileio import atomic_write
    from fasttrack.report.summary import summary_text

    out = Path(out_dir)
    summary = summary_text(read_evidence(Path(evidence_path), kinds), kinds)
    atomic_write(out / "summary.txt", summary.encode("utf-8"))
    if not reports:
        return Rendered(None, None, None, "", summary=summary)
    rendered = render_reports(
        evidence_path,
        kinds=kinds,
        html=out / "report.html",
        markdown=out / "summary.md",
        junit=out / "junit.xml",
        annotate=annotate,
    )
    return replace(rendered, summary=summary)
