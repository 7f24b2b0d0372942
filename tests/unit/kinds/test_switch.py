"""Proof of path: metrics parsing and step counting per batch."""

from __future__ import annotations

from fasttrack.kinds.switch.counters import parse_metric, path_counts
from fasttrack.kinds.switch.run import exercise
from support.paths import FAULTS
from support.projects import load_module

ToyTarget = load_module(FAULTS / "base" / "toy" / "target.py", "toy_target").ToyTarget


def test_parse_prometheus_counter_by_label():
    text = (
        "# HELP minik3_decode_steps_total decode steps\n"
        "# TYPE minik3_decode_steps_total counter\n"
        'minik3_decode_steps_total{path="stock"} 12\n'
        'minik3_decode_steps_total{model="m",path="latency_specialized"} 3.0\n'
        'minik3_other_total{path="stock"} 99\n'
    )
    assert parse_metric(text, "minik3_decode_steps_total", "path") == {"stock": 12.0, "latency_specialized": 3.0}


def test_path_counts_accepts_nested_and_flat_reports():
    assert path_counts({"decode_steps_by_path": {"stock": 2}, "latency_specialized": True}) == {"stock": 2.0}
    assert path_counts({"stock": 1, "fast": 4, "flag": True}) == {"stock": 1.0, "fast": 4.0}


def test_exercise_counts_steps_per_batch():
    total, per_batch = exercise(ToyTarget(fast_path=True), [1, 3])
    assert total == {"fast_path": 8.0}
    assert per_batch == {1: {"fast_path": 4.0}, 3: {"fast_path": 4.0}}
    total, _ = exercise(ToyTarget(), [2])
    assert total == {"stock": 4.0}
