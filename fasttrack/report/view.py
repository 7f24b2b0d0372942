"""Evidence (plain JSON, as read from evidence.json) -> what the report's sections show.

The report's layout is here and in its template; what each check kind shows comes from the kind's
own report section (``Kind.report``, `fasttrack.report.sections`), which the view asks in the
registry's order. Reporters read only the evidence and tolerate missing measurements: a runner
that wrote fewer keys gives a sparser report, never a crash.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from markupsafe import Markup

from fasttrack.report import charts
from fasttrack.report.coverage import Coverage, build_coverage
from fasttrack.report.format import (
    STATUS_ORDER,
    as_map,
    deployment_of,
    details_list,
    elsewhere_lines,
    maps,
    ran_here,
    short_point,
    strings,
    why,
)
from fasttrack.report.matrix import Matrix, build_matrix
from fasttrack.report.sections import Speedup, Table
from fasttrack.selection import describe_eval_limits, describe_hardware_exclusions, hardware_exclusions

if TYPE_CHECKING:
    from fasttrack.report.sections import Kinds

MAX_REASONS = 40


@dataclass
class ReportView:
    evidence: Mapping[str, Any]
    digest: str
    verdict: str
    reasons: list[str]
    reasons_more: int
    counts: Mapping[str, int]
    checks: list[Mapping[str, Any]]
    by_kind: dict[str, list[Mapping[str, Any]]]
    letters: dict[str, str] = field(default_factory=dict)  # the where-it-works grid's letter of each kind
    sections: dict[str, Mapping[str, Any]] = field(default_factory=dict)  # each kind's report data
    tables: list[Table] = field(default_factory=list)  # sections of kinds the template does not lay out
    scope: dict[str, Any] = field(default_factory=dict)
    heatmap: Markup | None = None
    matrix: Matrix | None = None  # the first screen's kinds x hardware setups
    coverage: Coverage | None = None  # declared scope values x kinds: end to end, kernel tests only, not reached
    audits: list[dict[str, Any]] = field(default_factory=list)
    audits_elsewhere: list[dict[str, Any]] = field(default_factory=list)
    checklist: list[str] = field(default_factory=list)

    def section(self, kind: str) -> Mapping[str, Any]:
        """The report data of ``kind`` (empty when no registered kind gives any)."""
        return self.sections.get(kind, {})


def build_view(evidence: Mapping[str, Any], digest: str, kinds: Kinds) -> ReportView:
    checks = list(evidence.get("checks", ()))
    by_kind: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for c in checks:
        by_kind[c["kind"]].append(c)
    verdict = evidence["verdict"]
    reasons = list(verdict.get("reasons", ()))
    view = ReportView(
        evidence=evidence,
        digest=digest,
        verdict=verdict["status"],
        reasons=reasons[:MAX_REASONS],
        reasons_more=max(0, len(reasons) - MAX_REASONS),
        counts=verdict.get("counts", {}),
        checks=sorted(checks, key=lambda c: (STATUS_ORDER.get(c["status"], 9), c["kind"], c["id"])),
        by_kind=dict(by_kind),
        letters={name: kind.letter for name, kind in kinds.items()},
    )
    for name, kind in kinds.items():
        section = kind.report
        if section is not None and section.html is not None:
            view.sections[name] = section.html(evidence, by_kind.get(name, []))
        table = section.table(evidence, by_kind.get(name, [])) if section is not None and section.table else None
        if table is not None:
            view.tables.append(table)
    view.scope = _scope(evidence)
    view.heatmap = _heatmap(evidence, checks, kinds, view.letters)
    audit_kinds = tuple(name for name, kind in kinds.items() if kind.audit)
    view.matrix = build_matrix(checks, view.letters, audit_kinds)
    view.coverage = build_coverage(evidence, kinds)
    audits, elsewhere = ran_here(c for c in view.checks if c["kind"] in audit_kinds)
    view.audits = [audit_row(c) for c in audits]
    view.audits_elsewhere = elsewhere_lines(elsewhere, audit_kinds)
    view.checklist = _checklist(evidence, view, kinds)
    return view


def _scope(evidence: Mapping[str, Any]) -> dict[str, Any]:
    data = as_map(evidence["manifest"].get("data"))
    scope = as_map(data.get("scope"))
    others = {k: v for k, v in scope.items() if k != "hardware"}
    preserve = as_map(data.get("preserve"))
    dims: dict[str, set] = defaultdict(set)
    for p in evidence.get("scope_points", ()):
        for k, v in as_map(p.get("dims")).items():
            dims[k].add(str(v))
    return {
        "hardware": [
            {
                **h,
                "device_counts": strings(h.get("device_counts")),
                "tensor_parallel": strings(h.get("tensor_parallel")),
            }
            for h in maps(scope.get("hardware"))
        ],
        "others": others,
        "preserve": [k for k, v in preserve.items() if v],
        "n_points": len(evidence.get("scope_points", ())),
        "dims": {k: sorted(v, key=lambda s: (len(s), s)) for k, v in dims.items()},
        "summary": as_map(data.get("optimisation")).get("summary", ""),
    }


def _matches(cell_dims: Mapping[str, Any], check_dims: Mapping[str, Any] | None) -> bool:
    """A check covers a cell when every dimension they share has the same value."""
    if not isinstance(check_dims, Mapping) or not check_dims:
        return False
    return all(str(check_dims[k]) == str(v) for k, v in cell_dims.items() if k in check_dims)


def _heatmap(
    evidence: Mapping[str, Any], checks: Sequence[Mapping[str, Any]], kinds: Kinds, letters: Mapping[str, str]
) -> Markup | None:
    points = [as_map(p.get("dims")) for p in evidence.get("scope_points", ())]
    if not points:
        return None
    col_dim = "batch" if any("batch" in p for p in points) else None

    def row_of(p: Mapping[str, Any]) -> str:  # one row per deployment: hardware and engine dimensions
        return short_point(deployment_of(p)) or "any hardware"

    rows = list(dict.fromkeys(row_of(p) for p in points))
    cols = sorted({str(p[col_dim]) for p in points if col_dim in p}, key=lambda s: (len(s), s)) if col_dim else ["all"]
    hw_of_row: dict[str, dict[str, Any]] = {}
    for p in points:
        hw_of_row.setdefault(row_of(p), deployment_of(p))
    cells: dict[tuple[str, str], charts.HeatCell] = {}
    for row in rows:
        for col in cols:
            dims = dict(hw_of_row[row])
            if col_dim:
                dims[col_dim] = col
            if not any(
                _matches(dims, p) for p in points if row_of(p) == row and (not col_dim or str(p.get(col_dim)) == col)
            ):
                continue
            covering = [c for c in checks if _matches(dims, c.get("scope_point"))]
            cells[(row, col)] = _cell(covering, kinds)
    return charts.heatmap(rows, cols, cells, col_dim or "scope", letters)


def _cell(covering: Sequence[Mapping[str, Any]], kinds: Kinds) -> charts.HeatCell:
    # "covered" means the check produced a result here, not that it was planned
    covered = tuple(sorted({c["kind"] for c in covering if c["status"] in ("passed", "failed")}))
    worst = min(
        (c["status"] for c in covering if c.get("required", True)),
        key=lambda s: STATUS_ORDER.get(s, 9),
        default=None,
    )
    # Speed-ups timed here (a benchmark that passed or failed an expectation), the mean of them
    timed = [s for s in (_speedup(c, kinds) for c in covering) if s is not None]
    ratios = [s.value for s in timed if s.value is not None]
    value = sum(ratios) / len(ratios) if ratios else None
    low, high = _interval(timed) if ratios else (None, None)
    bounds = ", ".join(sorted({s.bounds for s in timed})) or "interval"
    return charts.HeatCell(value, covered, worst, low, high, bounds)


def _speedup(check: Mapping[str, Any], kinds: Kinds) -> Speedup | None:
    kind = kinds.get(str(check.get("kind")))
    section = kind.report if kind is not None else None
    return section.speedup(check) if section is not None and section.speedup is not None else None


def _interval(timed: Sequence[Speedup]) -> tuple[float | None, float | None]:
    """The span of the speed-ups' bounds at one cell: (lowest lower bound, highest upper
    bound); None where an outcome recorded no interval (not decided)."""
    if any(s.low is None or s.high is None for s in timed):
        return None, None
    lows = [s.low for s in timed if s.low is not None]
    highs = [s.high for s in timed if s.high is not None]
    return (min(lows), max(highs)) if lows else (None, None)


def audit_row(c: Mapping[str, Any]) -> dict[str, Any]:
    """Switch, audits and numerical checks: the key measurements as a key/value list (no samples,
    no long lists), the reason only when there is one."""
    m = as_map(c.get("measurements"))
    short = {k: v for k, v in m.items() if not isinstance(v, (list, tuple)) or len(v) <= 8}
    return {
        "kind": c["kind"],
        "name": c["name"],
        "point": short_point(c.get("scope_point")),
        "status": c["status"],
        "reason": why(c) if c["status"] != "passed" else str(c.get("reason") or ""),
        "details": details_list(short, limit=16),
    }


def partial_run_notes(evidence: Mapping[str, Any]) -> list[str]:
    """What a partial run (--only/--skip/--hardware, a shard) left out, by name: its verdict is not the gate's."""
    run = as_map(evidence.get("run"))
    notes = []
    if run.get("only") or run.get("skip"):
        chosen = f"only {', '.join(strings(run.get('only')))}" if run.get("only") else ""
        skipped = f"skipping {', '.join(strings(run.get('skip')))}" if run.get("skip") else ""
        notes.append(
            f"Partial run ({'; '.join(x for x in (chosen, skipped) if x)}): the other check kinds were not run and not counted."
        )
    left_out = hardware_exclusions(run, evidence.get("checks", ()))
    if left_out:
        notes.append(
            f"Partial run for hardware {', '.join(strings(run.get('hardware')))}: not run and not counted here (merge with "
            "a run on that hardware for the full-scope verdict): " + "; ".join(describe_hardware_exclusions(left_out))
        )
    shard = as_map(run.get("shard"))
    if shard:
        notes.append(
            f"Shard {shard.get('index')}/{shard.get('count')}: merge every shard (fasttrack merge) for the verdict."
        )
    return notes


def narrowed_checks(evidence: Mapping[str, Any]) -> list[str]:
    """Checks the manifest runs at fewer hardware setups than its scope (``points``, recorded by the
    plan), e.g. ``evals mrcr at tensor_parallel 1``: a declared choice a reviewer has to accept."""
    return [
        f"{n.get('check')} at "
        + ", ".join(f"{dim} {'/'.join(str(v) for v in values)}" for dim, values in as_map(n.get("points")).items())
        for n in maps(as_map(evidence.get("plan")).get("narrowed"))
    ]


def _checklist(evidence: Mapping[str, Any], view: ReportView, kinds: Kinds) -> list[str]:
    """What the evidence cannot decide and a reviewer still has to judge."""
    items = [
        *partial_run_notes(evidence),
        "The design: is the optimisation confined to the model's own code and off unless the switch is set?",
        "The declared scope: do the hardware and workload ranges match what the authors will support?",
    ]
    narrowed = narrowed_checks(evidence)
    if narrowed:
        items.append(
            "The manifest runs some checks at fewer hardware setups than its scope (points): "
            + "; ".join(narrowed)
            + ". Do the checks that run at every setup (kernel tests, stress audits, the switch"
            + ("" if any(n.startswith("divergence") for n in narrowed) else ", divergence")
            + ") cover the rest?"
        )
    limits = as_map(as_map(evidence.get("run")).get("eval_limits"))
    if limits:
        items.append(
            f"Eval sample sizes came from the command line, not the manifest (--eval-limit): {describe_eval_limits(limits)}."
        )
    for name, kind in kinds.items():  # what each kind's section asks of the reviewer, in registry order
        section = kind.report
        if section is not None and section.checklist is not None and name in view.sections:
            items.extend(section.checklist(view.sections[name]))
    not_run = [
        c for c in evidence.get("checks", ()) if c["status"] in ("not_run", "errored") and c.get("required", True)
    ]
    if not_run:
        items.append(f"{len(not_run)} required outcome(s) did not run or errored: they must run before a PASS.")
    if evidence["git"].get("dirty"):
        items.append("The work tree was dirty when the run started: the evidence may not match any commit.")
    items.append(
        "Anything the checks cannot see: concurrency under production load, memory headroom, maintenance cost."
    )
    return items


def kinds_table(checks: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per check kind: how many required outcomes of each status, and the outcomes not required
    (the summary table; its status columns add up to the headline's required outcomes)."""
    table: dict[str, dict[str, int]] = {}
    for c in checks:
        row = table.setdefault(c["kind"], {"passed": 0, "failed": 0, "errored": 0, "not_run": 0, "not_required": 0})
        key = c["status"] if c.get("required", True) else "not_required"
        row[key] = row.get(key, 0) + 1
    return [{"kind": k, **v} for k, v in table.items()]
