"""A server census profiles both sides at once, and reads the candidate's counters around its own window."""

from __future__ import annotations

import threading
from types import SimpleNamespace

from fasttrack.kinds.benchmarks import server_census


class Profiler:
    """Stands in for a server's torch profiler: both sides must be inside their windows together."""

    def __init__(self, both: threading.Barrier, ops: int):
        self.both = both
        self.ops = ops

    def decode_census(self, batch: int, steps: int) -> dict:
        self.both.wait()  # a census that profiles one side after the other never gets past here
        return {"kernels_per_step": float(self.ops), "layers_source": "divided_by_n_layers", "batch": batch}


def test_both_sides_are_profiled_at_once_and_each_keeps_its_own_census():
    both = threading.Barrier(2, timeout=30)
    sides = {
        "baseline": SimpleNamespace(profiler=Profiler(both, 920)),
        "candidate": SimpleNamespace(profiler=Profiler(both, 681)),
    }
    found, counted = server_census.census_at(SimpleNamespace(switches=[]), sides, 8, steps=4)
    assert found["baseline"]["kernels_per_step"] == 920 and found["candidate"]["kernels_per_step"] == 681
    assert found["baseline"]["profiled_calls"] == found["candidate"]["profiled_calls"] == 1
    assert counted is None  # no metrics proof declared: nothing to read


def test_the_candidates_counters_are_read_before_and_after_its_own_window(monkeypatch):
    events: list[str] = []

    class Scraper:
        def __init__(self, side, proofs):
            self.reads = 0

        def snapshot(self):
            self.reads += 1
            events.append(f"read {self.reads}")
            return {"m{technique}": {"fused": 10.0 * self.reads}}

    class Recorded(Profiler):
        def __init__(self, both, ops, name):
            super().__init__(both, ops)
            self.name = name

        def decode_census(self, batch, steps):
            events.append(f"{self.name} profiled")
            return super().decode_census(batch, steps)

    proof = SimpleNamespace(source="metrics", metric="m", label="technique", counted=True)
    switch = SimpleNamespace(proof=proof, path_value="fused")
    manifest = SimpleNamespace(switches=[switch], switch_on=lambda s, side: side == "candidate")
    monkeypatch.setattr(server_census, "MetricsScraper", Scraper)
    both = threading.Barrier(2, timeout=30)
    sides = {
        "baseline": SimpleNamespace(profiler=Recorded(both, 920, "baseline")),
        "candidate": SimpleNamespace(profiler=Recorded(both, 681, "candidate")),
    }
    _, counted = server_census.census_at(manifest, sides, 1, steps=4)
    own = [e for e in events if not e.startswith("baseline")]
    assert own == ["read 1", "candidate profiled", "read 2"]
    assert counted == {"fused": 10.0}


def test_a_side_without_a_profiler_gives_no_census_for_either():
    sides = {"baseline": SimpleNamespace(profiler=None), "candidate": SimpleNamespace(profiler=object())}
    found, counted = server_census.census_at(SimpleNamespace(switches=[]), sides, 1)
    assert found == {"baseline": None, "candidate": None} and counted is None
