"""Reports of a partial run (--only, --hardware) say what was left out, by name."""

from __future__ import annotations

import copy

from fasttrack.kinds.registry import KINDS
from fasttrack.report.html import render_html
from fasttrack.report.markdown import render_markdown
from fasttrack.report.view import partial_run_notes


def narrowed(evidence, hardware=("cpu",), only=()):
    """The pass fixture as if run with --hardware/--only: one H200 outcome excluded."""
    e = copy.deepcopy(evidence)
    e["run"]["hardware"], e["run"]["only"] = list(hardware), list(only)
    e["checks"].append(
        {
            "id": "kernels/k@accelerator=NVIDIA H200,batch=1",
            "kind": "kernels",
            "name": "k",
            "status": "not_run",
            "scope_point": {"accelerator": "NVIDIA H200", "batch": 1},
            "scope_point_id": "accelerator=NVIDIA H200,batch=1",
            "required": False,
            "reason_code": "out_of_scope",
            "reason": "NVIDIA H200 excluded by --hardware cpu",
            "started_at": None,
            "duration_s": 0.0,
            "measurements": {},
            "artifacts": [],
            "inputs_digest": None,
        }
    )
    return e


def test_full_run_has_no_partial_notes(load):
    evidence, _ = load("pass")
    assert partial_run_notes(evidence) == []


def test_hardware_and_kind_exclusions_are_named(load):
    evidence, digest = load("pass")
    e = narrowed(evidence, only=("kernels",))
    notes = partial_run_notes(e)
    assert notes[0] == "Partial run (only kernels): the other check kinds were not run and not counted."
    assert notes[1].startswith("Partial run for hardware cpu:") and notes[1].endswith(
        "NVIDIA H200: 1 outcome: kernels/k"
    )
    markdown = render_markdown(e, digest, kinds=KINDS)
    assert "> **Partial run for hardware cpu:" in markdown
    html = render_html(e, digest, kinds=KINDS)
    assert "Partial run for hardware cpu:" in html and "· hardware cpu" in html


def test_excluded_kinds_are_not_listed_again_under_hardware(load):
    evidence, _ = load("pass")
    notes = partial_run_notes(narrowed(evidence, only=("evals",)))
    assert len(notes) == 1 and notes[0].startswith("Partial run (only evals)")
