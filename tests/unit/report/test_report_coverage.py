"""The coverage map (fasttrack.report.coverage): per declared scope value, the kinds that ran it end
to end, those that reached it only in kernel tests, and the axes a reviewer has to know about in
words. Only outcomes that ran count; whether a kind is end to end comes from the registry."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fasttrack.evidence import CheckOutcome, Status
from fasttrack.kinds.registry import KINDS
from fasttrack.report.coverage import Coverage, build_coverage
from fasttrack.report.html import render_html
from fasttrack.report.markdown import render_markdown
from support.evidence_fixtures import build_evidence

CPU = {"accelerator": "cpu", "device_count": 1}


def _pid(dims: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(dims.items()))


def _outcome(kind: str, name: str, dims: dict[str, Any] | None, status: Status = Status.PASSED) -> CheckOutcome:
    pid = _pid(dims) if dims else None
    code = {Status.NOT_RUN: "underpowered", Status.ERRORED: "timeout"}.get(status)
    return CheckOutcome(
        f"{kind}/{name}" + (f"@{pid}" if pid else ""), kind, name, status, dims, pid, True, code, code and "why"
    )


def reach(coverage: Coverage | None, dimension: str, value: Any) -> str:
    row = coverage.row(dimension, value) if coverage is not None else None
    assert row is not None, (dimension, value)
    return row.reach


def evidence(extra: tuple[CheckOutcome, ...] = ()) -> dict[str, Any]:
    """Scope: cpu, TP 1/2/4, fp32/bf16, batch 1/8. Kernel tests ran at TP 1 and 2 at every dtype
    and batch (TP 4 did not run); end to end, evals ran fp32 at TP 1 (TP 2 underpowered: not run),
    a benchmark ran batch 1 (batch 8 errored), features ran at TP 1 without recording a dtype or
    a batch."""
    points = [
        {**CPU, "tensor_parallel": tp, "dtype": dt, "batch": b}
        for tp in (1, 2, 4)
        for dt in ("fp32", "bf16")
        for b in (1, 8)
    ]
    checks = [_outcome("scope_diff", "code_paths", None)]
    for p in points:
        ran = p["tensor_parallel"] != 4
        checks.append(_outcome("kernels", "k", p, Status.PASSED if ran else Status.NOT_RUN))
    checks += [
        _outcome("evals", "mrcr", {**CPU, "tensor_parallel": 1, "dtype": "fp32"}),
        _outcome("evals", "mrcr", {**CPU, "tensor_parallel": 2, "dtype": "fp32"}, Status.NOT_RUN),
        _outcome("benchmarks", "decode", {**CPU, "tensor_parallel": 1, "dtype": "fp32", "batch": 1}, Status.FAILED),
        _outcome("benchmarks", "decode", {**CPU, "tensor_parallel": 1, "dtype": "fp32", "batch": 8}, Status.ERRORED),
        _outcome("features", "logprobs", {**CPU, "tensor_parallel": 1}),
        *extra,
    ]
    base = build_evidence("kimi-k3-latency", "pass", samples=4)
    built = replace(base, scope_points=tuple({"id": _pid(p), "dims": p} for p in points)).with_checks(checks)
    return built.to_dict()


def test_values_only_kernel_tests_reached_and_a_held_fixed_axis_are_flagged_in_words():
    cov = build_coverage(evidence(), KINDS)
    assert cov is not None
    assert [g.dimension for g in cov.groups] == ["accelerator", "device_count", "tensor_parallel", "batch", "dtype"]
    assert [c.kind for c in cov.columns] == ["kernels", "evals", "features", "benchmarks"]  # registry order
    assert cov.left_out == ("scope_diff",)  # static: exercises no scope value
    fp32, bf16 = cov.row("dtype", "fp32"), cov.row("dtype", "bf16")
    assert fp32 and fp32.reach == "end_to_end" and fp32.end_to_end == ("evals", "benchmarks")
    assert bf16 and bf16.reach == "kernel" and bf16.kernel == ("kernels",) and bf16.reach_text == "kernel tests only"
    assert (
        "dtype: end-to-end checks ran fp32 only; bf16 reached only in kernel tests "
        "(features ran without recording a dtype)"
    ) in cov.flags
    # a value every outcome there left unrun: reached by nothing, with the count of what did not run
    assert (
        "tensor_parallel: end-to-end checks ran 1 only; 2 reached only in kernel tests; "
        "no outcome that ran reached 4 (4 outcomes there did not run or errored)"
    ) in cov.flags
    four = cov.row("tensor_parallel", 4)
    assert four and four.reach == "none" and four.idle == 4


def test_not_run_and_errored_outcomes_exercise_nothing():
    cov = build_coverage(evidence(), KINDS)
    assert cov is not None
    two = cov.row("tensor_parallel", 2)
    assert two and two.end_to_end == ()  # the evals at TP 2 did not run
    evals = next(i for i, c in enumerate(cov.columns) if c.kind == "evals")
    assert (two.cells[evals].state, two.cells[evals].ran, two.cells[evals].idle) == ("not_run", 0, 1)
    batch8 = cov.row("batch", 8)
    assert batch8 and batch8.reach == "kernel"  # the benchmark at batch 8 errored
    batch1 = cov.row("batch", 1)
    assert batch1 and batch1.end_to_end == ("benchmarks",)  # a failed outcome ran: it counts
    assert (
        "batch: end-to-end checks ran 1 only; 8 reached only in kernel tests "
        "(evals and features ran without recording a batch)"
    ) in cov.flags
    # once the TP 2 eval runs, TP 2 is end to end and the axis is no longer held fixed
    ran = build_coverage(evidence((_outcome("evals", "aime", {**CPU, "tensor_parallel": 2, "dtype": "fp32"}),)), KINDS)
    assert ran is not None and reach(ran, "tensor_parallel", 2) == "end_to_end"
    assert not any(f.startswith("tensor_parallel: end-to-end checks ran 1 only") for f in ran.flags)


def test_an_axis_no_end_to_end_check_recorded_is_flagged():
    data = evidence()
    data["checks"] = [c for c in data["checks"] if c["kind"] not in ("evals", "benchmarks")]
    cov = build_coverage(data, KINDS)
    assert cov is not None
    assert (
        "dtype: nothing end to end ran any declared dtype; fp32 and bf16 reached only in kernel tests "
        "(the end-to-end checks ran without recording a dtype)"
    ) in cov.flags


def test_a_dimension_with_one_value_counts_every_outcome_that_ran_at_a_scope_point():
    cov = build_coverage(evidence(), KINDS)
    assert cov is not None
    cpu = cov.row("accelerator", "cpu")
    assert cpu and cpu.end_to_end == ("evals", "features", "benchmarks")
    features = next(i for i, c in enumerate(cov.columns) if c.kind == "features")
    fp32 = cov.row("dtype", "fp32")
    assert fp32 is not None and fp32.cells[features].state == "unrecorded"
    assert not any(f.startswith(("accelerator", "device_count")) for f in cov.flags)


def test_what_end_to_end_means_comes_from_the_registry_not_from_kind_names():
    kinds = dict(KINDS)
    kinds["kernels"] = replace(KINDS["kernels"], exercises="end_to_end")  # type: ignore[type-var]
    cov = build_coverage(evidence(), kinds)
    assert reach(cov, "dtype", "bf16") == "end_to_end"
    kinds["evals"] = replace(KINDS["evals"], exercises="static")  # type: ignore[type-var]
    cov = build_coverage(evidence((_outcome("mystery", "x", {**CPU, "tensor_parallel": 4, "dtype": "bf16"}),)), kinds)
    assert cov is not None and "evals" in cov.left_out and "mystery" in cov.left_out  # unknown kinds count for nothing
    assert reach(cov, "tensor_parallel", 4) == "none"


def test_no_scope_points_no_map():
    data = evidence()
    data["scope_points"] = []
    assert build_coverage(data, KINDS) is None


def test_the_html_report_and_summary_show_the_map():
    data = evidence()
    html = render_html(data, "0" * 64, kinds=KINDS)
    assert '<a href="#coverage">Coverage</a>' in html
    section = html[html.index('<section id="coverage">') : html.index('<section id="evals">')]
    assert "<h2>Coverage</h2>" in section
    assert "dtype: end-to-end checks ran fp32 only; bf16 reached only in kernel tests" in section
    assert 'data-dimension="dtype" data-value="bf16"' in section and "kernel tests only" in section
    assert "http://" not in section and "https://" not in section  # self-contained
    md = render_markdown(data, "0" * 64, kinds=KINDS)
    assert "### Coverage of the declared scope" in md
    assert "| dtype | fp32 | bf16 | – |" in md
    assert "- ⚠️ dtype: end-to-end checks ran fp32 only" in md


def test_the_example_runs_bf16_end_to_end_and_reaches_every_context_edge_in_kernel_tests():
    """#34 part 2 on the example's plan: divergence and the full-context probe run at each dtype,
    the context-edge kernel suite at each context bucket (outcomes shaped as a run writes them)."""
    import json

    from fasttrack.evidence import canonical_bytes
    from support.paths import EXAMPLE
    from support.planned_evidence import planned_evidence

    example = json.loads(canonical_bytes(planned_evidence(EXAMPLE / "fasttrack.yaml").to_dict()))
    coverage = build_coverage(example, KINDS)
    bf16 = coverage.row("dtype", "bf16") if coverage is not None else None
    assert bf16 is not None and {"divergence", "features"} <= set(bf16.end_to_end)
    for edge in (1024, 2048, 4096):
        assert "kernels" in coverage.row("context", edge).kernel  # type: ignore[union-attr]
    assert not any(flag.startswith("dtype:") for flag in coverage.flags)  # type: ignore[union-attr]
