"""Against the last good run: speed-ups and eval means of one run compared with an earlier run of
the same optimisation on the same hardware (``fasttrack check --previous``, the dashboard).

Two runs are compared point by point: the same outcome id (check, name and scope point, so the
same accelerator and device count) in both. A value **dropped** when the current run's upper
bound is below the earlier run's lower bound: the drop is beyond both intervals, so noise in
either run alone cannot explain it (each bound is one-sided at its run's alpha; for a change of
nothing the chance of a flag is at most the sum of the two alphas, and far less in practice:
benchmarks/false_alarms.py measures it). Compared values:

- what each kind's measurements say is comparable across runs (``Measurements.compared``):
  benchmarks the speed-up (median pair ratio) and its bounds ``ratio_ci``; evals the candidate's
  mean score and its bounds ``candidate_mean_ci`` (oriented by the eval's ``higher_is_better``).

Pure functions over evidence dicts (no engine, no statistics library): the engine turns the
result into outcomes, the dashboard into a list of drops per run. Both give the kinds registry.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol


class _Compared(Protocol):
    """A value one outcome measured, with its bounds (`fasttrack.kinds.measurements.Comparable`)."""

    @property
    def what(self) -> str: ...
    @property
    def value(self) -> float | None: ...
    @property
    def bounds(self) -> tuple[float | None, ...] | None: ...


class _Model(Protocol):
    def compared(self) -> _Compared | None: ...


class _Reader(Protocol):
    def of(self, outcome: Mapping[str, Any]) -> _Model: ...


class Measured(Protocol):
    """What history needs of a check kind: its measurements model (`fasttrack.kinds.base.Kind`)."""

    @property
    def measurements(self) -> _Reader: ...


Kinds = Mapping[str, Measured]  # the registry, as history receives it


@dataclass(frozen=True)
class Value:
    """One comparable value of a run: the value and its one-sided bounds, oriented (higher: better)."""

    id: str
    kind: str
    name: str
    point: Mapping[str, Any]
    what: str  # "speed-up" | "candidate mean"
    value: float
    low: float
    high: float


@dataclass(frozen=True)
class Compared:
    now: Value
    before: Value

    @property
    def dropped(self) -> bool:
        return self.now.high < self.before.low

    def to_dict(self) -> dict[str, Any]:
        def side(v: Value) -> dict[str, float]:
            return {"value": v.value, "low": v.low, "high": v.high}

        return {"what": self.now.what, "now": side(self.now), "before": side(self.before), "dropped": self.dropped}

    def sentence(self) -> str:
        n, b = self.now, self.before
        verb = "dropped beyond both intervals" if self.dropped else "did not drop beyond both intervals"
        return (
            f"{n.what} {verb}: now {n.value:.4g} [{n.low:.4g}, {n.high:.4g}], before {b.value:.4g} "
            f"[{b.low:.4g}, {b.high:.4g}]"
        )


def _finite(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return float(x)


def _lower_is_better_evals(evidence: Mapping[str, Any]) -> set[str]:
    data = (evidence.get("manifest") or {}).get("data") or {}
    return {
        str(e.get("id"))
        for e in data.get("evals") or ()
        if isinstance(e, Mapping) and e.get("higher_is_better") is False
    }


def values(evidence: Mapping[str, Any], kinds: Kinds) -> dict[str, Value]:
    """The comparable values of a run, by outcome id (outcomes that measured no bounds are left out)."""
    lower_better = _lower_is_better_evals(evidence)
    found: dict[str, Value] = {}
    for check in evidence.get("checks") or ():
        if not isinstance(check, Mapping) or "#" in str(check.get("id", "")):
            continue
        kind, name = str(check.get("kind")), str(check.get("name"))
        model = kinds.get(kind)
        compared = model.measurements.of(check).compared() if model is not None else None
        if compared is None or not isinstance(compared.bounds, Sequence) or len(compared.bounds) != 2:
            continue
        value, low, high = (_finite(v) for v in (compared.value, *compared.bounds))
        if value is None or low is None or high is None:
            continue
        if kind == "evals" and name in lower_better:
            value, low, high = -value, -high, -low
        point = check.get("scope_point") or {}
        found[str(check["id"])] = Value(str(check["id"]), kind, name, point, compared.what, value, low, high)
    return found


def compare(now: Mapping[str, Any], before: Mapping[str, Any], kinds: Kinds) -> list[Compared]:
    """Every value both runs measured, current run's order."""
    earlier = values(before, kinds)
    return [Compared(v, earlier[k]) for k, v in values(now, kinds).items() if k in earlier]


def optimisation_id(evidence: Mapping[str, Any]) -> str | None:
    manifest = evidence.get("manifest") or {}
    data = manifest.get("data") or {}
    return manifest.get("optimisation_id") or ((data.get("optimisation") or {}).get("id"))


def drops_over(runs: Sequence[Mapping[str, Any]], kinds: Kinds) -> list[list[Compared]]:
    """For runs of one optimisation in time order: per run, the values that dropped against the
    latest earlier run that measured the same value (the same check at the same scope point, so
    the same hardware; runs of other hardware in between do not interrupt the line)."""
    last: dict[str, Value] = {}
    out: list[list[Compared]] = []
    for run in runs:
        now = values(run, kinds)
        out.append([c for c in (Compared(v, last[k]) for k, v in now.items() if k in last) if c.dropped])
        last.update(now)
    return out
