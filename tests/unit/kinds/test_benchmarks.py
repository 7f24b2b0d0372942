"""Benchmark runner: alternating runs, paired ratio with CI, where-it-works rule, claims, census."""

from __future__ import annotations

from pathlib import Path

import pytest

from fasttrack.evidence import Status
from fasttrack.kinds.benchmarks import census, decide, speed, timing
from fasttrack.kinds.benchmarks import run as bench_run
from fasttrack.kinds.context import RunContext
from fasttrack.manifest import ScopePoint, load_manifest
from fasttrack.manifest.sections import thaw
from fasttrack.plan import CheckInstance

FAKE_MANIFEST = Path(__file__).resolve().parents[1] / "probes" / "fake_manifest.yaml"


def run_point(tmp_path: Path, batch: int, faults=()):
    path = tmp_path / "fasttrack.yaml"
    # Simulated decode time (30 ms a step) well above what a busy host adds to the fake's own Python
    # work, so the speed the timing sees is the fake's planted one beside other jobs too.
    text = FAKE_MANIFEST.read_text().replace("faults: []", f"faults: {list(faults)}")
    path.write_text(text.replace("step_delay_s: 0.005}", "step_delay_s: 0.03}"))
    manifest = load_manifest(path)
    bench = manifest.benchmarks[0]
    point = ScopePoint.of({"accelerator": "cpu", "device_count": 1, "tensor_parallel": 1, "batch": batch})
    instance = CheckInstance(
        f"benchmarks/{bench.id}@{point.id}",
        "benchmarks",
        bench.id,
        point,
        True,
        True,
        None,
        None,
        None,
        1.0,
        60.0,
        thaw(bench.raw),
    )
    return bench_run.run(instance, RunContext(manifest, None, tmp_path, tmp_path / "artifacts", 60.0))


def test_faster_candidate_passes_with_ratio_and_ci(tmp_path):
    outcomes = run_point(tmp_path, 8)
    (bench,) = [o for o in outcomes if o.kind == "benchmarks"]
    assert bench.status is Status.PASSED, bench.reason
    m = bench.measurements
    # repeats: 5, then the sequential rule against 1 - margin: at the default alpha 0.025 it cannot
    # decide before 7 pairs, however clear they are
    assert len(m["baseline"]["runs"]) == len(m["candidate"]["runs"]) == m["pairs"] >= 7
    assert 1.05 < m["ratio"] < 1.8  # the fake's candidate steps sleep 0.7x as long (its Python overhead is shared)
    lo, hi = m["ratio_ci"]
    assert 0.95 <= lo <= m["ratio"] <= hi  # shown within the 5 % margin: the lower bound above 0.95
    assert m["rule"] == "not slower than stock" and m["alpha"] == 0.025 and m["promise"] is None
    assert m["margin"] == 0.05 and m["max_pairs"] == 30
    assert m["unit"] == "tokens/s/user" and m["point"]["batch"] == 8


def test_slowdown_at_batch_64_fails_the_point_with_a_precise_reason(tmp_path):
    outcomes = run_point(tmp_path, 64, ["slow_at_batch_64"])
    (bench,) = [o for o in outcomes if o.kind == "benchmarks"]
    assert bench.status is Status.FAILED and bench.reason_code == "regression"
    assert "slower than stock by more than the declared 5% at this in-scope point" in bench.reason
    assert bench.measurements["ratio_ci"][1] < 0.95  # shown slower than the margin allows


def test_batch_1_claim_is_judged_at_batch_1_only(tmp_path):
    at_1 = [o for o in run_point(tmp_path, 1) if o.kind == "claims"]
    assert len(at_1) == 1
    claim = at_1[0]
    assert claim.required is False and claim.name == "fake-b1"
    assert claim.measurements["status"] == "reproduced", claim.measurements["assessment"]
    assert claim.status is Status.PASSED


def test_paired_ratio_and_the_rule_within_a_margin():
    comparison = decide.paired_ratio([10] * 6, [12, 13, 12, 14, 13, 12.5])
    assert comparison.ratio == pytest.approx(1.275)
    assert comparison.ratio_ci == (pytest.approx(1.2), pytest.approx(1.4))  # min and max of 6 pairs at alpha 0.025

    def rule(ratios, margin=0.05, alpha=0.025, max_pairs=30):
        return decide.within_margin(speed.sequential(ratios, 1 - margin, alpha), margin, alpha, max_pairs, None)

    assert rule([1.2] * 7).status is Status.PASSED  # shown above 0.95 at the 7th pair
    # a point estimate alone never passes: six clear pairs cannot decide at alpha 0.025
    six = rule([1.2] * 6)
    assert six.status is Status.NOT_RUN and six.reason_code == "underpowered" and "pairs would decide" in six.reason
    slower = rule([0.8] * 7)
    assert slower.status is Status.FAILED and "slower than stock by more than the declared 5%" in slower.reason
    # a candidate 3 % slower is within a 5 % margin: it passes; against a 1 % margin it fails
    assert rule([0.97] * 8).status is Status.PASSED
    assert rule([0.97] * 8, margin=0.01).status is Status.FAILED
    # at the floor itself no number of pairs decides
    at_floor = rule([0.94, 0.96] * 15)
    assert at_floor.status is Status.NOT_RUN and "max_pairs 30" in at_floor.reason
    lower_better = decide.paired_ratio([2.0, 2.0], [1.0, 1.0], higher_is_better=False)
    assert lower_better.ratio == pytest.approx(2.0)


def test_runs_alternate_in_counterbalanced_pairs():
    order = []
    timing.alternate(lambda: order.append("A") or 1.0, lambda: order.append("B") or 1.0, 4)
    assert "".join(order) == "AB" + "AB" + "BA" + "AB" + "BA"


def test_kernel_census_counts_ops_per_layer_from_record_function_ranges():
    import torch
    from torch.profiler import record_function

    from fasttrack.targets.python.census import census

    layers = [torch.nn.Linear(8, 8) for _ in range(3)]
    x = torch.randn(2, 8)

    def steps(n):
        def go():
            for _ in range(n):
                h = x
                for i, layer in enumerate(layers):
                    with record_function(f"toy.layer.{i}"):
                        h = torch.relu(layer(h))

        return go

    result = census(steps(5), steps(1), 4)
    assert result.device == "cpu" and result.layers_source == "record_function" and result.layers == 3
    assert result.kernels_per_step == 6 and result.kernels_per_layer == 2  # aten::linear + aten::relu
    assert result.us_per_layer > 0


def test_the_raw_event_count_equals_torchs_event_tree_count():
    """The census counts top-level ATen ops from the profiler's raw events (fast); torch's own event
    tree (prof.events(), slow) must give the same counts, names, layers and times, here with ops
    nested in ops (linear -> addmm), ranges nested in ranges, and ops outside any layer."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    from fasttrack.targets.python import census as K

    layers = [torch.nn.Linear(8, 8) for _ in range(3)]
    x = torch.randn(4, 8)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        h = x * 2
        for i, layer in enumerate(layers):
            with record_function(f"toy.layer.{i}"), record_function("attention"):
                h = torch.softmax(layer(h), dim=-1) + h.sum()
        h.argmax()
    old = K._count_cpu(list(prof.events()))
    raw = K._kineto_events(prof)
    assert raw is not None
    new = K._count_cpu_kineto(raw)
    assert (new.kernels, new.names) == (old.kernels, old.names) and new.kernels > 0
    assert {i: k for i, (k, _) in new.per_layer.items()} == {i: k for i, (k, _) in old.per_layer.items()}
    assert sorted(new.per_layer) == [0, 1, 2] and "aten::addmm" not in new.names  # nested in aten::linear
    assert new.us == pytest.approx(old.us, rel=1e-9)


def test_kernel_census_time_below_noise_is_none_not_zero(monkeypatch):
    from fasttrack.targets.python import census as K

    # The prefill-only run measured slower than the full run (noise larger than the decode steps):
    # kernels are still counted, the time is no measurement.
    profiles = iter([K.Profile("cuda", 300, 900.0, {}), K.Profile("cuda", 46, 950.0, {})])
    monkeypatch.setattr(K, "profile_call", lambda fn: next(profiles))
    result = K.census(lambda: None, lambda: None, 8, n_layers=5, repeats=1)
    assert result.kernels_per_step == (300 - 46) / 8 and result.kernels_per_layer == (300 - 46) / 8 / 5
    assert result.us_per_step is None and result.us_per_layer is None
    harmonised = census.harmonise_census(
        {"baseline": {**result.to_dict(), "layers_source": "record_function"}, "candidate": result.to_dict()}
    )
    assert harmonised["baseline"]["us_per_layer"] is None


def test_where_it_works_matrix_rows():
    from fasttrack.evidence import CheckOutcome

    def bench(batch, ratio, ci, status):
        return CheckOutcome(
            id=f"b@{batch}",
            kind="benchmarks",
            name="decode",
            status=status,
            scope_point={"batch": batch},
            measurements={"ratio": ratio, "ratio_ci": ci, "metric": "decode_tokens_per_s_per_user"},
        )

    rows = decide.where_it_works_matrix(
        [
            bench(64, 0.7, [0.6, 0.8], Status.FAILED),
            bench(1, 1.5, [1.3, 1.7], Status.PASSED),
            bench(8, 1.0, [0.9, 1.1], Status.PASSED),
            bench(16, 0.9, [0.7, 1.1], Status.NOT_RUN),
            CheckOutcome(id="x", kind="benchmarks", name="decode", status=Status.NOT_RUN, scope_point={"batch": 3}),
            CheckOutcome(id="c", kind="claims", name="decode", status=Status.PASSED),
        ]
    )
    assert [(r["point"]["batch"], r["verdict"]) for r in rows] == [
        (1, "faster"),
        (3, "not_run"),
        (8, "no slower"),
        (16, "undecided"),
        (64, "slower"),
    ]


def test_kernel_census_adds_layer_ranges_with_hooks_when_the_model_has_none():
    import torch

    from fasttrack.targets.python.census import census

    class Toy(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(4))
            self.head = torch.nn.Linear(8, 8)

        def forward(self, x):
            for layer in self.layers:
                x = torch.relu(layer(x))
            return self.head(x)

    model, x = Toy(), torch.randn(2, 8)

    def steps(n):
        return lambda: [model(x) for _ in range(n)]

    result = census(steps(3), steps(1), 2, n_layers=4, model=model)
    assert result.layers_source == "record_function" and result.layers == 4
    assert (
        result.kernels_per_layer == 1 and result.kernels_per_step == 4 * 2 + 1
    )  # the relu and the head run outside the layers
    unhooked = census(steps(3), steps(1), 2, n_layers=4)
    assert unhooked.layers_source == "divided_by_n_layers" and unhooked.kernels_per_layer == 9 / 4


def test_kernel_census_falls_back_when_decode_bypasses_the_hooked_layers():
    import torch

    from fasttrack.targets.python.census import census

    class Bypass(torch.nn.Module):
        """Prefill runs the layer modules; "decode" runs a fused replacement that does not."""

        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(2))

        def prefill(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

        def decode(self, x):
            return torch.relu(x @ self.layers[0].weight.T)

    model, x = Bypass(), torch.randn(1, 8)

    def run(n):
        return lambda: [model.prefill(x)] + [model.decode(x) for _ in range(n - 1)]

    result = census(run(4), run(1), 3, n_layers=2, model=model)
    assert result.layers_source == "divided_by_n_layers"
    assert result.kernels_per_step == 3 and result.kernels_per_layer == 1.5  # t, matmul, relu over 2 layers


def test_census_sides_are_compared_by_the_same_method():
    ranges = {
        "kernels_per_step": 800,
        "us_per_step": 600.0,
        "kernels_per_layer": 150,
        "us_per_layer": 100.0,
        "layers": 5,
        "layers_source": "record_function",
    }
    divided = {
        "kernels_per_step": 580,
        "us_per_step": 300.0,
        "kernels_per_layer": 116,
        "us_per_layer": 60.0,
        "layers": 5,
        "layers_source": "divided_by_n_layers",
    }
    out = census.harmonise_census({"baseline": ranges, "candidate": divided})
    assert out["candidate"] is divided
    assert out["baseline"]["kernels_per_layer"] == 160 and out["baseline"]["layers_source"] == "divided_by_n_layers"
    assert out["baseline"]["per_layer_from_ranges"]["kernels"] == 150
    same = {"baseline": ranges, "candidate": ranges}
    assert census.harmonise_census(same) == same


def test_census_beside_a_rate_is_profiled_once_and_says_so(tmp_path, monkeypatch):
    asked = []

    def fake_census(target, prompts, steps=census.CENSUS_STEPS, repeats=census.CENSUS_REPEATS["metric"]):
        asked.append(repeats)
        return {
            "kernels_per_layer": 5.0,
            "us_per_layer": 10.0,
            "kernels_per_step": 20.0,
            "us_per_step": 40.0,
            "layers": 4,
            "layers_source": "record_function",
            "profiled_calls": repeats,
        }

    monkeypatch.setattr(bench_run, "kernel_census", fake_census)
    (bench, *_) = run_point(tmp_path, 1)
    assert asked == [1, 1]  # decode rate is the metric: the census is a record beside it
    assert bench.measurements["kernel_census"]["baseline"]["profiled_calls"] == 1
