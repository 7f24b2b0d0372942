"""Build realistic evidence fixtures through fasttrack.evidence (deterministic, seeded).

    python tests/fixtures/evidence/evidence_fixtures.py OUT_DIR [--samples N]

writes pass/, fail/ and incomplete/ (each an evidence.json) and history/ (several runs of three
optimisations for the dashboard). Reports and verify tests build them at test time with
``build_fixture(kind, ...)``, so the checks that produce real evidence are not needed here.

Eval samples carry hostile model outputs (``<script>``, ``"><img onerror>``, ``</script>``...):
reports must show them as text and never run them.
"""

from __future__ import annotations

import argparse
import hashlib
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from fasttrack.evidence import (
    CheckOutcome,
    Evidence,
    GitRecord,
    ManifestRecord,
    RunRecord,
    Status,
    compute_verdict,
    write_evidence,
)

XSS_PAYLOADS = (
    "<script>window.__xss = 1; alert(1)</script>",
    '"><img src=x onerror="window.__xss=2;alert(1)">',
    "</script><script>window.__xss=3</script>",
    "<svg onload=window.__xss=4>",
    "javascript:window.__xss=5",
    "{{ 7*7 }} <b>bold?</b> &amp; &lt;",
    "\u2028\u2029 line separators and a NUL-free tab\t",
)

BATCHES = (1, 2, 4, 8, 16, 17, 32, 64)


@dataclass(frozen=True)
class Optimisation:
    """What a fixture manifest declares (a small slice of a real manifest)."""

    id: str
    title: str
    model_id: str
    accelerator: str
    device_counts: tuple[int, ...]
    tensor_parallel: tuple[int, ...]
    code_paths: tuple[str, ...]
    eval_tasks: tuple[tuple[str, str, float], ...]  # (task, metric, margin)


OPTIMISATIONS = {
    "kimi-k3-latency": Optimisation(
        "kimi-k3-latency",
        "Kimi K3 latency-specialised decode path (GB300, 8 or 16 GPUs)",
        "moonshotai/Kimi-K3",
        "NVIDIA GB300",
        (8, 16),
        (8, 16),
        ("vllm/model_executor/models/kimi_k3*.py", "vllm/model_executor/models/kimi_k3/**"),
        (("mrcr", "grade", 0.02), ("aime25", "exact_match", 0.10)),
    ),
    "deepseek-v4.1-flash-mtp": Optimisation(
        "deepseek-v4.1-flash-mtp",
        "DeepSeek-V4.1-Flash multi-token prediction decode (H200, 8 GPUs)",
        "deepseek-ai/DeepSeek-V4.1-Flash",
        "NVIDIA H200",
        (8,),
        (8,),
        ("vllm/model_executor/models/deepseek_v4*.py",),
        (("gsm8k", "exact_match", 0.02), ("mrcr", "grade", 0.03)),
    ),
    "glm5.3-fp8-attention": Optimisation(
        "glm5.3-fp8-attention",
        "GLM5.3 FP8 attention kernels (B200, 4 or 8 GPUs)",
        "zai-org/GLM-5.3",
        "NVIDIA B200",
        (4, 8),
        (4,),
        ("vllm/model_executor/models/glm5*.py",),
        (("aime25", "exact_match", 0.10),),
    ),
}


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def manifest_data(opt: Optimisation) -> dict[str, Any]:
    return {
        "fasttrack": 1,
        "optimisation": {
            "id": opt.id,
            "title": opt.title,
            "summary": f"{opt.title}: fused kernels behind an opt-in switch.",
        },
        "model": {"id": opt.model_id, "code_paths": list(opt.code_paths), "allowed_paths": ["tests/models/**"]},
        "switch": {"name": "latency_specialized", "default": False},
        "scope": {
            "hardware": [
                {
                    "accelerator": opt.accelerator,
                    "device_counts": list(opt.device_counts),
                    "tensor_parallel": list(opt.tensor_parallel),
                    "interconnect": "nvlink",
                }
            ],
            "batch": {"min": 1, "max": 64},
            "speculative": {"method": "dspark", "draft_lengths": [1, 3, 7], "min_acceptance_length": 2.0},
        },
        "preserve": {"full_context": True, "temperature_sampling": True, "structured_output": True},
        "evals": [
            {"id": t, "task": t, "metric": m, "margin": margin, "alpha": 0.05} for t, m, margin in opt.eval_tasks
        ],
    }


def hardware_setups(opt: Optimisation) -> list[dict[str, Any]]:
    return [
        {"accelerator": opt.accelerator, "device_count": n, "tensor_parallel": tp}
        for n in opt.device_counts
        for tp in opt.tensor_parallel
        if n % tp == 0
    ]


def point_id(dims: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(dims.items()))


class _Builder:
    """Accumulates check outcomes; `mode` decides which ones fail or do not run."""

    def __init__(self, opt: Optimisation, mode: str, rng: random.Random, start: datetime, samples: int, quality: float):
        self.opt, self.mode, self.rng, self.t, self.samples, self.quality = opt, mode, rng, start, samples, quality
        self.checks: list[CheckOutcome] = []

    def add(
        self,
        kind: str,
        name: str,
        dims: dict[str, Any] | None,
        status: Status,
        measurements: dict[str, Any],
        reason_code: str | None = None,
        reason: str | None = None,
        duration: float = 1.0,
        required: bool = True,
    ) -> None:
        pid = point_id(dims) if dims is not None else None
        self.checks.append(
            CheckOutcome(
                id=f"{kind}/{name}@{pid or 'global'}",
                kind=kind,
                name=name,
                status=status,
                scope_point=dims,
                scope_point_id=pid,
                required=required,
                reason_code=reason_code,
                reason=reason,
                started_at=_iso(self.t),
                duration_s=round(duration, 3),
                measurements=measurements,
                inputs_digest=_sha(f"{kind}{name}{pid}")[:16],
            )
        )
        self.t += timedelta(seconds=duration)

    # -- individual check kinds ------------------------------------------------------------

    def scope_diff(self, changed: list[str]) -> None:
        violations = (
            [{"path": "vllm/distributed/all_reduce.py", "reason": "outside model.code_paths and allowed_paths"}]
            if self.mode == "fail"
            else []
        )
        if violations:
            changed = [*changed, "vllm/distributed/all_reduce.py"]
        self.add(
            "scope_diff",
            "confinement",
            None,
            Status.FAILED if violations else Status.PASSED,
            {
                "base": "b" * 40,
                "head": "c" * 40,
                "changed": changed,
                "violations": violations,
                "code_paths": list(self.opt.code_paths),
                "allowed_paths": ["tests/models/**"],
            },
            reason_code="regression" if violations else None,
            reason="1 changed file lies outside the model's code paths" if violations else None,
        )
        self.add(
            "switch",
            "opt-in",
            None,
            Status.PASSED,
            {
                "default_path_counts": {"stock": 512, "latency_specialized": 0},
                "candidate_path_counts": {"stock": 0, "latency_specialized": 512},
                "expected_path": "latency_specialized",
            },
        )

    def kernels(self, setup: dict[str, Any]) -> None:
        tests = ["test_fused_allreduce", "test_router_split", "test_latent_proj", "test_prefetch_overlap"]
        for batch in BATCHES:
            dims = {**setup, "batch": batch}
            if self.mode == "incomplete" and setup["device_count"] == 16:
                self.add(
                    "kernels",
                    "kimi-kernels",
                    dims,
                    Status.NOT_RUN,
                    {},
                    "hardware",
                    f"needs 16x {self.opt.accelerator}; this machine has 8",
                    0.0,
                )
                continue
            rows, failed = [], 0
            for name in tests:
                atol = 2e-3 if "allreduce" in name else 1e-3
                err = atol * self.rng.uniform(0.05, 0.6)
                outcome, message = "passed", ""
                if self.mode == "fail" and batch == 17 and name == "test_fused_allreduce":
                    err, outcome, message = atol * 41.5, "failed", "max abs error 0.083 > atol 0.002 at rank 3"
                    failed += 1
                rows.append(
                    {
                        "nodeid": f"tests/models/kernels/test_k.py::{name}[batch={batch}]",
                        "outcome": outcome,
                        "duration_s": round(self.rng.uniform(0.1, 3), 3),
                        "tolerance": {"atol": atol, "rtol": 1e-2},
                        "worst_error": {"abs": err, "rel": err * 3},
                        "message": message,
                    }
                )
            self.add(
                "kernels",
                "kimi-kernels",
                dims,
                Status.FAILED if failed else Status.PASSED,
                {"tests": rows, "passed": len(tests) - failed, "failed": failed, "errors": 0, "skipped": 0},
                "regression" if failed else None,
                f"{failed} kernel test failed: worst error 41x the tolerance" if failed else None,
                12.0,
            )

    def audits(self, setup: dict[str, Any]) -> None:
        self.add(
            "stress",
            "fused-allreduce-stress",
            setup,
            Status.PASSED,
            {"repeats": 1000, "distinct_results": 1, "first_mismatch": None, "tool": "pytest", "errors": 0},
            duration=90,
        )
        if self.mode == "incomplete":
            self.add(
                "sanitizer",
                "compute-sanitizer",
                setup,
                Status.ERRORED,
                {"tool": "racecheck", "errors": None},
                "timeout",
                "compute-sanitizer racecheck ran past its 3600 s timeout",
                3600,
            )
        else:
            self.add(
                "sanitizer",
                "compute-sanitizer",
                setup,
                Status.PASSED,
                {"repeats": 1, "distinct_results": 1, "first_mismatch": None, "tool": "racecheck", "errors": 0},
                duration=300,
            )

    def evals(self, setup: dict[str, Any], first_setup: bool) -> None:
        for task, metric, margin in self.opt.eval_tasks:
            n = self.samples if first_setup else min(self.samples, 300)
            if self.mode == "incomplete" and setup["device_count"] == 16:
                self.add(
                    "evals",
                    task,
                    setup,
                    Status.NOT_RUN,
                    {"task": task, "metric": metric, "margin": margin},
                    "hardware",
                    f"needs 16x {self.opt.accelerator}; this machine has 8",
                    0.0,
                )
                continue
            regress = self.mode == "fail" and task == self.opt.eval_tasks[0][0] and first_setup
            m = self._eval_measurements(task, metric, margin, n, regress)
            status, code, reason = Status.PASSED, None, None
            if m["lower_bound"] <= -margin:
                status, code = Status.FAILED, "regression"
                reason = f"{task}: lower bound {m['lower_bound']:+.3f} is below the margin -{margin}"
            if self.mode == "incomplete" and task == self.opt.eval_tasks[-1][0] and first_setup:
                status, code = Status.NOT_RUN, "underpowered"
                m = {**m, "mde": round(margin * 1.4, 4), "n_needed": int(n * 1.4**2) + 1}
                reason = f"{task}: minimum detectable effect {m['mde']:.3f} exceeds the margin {margin}; needs {m['n_needed']} items"
            self.add("evals", task, setup, status, m, code, reason, 600.0)

    def _eval_measurements(self, task: str, metric: str, margin: float, n: int, regress: bool) -> dict[str, Any]:
        rng = self.rng
        base_p = 0.72 * self.quality
        # Flips at fixed strides, so a fixture's verdict does not hang on sampling noise.
        rw_every = 12 if regress else 150  # right -> wrong
        wr_every = 100  # wrong -> right
        bins = ("0-32k", "32k-128k", "128k-512k", "512k-1M") if task == "mrcr" else ("short", "long")
        samples, d_by_bin = [], {b: [] for b in bins}
        for i in range(n):
            b = bins[i % len(bins)]
            base = 1.0 if rng.random() < base_p else 0.0
            if i % rw_every == 5 or (regress and b == bins[-1] and i % 9 == 2):
                base, cand = 1.0, 0.0
            elif i % wr_every == 33:
                base, cand = 0.0, 1.0
            else:
                cand = base
            prompt = f"[{task} #{i}] Retrieve the {i % 7 + 1}th poem about tapirs from the conversation above."
            answer = f"Answer {i}: the tapir sleeps beneath the fern."
            base_out, cand_out = answer, answer if cand == base else f"Answer {i}: the tapir wakes."
            if i % 97 == 3:  # hostile outputs, on flipped and unflipped items alike
                payload = XSS_PAYLOADS[(i // 97) % len(XSS_PAYLOADS)]
                cand_out = f"{cand_out} {payload}"
                base_out = f"{base_out} {XSS_PAYLOADS[(i // 97 + 1) % len(XSS_PAYLOADS)]}"
            if i % 211 == 5:
                cand_out += " " + "very long generation " * 400
            samples.append(
                {
                    "doc_id": i,
                    "prompt": prompt,
                    "prompt_hash": _sha(prompt)[:16],
                    "baseline_output": base_out,
                    "candidate_output": cand_out,
                    "baseline_score": base,
                    "candidate_score": cand,
                    "bin": b,
                    "flipped": cand != base,
                }
            )
            d_by_bin[b].append(cand - base)
        diffs = [s["candidate_score"] - s["baseline_score"] for s in samples]
        mean = sum(diffs) / n
        sd = (sum((d - mean) ** 2 for d in diffs) / max(n - 1, 1)) ** 0.5
        half = 1.96 * sd / n**0.5
        lb = mean - 1.645 * sd / n**0.5
        bin_rows = []
        for b, ds in d_by_bin.items():
            k = max(len(ds), 1)
            bm = sum(ds) / k
            bsd = (sum((d - bm) ** 2 for d in ds) / max(k - 1, 1)) ** 0.5
            blb = bm - 1.645 * bsd / k**0.5
            bin_rows.append(
                {
                    "name": b,
                    "n": len(ds),
                    "diff": bm,
                    "ci_low": bm - 1.96 * bsd / k**0.5,
                    "ci_high": bm + 1.96 * bsd / k**0.5,
                    "lower_bound": blb,
                    "passed": blb > -margin,
                }
            )
        bm_ = sum(s["baseline_score"] for s in samples) / n
        mde = 2.49 * max(sd, 0.05) / n**0.5
        return {
            "task": task,
            "metric": metric,
            "n": n,
            "n_max": max(n, 200),
            "margin": margin,
            "alpha": 0.05,
            "baseline_mean": bm_,
            "candidate_mean": bm_ + mean,
            "diff": mean,
            "ci_low": mean - half,
            "ci_high": mean + half,
            "lower_bound": lb,
            "mde": mde,
            "n_needed": int(n * (mde / margin) ** 2) + 1,
            "p_mcnemar": round(min(1.0, 0.5 ** max(1, sum(1 for d in diffs if d != 0) // 4)), 6),
            "flips": {
                "right_to_wrong": sum(1 for d in diffs if d < 0),
                "wrong_to_right": sum(1 for d in diffs if d > 0),
            },
            "floor": False,
            "bins": bin_rows,
            "sequential": {"used": task == "mrcr", "max": max(n, 200), "stopped_early": False, "decision": "continue"},
            "samples": samples,
        }

    def divergence_and_features(self, setup: dict[str, Any]) -> None:
        self.add(
            "divergence",
            "logit-divergence",
            setup,
            Status.PASSED,
            {
                "buckets": [
                    {
                        "start": s,
                        "end": e,
                        "n": 16,
                        "mean_kl": 0.001 * (i + 1),
                        "p99_kl": 0.01 * (i + 1),
                        "top1_agreement": 0.995 - 0.002 * i,
                        "passed": True,
                    }
                    for i, (s, e) in enumerate(((0, 8192), (8192, 65536), (65536, 262144)))
                ],
                "thresholds": {"max_mean_kl": 0.01, "max_p99_kl": 0.1, "min_top1_agreement": 0.98},
            },
            duration=120,
        )
        probes = ("full_context", "temperature_sampling", "structured_output", "stop_strings", "n_samples", "logprobs")
        for probe in probes:
            status, code, reason = Status.PASSED, None, None
            if self.mode == "fail" and probe == "structured_output":
                status, code, reason = (
                    Status.FAILED,
                    "mismatch",
                    '3 of 50 outputs did not match the JSON schema "person"',
                )
            if self.mode == "incomplete" and probe == "full_context":
                status, code, reason = (
                    Status.ERRORED,
                    "target",
                    "candidate server exited with code 137 while loading 262144-token prompt",
                )
            self.add(
                "features",
                probe,
                setup,
                status,
                {
                    "probe": probe,
                    "statistic": "chi2" if probe == "temperature_sampling" else "count",
                    "p_value": 0.41 if probe == "temperature_sampling" else None,
                    "details": {"samples": 50, "schema": "person"} if probe == "structured_output" else {"samples": 50},
                },
                code,
                reason,
                30.0,
            )

    def speculative(self, setup: dict[str, Any]) -> None:
        for draft in (1, 3, 7):
            acc = 1 + draft * 0.55
            self.add(
                "speculative",
                "dspark",
                {**setup, "draft_length": draft},
                Status.PASSED,
                {
                    "draft_length": draft,
                    "acceptance_length": round(acc, 2),
                    "min_acceptance_length": 2.0 if draft > 1 else 1.0,
                    "acceptance_margin": 0.1,
                    "stock_acceptance_length": round(acc + 0.05, 2),
                    "greedy_equal": True,
                    "mismatch_at": None,
                },
                duration=60,
            )

    def benchmarks(self, setup: dict[str, Any]) -> None:
        if self.mode == "incomplete" and setup["device_count"] == 16:
            return
        for batch in (1, 16, 64):
            dims = {**setup, "batch": batch}
            base = 120.0 / (1 + batch / 40)
            ratio = (1.58 if setup["device_count"] == 8 else 1.85) * (1 - batch / 400) * self.quality
            cand = base * ratio
            self.add(
                "benchmarks",
                "decode-tokens-per-s",
                dims,
                Status.PASSED,
                {
                    "metric": "decode_tokens_per_s_per_user",
                    "unit": "tok/s",
                    "point": dims,
                    "baseline": {"median": round(base, 2), "runs": 5},
                    "candidate": {"median": round(cand, 2), "runs": 5},
                    "ratio": round(ratio, 3),
                    "ratio_ci": [round(ratio * 0.97, 3), round(ratio * 1.03, 3)],
                    "kernel_census": {
                        "baseline": {"kernels_per_layer": 23, "us_per_layer": 130.0},
                        "candidate": {"kernels_per_layer": 13, "us_per_layer": 69.0 / self.quality},
                    },
                },
                duration=200,
            )

    def claims(self) -> None:
        rows = [
            (
                "layer-130-to-69us",
                "Per layer, stock ran 23 kernels in 130 us; the specialised path runs 13 in 69 us",
                {"baseline": 130, "candidate": 69, "speedup": 1.88},
                {"baseline": 130.4, "candidate": 69.8, "speedup": 1.87},
                [],
                "reproduced",
            ),
            (
                "dspark-842",
                "842 tokens per second with DSpark, seven draft tokens and a synthetic acceptance length of 6",
                {"baseline": 488, "candidate": 842, "speedup": 1.73},
                None,
                ["synthetic_acceptance", "prefill_excluded"],
                "not_measurable",
            ),
            (
                "agentx-p90-224-to-403",
                "AgentX P90 interactivity went from 223.7 to 403.2 tokens per second per user",
                {"baseline": 223.7, "candidate": 403.2, "speedup": 1.80},
                None,
                ["not_comparable"],
                "not_comparable",
            ),
        ]
        for cid, statement, claimed, measured, labels, state in rows:
            self.add(
                "claims",
                cid,
                None,
                Status.PASSED if state == "reproduced" else Status.NOT_RUN,
                {
                    "claim_id": cid,
                    "statement": statement,
                    "claimed": claimed,
                    "measured": measured,
                    "labels": labels,
                    "status": state,
                },
                None if state == "reproduced" else "not_comparable",
                None if state == "reproduced" else f"claim is {state.replace('_', ' ')}: {', '.join(labels)}",
                duration=0.0,
                required=False,
            )


def build_evidence(
    optimisation: str = "kimi-k3-latency",
    mode: str = "pass",
    *,
    samples: int = 240,
    seed: int = 7,
    started: datetime | None = None,
    quality: float = 1.0,
    head: str | None = None,
) -> Evidence:
    """One run's evidence. mode: pass | fail | incomplete."""
    if mode not in ("pass", "fail", "incomplete"):
        raise ValueError(f"unknown fixture mode {mode!r}")
    opt = OPTIMISATIONS[optimisation]
    rng = random.Random(f"{optimisation}/{mode}/{seed}")
    start = started or datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    b = _Builder(opt, mode, rng, start, samples, quality)
    b.scope_diff(
        [p.replace("*", "").replace("/**", "/attention.py") for p in opt.code_paths] + ["tests/models/test_switch.py"]
    )
    setups = hardware_setups(opt)
    for i, setup in enumerate(setups):
        b.kernels(setup)
        b.audits(setup)
        b.evals(setup, first_setup=i == 0)
        b.divergence_and_features(setup)
        b.benchmarks(setup)
    b.speculative(setups[0])
    b.claims()
    count = 8 if mode == "incomplete" else max(opt.device_counts)
    data = manifest_data(opt)
    environment = {
        "accelerator": opt.accelerator,
        "accelerators": [{"index": i, "name": opt.accelerator, "memory_bytes": 288 * 2**30} for i in range(count)],
        "accelerator_count": count,
        "accelerator_source": "torch",
        "interconnect": "nvlink",
        "cpu_model": "NVIDIA Grace",
        "cpu_count": 144,
        "os": "Linux 6.8.0",
        "python": "3.12.3",
        "packages": {"fasttrack": "0.1.0", "torch": "2.9.0", "vllm": "0.12.1", "lm-eval": "0.4.9"},
        "cuda_driver": "580.65",
        "git": {"head": head or _sha(f"{optimisation}{seed}")[:40], "branch": "kimi-latency", "dirty": False},
    }
    points = []
    for setup in setups:
        for batch in BATCHES:
            dims = {**setup, "batch": batch}
            points.append({"id": point_id(dims), "dims": dims})
    checks = tuple(b.checks)
    return Evidence(
        run=RunRecord(
            id=f"{optimisation}-{mode}-{seed}",
            started_at=_iso(start),
            finished_at=_iso(b.t),
            state="complete",
            argv=("fasttrack", "check", "fasttrack.yaml", "--out", "evidence/"),
        ),
        manifest=ManifestRecord(
            "fasttrack.yaml", _sha(repr(data)), opt.id, opt.title, opt.model_id, "latency_specialized", data
        ),
        git=GitRecord(
            "b" * 40, head or _sha(f"{optimisation}{seed}")[:40], False, tuple(b.checks[0].measurements["changed"])
        ),
        environment=environment,
        scope_points=tuple(points),
        checks=checks,
        verdict=compute_verdict(checks, run_state="complete"),
    )


# Dashboard history: (optimisation, [(mode, quality), ...]) oldest first.
HISTORY = {
    "kimi-k3-latency": [("fail", 0.95), ("incomplete", 1.0), ("fail", 1.0), ("pass", 1.0), ("pass", 1.02)],
    "deepseek-v4.1-flash-mtp": [("incomplete", 1.0), ("pass", 1.0), ("pass", 0.98), ("fail", 1.0)],
    "glm5.3-fp8-attention": [("pass", 1.0), ("pass", 1.01), ("incomplete", 1.0)],
}


def write_history(out_dir: Path, samples: int = 300) -> list[Path]:
    """Several runs per optimisation, a day apart, each in its own directory."""
    paths = []
    for optimisation, runs in HISTORY.items():
        for day, (mode, quality) in enumerate(runs):
            started = datetime(2026, 11, 20 + day, 9, 0, tzinfo=UTC)
            ev = build_evidence(optimisation, mode, samples=samples, seed=day, started=started, quality=quality)
            path = Path(out_dir) / optimisation / f"run-{day:02d}" / "evidence.json"
            write_evidence(ev, path)
            paths.append(path)
    return paths


def write_fixture(out_dir: Path, mode: str, samples: int = 240) -> Path:
    path = Path(out_dir) / mode / "evidence.json"
    write_evidence(build_evidence("kimi-k3-latency", mode, samples=samples), path)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--samples", type=int, default=240, help="eval samples in the main scope point")
    args = parser.parse_args()
    for mode in ("pass", "fail", "incomplete"):
        print(write_fixture(args.out_dir, mode, args.samples))
    for path in write_history(args.out_dir / "history"):
        print(path)


if __name__ == "__main__":
    main()
