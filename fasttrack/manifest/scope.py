"""Scope points: one combination of the declared scope dimensions, and how a scope expands."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Every dimension a scope point can have, in the order they are expanded.
DIMENSIONS: tuple[str, ...] = (
    "accelerator",
    "device_count",
    "tensor_parallel",
    "batch",
    "tokens_per_step",
    "dtype",
    "draft_length",
    "context",
)
# The dimensions that together name one hardware setup (one deployment of the target).
HARDWARE_DIMENSIONS: tuple[str, ...] = ("accelerator", "device_count", "tensor_parallel")
# Engine dimensions a manifest may name in scope.engine (any other identifier is accepted too):
# settings of the serving engine that change the code path, each a list of values. With the
# hardware dimensions they make a *deployment* (one server configuration).
KNOWN_ENGINE_DIMENSIONS: tuple[str, ...] = (
    "kv_cache_dtype",
    "attention_backend",
    "moe_backend",
    "quantization",
    "cuda_graph_mode",
    "compilation_mode",
)
# scope.parallelism lists that become engine dimensions when they declare a degree above 1.
PARALLEL_DIMENSIONS: dict[str, str] = {
    "decode_context": "decode_context_parallel",
    "expert": "expert_parallel",
    "data": "data_parallel",
}
# scope.models: several checkpoints under one optimisation, a deployment dimension of its own.
MODEL_DIMENSION = "model"

ODD_BATCH_PREFERENCES = (17, 3)


@dataclass(frozen=True, order=True)
class ScopePoint:
    """One point of the scope. ``dims`` is sorted by dimension name, so equal points are equal."""

    dims: tuple[tuple[str, Any], ...]

    @classmethod
    def of(cls, values: Mapping[str, Any] | Iterable[tuple[str, Any]]) -> ScopePoint:
        items = values.items() if isinstance(values, Mapping) else values
        return cls(tuple(sorted(items)))

    @property
    def id(self) -> str:
        """Stable text id, e.g. ``accelerator=cpu,batch=17,dtype=bf16,tensor_parallel=2``."""
        return ",".join(f"{name}={value}" for name, value in self.dims)

    def get(self, name: str, default: Any = None) -> Any:
        for key, value in self.dims:
            if key == name:
                return value
        return default

    def as_dict(self) -> dict[str, Any]:
        return dict(self.dims)

    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.dims)

    def project(self, names: Iterable[str]) -> ScopePoint:
        """The same point restricted to ``names``."""
        wanted = set(names)
        return ScopePoint(tuple((k, v) for k, v in self.dims if k in wanted))

    def __str__(self) -> str:
        return self.id


def representative_batches(minimum: int, maximum: int) -> tuple[int, ...]:
    """min, max, every power of two strictly between, and one odd size (17, else 3, else the
    smallest odd size inside): awkward sizes catch kernels that only work on nice shapes."""
    points = {minimum, maximum}
    power = 1
    while power < maximum:
        if power > minimum:
            points.add(power)
        power *= 2
    preferred = [b for b in ODD_BATCH_PREFERENCES if minimum < b < maximum and b not in points]
    if preferred:
        points.add(preferred[0])
    else:
        odd = minimum + 1 if minimum % 2 == 0 else minimum + 2  # computed: ranges can be huge
        while odd in points:
            odd += 2
        if odd < maximum:
            points.add(odd)
    return tuple(sorted(points))


def hardware_setups(entries: Sequence[Any]) -> tuple[dict[str, Any], ...]:
    """(accelerator, device_count, tensor_parallel) combinations of every hardware entry.

    On GPUs a tensor-parallel degree must divide the device count; on ``cpu`` ranks are
    processes sharing the host, so every declared degree runs on its one "device".
    """
    seen: dict[tuple, dict[str, Any]] = {}
    for entry in entries:
        for count in entry.device_counts:
            for tp in entry.tensor_parallel:
                if not entry.is_cpu and count % tp != 0:
                    continue
                setup = {"accelerator": entry.accelerator, "device_count": count, "tensor_parallel": tp}
                seen.setdefault(tuple(setup.values()), setup)
    return tuple(seen.values())


def expand(
    setups: Sequence[Mapping[str, Any]],
    other_dims: Mapping[str, Sequence[Any]],
    dims: Sequence[str] | None,
) -> tuple[ScopePoint, ...]:
    """Union over hardware setups of the product with the other dimensions, projected on ``dims``."""
    known = (*DIMENSIONS, *(name for name in other_dims if name not in DIMENSIONS))
    if dims is not None:
        unknown = sorted(set(dims) - set(known))
        if unknown:
            raise ValueError(f"unknown scope dimension(s) {unknown}; known: {', '.join(known)}")
    wanted = set(known if dims is None else dims)
    others = [(name, values) for name, values in other_dims.items() if name in wanted and values]
    points: dict[ScopePoint, None] = {}
    for setup in setups:
        hardware = [(k, v) for k, v in setup.items() if k in wanted]
        for combo in itertools.product(*(values for _, values in others)):
            point = ScopePoint.of([*hardware, *zip((name for name, _ in others), combo)])
            points.setdefault(point, None)
    return tuple(points)
