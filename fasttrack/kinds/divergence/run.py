"""Divergence check: teacher-forced next-token distributions of both sides, by context position.

Both sides read the same long texts (prompts from the eval sets, each followed by its reference
answer) one token at a time; at every position we compare the baseline's next-token
distribution P with the candidate's Q:

* KL(P‖Q) = Σ_v P(v) (log P(v) − log Q(v))  — how much probability mass moved;
* top-1 agreement — whether both would pick the same greedy token.

Positions are grouped into context buckets (e.g. [0, 512), [512, 1024), …). A bug that only
appears beyond some context length — the kind the source article's long-context evals caught and
short-input kernel tests missed — shows up as a jump in the far buckets while the near ones stay
at numerical noise. KL values here are exact per position (no sampling), so thresholds apply
directly.

Default thresholds and why (the manifest may override them):

* ``max_mean_kl = 0.01`` nats per bucket. For calibration, llama.cpp's ``--kl-divergence`` on
  Llama-3-8B gives mean KLDs of 0.00136 for q8_0 (8-bit quantisation, accepted as near-lossless)
  and 0.0313 for q4_K_M (a visible quality loss). A fast-track kernel must not change the maths,
  only reorder it, so it should sit well below the 4-bit level; 0.01 tolerates bf16
  reduction-order noise while catching a q4-sized drift.
* ``max_p99_kl = 0.1``: a bug that hits a few positions hard (a wrong cache slot, a race) hides
  in a mean; the 99th percentile exposes it.
* ``min_top1_agreement = 0.98``: reordered floating-point sums flip near-ties only; a systematic
  drop below 98% means the candidate reads a different context. A bucket's agreement is a share
  of a few dozen positions, so it fails only when the disagreements *show* a share above 2 %
  (exact binomial test at `fasttrack.exact.TOP1_ALPHA` over the buckets; `rule.bucket_verdict`): a point estimate failed
  a candidate flipping 1 % of near ties in 13.5 % of 64-position buckets.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from fasttrack.kinds.context import target_failure
from fasttrack.kinds.divergence.rule import bucket_verdict, dtype_shares, edges_from, limits_from, top1_alpha

if TYPE_CHECKING:
    from fasttrack.kinds.context import RunContext
    from fasttrack.plan.instance import CheckInstance


@dataclass(frozen=True)
class BucketStats:
    lo: int
    hi: int | None  # None: open-ended last bucket
    positions: int
    mean_kl: float
    p99_kl: float
    max_kl: float
    top1_agreement: float
    passed: bool
    problems: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.lo}-{self.hi}" if self.hi is not None else f">={self.lo}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "lo": self.lo,
            "hi": self.hi,
            "positions": self.positions,
            "mean_kl": _num(self.mean_kl),
            "p99_kl": _num(self.p99_kl),
            "max_kl": _num(self.max_kl),
            "top1_agreement": _num(self.top1_agreement),
            "passed": self.passed,
            "problems": list(self.problems),
        }


@dataclass(frozen=True)
class DivergenceResult:
    status: str  # passed | failed | errored | not_run
    reason_code: str | None
    reason: str
    buckets: tuple[BucketStats, ...] = ()
    prompts: int = 0
    positions: int = 0
    thresholds: Mapping[str, float] | None = None
    non_finite_positions: Mapping[str, int] | None = None

    def to_measurements(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "reason": self.reason,
            "prompts": self.prompts,
            "positions": self.positions,
            "thresholds": dict(self.thresholds or {}),
            "non_finite_positions": dict(self.non_finite_positions or {}),
            "buckets": [b.to_dict() for b in self.buckets],
        }


def _num(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _as_logprobs(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):  # torch tensor, without importing torch here
        value = value.detach().to("cpu").double().numpy()
    arr = np.asarray(value, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"next_token_logprobs must return a [positions, vocab] array, got shape {arr.shape}")
    return arr


def position_divergence(base_lp: np.ndarray, cand_lp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-position KL(P_base ‖ P_cand) and top-1 agreement, from log-probabilities [T, V]."""
    if base_lp.shape != cand_lp.shape:
        raise ValueError(f"the two sides returned different shapes {base_lp.shape} vs {cand_lp.shape}")
    p = np.exp(base_lp)
    # 0·log0 terms are 0; where P>0 and Q=0 the KL is infinite (and should fail)
    with np.errstate(invalid="ignore", divide="ignore"):
        terms = np.where(p > 0, p * (base_lp - cand_lp), 0.0)
    kl = np.maximum(terms.sum(axis=1), 0.0)  # tiny negative values are rounding
    agree = base_lp.argmax(axis=1) == cand_lp.argmax(axis=1)
    return kl, agree


def run_divergence(
    cfg: Mapping[str, Any],
    baseline: Any,
    candidate: Any,
    texts: Sequence[str | Sequence[int]],
    *,
    progress: Callable[[str], None] | None = None,
    dtypes: int = 1,
) -> DivergenceResult:
    """Compare teacher-forced next-token distributions of two targets on ``texts``.

    ``cfg`` is the manifest's ``divergence:`` section (``buckets`` edges in tokens, thresholds).
    Targets need ``next_token_logprobs(text_or_ids) -> [T, V]`` log-probabilities. ``dtypes``:
    the instances per deployment that share the top-1 alpha (`rule.top1_alpha`).
    """
    say = progress or (lambda _m: None)
    cfg = _as_mapping(cfg)
    limits, edges = limits_from(cfg), edges_from(cfg)
    for side, target in (("baseline", baseline), ("candidate", candidate)):
        if not callable(getattr(target, "next_token_logprobs", None)):
            return DivergenceResult(
                "not_run",
                "dependency",
                f"the {side} target gives no teacher-forced next-token "
                "distributions (next_token_logprobs); only in-process targets do",
                thresholds=limits,
            )
    if not texts:
        return DivergenceResult(
            "not_run", "uncovered", "no prompts to compare (the eval sets gave none)", thresholds=limits
        )
    compared = _compare_texts(baseline, candidate, texts, edges, say)
    if isinstance(compared, str):
        return DivergenceResult("errored", "target", compared, thresholds=limits)
    kls, agrees, bad = compared
    buckets = _bucket_stats(kls, agrees, edges, limits, top1_alpha(edges, dtypes))
    total = int(sum(len(k) for k in kls))
    common: dict[str, Any] = {
        "buckets": buckets,
        "prompts": len(texts),
        "positions": total,
        "thresholds": limits,
        "non_finite_positions": bad,
    }
    if bad["baseline"]:
        return DivergenceResult(
            "errored",
            "target",
            f"the baseline produced non-finite logits at {bad['baseline']} position(s); the comparison is void",
            **common,
        )
    if bad["candidate"]:
        return DivergenceResult(
            "failed",
            "regression",
            f"the candidate produced non-finite logits at {bad['candidate']} position(s)",
            **common,
        )
    failed = [b for b in buckets if b.positions and not b.passed]
    if failed:
        detail = "; ".join(f"{b.name}: {', '.join(b.problems)}" for b in failed)
        return DivergenceResult("failed", "regression", f"divergence above thresholds in bucket(s) {detail}", **common)
    empty = [b.name for b in buckets if b.positions == 0]
    if empty:
        return DivergenceResult(
            "not_run",
            "uncovered",
            f"no prompt reaches context bucket(s) {', '.join(empty)}; use longer prompts or drop those buckets",
            **common,
        )
    return DivergenceResult("passed", None, f"all {len(buckets)} context buckets within thresholds", **common)


def _compare_texts(
    baseline: Any, candidate: Any, texts: Sequence[str | Sequence[int]], edges: list[int], say: Callable[[str], None]
) -> tuple[list[np.ndarray], list[np.ndarray], dict[str, int]] | str:
    """Per text, the per-position KL and top-1 agreement (positions with non-finite logits count as
    infinite KL and disagreement), and the non-finite positions per side; or why a side failed."""
    kls: list[np.ndarray] = []
    agrees: list[np.ndarray] = []
    bad = {"baseline": 0, "candidate": 0}
    for n, text in enumerate(texts, 1):
        try:
            tokens = _tokens(baseline, text, edges[-1])
            b = _as_logprobs(baseline.next_token_logprobs(tokens))
            c = _as_logprobs(candidate.next_token_logprobs(tokens))
        except Exception as exc:
            return f"next_token_logprobs failed: {type(exc).__name__}: {exc}"
        bad_b, bad_c = ~np.isfinite(b).all(axis=1), ~np.isfinite(c).all(axis=1)
        bad["baseline"] += int(bad_b.sum())
        bad["candidate"] += int(bad_c.sum())
        kl, agree = position_divergence(np.where(np.isfinite(b), b, -np.inf), np.where(np.isfinite(c), c, -np.inf))
        kls.append(np.where(bad_b | bad_c, np.inf, kl))
        agrees.append(agree & ~(bad_b | bad_c))
        say(f"divergence: {n}/{len(texts)} prompts")
    return kls, agrees, bad


def _tokens(target: Any, text: str | Sequence[int], limit: int) -> str | list[int]:
    """The text as the baseline's token ids, cut at the last bucket edge (positions beyond it
    cost decode steps and are not asked for); unchanged if the target exposes no tokenizer."""
    encode = getattr(getattr(target, "tokenizer", None), "encode", None)
    if isinstance(text, str) and not callable(encode):
        return text
    ids = list(encode(text)) if isinstance(text, str) and callable(encode) else [int(t) for t in text]
    return ids[:limit] if limit > 0 else ids


def _as_mapping(cfg: Any) -> Mapping[str, Any]:
    """The manifest's ``Divergence`` dataclass or a plain mapping."""
    if hasattr(cfg, "__dataclass_fields__"):
        return {name: getattr(cfg, name) for name in cfg.__dataclass_fields__}
    return cfg or {}


def _bucket_stats(
    kls: list[np.ndarray], agrees: list[np.ndarray], edges: list[int], limits: Mapping[str, float], alpha: float
) -> tuple[BucketStats, ...]:
    kl_all = np.concatenate(kls) if kls else np.zeros(0)
    agree_all = np.concatenate(agrees) if agrees else np.zeros(0, dtype=bool)
    pos_all = np.concatenate([np.arange(len(k)) for k in kls]) if kls else np.zeros(0, dtype=int)
    out = []
    bounds = list(itertools.pairwise(edges))
    for lo, hi in bounds:
        mask = (pos_all >= lo) & (pos_all < hi)
        out.append(_one_bucket(lo, hi, kl_all[mask], agree_all[mask], limits, alpha))
    beyond = pos_all >= edges[-1]
    if beyond.any():  # positions past the last edge still count: report them rather than drop them
        out.append(_one_bucket(edges[-1], None, kl_all[beyond], agree_all[beyond], limits, alpha))
    return tuple(out)


def _one_bucket(
    lo: int, hi: int | None, kl: np.ndarray, agree: np.ndarray, limits: Mapping[str, float], alpha: float
) -> BucketStats:
    if len(kl) == 0:
        nan = float("nan")
        return BucketStats(lo, hi, 0, nan, nan, nan, nan, False, ("no positions",))
    mean_kl = float(np.mean(kl)) if np.all(np.isfinite(kl)) else float("inf")
    p99 = float(np.percentile(kl, 99)) if np.all(np.isfinite(kl)) else float("inf")
    top1 = float(np.mean(agree))
    verdict = bucket_verdict(mean_kl, p99, int((~agree).sum()), len(agree), limits, alpha)  # the rule's own
    problems = []
    if verdict.mean_over:
        problems.append(f"mean KL {mean_kl:.4g} > {limits['max_mean_kl']:g}")
    if verdict.p99_over:
        problems.append(f"p99 KL {p99:.4g} > {limits['max_p99_kl']:g}")
    if verdict.top1_below:
        problems.append(
            f"top-1 agreement {top1:.3f} < {limits['min_top1_agreement']:g} (binomial p {verdict.p_top1:.2g})"
        )
    return BucketStats(lo, hi, len(kl), mean_kl, p99, float(np.max(kl)), top1, verdict.passed, tuple(problems))


def texts_from_eval(
    eval_cfg: Mapping[str, Any], root: Any, render: Callable[[list[dict[str, str]]], str] | None, max_prompts: int = 8
) -> list[str]:
    """The ``max_prompts`` longest eval contexts, rendered, each followed by its reference answer."""
    from pathlib import Path

    from fasttrack.kinds.evals.tasks import load_task, task_contexts
    from fasttrack.targets.lm_adapter import parse_messages

    task = load_task(eval_cfg, Path(root))
    texts = []
    for context, target in task_contexts(task):
        messages = parse_messages(context)
        if messages is not None:
            if render is None:
                raise ValueError("the eval's prompts are chat messages: a chat template renderer is needed")
            context = render(messages)
        texts.append(context + (target if isinstance(target, str) else ""))
    texts.sort(key=len, reverse=True)
    return texts[: int(max_prompts)]


# ---------------------------------------------------------------------------------------------
# Engine entry point (the divergence KIND's runner)
# ---------------------------------------------------------------------------------------------


def run(instance: CheckInstance, context: RunContext) -> Any:
    """The divergence check at one scope point, on the longest prompts of ``prompts_from``."""
    import time
    from pathlib import Path

    from fasttrack.errors import TargetError
    from fasttrack.evidence import Status, utc_now
    from fasttrack.kinds.evals.compare import as_eval_config
    from fasttrack.targets.sides import opened_pair

    started, clock = utc_now(), time.monotonic()
    manifest = context.manifest
    point = instance.scope_point.as_dict() if instance.scope_point is not None else None
    dtype = (point or {}).get("dtype")  # the thresholds at the point's dtype (divergence.dtypes)
    spec = manifest.divergence.at_dtype(dtype) if manifest.divergence is not None else dict(instance.config or {})
    cfg = _as_mapping(spec)
    from fasttrack.process.cpu import pin_single_thread

    pin_single_thread(manifest, point)  # see evals.run

    def outcome(status: str, **fields_: Any) -> Any:
        return context.outcome(
            instance, Status(status), started_at=started, duration_s=time.monotonic() - clock, **fields_
        )

    if manifest.target.kind != "python":
        return outcome(
            "not_run",
            reason_code="dependency",
            reason="teacher-forced next-token distributions need an "
            "in-process target (an OpenAI-compatible API returns only top-k logprobs)",
        )
    source = cfg.get("prompts_from")
    evals = {ev.id: ev for ev in manifest.evals}
    if source not in evals:
        return outcome(
            "errored",
            reason_code="error",
            reason=f"divergence.prompts_from {source!r} names no eval (have: {', '.join(evals) or 'none'})",
        )
    try:
        with opened_pair(manifest, point, log_dir=context.artifact_dir) as (baseline_side, candidate_side):
            baseline, candidate = baseline_side.target, candidate_side.target
            render = getattr(baseline, "apply_chat_template", None)
            texts = texts_from_eval(
                as_eval_config(evals[source]), Path(manifest.root), render, int(cfg.get("max_prompts") or 8)
            )
            result = run_divergence(cfg, baseline, candidate, texts, dtypes=dtype_shares(manifest, dtype))
    except TargetError as exc:
        status, code = target_failure(exc)
        return outcome(status.value, reason_code=code, reason=str(exc))
    except (ValueError, OSError) as exc:
        return outcome("errored", reason_code="error", reason=f"{type(exc).__name__}: {exc}")
    return outcome(
        result.status, reason_code=result.reason_code, reason=result.reason, measurements=result.to_measurements()
    )
