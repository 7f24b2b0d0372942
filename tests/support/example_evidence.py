"""Evidence shaped like the runnable example's main job on a CPU machine (tests of the first
screen): three CPU setups (TP 1/2/4) where kernels, switch and stress passed at every point, two
evals underpowered at TP 1, the rest of TP 1 passed, and every NVIDIA H200 point not run for want
of the hardware. ``failed``/``errored`` plant outcomes of those statuses."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fasttrack.evidence import CheckOutcome, Evidence, RunRecord, Status
from support.evidence_fixtures import build_evidence

H200 = "NVIDIA H200"
HERE = "cpu (2 cores), no GPU"
FEATURES = ("full_context", "temperature_sampling", "structured_output", "stop_strings", "n_samples", "logprobs")
EVALS = (("mrcr", "mrcr_local", "grade"), ("aime25", "aime25_chat_local", "exact_match"))


def _point(acc: str, tp: int, **dims: Any) -> dict[str, Any]:
    return {"accelerator": acc, "device_count": 1, "tensor_parallel": tp, **dims}


def _pid(dims: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(dims.items()))


def _kernel_points(acc: str, tp: int) -> list[dict[str, Any]]:
    return [
        _point(acc, tp, batch=b, draft_length=d, dtype=t)
        for b in (1, 3, 8, 17, 32, 64)
        for t in ("fp32", "bf16")
        for d in range(1, 8)
    ]


class _Outcomes:
    def __init__(self) -> None:
        self.checks: list[CheckOutcome] = []

    def add(
        self,
        kind: str,
        name: str,
        point: dict[str, Any] | None,
        status: Status = Status.PASSED,
        code: str | None = None,
        reason: str | None = None,
        measurements: dict[str, Any] | None = None,
    ) -> None:
        pid = _pid(point) if point else None
        self.checks.append(
            CheckOutcome(
                f"{kind}/{name}" + (f"@{pid}" if pid else ""),
                kind,
                name,
                status,
                point,
                pid,
                True,
                code,
                reason,
                "2026-12-03T10:00:00Z",
                1.0,
                measurements or {},
            )
        )

    def elsewhere(self, kind: str, name: str, point: dict[str, Any]) -> None:
        self.add(
            kind,
            name,
            point,
            Status.NOT_RUN,
            "hardware",
            f"needs {H200} x1 (scope hardware entry 2); this machine has: {HERE}",
        )


def _kernel_tests(point: dict[str, Any], ratio: float) -> dict[str, Any]:
    tests = [
        {
            "nodeid": f"tests/kernels/test_decode.py::test_decode_step_matches_stock[batch={point['batch']}-all]",
            "outcome": "passed",
            "tolerance": {"atol": 1e-05, "rtol": 1.3e-06},
            "worst_error": {"abs": ratio * 1e-05, "rel": 1e-4},
        },
        {
            "nodeid": "tests/kernels/test_cuda.py::test_cuda_graph_replay_matches_eager",
            "outcome": "skipped",
            "tolerance": None,
            "worst_error": None,
        },
    ]
    return {"tests": tests, "passed": 1, "failed": 0, "errors": 0, "skipped": 1}


def _underpowered(task: str, metric: str) -> dict[str, Any]:
    bins = [
        {"name": n, "n": k, "diff": 0.0, "ci_low": None, "ci_high": None, "passed": False, "status": "not_run"}
        for n, k in (("0-1024", 1), ("1024-2048", 4), ("2048-4096", 3))
    ]
    return {
        "task": task,
        "metric": metric,
        "margin": 0.05,
        "n": 8,
        "n_needed": 119,
        "diff": 0.0,
        "ci_low": 0.0,
        "ci_high": 0.0,
        "baseline_mean": 0.9601063829787234,
        "candidate_mean": 0.9601063829787234,
        "bins": bins if task.startswith("mrcr") else [],
    }


def example_evidence(*, failed: bool = False, errored: str | None = None, state: str = "complete") -> Evidence:
    """``errored``: the reason code of one planted errored feature probe (e.g. "target")."""
    o = _Outcomes()
    o.add("scope_diff", "code_paths", None)
    for tp in (1, 2, 4):
        cpu = _point("cpu", tp)
        o.add("switch", "latency_specialized", cpu)
        for i, k in enumerate(_kernel_points("cpu", tp)):
            bad = failed and tp == 2 and i == 5
            o.add(
                "kernels",
                "mini-k3-kernels",
                k,
                Status.FAILED if bad else Status.PASSED,
                "test_failed" if bad else None,
                "1 kernel test(s) failed here: test_decode_step_matches_stock: max abs error 3e-3" if bad else None,
                _kernel_tests(k, 41.5 if bad else 0.1 + 0.2 * tp / 4),
            )
        o.add("stress", "fused-allreduce-stress", cpu, measurements={"repeats": 20, "runs": 20, "failed_runs": 0})
    cpu1 = _point("cpu", 1)
    for eval_id, task, metric in EVALS:
        o.add(
            "evals",
            eval_id,
            cpu1,
            Status.NOT_RUN,
            "underpowered",
            "underpowered: the confidence sequence did not settle within 8 items (need n ≥ 119 or a larger maximum); "
            f"to decide, lift the limit of 8: --eval-limit {eval_id}=all",
            _underpowered(task, metric),
        )
    o.add("divergence", "token_kl", cpu1, measurements={"max_mean_kl": 0.01, "positions": 1024})
    for probe in FEATURES:
        if errored and probe == "n_samples":
            o.add(
                "features",
                probe,
                cpu1,
                Status.ERRORED,
                errored,
                "the candidate server did not come up: exited with code 1 before /health answered",
            )
        else:
            o.add(
                "features",
                probe,
                cpu1,
                measurements={"probe": probe, "statistic": 2.0933014464984187e-08, "details": {"cases": 8}},
            )
    for d in range(1, 8):
        o.add("speculative", "ngram", _point("cpu", 1, draft_length=d), measurements={"acceptance_length": 2.036})
    for b, ratio, ci in ((1, 1.21, [1.02, 1.35]), (8, 1.05, [0.74, 1.18]), (64, 0.99, [0.84, 1.45])):
        o.add(
            "benchmarks",
            "decode-per-user",
            _point("cpu", 1, batch=b),
            measurements={"ratio": ratio, "ratio_ci": ci, "metric": "decode_tokens_per_s_per_user"},
        )
    h200 = _point(H200, 1)
    o.elsewhere("switch", "latency_specialized", h200)
    for k in _kernel_points(H200, 1):
        o.elsewhere("kernels", "mini-k3-kernels", k)
    o.elsewhere("stress", "fused-allreduce-stress", h200)
    o.elsewhere("sanitizer", "racecheck", h200)
    for eval_id, _task, _metric in EVALS:
        o.elsewhere("evals", eval_id, h200)
    o.elsewhere("divergence", "token_kl", h200)
    for probe in FEATURES:
        o.elsewhere("features", probe, h200)
    for d in range(1, 8):
        o.elsewhere("speculative", "ngram", _point(H200, 1, draft_length=d))
    for b in (1, 8, 64):
        o.elsewhere("benchmarks", "decode-per-user", _point(H200, 1, batch=b))
    for d in (1, 4, 7):
        o.elsewhere("benchmarks", "speculative-decode", _point(H200, 1, batch=1, draft_length=d))

    base = build_evidence("kimi-k3-latency", "pass", samples=4)
    data = dict(base.manifest.data)
    data["evals"] = [
        {"id": e, "task": t, "metric": m, "margin": 0.05, "alpha": 0.05, "limit": 8, "timeout_s": 600}
        for e, t, m in EVALS
    ]
    data["scope"] = {
        "hardware": [
            {"accelerator": "cpu", "device_counts": [1], "tensor_parallel": [1, 2, 4]},
            {"accelerator": H200, "device_counts": [1], "tensor_parallel": [1]},
        ],
        "batch": {"min": 1, "max": 64, "points": [1, 3, 8, 17, 32, 64]},
    }
    points = [_point(a, tp, batch=b) for a, tps in (("cpu", (1, 2, 4)), (H200, (1,))) for tp in tps for b in (1, 8, 64)]
    run = RunRecord(
        "example-run",
        "2026-12-03T10:00:00Z",
        "2026-12-03T10:05:00Z",
        state,
        ("fasttrack", "check", "examples/mini-k3/fasttrack.yaml", "--jobs", "2", "--out", "out/mini-k3"),
    )
    evidence = replace(
        base,
        run=run,
        manifest=replace(base.manifest, data=data, path="examples/mini-k3/fasttrack.yaml"),
        scope_points=tuple({"id": _pid(p), "dims": p} for p in points),
    )
    return evidence.with_checks(o.checks, state=state)
