"""The kernel census of both sides at a benchmark point (in-process torch targets only)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from fasttrack.probes.adapters import InProcessProbeTarget
from fasttrack.probes.base import CompletionRequest, ProbeTarget

CENSUS_STEPS = 8
# Profiled calls per census side: the fastest of 3 when the census IS the benchmark's metric; one
# when it is only recorded beside a timed rate (its kernel count is deterministic, and on CPU each
# profiled call costs seconds of trace processing: 47 s of a 60 s batch-8 instance with 3).
CENSUS_REPEATS = {"metric": 3, "record": 1}


def kernel_census(
    target: ProbeTarget,
    prompts: Sequence[tuple[int, ...]],
    steps: int = CENSUS_STEPS,
    repeats: int = CENSUS_REPEATS["metric"],
) -> dict[str, Any] | None:
    """Census of one side (in-process torch targets only; None otherwise)."""
    if not isinstance(target, InProcessProbeTarget):
        return None
    from fasttrack.kernel_census import census

    def run(tokens: int) -> Callable[[], Any]:
        return lambda: target.complete_batch(
            [CompletionRequest(p, max_tokens=tokens, temperature=0.0, ignore_eos=True) for p in prompts]
        )

    engine = getattr(target.target, "engine", None)
    config = getattr(engine, "config", None)
    return {
        **census(
            run(1 + steps),
            run(1),
            steps,
            n_layers=getattr(config, "n_layers", None),
            model=getattr(engine, "model", None),
            repeats=repeats,
        ).to_dict(),
        "profiled_calls": repeats,
    }


def harmonise_census(census: dict[str, dict[str, Any] | None]) -> dict[str, dict[str, Any] | None]:
    """Both sides' per-layer figures by the same method: when one side's decode path bypasses the
    model's layer modules (its figure is per step / layers), the other's is computed that way too."""
    sides = [c for c in census.values() if c is not None]
    if len(sides) < 2 or len({c["layers_source"] for c in sides}) == 1:
        return census
    out: dict[str, dict[str, Any] | None] = {}
    for side, c in census.items():
        if c is None or c["layers_source"] == "divided_by_n_layers" or not c.get("layers"):
            out[side] = c
            continue
        us_step = c["us_per_step"]
        out[side] = {
            **c,
            "kernels_per_layer": c["kernels_per_step"] / c["layers"],
            "us_per_layer": us_step / c["layers"] if us_step is not None else None,
            "layers_source": "divided_by_n_layers",
            "per_layer_from_ranges": {"kernels": c["kernels_per_layer"], "us": c["us_per_layer"]},
        }
    return out
