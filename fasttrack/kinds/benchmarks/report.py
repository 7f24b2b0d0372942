"""Benchmarks in the report: one row per benchmark and scope point (medians of both sides, the
speed-up and its interval, kernels per layer), what each switch alone buys (the ablation arms),
the speed-ups of the where-it-works grid, and one line per accelerator and reason for what did not
run here."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from fasttrack.evidence import ARM_SEPARATOR
from fasttrack.kinds.benchmarks.measurements import BenchmarkMeasurements
from fasttrack.report.format import as_map, elsewhere_lines, num, number, ran_here, short_point
from fasttrack.report.sections import Outcomes, ReportSection, Speedup


def _median(side: Any, metric: Any) -> Any:
    """A side's median: a number, or (vllm_bench, sglang_bench) the metric's field of the median of every field."""
    median = as_map(side).get("median")
    return as_map(median).get(str(metric)) if isinstance(median, Mapping) else median


def ablation(benchmarks: Outcomes) -> dict[str, Any] | None:
    """What each switch buys: per benchmark and point, the speed-up of each switch alone (the arms
    ``<id>~<switch>``) and of all but one (leave-one-out, ``<id>~-<switch>``) beside all switches
    on (the benchmark itself)."""
    arms: dict[str, list[str]] = defaultdict(list)
    cells: dict[tuple[str, str], dict[str, str]] = defaultdict(dict)
    for c in benchmarks:
        m = BenchmarkMeasurements.of(c)
        base, _, arm = str(c["name"]).partition(ARM_SEPARATOR)
        key = (base, short_point(c.get("scope_point")) + (f" c={m.max_concurrency}" if m.max_concurrency else ""))
        value = num(m.ratio, 2)
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
    # rival arms (enable.arms): no candidate runs "all on"; each arm is a candidate of its own
    rival = not any("all on" in v for (b, _p), v in cells.items() if b in arms)
    return {"switches": switches, "rows": rows, "rival": rival}


def _bounds_text(m: BenchmarkMeasurements, ci: Any) -> str:
    """The speed-up's bounds, saying what they are and what the rule asked of them: "passed" on
    "not slower than stock" means no slowdown was shown (upper bound at or above 1), not a gain."""
    if not ci:
        return ""
    level = f"one-sided {1 - m.alpha:.1%}" if m.alpha is not None else "bounds"
    if m.promise is not None:
        asked = f"lower bound ≥ {num(m.promise)}× promised"
    elif m.rule and "census" in m.rule:
        asked = str(m.rule)
    else:
        asked = "not slower: upper bound ≥ 1×"
    return f"[{num(ci[0])}, {num(ci[1])}] ({level}; {asked})"


def benchmark_row(c: Mapping[str, Any]) -> dict[str, Any]:
    m = BenchmarkMeasurements.of(c)
    census = as_map(m.kernel_census)
    ci = m.ratio_ci if m.ratio_ci is not None and len(m.ratio_ci) == 2 else None
    kernels = ""
    if census:
        base, cand = as_map(census.get("baseline")), as_map(census.get("candidate"))
        kernels = f"{num(base.get('kernels_per_layer'), 1)} → {num(cand.get('kernels_per_layer'), 1)}"
        if base.get("us_per_layer") is not None or cand.get("us_per_layer") is not None:
            # None: the decode steps' time was below the profiler's noise (no measurement, not 0)
            kernels += f"; µs {num(base.get('us_per_layer'), 1)} → {num(cand.get('us_per_layer'), 1)}"
        kernels += f"; per step {num(base.get('kernels_per_step'), 0)} → {num(cand.get('kernels_per_step'), 0)}"
        kernels += _differing(as_map(base.get("kernel_names")), as_map(cand.get("kernel_names")))
    return {
        "name": c["name"],
        "point": short_point(c.get("scope_point")),
        "status": c["status"],
        "metric": f"{m.metric or ''} {m.unit or ''}".strip(),
        "baseline": num(_median(m.baseline, m.metric)),
        "candidate": num(_median(m.candidate, m.metric)),
        "ratio": num(m.ratio),
        "ratio_ci": _bounds_text(m, ci),
        "kernels": kernels,
        "reason": c.get("reason") or "",
    }


def _differing(base: Mapping[str, Any], cand: Mapping[str, Any], top: int = 4) -> str:
    """The operators (kernels) whose per-step counts differ most, e.g. "; aten::rsqrt 21 → 0"."""
    gaps = {n: (float(base.get(n) or 0), float(cand.get(n) or 0)) for n in set(base) | set(cand)}
    changed = sorted((n for n, (b, c) in gaps.items() if b != c), key=lambda n: (-abs(gaps[n][0] - gaps[n][1]), n))
    return "".join(f"; {n} {num(gaps[n][0], 0)} → {num(gaps[n][1], 0)}" for n in changed[:top])


def speedup(c: Mapping[str, Any]) -> Speedup | None:
    """The speed-up a benchmark measured here (passed or failed an expectation), with its interval;
    None when it did not time anything here."""
    if c["status"] not in ("passed", "failed"):
        return None
    m = BenchmarkMeasurements.of(c)
    low, high = m.bounds
    level = f"one-sided {1 - m.alpha:.1%} bounds" if m.alpha is not None else "bounds"
    return Speedup(number(m.ratio), number(low), number(high), level)


def benchmarks(evidence: Mapping[str, Any], outcomes: Outcomes) -> Mapping[str, Any]:
    ran, elsewhere = ran_here(outcomes)
    return {"rows": [benchmark_row(c) for c in ran], "elsewhere": elsewhere_lines(elsewhere), "ablation": ablation(ran)}


SECTION = ReportSection(html=benchmarks, speedup=speedup)
