"""`fasttrack merge` of parts that selected different kinds: a CPU run of every kind beside H200
runs of some kinds each (the example's whole scope in device calls of at most 10 minutes)."""

from __future__ import annotations

from fasttrack.engine.merge import merge_evidence
from fasttrack.evidence import Status
from fasttrack.kinds.registry import KINDS
from support.paths import ROOT
from support.planned_evidence import narrowed, planned_evidence

MINI = ROOT / "examples" / "mini-k3" / "fasttrack.yaml"  # cpu and one H200


def parts(*selections: dict) -> list:
    whole = planned_evidence(MINI)
    return [narrowed(whole, **selection) for selection in selections]


def test_parts_of_different_kinds_merge_into_the_whole_scope():
    merged = merge_evidence(
        parts(
            {"hardware": ("cpu",)},
            {"hardware": ("NVIDIA H200",), "only": ("evals", "features")},
            {"hardware": ("NVIDIA H200",), "skip": ("evals", "features")},
        )
    )
    assert merged.run.only == () and merged.run.skip == () and merged.run.hardware == ()
    assert merged.verdict.status == "PASS"
    assert all(c.status is Status.PASSED for c in merged.checks if c.required)
    assert not [c for c in merged.checks if c.reason_code == "out_of_scope"]


def test_a_kind_no_part_ran_is_required_again_and_named():
    merged = merge_evidence(
        parts({"hardware": ("cpu",)}, {"hardware": ("NVIDIA H200",), "only": ("evals", "features")})
    )
    assert merged.run.only == ()  # the CPU part selected every kind
    missing = [c for c in merged.checks if c.reason_code == "out_of_scope" and c.required]
    assert missing and {c.scope_point["accelerator"] for c in missing} == {"NVIDIA H200"}
    assert {c.kind for c in missing} >= {"kernels", "benchmarks"} and "evals" not in {c.kind for c in missing}
    assert "no merged run covered NVIDIA H200" in missing[0].reason and "--only evals,features" in missing[0].reason
    assert merged.verdict.status == "INCOMPLETE"


def test_parts_that_together_leave_a_kind_out_keep_it_out():
    merged = merge_evidence(
        parts(
            {"hardware": ("cpu",), "only": ("kernels",)}, {"hardware": ("NVIDIA H200",), "only": ("kernels", "stress")}
        )
    )
    assert merged.run.only == ("kernels", "stress")  # a partial run still, and says so
    evals = [c for c in merged.checks if c.kind == "evals"]
    assert evals and all(not c.required for c in evals)


def test_a_merged_pass_names_its_own_folder_in_the_next_verify():
    from pathlib import Path

    from fasttrack.report.reasons import next_step, reason_groups

    out = Path("results") / "merged"
    merged = merge_evidence(parts({"hardware": ("cpu",)}, {"hardware": ("NVIDIA H200",)}), out_dir=out).to_dict()
    step = next_step(merged, [g.key for g in reason_groups(merged, KINDS)], KINDS)
    assert step is not None and step.command.startswith(f"fasttrack verify {out}/evidence.json --manifest ")
    unnamed = merge_evidence(parts({"hardware": ("cpu",)}, {"hardware": ("NVIDIA H200",)})).to_dict()
    assert next_step(unnamed, [g.key for g in reason_groups(unnamed, KINDS)], KINDS).command.startswith(
        "fasttrack verify fasttrack-out/"
    )
