"""Against the last good run: values that dropped beyond both runs' intervals."""

from __future__ import annotations

from fasttrack import history
from fasttrack.kinds.registry import KINDS


def run(*checks, optimisation="opt", evals=()):
    return {"manifest": {"optimisation_id": optimisation, "data": {"evals": list(evals)}}, "checks": list(checks)}


def bench(point, ratio, low, high, name="decode"):
    return {
        "id": f"benchmarks/{name}@{point}",
        "kind": "benchmarks",
        "name": name,
        "scope_point": {"accelerator": point},
        "measurements": {"ratio": ratio, "ratio_ci": [low, high]},
    }


def ev(point, mean, low, high, name="mrcr"):
    return {
        "id": f"evals/{name}@{point}",
        "kind": "evals",
        "name": name,
        "scope_point": {"accelerator": point},
        "measurements": {"candidate_mean": mean, "candidate_mean_ci": [low, high]},
    }


def test_a_drop_beyond_both_intervals_is_flagged_an_overlap_is_not():
    before = run(bench("h200", 3.35, 3.0, 3.7), ev("h200", 0.9, 0.85, 0.95))
    now = run(bench("h200", 2.0, 1.8, 2.2), ev("h200", 0.86, 0.8, 0.9))
    found = {c.now.kind: c for c in history.compare(now, before, KINDS)}
    assert found["benchmarks"].dropped and "speed-up dropped beyond both intervals" in found["benchmarks"].sentence()
    assert not found["evals"].dropped  # 0.9 upper bound overlaps 0.85 lower bound


def test_only_the_same_point_is_compared_and_unbounded_values_are_left_out():
    before = run(bench("cpu", 1.0, 0.9, 1.1))
    now = run(bench("h200", 0.5, 0.4, 0.6), bench("cpu", 0.5, None, 0.6))
    assert history.compare(now, before, KINDS) == []


def test_lower_is_better_evals_are_oriented():
    evals = [{"id": "loss", "higher_is_better": False}]
    before = run(ev("cpu", 0.2, 0.15, 0.25, name="loss"), evals=evals)
    now = run(ev("cpu", 0.5, 0.45, 0.55, name="loss"), evals=evals)
    (c,) = history.compare(now, before, KINDS)
    assert c.dropped  # a higher loss is worse


def test_dashboard_history_compares_each_run_with_the_latest_run_of_the_same_hardware():
    runs = [
        run(bench("h200", 3.3, 3.0, 3.6)),
        run(bench("cpu", 1.0, 0.9, 1.1)),  # another machine in between
        run(bench("h200", 2.0, 1.8, 2.2)),
        run(bench("h200", 2.1, 1.9, 2.3)),
    ]
    drops = history.drops_over(runs, KINDS)
    assert [len(d) for d in drops] == [0, 0, 1, 0] and drops[2][0].before.value == 3.3
