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

import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any

from fasttrack import stats as S
from fasttrack.errors import TargetError
from fasttrack.kinds.evals.tasks import ItemRecord

MAX_OUTPUT_CHARS = 2000  # per output kept in the evidence
MAX_CHANGED_SAMPLES = 40
UNCHANGED_SAMPLES = 5

Progress = Callable[[str], None]


@dataclass(frozen=True)
class BinResult:
    name: str
    comparison: S.PairedComparison
    decision: S.Decision
    sequential: S.SequentialResult | None = None

    def to_dict(self) -> dict[str, Any]:
        c = self.comparison
        return {
            "name": self.name,
            "n": c.n,
            "baseline_mean": _num(c.baseline_mean),
            "candidate_mean": _num(c.candidate_mean),
            "diff": _num(c.diff),
            "ci_low": _num(c.ci_low),
            "ci_high": _num(c.ci_high),
            "lower_bound": _num(c.lower_bound),
            "upper_bound": _num(c.upper_bound),
            "mde": _num(c.mde),
            "n_needed": c.n_needed,
            "floor": c.at_floor,
            "passed": self.decision.status == S.PASSED,
            "status": self.decision.status,
            "reason": self.decision.reason,
            "sequential": self.sequential.to_dict() if self.sequential else None,
        }


@dataclass(frozen=True)
class EvalComparison:
    """The outcome of one eval comparison and everything a reviewer needs to check it."""

    eval_id: str
    task: str
    metric: str
    status: str  # passed | failed | errored | not_run
    reason_code: str | None
    reason: str
    n_max: int = 0
    margin: float = 0.0
    alpha: float = 0.05
    overall: S.PairedComparison | None = None
    bins: tuple[BinResult, ...] = ()
    sequential: S.SequentialResult | None = None
    samples: tuple[dict[str, Any], ...] = ()
    non_finite: Mapping[str, int] = field(default_factory=dict)  # side -> responses
    cache: Mapping[str, Any] = field(default_factory=dict)
    timings: Mapping[str, float] = field(default_factory=dict)
    items: tuple[dict[str, Any], ...] = ()  # every compared item (scores, hashes, bin): the items.jsonl artifact
    floor: Mapping[str, Any] | None = None  # min_score: the candidate's mean against an absolute floor
    options: Mapping[str, Any] = field(default_factory=dict)  # lm-eval options applied (num_fewshot ...)

    def to_measurements(self) -> dict[str, Any]:
        c = self.overall
        m: dict[str, Any] = {
            "task": self.task,
            "metric": self.metric,
            "n": c.n if c else 0,
            "n_max": self.n_max,
            "margin": self.margin,
            "alpha": self.alpha,
            "status": self.status,
            "reason": self.reason,
            "non_finite": dict(self.non_finite),
            "cache": dict(self.cache),
            "timings": dict(self.timings),
        }
        if self.floor is not None:
            m["floor"] = dict(self.floor)
        if self.options:
            m["lm_eval_options"] = dict(self.options)
        if c is not None:
            d = c.to_dict()
            m.update(
                {
                    k: d[k]
                    for k in (
                        "baseline_mean",
                        "candidate_mean",
                        "diff",
                        "ci_low",
                        "ci_high",
                        "lower_bound",
                        "upper_bound",
                        "mde",
                        "n_needed",
                        "p_mcnemar",
                        "flips",
                        "unpaired_se",
                        "se",
                    )
                }
            )
            m["floor"] = c.at_floor
            # one-sided (1 - alpha) bounds of the candidate's own mean, for --previous
            bounds = S.mean_bounds([float(i["candidate_score"]) for i in self.items], self.alpha)
            m["candidate_mean_ci"] = list(bounds) if bounds else None
        m["bins"] = [b.to_dict() for b in self.bins]
        seq = self.sequential
        m["sequential"] = (
            seq.to_dict() if seq else {"used": False, "max": self.n_max, "stopped_early": False, "decision": None}
        )
        m["samples"] = list(self.samples)
        return m


def _num(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _errored(cfg: Mapping[str, Any], code: str, reason: str, **kw: Any) -> EvalComparison:
    return EvalComparison(
        str(cfg.get("id", cfg.get("task"))), str(cfg.get("task")), str(cfg.get("metric")), "errored", code, reason, **kw
    )


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
) -> EvalComparison:
    """Compare two lm-eval ``LM`` instances on one declared eval (a manifest ``evals:`` entry).

    ``baseline_identity`` (model id, revision, baseline code hash, scope point …) enables the
    baseline cache under ``cache_dir``; ``no_cache`` ignores and does not write it.
    """
    from fasttrack.kinds.evals import tasks as T
    from fasttrack.kinds.evals.cache import BaselineCache

    say = progress or (lambda _msg: None)
    root = Path(root) if root is not None else Path.cwd()
    eval_cfg = as_eval_config(eval_cfg)
    eval_id, task_name, metric = (
        str(eval_cfg.get("id", eval_cfg["task"])),
        str(eval_cfg["task"]),
        str(eval_cfg["metric"]),
    )
    margin, alpha = float(eval_cfg["margin"]), float(eval_cfg.get("alpha", 0.05))
    power = float(eval_cfg.get("power", 0.8))
    gen = dict(eval_cfg.get("generation") or {})
    model_args = dict(eval_cfg.get("model_args") or {})
    if model_args.get("max_gen_toks") is not None:  # lm-eval's model_args spelling of max_tokens
        gen.setdefault("max_tokens", int(model_args["max_gen_toks"]))
    seed = int(gen.get("seed", 1234))
    common = {"margin": margin, "alpha": alpha}
    higher_is_better = bool(eval_cfg.get("higher_is_better", True))
    try:
        task = T.load_task(eval_cfg, root)
    except (T.EvalConfigError, FileNotFoundError, KeyError, ValueError) as exc:
        return _errored(eval_cfg, "error", f"cannot load eval task {task_name!r}: {exc}", **common)

    order = list(range(len(task.docs)))
    random.Random(seed).shuffle(order)
    limit = int(eval_cfg.get("limit") or len(order))
    order = order[:limit]
    n_max = len(order)
    bins_cfg = eval_cfg.get("bins") or None
    try:
        labels = _bin_labels(task.docs, bins_cfg)
    except KeyError as exc:
        return _errored(
            eval_cfg, "error", f"eval {eval_id!r}: bins field {exc} is missing from the docs", n_max=n_max, **common
        )
    seq_cfg = eval_cfg.get("sequential") or {}
    sequential = bool(seq_cfg.get("enabled"))
    batch = int(seq_cfg.get("batch_size", 25)) if sequential else n_max
    min_samples = int(seq_cfg.get("min_samples", 0)) if sequential else 0
    material = None
    if baseline_identity is not None:
        material = {
            "baseline": dict(baseline_identity),
            "task": task.name,
            "task_definition": task.definition_hash,
            "generation": gen,
            "seed": seed,
            "repeats": int(eval_cfg.get("repeats") or 1),
            "metric": metric,
            "apply_chat_template": bool(eval_cfg.get("apply_chat_template", False)),
            "lm_eval_options": T.lm_eval_options(eval_cfg),
        }
    cache = BaselineCache.open(cache_dir, material, enabled=not no_cache)
    chat = bool(eval_cfg.get("apply_chat_template", False))
    multiturn = eval_cfg.get("fewshot_as_multiturn")

    base: dict[int, Any] = {}
    cand: dict[int, Any] = {}
    timings = {"baseline_s": 0.0, "candidate_s": 0.0}
    looks: list[int] = []
    seq_state: dict[str, S.SequentialResult] = {}
    done = 0
    while done < n_max:
        ids = order[done : done + batch]
        done += len(ids)
        try:
            t0 = time.perf_counter()
            cached, todo = cache.take(ids)
            fresh = (
                T.run_side(
                    baseline_lm,
                    task,
                    todo,
                    metric,
                    apply_chat_template=chat,
                    seed=seed,
                    generation=gen,
                    fewshot_as_multiturn=multiturn,
                )
                if todo
                else {}
            )
            cache.add(fresh, (time.perf_counter() - t0) / len(todo) if todo else None)
            base.update(cached)
            base.update(fresh)
            t1 = time.perf_counter()
            cand.update(
                T.run_side(
                    candidate_lm,
                    task,
                    ids,
                    metric,
                    apply_chat_template=chat,
                    seed=seed,
                    generation=gen,
                    fewshot_as_multiturn=multiturn,
                )
            )
            timings["baseline_s"] += t1 - t0
            timings["candidate_s"] += time.perf_counter() - t1
        except TargetError as exc:
            return _errored(eval_cfg, "target", str(exc), n_max=n_max, **common)
        except T.EvalConfigError as exc:
            return _errored(eval_cfg, "error", str(exc), n_max=n_max, **common)
        except Exception as exc:
            return _errored(eval_cfg, "error", f"lm-eval failed: {type(exc).__name__}: {exc}", n_max=n_max, **common)
        mismatch = _join_problem(order[:done], base, cand)
        if mismatch:
            return _errored(eval_cfg, "mismatch", mismatch, n_max=n_max, **common)
        say(f"{eval_id}: {done}/{n_max} items")
        if sequential and done >= min_samples:
            looks.append(done)
            try:
                settled = _sequential_step(
                    order[:done], base, cand, labels, looks, margin, alpha, n_max, seq_state, higher_is_better
                )
            except ValueError as exc:
                return _errored(eval_cfg, "error", f"eval {eval_id!r}: {exc}", n_max=n_max, **common)
            if settled:
                break

    if sequential and (not looks or looks[-1] != done):  # fewer items than min_samples: one final look
        looks.append(done)
        try:
            _sequential_step(order[:done], base, cand, labels, looks, margin, alpha, n_max, seq_state, higher_is_better)
        except ValueError as exc:
            return _errored(eval_cfg, "error", f"eval {eval_id!r}: {exc}", n_max=n_max, **common)
    used = order[:done]
    b_scores = [_oriented(base[i].score, higher_is_better) for i in used]
    c_scores = [_oriented(cand[i].score, higher_is_better) for i in used]
    overall = S.paired_comparison(b_scores, c_scores, margin=margin, alpha=alpha, power=power)
    bin_order = _bin_order(bins_cfg, [labels[i] for i in used]) if labels and bins_cfg else []
    per_bin = (
        S.compare_bins(
            b_scores, c_scores, [labels[i] for i in used], margin=margin, alpha=alpha, power=power, order=bin_order
        )
        if labels
        else {}
    )

    if sequential:
        seq_overall = seq_state.get("__all__") or S.sequential_decision(
            [], margin=margin, alpha=alpha, looks=[], n_max=n_max
        )
        overall_decision = _floor_guard(
            S.decision_from_sequential(seq_overall, overall.n_needed, margin), overall, margin
        )
        bins = tuple(
            BinResult(
                name,
                comp,
                _floor_guard(S.decision_from_sequential(seq_state[name], comp.n_needed, margin), comp, margin),
                seq_state[name],
            )
            for name, comp in per_bin.items()
        )
    else:
        seq_overall = None
        overall_decision = overall.decision
        bins = tuple(BinResult(name, comp, comp.decision) for name, comp in per_bin.items())
    decision = S.combine([overall_decision, *(b.decision for b in bins)])
    if seq_overall is not None:  # report the whole procedure: where it stopped and what it decided
        settled = decision.status in (S.PASSED, S.FAILED)
        seq_overall = replace(
            seq_overall,
            n_used=done,
            stopped_early=settled and done < n_max,
            decision=decision.status if settled else "inconclusive",
        )
    bad_bins = [b for b in bins if b.decision.status == S.FAILED]
    reason = decision.reason
    if bad_bins:  # name each failed bin with its own figures: the overall ones can hide where it broke
        detail = "; ".join(f"{b.name}: diff {b.comparison.diff:+.4f}, upper bound {_upper(b):.4f}" for b in bad_bins)
        reason = (
            f"bin(s) {', '.join(b.name for b in bad_bins)}: regression beyond the margin {margin:g} ({detail}); "
            f"overall ({overall_decision.status}): {overall_decision.reason}"
        )

    non_finite = {"baseline": sum(base[i].non_finite for i in used), "candidate": sum(cand[i].non_finite for i in used)}
    status, code = decision.status, decision.reason_code
    if non_finite["candidate"]:
        status, code = S.FAILED, "regression"
        reason = f"candidate produced non-finite logits on {non_finite['candidate']} response(s); " + reason
    elif non_finite["baseline"]:
        status, code = "errored", "target"
        reason = f"baseline produced non-finite logits on {non_finite['baseline']} response(s); the comparison is void"
    floor = None
    if eval_cfg.get("min_score") is not None and status != "errored":
        check = S.floor_check([cand[i].score for i in used], float(eval_cfg["min_score"]), alpha)
        floor = {**check.to_dict(), "status": check.status}
        if check.status == S.FAILED:
            status, code = S.FAILED, "regression"
            reason = (
                f"the candidate scores {check.mean:.4f}, below the floor min_score {check.floor:g} (one-sided "
                f"{1 - alpha:.0%} upper bound {check.upper:.4f}, {check.method}, n={check.n}); " + reason
            )
        elif check.status == "inconclusive" and status == S.PASSED:
            status, code = "not_run", "underpowered"
            reason = (
                f"the candidate's mean {check.mean:.4f} is below the floor min_score {check.floor:g} but its upper "
                f"bound {check.upper:.4f} reaches it: more items are needed to tell"
            )
    return EvalComparison(
        eval_id=eval_id,
        task=task.name,
        metric=metric,
        status=status,
        reason_code=code,
        reason=reason,
        n_max=n_max,
        margin=margin,
        alpha=alpha,
        overall=overall,
        bins=bins,
        sequential=seq_overall,
        samples=tuple(_samples(used, base, cand, labels)),
        non_finite=non_finite,
        items=tuple(
            {
                "doc_id": i,
                "bin": labels.get(i) if labels else None,
                "doc_hash": base[i].doc_hash,
                "prompt_hash": base[i].prompt_hash,
                "baseline_score": base[i].score,
                "candidate_score": cand[i].score,
            }
            for i in used
        ),
        cache={
            "enabled": cache.path is not None,
            "key": cache.key,
            "baseline_hits": cache.hits,
            # what the hits cost when they ran: a run without them takes that much longer
            "baseline_saved_s": round(cache.saved_s, 6),
            "baseline_hits_of_unknown_cost": cache.hits_of_unknown_cost,
        },
        timings={k: round(v, 3) for k, v in timings.items()},
        floor=floor,
        options=T.lm_eval_options(eval_cfg),
    )


def as_eval_config(spec: Any) -> dict[str, Any]:
    """A manifest ``EvalSpec`` (frozen dataclass) or a plain mapping, as a plain dict without Nones:
    the section as written (lm-eval options such as num_fewshot live only there) with the typed
    fields over it (e.g. a --eval-limit override)."""
    if is_dataclass(spec) and not isinstance(spec, type):
        raw = getattr(spec, "raw", None) or {}
        typed = {f.name: getattr(spec, f.name) for f in fields(spec) if f.name != "raw"}
        spec = {**_plain_copy(raw), **typed}
    return {k: v for k, v in dict(spec).items() if v is not None}


def _plain_copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain_copy(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_plain_copy(v) for v in value]
    return value


def _upper(b: BinResult) -> float:
    """The bound a bin's verdict used: the confidence sequence's in sequential mode, else the fixed-n one."""
    return b.sequential.upper if b.sequential is not None else b.comparison.upper_bound


def _floor_guard(decision: S.Decision, comp: S.PairedComparison, margin: float) -> S.Decision:
    """A sequential pass on a baseline at the floor means nothing: not_run(floor)."""
    if decision.status == S.PASSED and comp.at_floor:
        return S.Decision(S.NOT_RUN, "floor", f"the baseline scores at the floor (mean ≤ margin {margin:g})")
    return decision


def _sequential_step(
    used: Sequence[int],
    base: Mapping[int, ItemRecord],
    cand: Mapping[int, ItemRecord],
    labels: Mapping[int, str],
    looks: Sequence[int],
    margin: float,
    alpha: float,
    n_max: int,
    state: dict[str, S.SequentialResult],
    hib: bool = True,
) -> bool:
    """Update the anytime-valid decisions of the whole set and of every bin; True once settled."""
    groups: dict[str, list[int]] = {"__all__": list(used)}
    for i in used:
        if labels:
            groups.setdefault(labels[i], []).append(i)
    for name, ids in groups.items():
        if name in state and state[name].decision != "inconclusive":
            continue  # a settled verdict stays (it was valid at its stopping time)
        d = [_oriented(cand[i].score, hib) - _oriented(base[i].score, hib) for i in ids]
        if any(not -1.0 <= x <= 1.0 for x in d):
            raise ValueError(
                "sequential mode needs scores in [0, 1] (the confidence sequence is for bounded differences)"
            )
        if name == "__all__":
            group_looks = looks
        else:
            group_looks = [sum(1 for i in used[:k] if labels[i] == name) for k in looks]
        group_max = n_max if name == "__all__" else len(ids)
        state[name] = S.sequential_decision(
            d, margin=margin, alpha=alpha, looks=[k for k in group_looks if k >= 1], n_max=group_max
        )
    decisions = [s.decision for s in state.values()]
    return S.FAILED in decisions or all(d == S.PASSED for d in decisions)


def _oriented(score: float, higher_is_better: bool) -> float:
    """Scores compared so that higher is better: a lower-is-better metric in [0, 1] becomes 1 − score."""
    return score if higher_is_better else 1.0 - score


def _bin_labels(docs: Sequence[Mapping[str, Any]], bins_cfg: Mapping[str, Any] | None) -> dict[int, str]:
    if not bins_cfg:
        return {}
    field_name, edges = bins_cfg["field"], list(bins_cfg["edges"])
    values = [float(doc[field_name]) for doc in docs]
    return dict(enumerate(S.bins_by_edges(values, edges)))


def _bin_order(bins_cfg: Mapping[str, Any], present: list[str]) -> list[str]:
    declared = S.bin_names(list(bins_cfg["edges"]))
    extra = sorted(set(present) - set(declared))
    return [b for b in declared if b in set(present)] + extra


def _join_problem(ids: Sequence[int], base: Mapping[int, ItemRecord], cand: Mapping[int, ItemRecord]) -> str | None:
    for i in ids:
        if i not in base or i not in cand:
            return f"doc {i} is missing on the {'baseline' if i not in base else 'candidate'} side"
        b, c = base[i], cand[i]
        if b.doc_hash != c.doc_hash:
            return (
                f"doc {i}: the two sides evaluated different documents (doc_hash {b.doc_hash[:12]} ≠ {c.doc_hash[:12]})"
            )
        if b.prompt_hash != c.prompt_hash:
            return f"doc {i}: the two sides were given different prompts (prompt_hash {b.prompt_hash[:12]} ≠ {c.prompt_hash[:12]})"
        if b.rendered_hash and c.rendered_hash and b.rendered_hash != c.rendered_hash:
            return (
                f"doc {i}: the two sides sent different requests (the chat template or the generation settings "
                "differ between baseline and candidate)"
            )
    return None


def _samples(
    used: Sequence[int], base: Mapping[int, ItemRecord], cand: Mapping[int, ItemRecord], labels: Mapping[int, str]
) -> list[dict[str, Any]]:
    """Changed items (largest |difference| first, capped) and a few unchanged ones, with both outputs."""
    changed = [i for i in used if abs(cand[i].score - base[i].score) > 1e-12]
    changed.sort(key=lambda i: (-abs(cand[i].score - base[i].score), i))
    is_changed = set(changed)
    unchanged = [i for i in used if i not in is_changed][:UNCHANGED_SAMPLES]
    out = []
    for i in changed[:MAX_CHANGED_SAMPLES] + unchanged:
        b, c = base[i], cand[i]
        out.append(
            {
                "doc_id": i,
                "prompt_hash": b.prompt_hash,
                "bin": labels.get(i) if labels else None,
                "baseline_output": _clip(b.outputs),
                "candidate_output": _clip(c.outputs),
                "baseline_score": b.score,
                "candidate_score": c.score,
                "changed": i in is_changed,
            }
        )
    return out


def _clip(outputs: tuple[str, ...]) -> str:
    text = outputs[0] if len(outputs) == 1 else "\n---\n".join(outputs)
    return text if len(text) <= MAX_OUTPUT_CHARS else text[:MAX_OUTPUT_CHARS] + "…"
