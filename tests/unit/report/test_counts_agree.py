"""One definition of each count (fasttrack.evidence.counts): the terminal, the report, summary.md
and `verify` say the same numbers, on the example's evidence and on a merged evidence."""

from __future__ import annotations

import json
import re
from html import unescape

import pytest

from fasttrack.evidence import read_evidence, read_evidence_dict, write_evidence
from fasttrack.evidence.counts import RunCounts
from fasttrack.kinds.registry import KINDS
from fasttrack.report.html import render_html
from fasttrack.report.markdown import render_markdown
from fasttrack.report.summary import summary_text
from fasttrack.report.view import kinds_table
from fasttrack.verification.verify import VerifyOptions, verify
from support.example_evidence import example_evidence
from support.paths import ROOT

MERGED = ROOT / "benchmarks" / "results" / "mini-k3-full-scope" / "evidence.json"


def _numbers(text: str, counts: RunCounts) -> None:
    flat = " ".join(text.split())
    assert counts.headline() in flat, counts.headline()
    assert counts.sizes() in flat, counts.sizes()


@pytest.mark.parametrize("which", ["example", "merged"])
def test_every_reader_says_the_same_counts(tmp_path, which):
    if which == "merged":
        evidence_path = tmp_path / "evidence.json"
        evidence_path.write_bytes(MERGED.read_bytes())
        for name in ("evidence.json.sha256", "attestation.intoto.json"):
            (tmp_path / name).write_bytes((MERGED.parent / name).read_bytes())
    else:
        evidence_path = tmp_path / "evidence.json"
        write_evidence(example_evidence(), evidence_path)
    data = read_evidence_dict(evidence_path, kinds=KINDS)
    counts = RunCounts.of(data)
    # the verdict's own counts are the required outcomes by status
    assert {k: v for k, v in counts.required.items() if v} == {k: v for k, v in data["verdict"]["counts"].items() if v}
    assert counts.outcomes == len(data["checks"]) and counts.check_instances <= counts.outcomes
    terminal = summary_text(read_evidence(evidence_path, kinds=KINDS), KINDS)
    html = unescape(re.sub(r"<[^>]+>", " ", render_html(data, "0" * 64, kinds=KINDS)))
    markdown = render_markdown(data, "0" * 64, kinds=KINDS)
    for text in (terminal, html, markdown):
        _numbers(text, counts)
    found = {f.name: f.message for f in verify(VerifyOptions(evidence_path), KINDS).findings}
    _numbers(found["verdict"], counts)
    # the per-kind table adds up to the headline
    rows = kinds_table(data["checks"])
    for status in ("passed", "failed", "errored", "not_run"):
        assert sum(r[status] for r in rows) == counts.required.get(status, 0)
    assert sum(r["not_required"] for r in rows) == counts.outcomes - counts.required_outcomes
    assert json.loads(evidence_path.read_text())["checks"]
