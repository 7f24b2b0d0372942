"""Evidence (plain JSON, as read from evidence.json) -> what the report sections show.

Reporters read measurement keys listed in docs/evidence.md and tolerate missing ones: a runner that
wrote fewer keys gives a sparser report, never a crash.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from markupsafe import Markup

from fasttrack.report import charts
from fasttrack.report.reasons import hardware_label, short_point
from fasttrack.selection import describe_eval_limits, describe_hardware_exclusions, hardware_exclusions

# Caps that keep a 10,000-sample report small and fast to open.
MAX_DISCORDANT = 5000  # every discordant item up to this many...
MAX_EMBEDDED_CHARS = 5_000_000  # ...and up to this much (escaped) text in all, so the file stays under 10 MB
MAX_CONCORDANT_PER_EVAL = 100  # a bounded sample of concordant ones per eval outcome
MAX_OUTPUT_CHARS = 1500
MAX_PROMPT_CHARS = 400
FIRST_PAGE = 20  # items rendered as HTML (readable without JavaScript)
MAX_REASONS = 40
MAX_KERNEL_ROWS = 600  # rows over every setup (problem rows first per setup); the rest are counted

AUDIT_KINDS = ("switch", "stress", "sanitizer", "divergence", "speculative", "audit")
STATUS_ORDER = {"failed": 0, "errored": 1, "not_run": 2, "passed": 3}


# Scope dimensions that vary within one deployment; every other dimension (hardware and engine
# dimensions such as kv_cache_dtype or decode_context_parallel) names the deployment.
WORKLOAD_DIMENSIONS = ("batch", "dtype", "draft_length", "context")


def deployment_of(dims: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in dims.items() if k not in WORKLOAD_DIMENSIONS}


def num(value: Any, digits: int = 3, signed: bool = False) -> str:
    """Format a measurement for a table: 'n/a' for missing or non-finite numbers."""
    if isinstance(value, bool) or value is None:
        return "n/a" if value is None else str(value).lower()
    if isinstance(value, int):
        return f"{value:+d}" if signed else str(value)
    if isinstance(value, (dict, list)):
        return "n/a"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "n/a"
        return (
            f"{value:+.{digits}f}"
            if signed
            else f"{value:.{digits}g}"
            if abs(value) < 1e-3 and value
            else f"{value:.{digits}f}"
        )
    return str(value)


def human(value: Any, digits: int = 4) -> str:
    """A value for people: 0.9601063829787234 -> '0.9601', 12345 -> '12,345', 9.5e-07 -> '9.5e-07',
    True -> 'yes', a short list joined, a long one counted; never raw JSON."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "n/a"
        if value == 0:
            return "0"
        if abs(value) < 1e-3 or abs(value) >= 1e9:
            return f"{value:.2e}"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.{digits}g}"
    if isinstance(value, Mapping):
        return "; ".join(f"{k} {human(v, digits)}" for k, v in list(value.items())[:8]) + (
            f"; +{len(value) - 8} more" if len(value) > 8 else ""
        )
    if isinstance(value, (list, tuple)):
        if any(isinstance(v, (Mapping, list, tuple)) for v in value):
            return f"{len(value)} entr{'y' if len(value) == 1 else 'ies'}"
        shown = ", ".join(human(v, digits) for v in value[:8])
        return shown + (f", … (+{len(value) - 8})" if len(value) > 8 else "")
    text = str(value)
    return text if len(text) <= 200 else text[:199] + "…"


def _key(name: Any) -> str:
    """A measurement key for people: 'max_mean_kl' -> 'max mean kl'; other keys (paths, test ids) as they are."""
    text = str(name)
    return text.replace("_", " ") if text.replace("_", "").isalnum() else text


def details_list(value: Any, *, skip: Iterable[str] = ("reason", "status"), limit: int = 24) -> list[tuple[str, str]]:
    """A measurement mapping as (key, value) pairs for a key/value list: mappings one level deep
    flattened to 'outer.inner' keys (deeper ones summarised on one line), numbers formatted for
    people, long lists counted, at most ``limit`` pairs. ``reason``/``status`` repeat the row's own."""
    pairs: list[tuple[str, str]] = []
    skipped = set(skip)
    for key, item in value.items() if isinstance(value, Mapping) else ():
        if key in skipped or item in (None, "", [], {}):
            continue
        if isinstance(item, Mapping) and len(item) <= 12:
            pairs.extend((f"{_key(key)}.{_key(k)}", human(v)) for k, v in item.items() if v not in (None, "", [], {}))
        else:
            pairs.append((_key(key), human(item)))
    if len(pairs) > limit:
        pairs = [*pairs[:limit], ("…", f"{len(pairs) - limit} more values in evidence.json")]
    return pairs


ELSEWHERE = ("hardware", "out_of_scope", "dependency", "interrupted", "pending")


def elsewhere_lines(checks: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Outcomes that did not run on this machine (hardware, excluded, missing software, interrupted)
    as one line per accelerator and reason: they carry no measurement, only why."""
    lines: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for c in checks:
        acc = str(as_map(c.get("scope_point")).get("accelerator", "any hardware"))
        lines[(acc, str(c.get("reason_code")))].append(c)
    return [
        {
            "accelerator": acc,
            "count": len(members),
            "code": code,
            "status": members[0]["status"],
            "names": ", ".join(
                f"{n} ×{k}" if k > 1 else n
                for n, k in _counted(
                    f"{m['kind']}/{m['name']}" if m["kind"] in AUDIT_KINDS else str(m["name"]) for m in members
                )
            ),
            "reason": _why(members[0]),
        }
        for (acc, code), members in lines.items()
    ]


def _counted(names: Iterable[str]) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    return list(counts.items())


def ran_here(checks: Iterable[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """(outcomes with something to show, outcomes that did not run here)."""
    shown: list[Mapping[str, Any]] = []
    elsewhere: list[Mapping[str, Any]] = []
    for c in checks:
        (elsewhere if c["status"] == "not_run" and c.get("reason_code") in ELSEWHERE else shown).append(c)
    return shown, elsewhere


def as_map(value: Any) -> Mapping[str, Any]:
    """Runners own their measurement shapes; a value of an unexpected type reads as empty."""
    return value if isinstance(value, Mapping) else {}


def maps(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, (list, tuple)) else []


def strings(value: Any) -> list[str]:
    return [str(v) for v in value if not isinstance(v, (dict, list))] if isinstance(value, (list, tuple)) else []


def number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def measurements(check: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_map(check.get("measurements"))


def _clip(text: Any, limit: int) -> tuple[str, bool]:
    text = "" if text is None else str(text)
    return (text, False) if len(text) <= limit else (text[:limit], True)


@dataclass(frozen=True)
class Item:
    """One eval item as the flipped-items viewer shows it."""

    eval_id: str
    doc_id: str
    bin: str
    direction: str  # right_to_wrong | wrong_to_right | changed | same
    baseline_score: str
    candidate_score: str
    prompt: str
    baseline_output: str
    candidate_output: str
    truncated: bool

    @property
    def size(self) -> int:
        """Characters this item adds to the page: tojson writes each of < > & ' as a 6-character escape."""
        text = self.prompt + self.baseline_output + self.candidate_output
        return len(text) + 5 * sum(text.count(ch) for ch in "<>&'") + 100

    def as_row(self) -> list[Any]:
        return [
            self.eval_id,
            self.doc_id,
            self.bin,
            self.direction,
            self.baseline_score,
            self.candidate_score,
            self.prompt,
            self.baseline_output,
            self.candidate_output,
            self.truncated,
        ]


@dataclass(frozen=True)
class Items:
    shown: tuple[Item, ...]  # embedded: discordant first
    total: int  # samples recorded in the evidence
    discordant: int
    omitted_concordant: int
    omitted_discordant: int


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
    scope: dict[str, Any] = field(default_factory=dict)
    confinement: dict[str, Any] = field(default_factory=dict)
    heatmap: Markup | None = None
    ablation: dict[str, Any] | None = None  # each switch alone vs all on (the ablation arms)
    forests: list[Markup] = field(default_factory=list)
    eval_rows: list[dict[str, Any]] = field(default_factory=list)
    evals_not_run: list[dict[str, Any]] = field(default_factory=list)  # no estimate anywhere: one line each
    items: Items | None = None
    kernel_matrix: dict[str, Any] = field(default_factory=dict)
    features: list[dict[str, Any]] = field(default_factory=list)
    claims: list[dict[str, Any]] = field(default_factory=list)
    benchmarks: list[dict[str, Any]] = field(default_factory=list)
    features_elsewhere: list[Any] = field(default_factory=list)  # one line per accelerator and reason
    benchmarks_elsewhere: list[dict[str, Any]] = field(default_factory=list)
    audits: list[dict[str, Any]] = field(default_factory=list)
    audits_elsewhere: list[dict[str, Any]] = field(default_factory=list)
    checklist: list[str] = field(default_factory=list)


def build_view(evidence: Mapping[str, Any], digest: str) -> ReportView:
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
    )
    view.scope = _scope(evidence)
    view.confinement = _confinement(evidence, by_kind.get("scope_diff", []))
    view.heatmap = _heatmap(evidence, checks)
    view.forests, view.evals_not_run = _evals(evidence, by_kind.get("evals", []))
    view.eval_rows = eval_rows(evidence)
    view.items = _items(by_kind.get("evals", []))
    view.kernel_matrix = _kernel_matrix(by_kind.get("kernels", []))
    features, view.features_elsewhere = ran_here(by_kind.get("features", []))
    view.features = [_feature_row(c) for c in features]
    view.features_elsewhere = elsewhere_lines(view.features_elsewhere)
    view.claims = [_claim_row(c) for c in by_kind.get("claims", [])]
    benchmarks, elsewhere = ran_here(by_kind.get("benchmarks", []))
    view.benchmarks = [_benchmark_row(c) for c in benchmarks]
    view.benchmarks_elsewhere = elsewhere_lines(elsewhere)
    view.ablation = _ablation(benchmarks)
    audits, elsewhere = ran_here(c for c in view.checks if c["kind"] in AUDIT_KINDS)
    view.audits = [audit_row(c) for c in audits]
    view.audits_elsewhere = elsewhere_lines(elsewhere)
    view.checklist = _checklist(evidence, view, by_kind)
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


def _confinement(evidence: Mapping[str, Any], scope_diffs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    m = measurements(scope_diffs[0]) if scope_diffs else {}
    changed = strings(m.get("changed")) or strings(evidence["git"].get("changed_files"))
    violations = [
        {"path": str(v.get("path", "?")), "reason": str(v.get("reason", ""))} for v in maps(m.get("violations"))
    ]
    bad = {v["path"] for v in violations}
    return {
        "ran": bool(scope_diffs),
        "status": scope_diffs[0]["status"] if scope_diffs else None,
        "reason": scope_diffs[0].get("reason") if scope_diffs else None,
        "files": [{"path": p, "ok": p not in bad} for p in changed],
        "violations": violations,
        "code_paths": strings(m.get("code_paths")),
        "allowed_paths": strings(m.get("allowed_paths")),
        "gated_paths": strings(m.get("gated_paths")),
        "gated": strings(m.get("gated")),  # shared files changed behind the switches, for the reviewer
    }


def _matches(cell_dims: Mapping[str, Any], check_dims: Mapping[str, Any] | None) -> bool:
    """A check covers a cell when every dimension they share has the same value."""
    if not isinstance(check_dims, Mapping) or not check_dims:
        return False
    return all(str(check_dims[k]) == str(v) for k, v in cell_dims.items() if k in check_dims)


def _heatmap(evidence: Mapping[str, Any], checks: Sequence[Mapping[str, Any]]) -> Markup | None:
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
    worst_rank = {"failed": 0, "errored": 1, "not_run": 2, "passed": 3}
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
            # "covered" means the check produced a result here, not that it was planned
            kinds = tuple(sorted({c["kind"] for c in covering if c["status"] in ("passed", "failed")}))
            worst = min(
                (c["status"] for c in covering if c.get("required", True)),
                key=lambda s: worst_rank.get(s, 9),
                default=None,
            )
            # Speed-ups of the benchmarks that measured one here (passed or failed an expectation)
            timed = [
                measurements(c) for c in covering if c["kind"] == "benchmarks" and c["status"] in ("passed", "failed")
            ]
            ratios = [r for r in (number(m.get("ratio")) for m in timed) if r is not None]
            value = sum(ratios) / len(ratios) if ratios else None
            low, high = _interval(timed) if ratios else (None, None)
            cells[(row, col)] = charts.HeatCell(value, kinds, worst, low, high)
    return charts.heatmap(rows, cols, cells, col_dim or "scope")


def declared_evals(evidence: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The manifest's evals by id (as the evidence embeds the manifest)."""
    data = as_map(as_map(evidence.get("manifest")).get("data"))
    return {str(e.get("id")): e for e in maps(data.get("evals"))}


def eval_identity(evidence: Mapping[str, Any], check: Mapping[str, Any]) -> dict[str, Any]:
    """Task, metric and margin of an eval outcome: from its measurements, else from the manifest
    (an eval that did not run has no measurements but keeps the identity it was declared with)."""
    m = measurements(check)
    declared = declared_evals(evidence).get(str(check.get("name")), {})
    margin = number(m.get("margin"))
    if margin is None:
        margin = number(declared.get("margin"))
    return {
        "task": str(m.get("task") or declared.get("task") or check.get("name")),
        "metric": str(m.get("metric") or declared.get("metric") or "?"),
        "margin": abs(margin) if margin is not None else None,
    }


def _why(check: Mapping[str, Any]) -> str:
    """Why an outcome did not pass, without the scope point its row already names."""
    if check.get("status") == "passed":
        return ""
    reason = str(check.get("reason") or check.get("reason_code") or "")
    point = check.get("scope_point_id")
    return reason.replace(f" at {point}", "") if point else reason


def eval_rows(evidence: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per eval outcome, keeping the manifest's identity (task, metric, margin) for the
    ones that did not run, and why."""
    rows = []
    for c in evidence.get("checks", ()):
        if c.get("kind") != "evals":
            continue
        m = measurements(c)
        ident = eval_identity(evidence, c)
        flips = as_map(m.get("flips"))
        rows.append(
            {
                "id": str(c["name"]),
                "check_id": c["id"],
                "task": ident["task"],
                "metric": ident["metric"],
                "margin": num(ident["margin"]) if ident["margin"] is not None else "?",
                "point": short_point(c.get("scope_point")),
                "status": c["status"],
                "reason": c.get("reason"),
                "why": _why(c),
                "ran": bool(m),
                "n": num(m.get("n")),
                "baseline": num(m.get("baseline_mean")),
                "candidate": num(m.get("candidate_mean")),
                "diff": num(m.get("diff"), signed=True),
                "ci": f"[{num(m.get('ci_low'), signed=True)}, {num(m.get('ci_high'), signed=True)}]" if m else "n/a",
                "lower_bound": num(m.get("lower_bound"), signed=True),
                "mde": num(m.get("mde")),
                "p_mcnemar": num(m.get("p_mcnemar")),
                "rw": num(flips.get("right_to_wrong")),
                "wr": num(flips.get("wrong_to_right")),
                "floor": bool(m.get("floor")),
                "n_needed": m.get("n_needed"),
            }
        )
    return rows


DECISION = {"passed": True, "failed": False}  # anything else: not decided (grey)


def _bin_decision(b: Mapping[str, Any]) -> bool | None:
    """A bin's own decision: its status when recorded (an underpowered bin is undecided, not
    failed); older evidence without one: ``passed`` True is a pass, anything else undecided."""
    status = b.get("status")
    if isinstance(status, str):
        return DECISION.get(status)
    return True if b.get("passed") is True else None


def _interval(timed: Sequence[Mapping[str, Any]]) -> tuple[float | None, float | None]:
    """The span of the benchmarks' 95% intervals for the speed-up at one cell: (lowest lower
    bound, highest upper bound); None where a benchmark recorded no interval (not decided)."""
    lows, highs = [], []
    for m in timed:
        ci = m.get("ratio_ci")
        pair = [number(v) for v in ci] if isinstance(ci, (list, tuple)) and len(ci) == 2 else [None, None]
        if pair[0] is None or pair[1] is None:
            return None, None
        lows.append(pair[0])
        highs.append(pair[1])
    return (min(lows), max(highs)) if lows else (None, None)


def _evals(
    evidence: Mapping[str, Any], evals: Sequence[Mapping[str, Any]]
) -> tuple[list[Markup], list[dict[str, Any]]]:
    """A forest plot per declared eval with an estimate somewhere, and one line for each eval
    outcome that has none (not run: task, metric, margin and why)."""
    by_eval: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for c in evals:
        by_eval[str(c["name"])].append(c)
    forests, not_run = [], []
    for eval_id, outcomes in by_eval.items():
        ident = eval_identity(evidence, outcomes[0])
        margin = float(ident["margin"] or 0.0)
        frows = []
        for o in outcomes:
            m = measurements(o)
            if not m:
                not_run.append(
                    {
                        "id": eval_id,
                        **ident,
                        "margin": num(ident["margin"]) if ident["margin"] is not None else "?",
                        "point": short_point(o.get("scope_point")),
                        "status": o["status"],
                        "why": _why(o),
                    }
                )
                continue
            frows.append(
                charts.ForestRow(
                    short_point(o.get("scope_point")) + f" (n={num(m.get('n'))})",
                    number(m.get("diff")),
                    number(m.get("ci_low")),
                    number(m.get("ci_high")),
                    DECISION.get(o["status"]),
                    note=f"{o['status'].replace('_', ' ')}: {o.get('reason_code') or 'no estimate'}",
                )
            )
            for b in maps(m.get("bins")):
                frows.append(
                    charts.ForestRow(
                        f"bin {b.get('name')} (n={num(b.get('n'))})",
                        number(b.get("diff")),
                        number(b.get("ci_low")),
                        number(b.get("ci_high")),
                        _bin_decision(b),
                        indent=True,
                        note=f"{str(b.get('status') or 'no decision').replace('_', ' ')}: no interval at n={num(b.get('n'))}",
                    )
                )
        if frows:
            title = (
                f"{eval_id}: {ident['task']} ({ident['metric']}), candidate − baseline, 95% CI, margin {num(margin)}"
            )
            forests.append(charts.forest_plot(title, margin, frows))
    return forests, not_run


def _direction(base: Any, cand: Any) -> str:
    try:
        b, c = float(base), float(cand)
    except (TypeError, ValueError):
        return "same" if base == cand else "changed"
    if c < b:
        return "right_to_wrong"
    if c > b:
        return "wrong_to_right"
    return "same"


def _item(eval_id: str, s: Mapping[str, Any]) -> Item:
    prompt, t1 = _clip(s.get("prompt"), MAX_PROMPT_CHARS)
    base, t2 = _clip(s.get("baseline_output"), MAX_OUTPUT_CHARS)
    cand, t3 = _clip(s.get("candidate_output"), MAX_OUTPUT_CHARS)
    direction = _direction(s.get("baseline_score"), s.get("candidate_score"))
    if direction == "same" and s.get("flipped"):
        direction = "changed"
    return Item(
        eval_id,
        str(s.get("doc_id", "")),
        str(s.get("bin") or ""),
        direction,
        num(s.get("baseline_score")),
        num(s.get("candidate_score")),
        prompt,
        base,
        cand,
        t1 or t2 or t3,
    )


def _items(evals: Sequence[Mapping[str, Any]]) -> Items:
    discordant: list[Item] = []
    concordant: list[Item] = []
    total = n_disc = omitted_conc = 0
    budget = MAX_EMBEDDED_CHARS
    for c in evals:
        samples = maps(measurements(c).get("samples"))
        total += len(samples)
        eval_id = f"{c['name']} @ {short_point(c.get('scope_point'))}"
        kept_conc = 0
        for s in samples:
            flipped = bool(s.get("flipped")) or _direction(s.get("baseline_score"), s.get("candidate_score")) != "same"
            if flipped:
                n_disc += 1
                if len(discordant) < MAX_DISCORDANT and budget > 0:
                    discordant.append(_item(eval_id, s))
                    budget -= discordant[-1].size
            elif kept_conc < MAX_CONCORDANT_PER_EVAL:
                kept_conc += 1
                concordant.append(_item(eval_id, s))
            else:
                omitted_conc += 1
    # Concordant samples fill what the discordant ones left of the budget.
    while concordant and budget - sum(i.size for i in concordant) < 0:
        omitted_conc += len(concordant) - len(concordant) // 2
        concordant = concordant[: len(concordant) // 2]
    order = {"right_to_wrong": 0, "changed": 1, "wrong_to_right": 2}
    discordant.sort(key=lambda i: order.get(i.direction, 3))
    return Items(tuple(discordant + concordant), total, n_disc, omitted_conc, n_disc - len(discordant))


def _sci(value: Any) -> str:
    return (
        f"{value:.1e}"
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        else "n/a"
    )


def _short_test(nodeid: str) -> str:
    """Test function plus any non-scope parameters: 'test_decode[all]' for
    'path.py::test_decode[batch=1,dtype=fp32-all]' (scope values are the row, not the column)."""
    name = nodeid.split("::")[-1]
    if "[" not in name:
        return name
    func, params = name.split("[", 1)
    extra = [part for part in params.rstrip("]").split("-") if part and "=" not in part]
    return f"{func}[{'-'.join(extra)}]" if extra else func


def _ratio(t: Mapping[str, Any]) -> float | None:
    """Worst absolute error ÷ atol of one test result; None when either was not recorded."""
    atol = number(as_map(t.get("tolerance")).get("atol"))
    err = number(as_map(t.get("worst_error")).get("abs"))
    return err / atol if atol is not None and err is not None and atol > 0 else None


def _kernel_cell(t: Mapping[str, Any]) -> dict[str, Any]:
    tol = as_map(t.get("tolerance"))
    err = as_map(t.get("worst_error"))
    ratio = _ratio(t)
    outcome = str(t.get("outcome", "?"))
    bad = outcome not in ("passed", "skipped", "?")
    if ratio is not None:
        text = f"{ratio:.2f}×" + (" ✗" if bad else "")
    else:
        text = outcome.replace("_", " ")
    detail = (
        f"{outcome}: worst |err| {_sci(err.get('abs'))} vs atol {_sci(tol.get('atol'))}"
        if ratio is not None
        else outcome
    )
    if t.get("message"):
        detail += f" — {t['message']}"
    level = "bad" if bad else ("skip" if outcome == "skipped" else ("warn" if (ratio or 0) > 0.8 else "ok"))
    return {"text": text, "detail": detail, "level": level}


def _point_rest(dims: Mapping[str, Any] | None) -> str:
    """A scope point without its hardware setup (the setup heads its group): 'batch=3 dtype=fp32'."""
    rest = {k: v for k, v in as_map(dims).items() if k not in ("accelerator", "device_count", "tensor_parallel")}
    return short_point(rest) if rest else "(one point)"


def _kernel_matrix(kernels: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What the kernel tests showed, per suite and hardware setup: one row per scope point with its
    worst error ÷ tolerance over every test there, and a cell per test; problem rows first, setups
    with a problem open. Outcomes that did not run here are one line per accelerator and reason."""
    ran, elsewhere = ran_here(kernels)
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for c in ran:
        groups[(str(c.get("name")), hardware_label(c.get("scope_point")))].append(c)
    budget = MAX_KERNEL_ROWS
    setups = []
    for (suite, setup), members in groups.items():
        members = sorted(members, key=lambda c: STATUS_ORDER.get(c["status"], 9))
        tests: dict[str, None] = {}
        rows = []
        worst: tuple[float, str, str] | None = None
        for c in members:
            cells: dict[str, dict[str, Any]] = {}
            row_worst: tuple[float, str] | None = None
            results = maps(measurements(c).get("tests"))
            for t in results:
                name = _short_test(str(t.get("nodeid", "?")))
                tests.setdefault(name, None)
                cells[name] = _kernel_cell(t)
                ratio = _ratio(t)
                if ratio is not None and (row_worst is None or ratio > row_worst[0]):
                    row_worst = (ratio, name)
            if row_worst is not None and (worst is None or row_worst[0] > worst[0]):
                worst = (row_worst[0], row_worst[1], _point_rest(c.get("scope_point")))
            if budget > 0:
                budget -= 1
                counts = as_map(measurements(c))
                rows.append(
                    {
                        "point": _point_rest(c.get("scope_point")),
                        "status": c["status"],
                        "reason": _why(c),
                        "cells": cells,
                        "worst": f"{row_worst[0]:.2f}×" if row_worst else "–",
                        "worst_test": row_worst[1] if row_worst else "",
                        "worst_level": "bad"
                        if row_worst and row_worst[0] > 1
                        else ("warn" if row_worst and row_worst[0] > 0.8 else "ok"),
                        "tests": f"{counts.get('passed', 0)} passed"
                        + "".join(f", {counts.get(k)} {k}" for k in ("failed", "errors", "skipped") if counts.get(k))
                        if results
                        else "",
                    }
                )
        statuses: dict[str, int] = defaultdict(int)
        for c in members:
            statuses[c["status"]] += 1
        setups.append(
            {
                "suite": suite,
                "setup": setup,
                "points": len(members),
                "statuses": dict(statuses),
                "worst": f"{worst[0]:.2f}× ({worst[1]} at {worst[2]})" if worst else "no error/tolerance recorded",
                "problem": any(c["status"] != "passed" for c in members),
                "tests": list(tests),
                "rows": rows,
                "omitted": len(members) - len(rows),
            }
        )
    setups.sort(key=lambda g: (not g["problem"], g["suite"], g["setup"]))
    not_here = elsewhere_lines(elsewhere)
    between = [_batch_sizes_line(c) for c in ran if as_map(measurements(c).get("batch_sizes"))]
    return {"setups": setups, "not_here": not_here, "ran": len(ran), "batch_sizes": between}


def _batch_sizes_line(c: Mapping[str, Any]) -> str:
    """Which batch sizes a between-points kernel instance ran (the declared ones run per point)."""
    sizes = as_map(measurements(c).get("batch_sizes"))
    ran, failed = [int(b) for b in sizes.get("ran") or ()], [int(b) for b in sizes.get("failed") or ()]
    declared = ", ".join(str(b) for b in sizes.get("declared") or ())
    text = f"{c['name']} at {short_point(c.get('scope_point'))}: batch sizes {declared} (declared points) and "
    text += f"{len(ran)} of {len(sizes.get('between') or ())} between them passed ({sizes.get('policy', '')})"
    return text + (f"; failed at {', '.join(map(str, failed))}" if failed else "")


def _feature_row(c: Mapping[str, Any]) -> dict[str, Any]:
    m = measurements(c)
    return {
        "probe": str(m.get("probe") or c["name"]),
        "point": short_point(c.get("scope_point")),
        "status": c["status"],
        "statistic": human(m.get("statistic")) if m.get("statistic") is not None else "",
        "p_value": num(m.get("p_value")),
        "reason": _why(c) if c["status"] != "passed" else str(c.get("reason") or ""),
        "details": details_list(m.get("details")),
    }


def _claim_row(c: Mapping[str, Any]) -> dict[str, Any]:
    m = measurements(c)
    return {
        "id": str(m.get("claim_id") or c["name"]),
        "statement": str(m.get("statement") or ""),
        "claimed": human(m.get("claimed")),
        "measured": human(m.get("measured")),
        "labels": [label.replace("_", " ") for label in strings(m.get("labels"))],
        "status": str(m.get("status") or c["status"]).replace("_", " "),
    }


def _median(side: Any, metric: Any) -> Any:
    """A side's median: a number, or (vllm_bench) the metric's field of the median of every field."""
    median = as_map(side).get("median")
    return as_map(median).get(str(metric)) if isinstance(median, Mapping) else median


def _ablation(benchmarks: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """What each switch buys: per benchmark and point, the speed-up of each switch alone (the arms
    ``<id>~<switch>``) beside all switches on (the benchmark itself)."""
    arms: dict[str, list[str]] = defaultdict(list)
    cells: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    for c in benchmarks:
        base, _, arm = str(c["name"]).partition("~")
        key = (
            base,
            short_point(c.get("scope_point"))
            + (f" c={measurements(c)['max_concurrency']}" if measurements(c).get("max_concurrency") else ""),
        )
        value = num(measurements(c).get("ratio"), 2)
        cells[key][arm or "all on"] = value if value != "n/a" else str(c["status"])
        if arm and arm not in arms[base]:
            arms[base].append(arm)
    if not arms:
        return None
    switches = list(dict.fromkeys(a for names in arms.values() for a in names))
    rows = [
        {"benchmark": b, "point": p, "cells": [v.get(s, "") for s in switches], "all_on": v.get("all on", "")}
        for (b, p), v in cells.items()
        if b in arms
    ]
    return {"switches": switches, "rows": rows}


def audit_row(c: Mapping[str, Any]) -> dict[str, Any]:
    """Switch, audits and numerical checks: the key measurements as a key/value list (no samples,
    no long lists), the reason only when there is one."""
    m = measurements(c)
    short = {k: v for k, v in m.items() if not isinstance(v, (list, tuple)) or len(v) <= 8}
    return {
        "kind": c["kind"],
        "name": c["name"],
        "point": short_point(c.get("scope_point")),
        "status": c["status"],
        "reason": _why(c) if c["status"] != "passed" else str(c.get("reason") or ""),
        "details": details_list(short, limit=16),
    }


def _benchmark_row(c: Mapping[str, Any]) -> dict[str, Any]:
    m = measurements(c)
    census = as_map(m.get("kernel_census"))
    ci = m.get("ratio_ci") if isinstance(m.get("ratio_ci"), (list, tuple)) and len(m["ratio_ci"]) == 2 else None
    kernels = ""
    if census:
        base, cand = as_map(census.get("baseline")), as_map(census.get("candidate"))
        kernels = f"{num(base.get('kernels_per_layer'), 1)} → {num(cand.get('kernels_per_layer'), 1)}"
        if base.get("us_per_layer") is not None or cand.get("us_per_layer") is not None:
            # None: the decode steps' time was below the profiler's noise (no measurement, not 0)
            kernels += f"; µs {num(base.get('us_per_layer'), 1)} → {num(cand.get('us_per_layer'), 1)}"
    return {
        "name": c["name"],
        "point": short_point(c.get("scope_point")),
        "status": c["status"],
        "metric": f"{m.get('metric', '')} {m.get('unit', '')}".strip(),
        "baseline": num(_median(m.get("baseline"), m.get("metric"))),
        "candidate": num(_median(m.get("candidate"), m.get("metric"))),
        "ratio": num(m.get("ratio")),
        "ratio_ci": f"[{num(ci[0])}, {num(ci[1])}]" if ci else "",
        "kernels": kernels,
        "reason": c.get("reason") or "",
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


def _checklist(
    evidence: Mapping[str, Any], view: ReportView, by_kind: Mapping[str, Sequence[Mapping[str, Any]]]
) -> list[str]:
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
    if view.confinement.get("violations"):
        items.append(
            f"{len(view.confinement['violations'])} changed file(s) lie outside the model's code paths: justify or move them."
        )
    if view.items and view.items.discordant:
        items.append(
            f"Read the {view.items.discordant} flipped eval item(s), right→wrong first: are they noise or a pattern?"
        )
    labelled = [c for c in by_kind.get("claims", ()) if strings(measurements(c).get("labels"))]
    if labelled:
        items.append(
            f"{len(labelled)} benchmark claim(s) carry labels (synthetic acceptance, prefill excluded, not comparable): "
            "is the wording of each headline honest?"
        )
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
    """Per check kind: how many outcomes of each status (the summary table)."""
    table: dict[str, dict[str, int]] = {}
    for c in checks:
        row = table.setdefault(c["kind"], {"passed": 0, "failed": 0, "errored": 0, "not_run": 0})
        row[c["status"]] = row.get(c["status"], 0) + 1
    return [{"kind": k, **v} for k, v in table.items()]
