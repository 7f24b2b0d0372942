"""Evidence as a lab run of a real manifest would write it: one outcome per instance of the
manifest's plan, each with measurements of the shape its runner records (so that `fasttrack
verify` re-derives the same status). For verify, attest and CI-recipe tests, where a real run
needs hardware this machine lacks (GB300 x16)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from fasttrack.evidence import CheckOutcome, Evidence, GitRecord, ManifestRecord, RunRecord, Status
from fasttrack.kinds.benchmarks.rule import margin_for, promise_for
from fasttrack.kinds.claims import lint as C
from fasttrack.kinds.divergence.rule import limits_of
from fasttrack.kinds.registry import KINDS
from fasttrack.kinds.switch.counters import expected_path, proof_batches
from fasttrack.manifest import Manifest, load_manifest
from fasttrack.plan import CheckInstance, build_plan
from fasttrack.verification.coverage import bare_environment


def environment_for(manifest: Manifest) -> dict[str, Any]:
    """The first declared hardware entry at its largest device count."""
    entry = manifest.scope.hardware[0]
    count = max(entry.device_counts)
    if str(entry.accelerator).lower() == "cpu":
        return {"accelerator": "cpu", "accelerators": [], "accelerator_count": 0}
    return {
        "accelerator": entry.accelerator,
        "accelerators": [{"name": entry.accelerator, "memory_gib": 279}] * count,
        "accelerator_count": count,
        "interconnect": "nvlink",
    }


def planned_evidence(
    manifest_path: Path, *, mode: str = "pass", head: str | None = None, environment: dict[str, Any] | None = None
) -> Evidence:
    """``mode``: pass (every instance passed), fail (code confinement failed), incomplete (the
    first instance past code confinement not run for want of hardware)."""
    manifest = load_manifest(manifest_path)
    plan = build_plan(manifest, bare_environment(), KINDS)
    head = head or hashlib.sha1(manifest.sha256.encode()).hexdigest()
    checks = [_outcome(manifest, i, mode) for i in plan.instances]
    if mode == "incomplete":
        index = next(n for n, c in enumerate(checks) if c.kind not in ("scope_diff", "claims"))
        c = checks[index]
        checks[index] = CheckOutcome(
            c.id, c.kind, c.name, Status.NOT_RUN, c.scope_point, c.scope_point_id, True, "hardware", "needs more GPUs"
        )
    try:
        shown = Path(manifest_path).resolve().relative_to(manifest.root.resolve()).as_posix()
    except ValueError:
        shown = str(manifest_path)
    evidence = Evidence(
        run=RunRecord("lab-run-1", "2026-07-01T10:00:00Z", "2026-07-01T14:00:00Z", "complete", ("fasttrack", "check")),
        manifest=ManifestRecord(
            shown,
            manifest.sha256,
            manifest.id,
            manifest.optimisation.title,
            manifest.model.id,
            manifest.switch.name,
            manifest.data,
        ),
        git=GitRecord("b" * 40, head, False, ("setup.cfg",) if mode == "fail" else ()),
        environment=environment if environment is not None else environment_for(manifest),
        scope_points=tuple({"id": p.id, "dims": p.as_dict()} for p in manifest.scope_points()),
        checks=(),
        verdict=None,  # type: ignore[arg-type]
    )
    return evidence.with_checks(checks)


def _outcome(manifest: Manifest, instance: CheckInstance, mode: str) -> CheckOutcome:
    point = instance.scope_point
    status, code, reason, required = Status.PASSED, None, None, bool(instance.required)
    measurements = MEASUREMENTS[instance.kind](manifest, instance)
    if instance.kind == "scope_diff" and mode == "fail":
        measurements = {**measurements, "changed": ["setup.cfg"]}
        measurements["violations"] = [
            {"path": "setup.cfg", "reason": "outside model.code_paths and model.allowed_paths"}
        ]
        status, code, reason = Status.FAILED, "outside_code_paths", "1 changed file(s) outside model.code_paths"
    if instance.kind == "claims":
        lint = C.lint_claim(instance.config["benchmark"], instance.config["claim"])
        if lint.errors:
            status, code, reason, required = Status.ERRORED, "error", "malformed", True
        elif not lint.comparable:
            status, code, reason, required = Status.NOT_RUN, "not_comparable", "not comparable", False
        else:
            required = False
    return CheckOutcome(
        instance.id,
        instance.kind,
        instance.name,
        status,
        None if point is None else point.as_dict(),
        None if point is None else point.id,
        required,
        code,
        reason,
        "2026-07-01T10:00:00Z",
        1.0,
        measurements,
    )


def _scope_diff(m: Manifest, i: CheckInstance) -> dict[str, Any]:
    return {"changed": [], "violations": [], "code_paths": list(m.model.code_paths), "base": "b" * 40}


def _switch(m: Manifest, i: CheckInstance) -> dict[str, Any]:
    path, batches = expected_path(m), proof_batches(m)
    return {
        "expected_path": path,
        "batches": batches,
        "default_path_counts": {"stock": 4.0 * sum(batches)},
        "candidate_path_counts": {path: 4.0 * sum(batches)},
        "default_by_batch": {str(b): {"stock": 4.0 * b} for b in batches},
        "candidate_by_batch": {str(b): {path: 4.0 * b} for b in batches},
    }


def _kernels(m: Manifest, i: CheckInstance) -> dict[str, Any]:
    test = {"nodeid": "tests/kernels/test_k.py::test_k", "outcome": "passed", "duration_s": 0.1, "message": ""}
    return {"tests": [test], "tests_shown": 1, "tests_total": 1, "passed": 1, "failed": 0, "errors": 0, "skipped": 0}


def _stress(m: Manifest, i: CheckInstance) -> dict[str, Any]:
    repeats = next(a.repeats for a in m.audits if a.id == i.name)
    return {"repeats": repeats, "distinct_results": {"test_stress": 1}, "runs": repeats, "failed_runs": 0}


def _evals(m: Manifest, i: CheckInstance) -> dict[str, Any]:
    spec = next(e for e in m.evals if e.id == i.name)
    return {
        "status": "passed",
        "margin": spec.margin,
        "alpha": spec.alpha,
        "n": 400,
        "n_needed": 300,
        "lower_bound": -spec.margin / 2,
        "upper_bound": spec.margin,
        "floor": False,
        "non_finite": {"baseline": 0, "candidate": 0},
        "bins": [],
        "sequential": {"used": False},
    }


def _divergence(m: Manifest, i: CheckInstance) -> dict[str, Any]:
    edges = list(m.divergence.buckets if m.divergence and m.divergence.buckets else (0, 512, 1024))
    buckets = [
        {"name": f"{lo}-{hi}", "positions": 10, "mean_kl": 0.0001, "p99_kl": 0.001, "top1_agreement": 1.0}
        for lo, hi in zip(edges, edges[1:])
    ]
    dtype = i.scope_point.get("dtype") if i.scope_point is not None else None
    return {"status": "passed", "thresholds": limits_of(m, dtype), "buckets": buckets, "non_finite_positions": {}}


def _features(m: Manifest, i: CheckInstance) -> dict[str, Any]:
    details: dict[str, Any] = {"cases": [{"prompt": "p"}], "tolerance": 0.1, "schemas": [{"schema": "s.json"}]}
    if i.name == "mixed_batches":
        details = {"rows": [{"row": "greedy", "kind": "greedy", "equal_alone": True}], "power_if_greedy_leaks": 1.0}
    return {"probe": i.name, "statistic": 0.0, "p_value": 0.5, "details": details}


def _speculative(m: Manifest, i: CheckInstance) -> dict[str, Any]:
    minimum = m.scope.speculative.min_acceptance_length if m.scope.speculative else None
    return {
        "min_acceptance_length": minimum,
        "greedy_equal": True,
        "mismatch_at": None,
        "drafts": 40,
        "acceptance_length": (minimum or 1.0) + 0.5,
        "acceptance_margin": 0.1,
        "stock_acceptance_length": (minimum or 1.0) + 0.5,
    }


def _stock_unchanged(m: Manifest, i: CheckInstance) -> dict[str, Any]:
    return {"requests": 4, "tokens": 64, "max_logprob_diff": 0.0, "logprob_atol": 1e-5, "stock_files_changed": ["x"]}


def _benchmarks(m: Manifest, i: CheckInstance) -> dict[str, Any]:
    promise = promise_for(m, i.name, i.scope_point.as_dict() if i.scope_point else None)
    ratio = (promise or 1.0) + 0.3
    return {
        "ratio": ratio,
        "ratio_ci": [ratio - 0.1, ratio + 0.1],
        "pair_ratios": [ratio] * 7,
        "margin": None if promise else margin_for(m, i.name),
        "rule": "promised speed-up" if promise else "not slower than stock",
        "promise": promise,
    }


def _claims(m: Manifest, i: CheckInstance) -> dict[str, Any]:
    return {"claim": i.name}


MEASUREMENTS = {
    "scope_diff": _scope_diff,
    "switch": _switch,
    "kernels": _kernels,
    "stress": _stress,
    "sanitizer": lambda m, i: {"tool": "racecheck", "errors": []},
    "evals": _evals,
    "divergence": _divergence,
    "features": _features,
    "speculative": _speculative,
    "benchmarks": _benchmarks,
    "claims": _claims,
    "stock_unchanged": _stock_unchanged,
}


def narrowed(evidence: Evidence, **selection: Any) -> Evidence:
    """The evidence a run with ``only``/``skip``/``hardware`` would write: the outcomes it left
    out are not_run(out_of_scope) and not required, and the selection is recorded."""
    from dataclasses import replace

    from fasttrack.selection import Selection

    chosen = Selection(**selection)
    checks = [
        c
        if chosen.kind_selected(c.kind) and chosen.hardware_selected(c.scope_point)
        else replace(c, status=Status.NOT_RUN, required=False, reason_code="out_of_scope", reason="excluded")
        for c in evidence.checks
    ]
    return replace(evidence, run=replace(evidence.run, **selection)).with_checks(checks)
