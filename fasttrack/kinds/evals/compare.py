"""Eval comparison: run one lm-eval task on both sides, join per item, decide with paired statistics.

Flow: resolve the task (``tasks``) → choose the evaluation set (a seeded permutation of the
doc ids, first ``limit``; random so that a length-sorted data file still covers every bin, and
so that the sequential rule sees exchangeable items) → evaluate in batches (all at once without
sequential mode): baseline from the content-addressed cache where possible, candidate always →
join on doc id, requiring equal doc and prompt hashes → per-item scores (repeats averaged) →
``fasttrack.stats``: overall and per bin; non-finite logits on the candidate fail the check.

Returns an ``EvalComparison``; target and configuration problems become ``errored`` results with a
reason rather than exceptions, so one broken eval does not stop the gate.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any

from fasttrack import stats as S
from fasttrack.errors import TargetError
from fasttrack.kinds.evals.items import (
    bin_labels,
    bin_order,
    floor_guard,
    interleaved,
    join_problem,
    oriented,
    plain_copy,
    reference_rule,
    samples_of,
    sequential_step,
    upper,
)
from fasttrack.kinds.evals.result import BinResult, EvalComparison, _errored

Progress = Callable[[str], None]


@dataclass
class _Setting:
    """One declared eval as the comparison runs it: the task, which items in what order, and how
    the statistics decide."""

    cfg: dict[str, Any]
    eval_id: str
    metric: str
    margin: float
    alpha: float
    power: float
    generation: dict[str, Any]
    seed: int
    higher_is_better: bool
    task: Any
    order: list[int]  # the items, in the seeded order they are asked
    bins_cfg: Mapping[str, Any] | None
    labels: dict[int, str]  # item -> its length bin (empty without bins)
    sequential: bool
    batch: int
    min_samples: int
    bin_margin: float  # each bin is judged at this margin (``bins.margin``; default: the eval's)
    block: int  # bins taken in turn: the overall sequential test counts cycles of this many items
    parallel: bool = False  # both sides asked at once (two servers)

    @property
    def n_max(self) -> int:
        return len(self.order)

    def errored(self, code: str, reason: str) -> EvalComparison:
        return _errored(self.cfg, code, reason, n_max=self.n_max, margin=self.margin, alpha=self.alpha)


@dataclass
class _Collected:
    """Both sides' answers so far, and the sequential test's state."""

    base: dict[int, Any] = field(default_factory=dict)
    cand: dict[int, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=lambda: {"baseline_s": 0.0, "candidate_s": 0.0})
    looks: list[int] = field(default_factory=list)
    seq_state: dict[str, S.SequentialResult] = field(default_factory=dict)
    done: int = 0


def run_eval_comparison(
    eval_cfg: Mapping[str, Any],
    baseline_lm: Any,
    candidate_lm: Any,
    *,
    cache_dir: Path | None = None,
    progress: Progress | None = None,
    root: Path | None = None,
    baseline_identity: Mapping[str, Any] | None = None,
    no_cache: bool = False,
    parallel: bool = False,
) -> EvalComparison:
    """Compare two lm-eval ``LM`` instances on one declared eval (a manifest ``evals:`` entry).

    ``baseline_identity`` (model id, revision, baseline code hash, scope point …) enables the
    baseline cache under ``cache_dir``; ``no_cache`` ignores and does not write it. ``parallel``:
    ask both sides at once (each is its own server).
    """
    from fasttrack.kinds.evals.cache import BaselineCache

    setting = _setting(as_eval_config(eval_cfg), Path(root) if root is not None else Path.cwd())
    if isinstance(setting, EvalComparison):
        return setting
    setting.parallel = parallel
    material = _cache_material(setting, baseline_identity) if baseline_identity is not None else None
    cache = BaselineCache.open(cache_dir, material, enabled=not no_cache)
    got = _collect(setting, baseline_lm, candidate_lm, cache, progress or (lambda _msg: None))
    if isinstance(got, EvalComparison):
        return got
    return _judge(setting, got, cache)


def _setting(eval_cfg: dict[str, Any], root: Path) -> _Setting | EvalComparison:
    """The eval as configured, its task loaded and its items ordered (or why it cannot run)."""
    from fasttrack.kinds.evals import tasks as T

    margin, alpha = float(eval_cfg["margin"]), float(eval_cfg.get("alpha", 0.05))
    gen = dict(eval_cfg.get("generation") or {})
    model_args = dict(eval_cfg.get("model_args") or {})
    if model_args.get("max_gen_toks") is not None:  # lm-eval's model_args spelling of max_tokens
        gen.setdefault("max_tokens", int(model_args["max_gen_toks"]))
    seed = int(gen.get("seed", 1234))
    try:
        task = T.load_task(eval_cfg, root)
    except (T.EvalConfigError, FileNotFoundError, KeyError, ValueError) as exc:
        reason = f"cannot load eval task {str(eval_cfg['task'])!r}: {exc}"
        return _errored(eval_cfg, "error", reason, margin=margin, alpha=alpha)
    order = list(range(len(task.docs)))
    random.Random(seed).shuffle(order)
    limit = int(eval_cfg.get("limit") or len(order))
    eval_id = str(eval_cfg.get("id", eval_cfg["task"]))
    bins_cfg = eval_cfg.get("bins") or None
    try:
        labels = bin_labels(task.docs, bins_cfg)
    except KeyError as exc:
        reason = f"eval {eval_id!r}: bins field {exc} is missing from the docs"
        return _errored(eval_cfg, "error", reason, n_max=min(limit, len(order)), margin=margin, alpha=alpha)
    seq_cfg = eval_cfg.get("sequential") or {}
    sequential = bool(seq_cfg.get("enabled"))
    present = bin_order(bins_cfg, sorted(set(labels.values()))) if labels and bins_cfg else []
    block = len(present) if sequential and len(present) > 1 else 1
    if block > 1:  # sequential with bins: take the bins in turn, so that all of them settle together
        order = interleaved(order, labels, present)
    order = order[:limit]
    return _Setting(
        cfg=eval_cfg,
        eval_id=eval_id,
        metric=str(eval_cfg["metric"]),
        margin=margin,
        alpha=alpha,
        power=float(eval_cfg.get("power", 0.8)),
        generation=gen,
        seed=seed,
        higher_is_better=bool(eval_cfg.get("higher_is_better", True)),
        task=task,
        order=order,
        bins_cfg=bins_cfg,
        labels=labels,
        sequential=sequential,
        batch=int(seq_cfg.get("batch_size", 25)) if sequential else len(order),
        min_samples=int(seq_cfg.get("min_samples", 0)) if sequential else 0,
        bin_margin=float((bins_cfg or {}).get("margin") or margin),
        block=block,
    )


def _cache_material(setting: _Setting, baseline_identity: Mapping[str, Any]) -> dict[str, Any]:
    """What the baseline's answers depend on: the cache key's material."""
    from fasttrack.kinds.evals import tasks as T

    cfg = setting.cfg
    return {
        "baseline": dict(baseline_identity),
        "task": setting.task.name,
        "task_definition": setting.task.definition_hash,
        "generation": setting.generation,
        "seed": setting.seed,
        "repeats": int(cfg.get("repeats") or 1),
        "metric": setting.metric,
        "apply_chat_template": bool(cfg.get("apply_chat_template", False)),
        "lm_eval_options": T.lm_eval_options(cfg),
    }


def _collect(
    setting: _Setting, baseline_lm: Any, candidate_lm: Any, cache: Any, say: Progress
) -> _Collected | EvalComparison:
    """Ask both sides batch by batch (the baseline from the cache where it can), joining per item;
    in sequential mode look after every batch and stop once the test settles."""
    from fasttrack.kinds.evals import tasks as T

    got = _Collected()
    order, n_max = setting.order, setting.n_max
    while got.done < n_max:
        # no look comes before min_samples: ask for all of them at once (more requests in flight)
        ids = order[got.done : max(got.done + setting.batch, setting.min_samples)]
        got.done += len(ids)
        try:
            _ask(setting, baseline_lm, candidate_lm, cache, ids, got)
        except TargetError as exc:
            return setting.errored("target", str(exc))
        except T.EvalConfigError as exc:
            return setting.errored("error", str(exc))
        except Exception as exc:
            return setting.errored("error", f"lm-eval failed: {type(exc).__name__}: {exc}")
        mismatch = join_problem(order[: got.done], got.base, got.cand)
        if mismatch:
            return setting.errored("mismatch", mismatch)
        say(f"{setting.eval_id}: {got.done}/{n_max} items")
        if setting.sequential and got.done >= setting.min_samples:
            got.looks.append(got.done)
            try:
                if _look(setting, got):
                    break
            except ValueError as exc:
                return setting.errored("error", f"eval {setting.eval_id!r}: {exc}")
    if setting.sequential and (not got.looks or got.looks[-1] != got.done):  # fewer items than min_samples
        got.looks.append(got.done)  # one final look
        try:
            _look(setting, got)
        except ValueError as exc:
            return setting.errored("error", f"eval {setting.eval_id!r}: {exc}")
    return got


def _ask(setting: _Setting, baseline_lm: Any, candidate_lm: Any, cache: Any, ids: list[int], got: _Collected) -> None:
    """One batch: the baseline's uncached items and the candidate's, timed per side; one after the
    other, or at once (``setting.parallel``: two servers, each answering its own side)."""
    from fasttrack.kinds.evals import tasks as T

    cfg = setting.cfg
    options: dict[str, Any] = {
        "apply_chat_template": bool(cfg.get("apply_chat_template", False)),
        "seed": setting.seed,
        "generation": setting.generation,
        "fewshot_as_multiturn": cfg.get("fewshot_as_multiturn"),
    }
    cached, todo = cache.take(ids)

    def side(lm: Any, doc_ids: list[int], built: Any = None) -> tuple[dict[int, Any], float]:
        start = time.perf_counter()
        records = T.run_side(lm, setting.task, doc_ids, setting.metric, built=built, **options) if doc_ids else {}
        return records, time.perf_counter() - start

    if setting.parallel:
        # each side's own task object, built here: two threads never load the same data at once
        built = [T.build_task(setting.task) if doc_ids else None for doc_ids in (todo, ids)]
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="eval-side") as pool:
            base_job = pool.submit(side, baseline_lm, todo, built[0])
            cand_job = pool.submit(side, candidate_lm, ids, built[1])
            (fresh, base_s), (cand, cand_s) = base_job.result(), cand_job.result()
    else:
        fresh, base_s = side(baseline_lm, todo)
        cand, cand_s = side(candidate_lm, ids)
    cache.add(fresh, base_s / len(todo) if todo else None)
    got.base.update(cached)
    got.base.update(fresh)
    got.cand.update(cand)
    got.timings["baseline_s"] += base_s
    got.timings["candidate_s"] += cand_s


def _look(setting: _Setting, got: _Collected) -> bool:
    return sequential_step(
        setting.order[: got.done],
        got.base,
        got.cand,
        setting.labels,
        got.looks,
        setting.margin,
        setting.alpha,
        setting.n_max,
        got.seq_state,
        setting.higher_is_better,
        bin_margin=setting.bin_margin,
        block=setting.block,
    )


def _judge(setting: _Setting, got: _Collected, cache: Any) -> EvalComparison:
    """The paired comparison of the items asked, overall and per bin, and the eval's outcome."""
    from fasttrack.kinds.evals import tasks as T

    used = setting.order[: got.done]
    overall, overall_decision, bins, seq_overall = _statistics(setting, got, used)
    decision = S.combine([overall_decision, *(b.decision for b in bins)])
    if seq_overall is not None:  # report the whole procedure: where it stopped and what it decided
        settled = decision.status in (S.PASSED, S.FAILED)
        seq_overall = replace(
            seq_overall,
            n_used=got.done,
            stopped_early=settled and got.done < setting.n_max,
            decision=decision.status if settled else "inconclusive",
        )
    reason = _bins_reason(bins, overall_decision, decision.reason, setting.bin_margin)
    non_finite = {
        "baseline": sum(got.base[i].non_finite for i in used),
        "candidate": sum(got.cand[i].non_finite for i in used),
    }
    status, code, reason = _non_finite_rule(non_finite, decision.status, decision.reason_code, reason)
    floor = None
    if setting.cfg.get("min_score") is not None and status != "errored":
        floor, status, code, reason = _floor_rule(setting, [got.cand[i].score for i in used], status, code, reason)
    reference, status, code, reason = reference_rule(
        setting.cfg,
        setting.metric,
        [got.cand[i].score for i in used] if status != "errored" else [],
        status,
        code,
        reason,
    )
    labels = setting.labels
    return EvalComparison(
        eval_id=setting.eval_id,
        task=setting.task.name,
        metric=setting.metric,
        status=status,
        reason_code=code,
        reason=reason,
        n_max=setting.n_max,
        margin=setting.margin,
        alpha=setting.alpha,
        overall=overall,
        bins=bins,
        sequential=seq_overall,
        samples=tuple(samples_of(used, got.base, got.cand, labels)),
        non_finite=non_finite,
        items=tuple(_item_record(i, got, labels) for i in used),
        cache={
            "enabled": cache.path is not None,
            "key": cache.key,
            "baseline_hits": cache.hits,
            # what the hits cost when they ran: a run without them takes that much longer
            "baseline_saved_s": round(cache.saved_s, 6),
            "baseline_hits_of_unknown_cost": cache.hits_of_unknown_cost,
        },
        timings={k: round(v, 3) for k, v in got.timings.items()},
        floor=floor,
        options=T.lm_eval_options(setting.cfg),
        reference=reference,
        family=plain_copy(family) if isinstance(family := setting.cfg.get("family"), Mapping) else None,
    )


def _statistics(
    setting: _Setting, got: _Collected, used: list[int]
) -> tuple[S.PairedComparison, S.Decision, tuple[BinResult, ...], S.SequentialResult | None]:
    """Overall and per-bin comparisons and decisions (the sequential test's where it ran)."""
    margin, alpha, power, labels = setting.margin, setting.alpha, setting.power, setting.labels
    bin_margin = setting.bin_margin
    b_scores = [oriented(got.base[i].score, setting.higher_is_better) for i in used]
    c_scores = [oriented(got.cand[i].score, setting.higher_is_better) for i in used]
    overall = S.paired_comparison(b_scores, c_scores, margin=margin, alpha=alpha, power=power)
    bins_cfg = setting.bins_cfg
    order_of_bins = bin_order(bins_cfg, [labels[i] for i in used]) if labels and bins_cfg else []
    per_bin = (
        S.compare_bins(
            b_scores,
            c_scores,
            [labels[i] for i in used],
            margin=bin_margin,
            alpha=alpha,
            power=power,
            order=order_of_bins,
        )
        if labels
        else {}
    )
    if not setting.sequential:
        return overall, overall.decision, tuple(BinResult(n, c, c.decision) for n, c in per_bin.items()), None
    seq = got.seq_state
    seq_overall = seq.get("__all__") or S.sequential_decision(
        [], margin=margin, alpha=alpha, looks=[], n_max=setting.n_max, block=setting.block
    )
    # Under the sequential rule, "needs n" is the items that rule needs, not the fixed-n formula's.
    diffs = [c - b for b, c in zip(b_scores, c_scores, strict=True)]
    overall = _needing(overall, diffs, setting, block=setting.block)
    overall_decision = floor_guard(S.decision_from_sequential(seq_overall, overall.n_needed, margin), overall, margin)
    bin_diffs = {name: [d for d, i in zip(diffs, used, strict=True) if labels[i] == name] for name in per_bin}
    per_bin = {name: _needing(comp, bin_diffs[name], setting) for name, comp in per_bin.items()}
    bins = tuple(
        BinResult(
            name,
            comp,
            floor_guard(S.decision_from_sequential(seq[name], comp.n_needed, bin_margin), comp, bin_margin),
            seq[name],
        )
        for name, comp in per_bin.items()
    )
    return overall, overall_decision, bins, seq_overall


def _bins_reason(bins: Sequence[BinResult], overall_decision: S.Decision, reason: str, margin: float) -> str:
    """Each failed bin with its own figures: the overall ones can hide where it broke."""
    bad_bins = [b for b in bins if b.decision.status == S.FAILED]
    if not bad_bins:
        return reason
    detail = "; ".join(f"{b.name}: diff {b.comparison.diff:+.4f}, upper bound {upper(b):.4f}" for b in bad_bins)
    return (
        f"bin(s) {', '.join(b.name for b in bad_bins)}: regression beyond the margin {margin:g} ({detail}); "
        f"overall ({overall_decision.status}): {overall_decision.reason}"
    )


def _non_finite_rule(
    non_finite: Mapping[str, int], status: str, code: str | None, reason: str
) -> tuple[str, str | None, str]:
    """Non-finite logits on the candidate fail the eval; on the baseline they void the comparison."""
    if non_finite["candidate"]:
        return (
            S.FAILED,
            "regression",
            f"candidate produced non-finite logits on {non_finite['candidate']} response(s); " + reason,
        )
    if non_finite["baseline"]:
        return (
            "errored",
            "target",
            f"baseline produced non-finite logits on {non_finite['baseline']} response(s); the comparison is void",
        )
    return status, code, reason


def _floor_rule(
    setting: _Setting, scores: list[float], status: str, code: str | None, reason: str
) -> tuple[dict[str, Any], str, str | None, str]:
    """The candidate's mean against ``min_score`` (one-sided bound): below it fails, undecided is underpowered."""
    alpha = setting.alpha
    check = S.floor_check(scores, float(setting.cfg["min_score"]), alpha)
    floor = {**check.to_dict(), "status": check.status}
    if check.status == S.FAILED:
        return (
            floor,
            S.FAILED,
            "regression",
            f"the candidate scores {check.mean:.4f}, below the floor min_score {check.floor:g} (one-sided "
            f"{1 - alpha:.0%} upper bound {check.upper:.4f}, {check.method}, n={check.n}); " + reason,
        )
    if check.status == "inconclusive" and status == S.PASSED:
        return (
            floor,
            "not_run",
            "underpowered",
            f"the candidate's mean {check.mean:.4f} is below the floor min_score {check.floor:g} but its upper "
            f"bound {check.upper:.4f} reaches it: more items are needed to tell",
        )
    return floor, status, code, reason


def _item_record(i: int, got: _Collected, labels: Mapping[int, str]) -> dict[str, Any]:
    return {
        "doc_id": i,
        "bin": labels.get(i) if labels else None,
        "doc_hash": got.base[i].doc_hash,
        "prompt_hash": got.base[i].prompt_hash,
        "baseline_score": got.base[i].score,
        "candidate_score": got.cand[i].score,
    }


def as_eval_config(spec: Any) -> dict[str, Any]:
    """A manifest ``EvalSpec`` (frozen dataclass) or a plain mapping, as a plain dict without Nones:
    the section as written (lm-eval options such as num_fewshot live only there) with the typed
    fields over it (e.g. a --eval-limit override)."""
    if is_dataclass(spec) and not isinstance(spec, type):
        raw = getattr(spec, "raw", None) or {}
        typed = {f.name: getattr(spec, f.name) for f in fields(spec) if f.name != "raw"}
        spec = {**plain_copy(raw), **typed}
    return {k: v for k, v in dict(spec).items() if v is not None}


def _needing(comp: S.PairedComparison, diffs: list[float], setting: _Setting, block: int = 1) -> S.PairedComparison:
    """``comp`` with ``n_needed`` from the sequential rule: the items by which it passes a share
    ``power`` of continuations like the observed differences (`fasttrack.stats.items_to_settle`)."""
    needed = S.items_to_settle(
        diffs,
        margin=comp.margin,  # a bin's own (bins.margin) or the eval's
        alpha=setting.alpha,
        batch=setting.batch,
        power=setting.power,
        block=block,
    )
    return replace(comp, n_needed=needed if needed is not None else max(comp.n_needed, len(diffs) + 1))
