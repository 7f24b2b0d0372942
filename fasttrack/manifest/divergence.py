"""The ``divergence`` section and the thresholds of every teacher-forced comparison of next-token
distributions (divergence, the full-context probe), per dtype (#34). Its own module: the sections'
module holds the rest (`fasttrack.manifest.sections`, which re-exports these)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any


def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


# The thresholds of a teacher-forced comparison of next-token distributions (divergence, the
# full-context probe), and the built-in defaults of a dtype whose rounding alone exceeds them. bf16:
# between two correct paths of the example (an MoE whose bf16 rounding flips near-tied router
# choices), 8 prompts x 1,024 positions gave per-position KL up to 2.5 nats (0.1 % above 1.0),
# 256-position bucket means up to 0.027 and 99th percentiles up to 0.63, and the full-context
# probe's 16-position edge windows, which share the thresholds, means up to 0.22 and 99th
# percentiles (about their largest value) up to 2.3; top-1 flips at 2.3 % of positions. A mask
# built in bf16 gave bucket means 2.7-4.7 and 99th percentiles 13-16 (docs/measurements.md, #34).
DIVERGENCE_THRESHOLDS: tuple[str, ...] = ("max_mean_kl", "max_p99_kl", "min_top1_agreement")
DIVERGENCE_DEFAULTS: Mapping[str, float] = MappingProxyType(
    {"max_mean_kl": 0.01, "max_p99_kl": 0.1, "min_top1_agreement": 0.98}
)
DTYPE_DIVERGENCE_DEFAULTS: Mapping[str, Mapping[str, float]] = MappingProxyType(
    {"bf16": MappingProxyType({"max_mean_kl": 0.25, "max_p99_kl": 3.0, "min_top1_agreement": 0.95})}
)


@dataclass(frozen=True)
class Divergence:
    prompts_from: str | None = None
    buckets: tuple[int, ...] = ()
    max_prompts: int | None = None
    max_mean_kl: float | None = None
    max_p99_kl: float | None = None
    min_top1_agreement: float | None = None
    required: bool = True
    timeout_s: float | None = None
    raw: Mapping[str, Any] = field(default_factory=_empty)
    points: Mapping[str, tuple[Any, ...]] = field(default_factory=_empty)  # hardware setups to run at; empty: all
    dtypes: Mapping[str, Mapping[str, float]] = field(default_factory=_empty)  # a dtype's own thresholds

    def thresholds(self, dtype: str | None = None) -> dict[str, float]:
        """The thresholds at ``dtype``: each one from the dtype's own entry (``divergence.dtypes``),
        else the section's value, else the dtype's built-in default (`DTYPE_DIVERGENCE_DEFAULTS`),
        else `DIVERGENCE_DEFAULTS`. A value the manifest states always beats a built-in one."""
        own = self.dtypes.get(dtype, {}) if dtype is not None else {}
        builtin = DTYPE_DIVERGENCE_DEFAULTS.get(dtype, {}) if dtype is not None else {}
        out = {}
        for key in DIVERGENCE_THRESHOLDS:
            stated = own.get(key, getattr(self, key))
            out[key] = float(stated if stated is not None else builtin.get(key, DIVERGENCE_DEFAULTS[key]))
        return out

    def at_dtype(self, dtype: str | None) -> Divergence:
        """This section with its thresholds set to those at ``dtype`` (`thresholds`)."""
        limits = self.thresholds(dtype)
        return replace(
            self,
            max_mean_kl=limits["max_mean_kl"],
            max_p99_kl=limits["max_p99_kl"],
            min_top1_agreement=limits["min_top1_agreement"],
        )
