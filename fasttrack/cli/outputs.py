"""What `check` and `merge` do with finished evidence: the summary and reports (views of the
evidence: their failure warns and never changes the verdict) and, with reports, the unsigned
digest sidecar and in-toto attestation, so `fasttrack verify` works on the output as it is."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from fasttrack.errors import OutputError
from fasttrack.evidence import Evidence
from fasttrack.report.render import Rendered, render_all
from fasttrack.report.summary import summary_text

if TYPE_CHECKING:
    from fasttrack.kinds.base import Kinds


def write_outputs(evidence: Evidence, evidence_path: Path, out_dir: Path, *, reports: bool, kinds: Kinds) -> Rendered:
    """Summary, reports and attestation. A render bug warns (the verdict stands without the
    views); an output that cannot be written (a full disk) is an OutputError, exit 3, naming it
    and saying that the evidence itself is complete."""
    done = f"{evidence_path} is complete (verdict {evidence.verdict.status.value}); only this output is missing"
    try:
        rendered = render_all(evidence_path, out_dir, kinds=kinds, reports=reports)
    except OutputError as err:
        raise err.with_context(done) from None
    except Exception as err:  # reports are views of the evidence: the verdict stands without them
        click.echo(
            f"warning: rendering reports failed ({type(err).__name__}: {err}); evidence.json is complete", err=True
        )
        return Rendered(None, None, None, evidence.verdict.status.value, summary=summary_text(evidence, kinds))
    if reports:
        from fasttrack.attest import attest

        try:
            attest(evidence_path, kinds=kinds)
        except OutputError as err:
            raise err.with_context(done) from None
    return rendered
