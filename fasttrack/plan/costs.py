"""Estimates from what a run measured: the plan's built-in per-kind guesses are rough (the
example's CPU plan said ~23 minutes for a 3.5-minute run: instances that share one pytest session
or one server, and ``--jobs``, are not in them). An earlier run's evidence records each outcome's
wall seconds and the run's own start and end; `MeasuredCosts` turns them into per-instance costs
(the same instance id), per-kind means (an instance that did not run then) and the ratio of the
run's wall time to the sum of its outcomes' seconds (sharing and parallelism), so that `plan
--costs-from` and the progress line start from measurement instead of the guesses."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from fasttrack.cachedir import is_seconds
from fasttrack.plan.instance import CheckInstance


@dataclass(frozen=True)
class MeasuredCosts:
    per_instance: Mapping[str, float]  # instance id -> wall seconds its outcomes took
    per_kind: Mapping[str, float]  # kind -> mean seconds per instance that ran
    wall_factor: float  # the run's wall seconds / the sum of its instances' seconds
    source: str  # which run: its id

    @classmethod
    def from_evidence(cls, evidence: Mapping[str, Any]) -> MeasuredCosts:
        per_instance: dict[str, float] = defaultdict(float)
        kind_of: dict[str, str] = {}
        for c in evidence.get("checks") or ():
            if c.get("status") not in ("passed", "failed") or not c.get("duration_s"):
                continue  # only what really ran: a not-run outcome's seconds say nothing of its cost
            ident = str(c["id"]).split("#", 1)[0]
            per_instance[ident] += float(c["duration_s"])
            kind_of[ident] = str(c.get("kind"))
        by_kind: dict[str, list[float]] = defaultdict(list)
        for ident, seconds in per_instance.items():
            by_kind[kind_of[ident]].append(seconds)
        run = evidence.get("run") or {}
        total = sum(per_instance.values())
        wall = _seconds_between(run.get("started_at"), run.get("finished_at"))
        factor = wall / total if wall and total > 0 else 1.0
        return cls(
            dict(per_instance),
            {k: sum(v) / len(v) for k, v in by_kind.items()},
            min(max(factor, 0.05), 1.0),  # never more than serial, and sane when a clock jumped
            str(run.get("id") or "?"),
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "per_instance": dict(self.per_instance),
            "per_kind": dict(self.per_kind),
            "wall_factor": self.wall_factor,
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MeasuredCosts:
        """What `to_dict` wrote; ValueError/TypeError/KeyError on anything else."""
        per_instance = {str(k): _seconds(v) for k, v in dict(data["per_instance"]).items()}
        per_kind = {str(k): _seconds(v) for k, v in dict(data["per_kind"]).items()}
        return cls(per_instance, per_kind, min(max(_seconds(data["wall_factor"]), 0.05), 1.0), str(data["source"]))

    def updated_by(self, newer: MeasuredCosts) -> MeasuredCosts:
        """This memory with a newer run's measurements over it (a run of part of the scope keeps
        what earlier runs measured of the rest; its sharing factor is the newer one)."""
        return MeasuredCosts(
            {**self.per_instance, **newer.per_instance},
            {**self.per_kind, **newer.per_kind},
            newer.wall_factor,
            newer.source,
        )

    def knows(self, instance: CheckInstance) -> bool:
        """Whether the instance's estimate comes from measurement (its own, or its kind's mean)."""
        return instance.id in self.per_instance or instance.kind in self.per_kind

    def calibrate(self, instances: Sequence[CheckInstance]) -> list[CheckInstance]:
        """The instances with ``est_seconds`` measured where that run measured them (the same id;
        else the kind's mean there), the plan's guess otherwise."""
        out = []
        for inst in instances:
            measured = self.per_instance.get(inst.id, self.per_kind.get(inst.kind))
            out.append(replace(inst, est_seconds=measured) if measured is not None else inst)
        return out

    def wall_seconds(self, instances: Sequence[CheckInstance]) -> float:
        """The wall time the runnable ``instances`` should take, sharing and parallelism as measured."""
        return sum(i.est_seconds for i in self.calibrate(instances) if i.runnable) * self.wall_factor


def _seconds(value: Any) -> float:
    if not is_seconds(value):
        raise ValueError(f"not a number of seconds: {value!r}")
    return float(value)


def _seconds_between(start: Any, end: Any) -> float | None:
    try:
        return (datetime.fromisoformat(str(end)) - datetime.fromisoformat(str(start))).total_seconds()
    except (TypeError, ValueError):
        return None
