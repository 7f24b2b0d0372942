"""The ablation section: per-switch arms of the listed benchmarks and evals, in one or both forms
(each switch alone on; each switch left out with the others on)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

LEFT_OUT = "-"  # a leave-one-out ablation arm's label: "-<switch>" (every other switch on)


def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclass(frozen=True)
class Ablation:
    """Per-switch arms: the listed benchmarks and evals once per switch and form: only that switch
    on (``alone``), or only that switch off (``leave_one_out``)."""

    benchmarks: tuple[str, ...]
    evals: tuple[str, ...] = ()
    required: bool = False
    points: Mapping[str, tuple[Any, ...]] = field(default_factory=_empty)  # deployments to run the arms at
    forms: tuple[str, ...] = ("alone",)  # alone: each switch alone on; leave_one_out: each off, the others on

    def arms(self, switches: Sequence[str]) -> list[tuple[str, tuple[str, ...], str]]:
        """Each arm: its label (after ``~`` in the check name), the switches its candidate turns on,
        and the switch whose points bound it. ``alone``: ``<switch>``, that switch only;
        ``leave_one_out``: ``-<switch>``, every other switch."""
        arms: list[tuple[str, tuple[str, ...], str]] = []
        for form in self.forms:
            for name in switches:
                if form == "alone":
                    arms.append((name, (name,), name))
                else:
                    arms.append((f"{LEFT_OUT}{name}", tuple(s for s in switches if s != name), name))
        return arms
