"""Evals in the reports: a forest plot per declared eval (the paired difference with its interval
per scope point and length bin, against the margin), one row per outcome, the flipped items side
by side, the evals table of summary.md, the dashboard's trend and the first screen's estimate of
the time limits a deciding run needs."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup

from fasttrack.kinds.evals.measurements import Bounds, EvalMeasurements, Sample
from fasttrack.report import charts
from fasttrack.report.format import as_map, clip, hardware_label, maps, num, number, short_point, why
from fasttrack.report.sections import MarkdownTable, Outcomes, ReportSection

# Caps that keep a 10,000-sample report small and fast to open.
MAX_DISCORDANT = 5000  # every discordant item up to this many...
MAX_EMBEDDED_CHARS = 5_000_000  # ...and up to this much (escaped) text in all, so the file stays under 10 MB
MAX_CONCORDANT_PER_EVAL = 100  # a bounded sample of concordant ones per eval outcome
MAX_OUTPUT_CHARS = 1500
MAX_PROMPT_CHARS = 400
FIRST_PAGE = 20  # items rendered as HTML (readable without JavaScript)


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


def declared_evals(evidence: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The manifest's evals by id (as the evidence embeds the manifest)."""
    data = as_map(as_map(evidence.get("manifest")).get("data"))
    return {str(e.get("id")): e for e in maps(data.get("evals"))}


def eval_identity(evidence: Mapping[str, Any], check: Mapping[str, Any]) -> dict[str, Any]:
    """Task, metric and margin of an eval outcome: from its measurements, else from the manifest
    (an eval that did not run has no measurements but keeps the identity it was declared with)."""
    m = EvalMeasurements.of(check)
    declared = declared_evals(evidence).get(str(check.get("name")), {})
    margin = number(m.margin)
    if margin is None:
        margin = number(declared.get("margin"))
    return {
        "task": str(m.task or declared.get("task") or check.get("name")),
        "metric": str(m.metric or declared.get("metric") or "?"),
        "margin": abs(margin) if margin is not None else None,
    }


def eval_rows(evidence: Mapping[str, Any], outcomes: Outcomes) -> list[dict[str, Any]]:
    """One row per eval outcome, keeping the manifest's identity (task, metric, margin) for the
    ones that did not run, and why."""
    rows = []
    for c in outcomes:
        m = EvalMeasurements.of(c)
        ident = eval_identity(evidence, c)
        flips = m.flips
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
                "why": why(c),
                "ran": bool(m),
                "n": num(m.n),
                "baseline": num(m.baseline_mean),
                "candidate": num(m.candidate_mean),
                "diff": num(m.diff, signed=True),
                **_bounds_text(c["status"], m),
                "p_mcnemar": num(m.p_mcnemar),
                "rw": num(flips.get("right_to_wrong")),
                "wr": num(flips.get("wrong_to_right")),
                "floor": bool(m.floor),
                "n_needed": m.raw.get("n_needed"),
                "reference": reference_text(m),
                "family": family_text(m),
            }
        )
    return rows


def reference_text(m: EvalMeasurements) -> str:
    """The recorded reference (``evals[].reference``): the expected value, its relative tolerance
    and rule, the accepted means and the candidate's, met or missed; "" when none was checked."""
    ref = m.reference
    if ref is None or ref.value is None:
        return ""
    if ref.low is not None and ref.high is not None:
        accepted = f"[{num(ref.low, 4)}, {num(ref.high, 4)}]"
    elif ref.high is not None:
        accepted = f"at most {num(ref.high, 4)}"
    else:
        accepted = f"at least {num(ref.low, 4)}" if ref.low is not None else "?"
    verdict = "met" if ref.passed is True else "missed" if ref.passed is False else "not judged"
    return (
        f"reference {num(ref.value, 4)} (rtol {num(ref.rtol)}, {ref.rule or '?'}): accepts {accepted}; "
        f"the candidate's mean {num(ref.measured, 4)}, {verdict}"
    )


def family_text(m: EvalMeasurements) -> str:
    """The eval family whose alpha this test shares (``eval_families``, Bonferroni); "" when none."""
    family = m.family
    if not family:
        return ""
    members = [str(x) for x in family.get("members") or () if x is not None]
    correction = str(family.get("correction") or "bonferroni")
    correction = correction[:1].upper() + correction[1:]
    return (
        f"family {family.get('name', '?')}: alpha {num(number(family.get('alpha')))} shared by {len(members)} "
        f"eval{'' if len(members) == 1 else 's'} ({', '.join(members)}), {correction}: each at alpha "
        f"{num(number(family.get('adjusted_alpha')), 4)}"
    )


DECISION = {"passed": True, "failed": False}  # anything else: not decided (grey)
UNDECIDED = "—"


def _level(m: EvalMeasurements) -> str:
    return f"{1 - (m.alpha if m.alpha is not None else 0.05):.0%}"


def _bounds_text(status: str, m: EvalMeasurements) -> dict[str, str]:
    """The interval, the deciding lower bound and the MDE, each saying what it is; an undecided
    eval (not run, underpowered) shows none of them, only the items it needs."""
    if status not in DECISION or not m:
        needed = f"needs n ≥ {m.n_needed}" if m and m.n_needed else UNDECIDED
        return {"ci": UNDECIDED, "lower_bound": needed, "mde": UNDECIDED}
    level = _level(m)
    seq = m.sequential
    if seq.used:  # the sequential rule decided on its anytime-valid bound, not the fixed-n one
        lower = f"{num(seq.cs_lower, signed=True)} (anytime-valid {level} one-sided)"
    else:
        lower = f"{num(m.lower_bound, signed=True)} ({level} one-sided)"
    return {
        "ci": f"[{num(m.ci_low, signed=True)}, {num(m.ci_high, signed=True)}] ({level} two-sided)",
        "lower_bound": lower,
        "mde": num(m.mde),
    }


def _bin_decision(b: Bounds) -> bool | None:
    """A bin's own decision: its status when recorded (an underpowered bin is undecided, not
    failed); older evidence without one: ``passed`` True is a pass, anything else undecided."""
    if b.status is not None:
        return DECISION.get(b.status)
    return True if b.passed is True else None


def forests(evidence: Mapping[str, Any], evals: Outcomes) -> tuple[list[Markup], list[dict[str, Any]]]:
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
            m = EvalMeasurements.of(o)
            if not m:
                not_run.append(
                    {
                        "id": eval_id,
                        **ident,
                        "margin": num(ident["margin"]) if ident["margin"] is not None else "?",
                        "point": short_point(o.get("scope_point")),
                        "status": o["status"],
                        "why": why(o),
                    }
                )
                continue
            frows.append(
                charts.ForestRow(
                    short_point(o.get("scope_point")) + f" (n={num(m.n)})",
                    number(m.diff),
                    number(m.ci_low),
                    number(m.ci_high),
                    DECISION.get(o["status"]),
                    note=f"{o['status'].replace('_', ' ')}: {o.get('reason_code') or 'no estimate'}",
                )
            )
            for b in m.bins or ():
                frows.append(
                    charts.ForestRow(
                        f"bin {b.name} (n={num(b.n)})",
                        number(b.diff),
                        number(b.ci_low),
                        number(b.ci_high),
                        _bin_decision(b),
                        indent=True,
                        note=f"{str(b.status or 'no decision').replace('_', ' ')}: no interval at n={num(b.n)}",
                    )
                )
        if frows:
            title = (
                f"{eval_id}: {ident['task']} ({ident['metric']}), candidate − baseline, "
                f"{_level(EvalMeasurements.of(outcomes[0]))} two-sided CI, margin {num(margin)}"
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


def _item(eval_id: str, s: Sample) -> Item:
    prompt, t1 = clip(s.prompt, MAX_PROMPT_CHARS)
    base, t2 = clip(s.baseline_output, MAX_OUTPUT_CHARS)
    cand, t3 = clip(s.candidate_output, MAX_OUTPUT_CHARS)
    direction = _direction(s.baseline_score, s.candidate_score)
    if direction == "same" and s.flipped:
        direction = "changed"
    return Item(
        eval_id,
        "" if s.doc_id is None else str(s.doc_id),
        str(s.bin or ""),
        direction,
        num(s.baseline_score),
        num(s.candidate_score),
        prompt,
        base,
        cand,
        t1 or t2 or t3,
    )


def items(evals: Outcomes) -> Items:
    discordant: list[Item] = []
    concordant: list[Item] = []
    total = n_disc = omitted_conc = 0
    budget = MAX_EMBEDDED_CHARS
    for c in evals:
        samples = EvalMeasurements.of(c).samples or ()
        total += len(samples)
        eval_id = f"{c['name']} @ {short_point(c.get('scope_point'))}"
        kept_conc = 0
        for s in samples:
            flipped = bool(s.flipped) or _direction(s.baseline_score, s.candidate_score) != "same"
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


def evals(evidence: Mapping[str, Any], outcomes: Outcomes) -> Mapping[str, Any]:
    plots, not_run = forests(evidence, outcomes)
    return {
        "forests": plots,
        "not_run": not_run,
        "rows": eval_rows(evidence, outcomes),
        "flipped": items(outcomes),
        "first_page": FIRST_PAGE,
        "max_output": MAX_OUTPUT_CHARS,
    }


def checklist(data: Mapping[str, Any]) -> list[str]:
    flipped = data["flipped"]
    if not flipped.discordant:
        return []
    return [f"Read the {flipped.discordant} flipped eval item(s), right→wrong first: are they noise or a pattern?"]


def markdown(evidence: Mapping[str, Any], outcomes: Outcomes) -> list[MarkdownTable]:
    """summary.md's evals table: (title, header, rows)."""
    rows = eval_rows(evidence, outcomes)
    if not rows:
        return []
    header = [
        "eval",
        "task (metric, margin)",
        "scope point",
        "status",
        "n",
        "diff",
        "CI (two-sided)",
        "right→wrong / wrong→right",
    ]
    # the reference and family column only where an eval declares one (evals[].reference, eval_families)
    extra = any(r["reference"] or r["family"] for r in rows)
    return [
        (
            "Evals (paired, candidate − baseline)",
            header + (["reference / family"] if extra else []),
            [
                [
                    r["id"],
                    f"{r['task']} ({r['metric']}, margin {r['margin']})",
                    r["point"],
                    r["status"].replace("_", " ") + (f": {r['why']}" if r["why"] else ""),
                    r["n"],
                    r["diff"],
                    r["ci"],
                    f"{r['rw']} / {r['wr']}",
                ]
                + (["; ".join(t for t in (r["reference"], r["family"]) if t) or "—"] if extra else [])
                for r in rows
            ],
        )
    ]


def trend(evidence: Mapping[str, Any], outcomes: Outcomes) -> tuple[str | None, float | None]:
    """The first declared eval's mean paired difference over its outcomes (the dashboard's trend line)."""
    declared = [e.get("task") or e.get("id") for e in maps(as_map(evidence["manifest"].get("data")).get("evals"))]
    task = declared[0] if declared else (outcomes[0]["name"] if outcomes else None)
    found = [
        number(EvalMeasurements.of(c).diff) for c in outcomes if (EvalMeasurements.of(c).task or c["name"]) == task
    ]
    diffs = [d for d in found if d is not None]
    return task, (sum(diffs) / len(diffs) if diffs else None)


def _ints(values: Any) -> list[int]:
    """The distinct whole numbers among ``values``, sorted."""
    return sorted({v for v in values if isinstance(v, int) and not isinstance(v, bool)})


def underpowered(members: Outcomes) -> str:
    """The first screen's line for underpowered evals: which, at what sizes, and what decides them."""
    names = list(dict.fromkeys(str(c.get("name")) for c in members))
    measured = [EvalMeasurements.of(c) for c in members]
    ns, needed = _ints(m.n for m in measured), _ints(m.n_needed for m in measured)
    setups = list(dict.fromkeys(hardware_label(c.get("scope_point")) for c in members))
    text = f"{len(members)} eval{'' if len(members) == 1 else 's'} ({', '.join(names)}) at {', '.join(setups[:3])}"
    if ns:
        text += f": {'/'.join(str(n) for n in ns)} items cannot decide the margin"
        if needed:
            text += f" (need ≥ {needed[0]})"
    return text + "; decide with " + " ".join(f"--eval-limit {n}=all" for n in names)


def deciding_time_scale(evidence: Mapping[str, Any], required: Outcomes, current: float) -> float | None:
    """The --timeout-scale a deciding run of the underpowered evals needs, from what this run
    measured: seconds per item x the items each bin needs (``n_needed`` per bin), against the
    eval's time limit. Baseline items served from the cache count at what they cost when they ran
    (the new items of the deciding run are not cached). None when that fits in the current limits
    or cannot be told."""
    data = as_map(as_map(evidence.get("manifest")).get("data"))
    timeouts = as_map(data.get("timeouts"))
    declared = {str(as_map(e).get("id")): as_map(e) for e in data.get("evals") or () if isinstance(e, Mapping)}
    wanted = current
    for c in required:
        if c.get("reason_code") != "underpowered":
            continue
        m = EvalMeasurements.of(c)
        limit = declared.get(str(c.get("name")), {}).get("timeout_s") or as_map(timeouts.get("per_kind")).get(
            "evals", timeouts.get("default_s")
        )
        n, needed, spent, limit = (_positive(v) for v in (m.n, m.n_needed, c.get("duration_s"), limit))
        if n is None or needed is None or spent is None or limit is None:
            continue
        spent += _uncached_baseline_cost(m, n)
        bins = max(1, len(m.bins or ()))
        wanted = max(wanted, math.ceil(spent / n * needed * bins / limit))
    return float(wanted) if wanted > current else None


def _uncached_baseline_cost(m: EvalMeasurements, n: float) -> float:
    """Seconds the eval's cached baseline items would have cost to run: their stored cost, and for
    hits of unknown cost what an item cost this run (a fresh baseline item where there was one,
    else a candidate item: the stock path is rarely the faster one)."""
    cache, timings = m.cache, m.timings
    saved = _positive(cache.get("baseline_saved_s")) or 0.0
    # evidence from before costs were stored has no count of its own: every hit's cost is unknown
    unknown = _positive(cache.get("baseline_hits_of_unknown_cost", cache.get("baseline_hits")))
    if unknown is None:
        return saved
    fresh = n - (_positive(cache.get("baseline_hits")) or 0.0)
    base_each = (_positive(timings.get("baseline_s")) or 0.0) / fresh if fresh > 0 else 0.0
    cand_each = (_positive(timings.get("candidate_s")) or 0.0) / n
    return saved + unknown * max(base_each, cand_each)


def _positive(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        return None
    return float(value)


SECTION = ReportSection(
    html=evals,
    checklist=checklist,
    markdown=markdown,
    markdown_before_failures=True,
    trend=trend,
    underpowered=underpowered,
    deciding_time_scale=deciding_time_scale,
)
