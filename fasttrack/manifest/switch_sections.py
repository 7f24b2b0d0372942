"""The switch sections of the manifest model (re-exported by `fasttrack.manifest.sections`): a
switch, its proof of path and census rules, and its negative scope (``inert`` deployments and the
``refused`` combinations)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from fasttrack.manifest.narrowing import within


def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclass(frozen=True)
class CensusRule:
    """How the candidate's kernel census must differ from stock's in a region of the scope."""

    points: Mapping[str, tuple[Any, ...]] = field(default_factory=_empty)  # empty: every point
    max_kernels_per_layer_ratio: float | None = None
    kernels_present: tuple[str, ...] = ()  # regular expressions searched in kernel names
    kernels_absent: tuple[str, ...] = ()  # ... in stock's step and never in the candidate's
    min_streams_per_step: int | None = (
        None  # GPU: the candidate's step runs kernels on this many streams, stock's fewer
    )


@dataclass(frozen=True)
class SwitchProof:
    source: str  # "metrics" | "inprocess" (counters) | "log" | "census" (servers, no counter)
    metric: str | None = None
    label: str | None = None
    value: str | None = None
    metrics_path: str = "/metrics"
    census: tuple[CensusRule, ...] = ()  # first rule containing a point applies; none: "differs"
    log_signature: str | None = None  # a server's proof from its log: a regex on the candidate's, never stock's

    @property
    def counted(self) -> bool:
        """The proof reads a counter of decode steps per path (else a log or a kernel census)."""
        return self.source in COUNTED_SOURCES


COUNTED_SOURCES = frozenset({"metrics", "inprocess"})


# Environment values that leave an environment switch off (compared case-insensitively).
ENV_OFF_VALUES = frozenset({"", "0", "false", "no", "off"})


@dataclass(frozen=True)
class Refused:
    """A combination the server must refuse to start with the switch on (``switch.refused``)."""

    id: str
    message: str
    serve_args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=_empty)
    points: Mapping[str, tuple[Any, ...]] = field(default_factory=_empty)
    timeout_s: float | None = None


@dataclass(frozen=True)
class Switch:
    name: str
    default: bool
    engine_arg: str | None = None
    server_flag: str | None = None
    env: str | None = None  # "NAME=value"
    proof: SwitchProof | None = None
    points: Mapping[str, tuple[Any, ...]] = field(default_factory=_empty)  # where it has an effect; empty: all
    description: str = ""
    inert: Mapping[str, tuple[Any, ...]] = field(default_factory=_empty)  # where it must not act; empty: nowhere
    refused: tuple[Refused, ...] = ()  # combinations the server must refuse to start with it on
    threshold: tuple[str, int] | None = None  # (dimension, max): acts up to max, stock above
    exact: bool = False  # promised bit-identical to stock with it alone on: greedy tokens and logprobs
    # An option-valued switch: `option value` on the candidate, `option stock` (or nothing) on stock.
    option: str | None = None  # "--moe-backend"
    option_value: str | None = None
    option_stock: str | None = None
    rival_of: str | None = None  # an arm of `enable.arms`: the declared switch's name (arms exclude each other)

    @property
    def keyword(self) -> str | None:
        """The factory keyword that turns it on in-process: its engine_arg; else its name, unless
        the environment turns it on (then no keyword)."""
        if self.engine_arg:
            return self.engine_arg
        return None if self.env or self.option else self.name

    @property
    def env_name(self) -> str | None:
        return self.env.split("=", 1)[0] if self.env else None

    @property
    def env_value(self) -> str | None:
        return self.env.split("=", 1)[1] if self.env else None

    @property
    def path_value(self) -> str:
        """The label value (or path-report key) that counts its optimised path's steps."""
        return self.proof.value if self.proof is not None and self.proof.value else self.name

    def acts_at(self, point: Any) -> bool:
        """Whether the switch has an effect at ``point``: inside its ``points`` (a dimension the
        point does not carry narrows nothing), at or below its ``threshold``, outside ``inert``."""
        return _meets(point, self.points) and not self.inert_at(point)

    def inert_at(self, point: Any) -> bool:
        """Whether ``point`` is negative scope, where the switch on must take the stock path: inside
        ``inert`` (every dimension it names on the point), or above the ``threshold``."""
        if self.threshold is not None:
            value = point.get(self.threshold[0])
            if value is not None and int(value) > self.threshold[1]:
                return True
        return bool(self.inert) and all(point.get(d) is not None for d in self.inert) and within(point, self.inert)


def _meets(point: Any, region: Mapping[str, Any]) -> bool:
    """``within`` over the dimensions the point carries (a deployment's proof is not narrowed by a
    workload dimension such as tokens_per_step)."""
    return all(point.get(dim) in values for dim, values in region.items() if point.get(dim) is not None)
