"""Benchmark claims: lint what a published number really says, and judge it against measurements.

Pure functions over manifest data (no I/O), used by ``fasttrack plan`` (lint) and by the benchmark
runner (assessment).

Lint (`lint_claims`):
- a claim whose baseline and candidate setups differ in anything but the switch (8 GPUs before,
  16 after) is **not comparable**, and so is one the manifest marks ``comparable: false``;
- special conditions are labelled: ``synthetic_acceptance`` (a forced speculative acceptance
  length), ``prefill_excluded``, ``replay_workload``, ``percentile:<p>``, ``speculative:<method>``;
- a claim with no stated setup on a side (neither the benchmark's ``setups`` nor its own
  ``setup``), or a claim stating neither a candidate value, a speedup nor a difference, is an **error**.

Assessment (`assess_claim`): a claim is ``not_comparable`` (never reproduced, whatever was
measured), ``not_measurable`` here (and why: hardware, synthetic acceptance, no measurement),
``reproduced`` (measured speedup at least the claimed one within its relative tolerance; faster
than claimed also reproduces a speed claim) or ``not_reproduced``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fasttrack.manifest.build import resolve_setup, setup_differences, switch_args
from fasttrack.manifest.sections import thaw

if TYPE_CHECKING:
    from fasttrack.manifest import Manifest

DEFAULT_TOLERANCE = 0.05
REPRODUCED = "reproduced"
NOT_REPRODUCED = "not_reproduced"
NOT_MEASURABLE = "not_measurable"
NOT_COMPARABLE = "not_comparable"


@dataclass(frozen=True)
class ClaimLint:
    benchmark_id: str
    claim_id: str
    statement: str
    baseline_setup: Mapping[str, Any] | None
    candidate_setup: Mapping[str, Any] | None
    comparable: bool
    differences: tuple[str, ...] = ()  # "gpus: 8 vs 16"
    labels: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()
    claimed: Mapping[str, Any] = field(default_factory=dict)  # baseline, candidate, speedup
    tolerance: float = DEFAULT_TOLERANCE
    conditions: Mapping[str, Any] = field(default_factory=dict)
    metric: str = ""
    higher_is_better: bool = True  # ratios are candidate/baseline, or baseline/candidate when lower is better
    # Where the engine's own flags force acceptance on this claim's runs (commands, env,
    # engine_args: fasttrack.manifest.acceptance), as {"where", "how", "acceptance_length"}.
    synthetic_sources: tuple[Mapping[str, Any], ...] = ()

    def summary(self) -> str:
        """One line for ``fasttrack plan`` and reports."""
        parts = [f"claim {self.claim_id!r} ({self.benchmark_id})"]
        if self.errors:
            parts.append("ERROR: " + "; ".join(self.errors))
        if not self.comparable:
            why = ", ".join(self.differences) if self.differences else "marked comparable: false"
            parts.append(f"not comparable ({why})")
        special = [label for label in self.labels if label != "not_comparable"]
        if special:
            parts.append("labelled " + ", ".join(special))
        if self.synthetic_sources:
            parts.append(
                "acceptance forced by " + "; ".join(f"{s['where']}: {s['how']}" for s in self.synthetic_sources)
            )
        if len(parts) == 1:
            parts.append("comparable, no special conditions")
        return ": ".join(parts[:1]) + ": " + "; ".join(parts[1:])


def lint_claim(
    benchmark: Mapping[str, Any], claim: Mapping[str, Any], own: Mapping[str, bool] | None = None
) -> ClaimLint:
    """One claim's lint; ``own``: the switches' flags and options (`switch_args`), which the
    candidate's ``engine_args`` pass without making the setups differ."""
    errors: list[str] = []
    setups = {side: resolve_setup(benchmark, claim, side) for side in ("baseline", "candidate")}
    for side, setup in setups.items():
        if setup is None:
            errors.append(f"no {side} setup is stated (give the benchmark's setups.{side} or the claim's {side}.setup)")
    differences: list[str] = []
    if setups["baseline"] is not None and setups["candidate"] is not None:
        for key in setup_differences(setups["baseline"], setups["candidate"], own):
            a, b = setups["baseline"].get(key), setups["candidate"].get(key)
            differences.append(f"{key}: {_show(a)} vs {_show(b)}")
    comparable = not differences and claim.get("comparable") is not False
    conditions = dict(claim.get("conditions") or {})
    labels: list[str] = []
    if not comparable:
        labels.append("not_comparable")
    speculative = [s.get("speculative") or {} for s in setups.values() if s]
    sources = synthetic_sources(benchmark, setups)
    if (
        conditions.get("acceptance") == "synthetic"
        or any(sp.get("acceptance") == "synthetic" for sp in speculative)
        or sources
    ):
        labels.append("synthetic_acceptance")
    if conditions.get("prefill") == "excluded":
        labels.append("prefill_excluded")
    workload = benchmark.get("workload") or {}
    if workload.get("kind") == "replay" or "replay" in str(conditions.get("workload", "")).lower():
        labels.append("replay_workload")
    percentile = conditions.get("percentile")
    if percentile and percentile not in ("mean", "median", "p50"):
        labels.append(f"percentile:{percentile}")
    methods = sorted({str(sp.get("method")) for sp in speculative if sp.get("method") not in (None, "none")})
    labels.extend(f"speculative:{m}" for m in methods)
    base_value = (claim.get("baseline") or {}).get("value")
    cand_value = (claim.get("candidate") or {}).get("value")
    speedup = claim.get("speedup")
    if cand_value is None and speedup is None and claim.get("difference") is None:
        errors.append("states neither a candidate value, a speedup nor a difference")
    return ClaimLint(
        benchmark_id=str(benchmark.get("id")),
        claim_id=str(claim.get("id")),
        statement=str(claim.get("statement", "")),
        baseline_setup=setups["baseline"],
        candidate_setup=setups["candidate"],
        comparable=comparable,
        differences=tuple(differences),
        labels=tuple(labels),
        errors=tuple(errors),
        claimed={
            "baseline": base_value,
            "candidate": cand_value,
            "speedup": thaw(speedup),
            **({"difference": thaw(claim["difference"])} if claim.get("difference") is not None else {}),
        },
        tolerance=float(claim.get("tolerance", DEFAULT_TOLERANCE)),
        conditions=conditions,
        metric=str(benchmark.get("metric", "")),
        higher_is_better=_higher_is_better(benchmark),
        synthetic_sources=tuple(sources),
    )


# The planner's note on a benchmark's config: what forces acceptance on its runs (the target's
# commands, env and speculative_args; fasttrack.manifest.acceptance.benchmark_synthetic).
DETECTED_KEY = "detected_synthetic_acceptance"


def with_detected(data: Mapping[str, Any], benchmark: Mapping[str, Any]) -> dict[str, Any]:
    """``benchmark`` with what forces speculative acceptance on its runs (engine flags, env) under
    `DETECTED_KEY`, when anything does: its outcome and every claim measured with it say so."""
    from fasttrack.manifest.acceptance import benchmark_synthetic

    detected = [s.to_dict() for s in benchmark_synthetic(data, benchmark)]
    return {**benchmark, DETECTED_KEY: detected} if detected else dict(benchmark)


def synthetic_sources(
    benchmark: Mapping[str, Any], setups: Mapping[str, Mapping[str, Any] | None]
) -> list[Mapping[str, Any]]:
    """Where the engine's flags force acceptance for a claim: what the planner detected on the
    benchmark's runs, plus each side's own ``engine_args``."""
    from fasttrack.manifest.acceptance import SyntheticAcceptance, in_setup, once_dicts

    found: list[Mapping[str, Any]] = [dict(s) for s in benchmark.get(DETECTED_KEY) or ()]
    for side, setup in setups.items():
        for how, length in in_setup(setup):
            found.append(SyntheticAcceptance(("claim", side, "setup", "engine_args"), how, length).to_dict())
    return list(once_dicts(found))  # each source once, with its places


def _higher_is_better(benchmark: Mapping[str, Any]) -> bool:
    from fasttrack.manifest.sections import lower_is_better

    if "higher_is_better" in benchmark:
        return bool(benchmark["higher_is_better"])
    return not lower_is_better(str(benchmark.get("metric", "")))


def lint_claims(manifest: Manifest | Mapping[str, Any]) -> list[ClaimLint]:
    """Lint every claim of a manifest (a `Manifest` or its plain data)."""
    data: Mapping[str, Any] = manifest if isinstance(manifest, Mapping) else manifest.data
    own = switch_args(data)
    return [
        lint_claim(bench, claim, own) for bench in data.get("benchmarks") or () for claim in bench.get("claims") or ()
    ]


# ---------------------------------------------------------------------------------------------
# Assessment


@dataclass(frozen=True)
class ClaimAssessment:
    lint: ClaimLint
    status: str  # reproduced | not_reproduced | not_measurable | not_comparable
    reason: str
    measured: Mapping[str, Any] | None = None  # {"speedup": x, "ci": [lo, hi], "points": [...]}

    def measurements(self) -> dict[str, Any]:
        """The ``claims`` measurement keys of docs/evidence.md."""
        return {
            "claim_id": self.lint.claim_id,
            "benchmark_id": self.lint.benchmark_id,
            "statement": self.lint.statement,
            "claimed": dict(self.lint.claimed),
            "measured": dict(self.measured) if self.measured else None,
            "labels": list(self.lint.labels),
            "status": self.status,
            "tolerance": self.lint.tolerance,
            "differences": list(self.lint.differences),
            "errors": list(self.lint.errors),
        }


def claimed_speedup(lint: ClaimLint) -> tuple[float, float] | None:
    """(min, max) claimed ratio: the stated speedup, else candidate/baseline values."""
    speedup = lint.claimed.get("speedup")
    if isinstance(speedup, Mapping):
        return float(speedup["min"]), float(speedup["max"])
    if speedup is not None:
        return float(speedup), float(speedup)
    base, cand = lint.claimed.get("baseline"), lint.claimed.get("candidate")
    if base and cand:
        ratio = float(cand) / float(base) if lint.higher_is_better else float(base) / float(cand)
        return ratio, ratio
    return None


def hardware_mismatch(lint: ClaimLint, here: Mapping[str, Any]) -> str | None:
    """Why this machine cannot run the claim's setup, or None. ``here``: accelerator, device_count."""
    setup = lint.candidate_setup or {}
    want_acc = setup.get("accelerator")
    have_acc = str(here.get("accelerator") or "")
    want_gpus = setup.get("gpus")
    have = f"{have_acc} x{here.get('device_count', 1)}"
    if want_acc and _norm(want_acc) != _norm(have_acc):
        return f"needs {want_acc}" + (f" x{want_gpus}" if want_gpus else "") + f"; this machine has {have}"
    if want_gpus and int(here.get("device_count") or 1) < int(want_gpus):
        return f"needs {want_gpus} x {want_acc or 'accelerator'}; this machine has {have}"
    return None


def point_matches(
    conditions: Mapping[str, Any], point: Mapping[str, Any], setup: Mapping[str, Any] | None = None
) -> bool:
    """Whether a benchmark scope point lies inside the claim's stated conditions (batch, draft
    length) and its candidate setup's GPU count."""
    batch = conditions.get("batch")
    if batch is not None and "batch" in point:
        if isinstance(batch, Mapping):
            if not batch["min"] <= int(point["batch"]) <= batch["max"]:
                return False
        elif int(point["batch"]) != int(batch):
            return False
    gpus = (setup or {}).get("gpus")
    if gpus is not None and point.get("device_count") is not None and int(point["device_count"]) != int(gpus):
        return False
    draft = conditions.get("draft_length")
    return draft is None or point.get("draft_length") is None or int(point["draft_length"]) == int(draft)


def assess_claim(
    lint: ClaimLint,
    here: Mapping[str, Any],
    measured_points: Sequence[Mapping[str, Any]] = (),
    can_force_acceptance: bool = False,
) -> ClaimAssessment:
    """Judge one claim. ``measured_points``: ``{"point": dims, "ratio": x, "ratio_ci": [lo, hi]}`` per
    benchmarked scope point of the claim's benchmark on this machine."""
    if lint.errors:
        return ClaimAssessment(lint, NOT_MEASURABLE, "the claim is malformed: " + "; ".join(lint.errors))
    if not lint.comparable:
        why = ", ".join(lint.differences) if lint.differences else "the manifest marks it comparable: false"
        return ClaimAssessment(
            lint,
            NOT_COMPARABLE,
            f"baseline and candidate ran under different setups ({why}); "
            "the ratio mixes the optimisation with the setup change",
        )
    mismatch = hardware_mismatch(lint, here)
    if mismatch:
        return ClaimAssessment(lint, NOT_MEASURABLE, mismatch)
    if "synthetic_acceptance" in lint.labels and not can_force_acceptance:
        return ClaimAssessment(
            lint,
            NOT_MEASURABLE,
            (
                f"the claim assumes a synthetic acceptance length "
                f"({lint.conditions.get('acceptance_length', '?')}) that this target cannot force"
            ),
        )
    claimed = claimed_speedup(lint)
    difference = lint.claimed.get("difference")
    if claimed is None and difference is None:
        return ClaimAssessment(
            lint, NOT_MEASURABLE, "the claim gives no ratio to compare (a baseline value or speedup is missing)"
        )
    matching = [
        m for m in measured_points if point_matches(lint.conditions, m.get("point") or {}, lint.candidate_setup)
    ]
    if not matching:
        return ClaimAssessment(
            lint, NOT_MEASURABLE, "no benchmarked scope point on this machine matches the claim's conditions"
        )
    verdicts = []
    measured: dict[str, Any] = {"points": [dict(m["point"]) for m in matching]}
    if claimed is not None:
        verdicts.append(_speedup_verdict(lint, claimed, matching, measured))
    if difference is not None:
        verdicts.append(_difference_verdict(lint, difference, matching, measured))
    if any(v is None for v, _ in verdicts):
        return ClaimAssessment(lint, NOT_MEASURABLE, "; ".join(text for _, text in verdicts), measured)
    status = REPRODUCED if all(ok for ok, _ in verdicts) else NOT_REPRODUCED
    return ClaimAssessment(lint, status, "; ".join(text for _, text in verdicts), measured)


def _speedup_verdict(
    lint: ClaimLint, claimed: tuple[float, float], matching: Sequence[Mapping[str, Any]], measured: dict[str, Any]
) -> tuple[bool | None, str]:
    """Whether the lowest measured ratio reaches the claimed one less the tolerance, and why."""
    low, high = claimed
    floor = low * (1.0 - lint.tolerance)
    worst = min(matching, key=lambda m: m["ratio"])
    measured.update(speedup=worst["ratio"], ratio_ci=worst.get("ratio_ci"), ratios=[m["ratio"] for m in matching])
    claim_text = f"{low:.2f}x" if low == high else f"{low:.2f}x-{high:.2f}x"
    if worst["ratio"] >= floor:
        return True, (
            f"measured {worst['ratio']:.2f}x (lowest of {len(matching)} point(s)) against "
            f"the claimed {claim_text} with tolerance {lint.tolerance:.0%}"
        )
    return False, (
        f"measured {worst['ratio']:.2f}x at {_point_text(worst['point'])}, below the "
        f"claimed {claim_text} less {lint.tolerance:.0%} ({floor:.2f}x)"
    )


def _difference_verdict(
    lint: ClaimLint, difference: Mapping[str, Any], matching: Sequence[Mapping[str, Any]], measured: dict[str, Any]
) -> tuple[bool | None, str]:
    """A difference claim ('60 fewer kernels per step'): the smallest measured improvement (stock
    minus candidate for a lower-is-better metric, candidate minus stock otherwise) against the
    claimed one less the tolerance; None where a point recorded no value of a side."""
    value, unit = float(difference["value"]), str(difference["unit"])
    gains = []
    for m in matching:
        b, c = m.get("baseline"), m.get("candidate")
        if b is None or c is None:
            return None, f"no {lint.metric} value of each side was recorded at {_point_text(m['point'])}"
        gains.append((float(b) - float(c)) if not lint.higher_is_better else (float(c) - float(b)))
    worst = min(gains)
    floor = value * (1.0 - lint.tolerance)
    measured.update(difference=worst, differences=gains, unit=unit)
    if worst >= floor:
        return True, (
            f"measured a difference of {worst:g} {unit} (smallest of {len(gains)} point(s)) against the claimed "
            f"{value:g} {unit} with tolerance {lint.tolerance:.0%}"
        )
    return (
        False,
        f"measured a difference of {worst:g} {unit}, below the claimed {value:g} {unit} less {lint.tolerance:.0%} ({floor:g})",
    )


def format_lint(lints: Iterable[ClaimLint]) -> list[str]:
    return [lint.summary() for lint in lints]


def _norm(name: str) -> str:
    return str(name).lower().replace("nvidia", "").replace(" ", "").strip()


def _show(value: Any) -> str:
    return "unset" if value is None else str(thaw(value))


def _point_text(point: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(point.items()))


def assess_manifest_claims(
    manifest: Manifest,
    here: Mapping[str, Any],
    measured: Mapping[str, Sequence[Mapping[str, Any]]] | None = None,
    can_force_acceptance: bool = False,
) -> list[ClaimAssessment]:
    """Every claim of a manifest judged on this machine. ``measured`` maps a benchmark id to its
    measured points (``{"point", "ratio", "ratio_ci"}``); claims of benchmarks that did not run
    here come out not measurable (or not comparable), each with its reason."""
    measured = measured or {}
    return [
        assess_claim(lint, here, measured.get(lint.benchmark_id, ()), can_force_acceptance)
        for lint in lint_claims(manifest)
    ]
