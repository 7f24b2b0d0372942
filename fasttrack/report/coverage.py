"""The report's coverage map: for each declared value of each scope dimension (the values the
evidence's ``scope_points`` take), which check kinds exercised it end to end, which reached it only
in kernel tests, and which did not reach it at all; and, in words above the table, the axes a
reviewer has to know about (one held fixed by every end-to-end check, a value nothing end to end
ran, a value no outcome that ran touched).

What counts, from the evidence alone:

- an outcome exercises a value when it *ran* (``passed`` or ``failed``) and its scope point records
  that value; ``not_run`` and ``errored`` outcomes exercised nothing (they are counted apart);
- a dimension the scope declares with one value only is exercised by every outcome that ran at a
  scope point (the scope has no other value for it to run);
- an outcome that records no value of a dimension with several (an eval served at the target's own
  dtype) ran, but the evidence does not say at which value: it counts for none of them (the map
  shows it as "unrecorded");
- whether a kind exercises end to end (it drives the model or the target as a whole), in kernel
  tests, or nothing (a static check) is the kind's own ``exercises`` in the registry the reporters
  receive, never its name. A kind that is not in the registry counts for nothing.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fasttrack.report.format import WORKLOAD_DIMENSIONS, as_map, maps

if TYPE_CHECKING:
    from fasttrack.report.sections import Kinds

END_TO_END = "end_to_end"
KERNEL = "kernel"
EXERCISING = (END_TO_END, KERNEL)  # the map's columns; static kinds exercise no scope value
RAN = frozenset({"passed", "failed"})
HARDWARE = ("accelerator", "device_count", "tensor_parallel")
REACH_TEXT = {END_TO_END: "end to end", KERNEL: "kernel tests only", "none": "not reached"}
CELL_TEXT = {
    "unrecorded": "ran without recording this dimension: it counts for none of its values",
    "none": "no outcome of this kind at this value",
}


@dataclass(frozen=True)
class Column:
    kind: str
    letter: str
    exercises: str  # end_to_end or kernel

    @property
    def label(self) -> str:
        return "end to end" if self.exercises == END_TO_END else "kernel tests"


@dataclass(frozen=True)
class Cell:
    ran: int  # outcomes of the kind that ran at this value
    idle: int  # outcomes of the kind at this value that did not run or errored
    unrecorded: bool  # the kind ran without recording this dimension

    @property
    def state(self) -> str:
        if self.ran:
            return "ran"
        if self.idle:
            return "not_run"
        return "unrecorded" if self.unrecorded else "none"

    @property
    def text(self) -> str:
        state = self.state
        if state == "ran":
            return f"{self.ran}✓" + (f" {self.idle}○" if self.idle else "")
        return {"not_run": f"{self.idle}○", "unrecorded": "·"}.get(state, "")

    @property
    def title(self) -> str:
        if self.ran:
            return f"{self.ran} ran here" + (f"; {self.idle} did not run or errored" if self.idle else "")
        if self.idle:
            return f"{self.idle} planned here did not run or errored: they exercised nothing"
        return CELL_TEXT[self.state]


@dataclass(frozen=True)
class Row:
    dimension: str
    value: str
    cells: tuple[Cell, ...]  # one per column
    end_to_end: tuple[str, ...]  # the kinds that ran this value end to end
    kernel: tuple[str, ...]  # the kernel-level kinds that ran it
    idle: int  # outcomes at this value that did not run or errored

    @property
    def reach(self) -> str:
        return END_TO_END if self.end_to_end else KERNEL if self.kernel else "none"

    @property
    def reach_text(self) -> str:
        return REACH_TEXT[self.reach]


@dataclass(frozen=True)
class Group:
    dimension: str
    rows: tuple[Row, ...]


@dataclass(frozen=True)
class Coverage:
    columns: tuple[Column, ...]
    groups: tuple[Group, ...]  # one per declared dimension, hardware first
    flags: tuple[str, ...]  # what the reviewer has to know, in words
    left_out: tuple[str, ...]  # kinds with outcomes that exercise no scope value (static, unknown)

    def row(self, dimension: str, value: Any) -> Row | None:
        group = next((g for g in self.groups if g.dimension == dimension), None)
        return next((r for r in group.rows if r.value == str(value)), None) if group else None


def build_coverage(evidence: Mapping[str, Any], kinds: Kinds) -> Coverage | None:
    """The coverage map of ``evidence``, or None when it records no scope points."""
    declared = declared_values(evidence.get("scope_points"))
    if not declared:
        return None
    checks = maps(evidence.get("checks"))
    present = list(dict.fromkeys(str(c.get("kind")) for c in checks))
    columns = tuple(
        Column(name, kind.letter, kind.exercises)
        for name, kind in kinds.items()
        if name in present and kind.exercises in EXERCISING
    )
    left_out = tuple(k for k in present if k not in {c.kind for c in columns})
    by_kind: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for c in checks:
        by_kind[str(c.get("kind"))].append(c)
    groups = tuple(
        Group(dim, _rows(dim, values, len(values) == 1, columns, by_kind)) for dim, values in declared.items()
    )
    flags = tuple(flag for g in groups if (flag := _flag(g, columns)) is not None)
    return Coverage(columns, groups, flags, left_out)


def declared_values(points: Any) -> dict[str, list[str]]:
    """Dimension -> its declared values (as text), hardware dimensions first, then engine, then workload."""
    seen: dict[str, dict[str, Any]] = defaultdict(dict)
    for p in maps(points):
        for dim, value in as_map(p.get("dims")).items():
            seen[str(dim)].setdefault(str(value), value)
    return {dim: _ordered(seen[dim]) for dim in sorted(seen, key=_dim_key)}


def _ordered(values: Mapping[str, Any]) -> list[str]:
    """Numbers in increasing order, then names in the order the scope points first give them
    (the manifest's: ``dtypes: [fp32, bf16]``)."""
    numbers = [text for text, v in values.items() if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return sorted(numbers, key=lambda text: float(values[text])) + [t for t in values if t not in set(numbers)]


def _dim_key(dim: str) -> tuple[int, int, str]:
    if dim in HARDWARE:
        return (0, HARDWARE.index(dim), dim)
    if dim in WORKLOAD_DIMENSIONS:
        return (2, WORKLOAD_DIMENSIONS.index(dim), dim)
    return (1, 0, dim)


def _tally(
    dim: str, single: bool, outcomes: Iterable[Mapping[str, Any]]
) -> tuple[Counter[str], Counter[str], bool, Counter[str]]:
    """One kind's outcomes along ``dim``: (ran per value, did not run per value, ran without
    recording it, ran at a scope point without recording it: what a single-valued dimension counts)."""
    ran: Counter[str] = Counter()
    idle: Counter[str] = Counter()
    unrecorded = False
    implied: Counter[str] = Counter()
    for c in outcomes:
        point = as_map(c.get("scope_point"))
        went = c.get("status") in RAN
        if dim in point:
            (ran if went else idle)[str(point[dim])] += 1
        elif went:
            unrecorded = True
            if point:
                implied["*"] += 1
    return ran, idle, unrecorded and not single, implied


def _rows(
    dim: str,
    values: Sequence[str],
    single: bool,
    columns: Sequence[Column],
    by_kind: Mapping[str, Sequence[Mapping[str, Any]]],
) -> tuple[Row, ...]:
    tallies = [_tally(dim, single, by_kind.get(col.kind, ())) for col in columns]
    rows = []
    for value in values:
        cells = tuple(
            Cell(ran[value] + (implied["*"] if single else 0), idle[value], unrecorded)
            for ran, idle, unrecorded, implied in tallies
        )
        reached = [col for col, cell in zip(columns, cells, strict=True) if cell.ran]
        rows.append(
            Row(
                dim,
                value,
                cells,
                tuple(col.kind for col in reached if col.exercises == END_TO_END),
                tuple(col.kind for col in reached if col.exercises == KERNEL),
                sum(idle[value] for _, idle, _, _ in tallies),
            )
        )
    return tuple(rows)


def _flag(group: Group, columns: Sequence[Column]) -> str | None:
    """The group's axis in words when some declared value was not exercised end to end."""
    rows, dim = group.rows, group.dimension
    ran = [r.value for r in rows if r.reach == END_TO_END]
    if len(ran) == len(rows):
        return None
    kernel_only = [r.value for r in rows if r.reach == KERNEL]
    unreached = [r for r in rows if r.reach == "none"]
    parts = []
    if len(ran) == 1 and len(rows) > 1:
        parts.append(f"end-to-end checks ran {ran[0]} only")
    elif not ran and len(rows) > 1:
        parts.append(f"nothing end to end ran any declared {dim}")
    if kernel_only:
        parts.append(
            f"{_both(kernel_only)} reached only in kernel tests"
            if parts
            else f"nothing end to end ran {_either(kernel_only)}: reached only in kernel tests"
        )
    if unreached:
        idle = sum(r.idle for r in unreached)
        parts.append(
            f"no outcome that ran reached {_either([r.value for r in unreached])}"
            + (f" ({idle} outcome{'s' if idle != 1 else ''} there did not run or errored)" if idle else "")
        )
    end_to_end = [col for col in columns if col.exercises == END_TO_END]
    silent = [
        col.kind for col, cell in zip(columns, rows[0].cells, strict=True) if col in end_to_end and cell.unrecorded
    ]
    if silent:
        who = "the end-to-end checks" if len(silent) == len(end_to_end) else _both(silent)
        parts[-1] += f" ({who} ran without recording a {dim})"
    return f"{dim}: " + "; ".join(parts)


def _either(values: Sequence[str]) -> str:
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " or " + values[-1]


def _both(values: Sequence[str]) -> str:
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " and " + values[-1]
