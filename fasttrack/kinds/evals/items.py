"""What one eval comparison does per item and per group of items, apart from asking the sides:
the items' length bins and their order, joining both sides' answers on doc id (equal doc and
prompt hashes required), orienting scores, one look of the sequential test, the floor guard of a
bin, and the items kept side by side in the evidence."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from fasttrack import stats as S
from fasttrack.kinds.evals.tasks import ItemRecord

if TYPE_CHECKING:
    from fasttrack.kinds.evals.result import BinResult

MAX_OUTPUT_CHARS = 2000  # per output kept in the evidence
MAX_CHANGED_SAMPLES = 40
UNCHANGED_SAMPLES = 5


def plain_copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: plain_copy(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [plain_copy(v) for v in value]
    return value


def upper(b: BinResult) -> float:
    """The bound a bin's verdict used: the confidence sequence's in sequential mode, else the fixed-n one."""
    return b.sequential.upper if b.sequential is not None else b.comparison.upper_bound


def floor_guard(decision: S.Decision, comp: S.PairedComparison, margin: float) -> S.Decision:
    """A sequential pass on a baseline at the floor means nothing: not_run(floor)."""
    if decision.status == S.PASSED and comp.at_floor:
        return S.Decision(S.NOT_RUN, "floor", f"the baseline scores at the floor (mean ≤ margin {margin:g})")
    return decision


def sequential_step(
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
    bin_margin: float | None = None,
    block: int = 1,
) -> bool:
    """Update the anytime-valid decisions of the whole set (at ``margin``; in cycles of ``block``
    items when the order interleaves the bins) and of every bin (at ``bin_margin``, default
    ``margin``); True once settled."""
    groups: dict[str, list[int]] = {"__all__": list(used)}
    for i in used:
        if labels:
            groups.setdefault(labels[i], []).append(i)
    for name, ids in groups.items():
        if name in state and state[name].decision != "inconclusive":
            continue  # a settled verdict stays (it was valid at its stopping time)
        d = [oriented(cand[i].score, hib) - oriented(base[i].score, hib) for i in ids]
        if any(not -1.0 <= x <= 1.0 for x in d):
            raise ValueError(
                "sequential mode needs scores in [0, 1] (the confidence sequence is for bounded differences)"
            )
        if name == "__all__":
            group_looks = list(looks)
        else:
            group_looks = [sum(1 for i in used[:k] if labels[i] == name) for k in looks]
        whole = name == "__all__"
        state[name] = S.sequential_decision(
            d,
            margin=margin if whole or bin_margin is None else bin_margin,
            alpha=alpha,
            looks=[k for k in group_looks if k >= 1],
            n_max=n_max if whole else len(ids),
            block=block if whole else 1,
        )
    decisions = [s.decision for s in state.values()]
    return S.FAILED in decisions or all(d == S.PASSED for d in decisions)


def oriented(score: float, higher_is_better: bool) -> float:
    """Scores compared so that higher is better: a lower-is-better metric in [0, 1] becomes 1 − score."""
    return score if higher_is_better else 1.0 - score


def bin_labels(docs: Sequence[Mapping[str, Any]], bins_cfg: Mapping[str, Any] | None) -> dict[int, str]:
    if not bins_cfg:
        return {}
    field_name, edges = bins_cfg["field"], list(bins_cfg["edges"])
    values = [float(doc[field_name]) for doc in docs]
    return dict(enumerate(S.bins_by_edges(values, edges)))


def interleaved(order: Sequence[int], labels: Mapping[int, str], bins: Sequence[str]) -> list[int]:
    """``order`` taken one item per bin in turn (bins in ``bins`` order, each bin's items in their
    order in ``order``) for as many whole cycles as every bin can fill: the sequential rule sees
    every bin grow alike, and its overall test, about the bins' equal-weighted mean, counts whole
    cycles (`fasttrack.stats.sequential.rejects`). Items beyond the smallest bin's count are left out."""
    per_bin = {b: [i for i in order if labels[i] == b] for b in bins}
    cycles = min((len(v) for v in per_bin.values()), default=0)
    return [per_bin[b][c] for c in range(cycles) for b in bins]


def bin_order(bins_cfg: Mapping[str, Any], present: list[str]) -> list[str]:
    declared = S.bin_names(list(bins_cfg["edges"]))
    extra = sorted(set(present) - set(declared))
    return [b for b in declared if b in set(present)] + extra


def join_problem(ids: Sequence[int], base: Mapping[int, ItemRecord], cand: Mapping[int, ItemRecord]) -> str | None:
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


def samples_of(
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


def reference_rule(
    cfg: Mapping[str, Any], metric: str, scores: Sequence[float], status: str, code: str | None, reason: str
) -> tuple[dict[str, Any] | None, str, str | None, str]:
    """The candidate's mean against the eval's ``reference`` (vLLM's lm-eval CI: an expected value
    and a relative tolerance, `rule.reference_verdict`): outside it fails the eval."""
    from fasttrack.kinds.evals.rule import reference_bounds, reference_of, reference_verdict

    ref = reference_of(cfg.get("reference"), metric)
    if ref is None or not scores:
        return None, status, code, reason
    hib = bool(cfg.get("higher_is_better", True))
    measured = sum(scores) / len(scores)
    low, high = reference_bounds(ref["value"], ref["rtol"], ref["rule"], hib)
    ok = reference_verdict(measured, ref["value"], ref["rtol"], ref["rule"], hib)
    record = {
        **ref,
        "measured": measured,
        "low": low if low > -float("inf") else None,
        "high": high if high < float("inf") else None,
        "higher_is_better": hib,
        "passed": ok,
    }
    if ok:
        return record, status, code, reason
    accepted = f"at least {low:.4f}" if record["high"] is None else f"in [{low:.4f}, {high:.4f}]"
    if record["low"] is None:
        accepted = f"at most {high:.4f}"
    why = (
        f"the candidate's mean {measured:.4f} misses the reference {ref['value']:g} (rtol {ref['rtol']:g}, "
        f"{ref['rule']}: {accepted}, n={len(scores)})"
    )
    return record, S.FAILED, "regression", why + ("; " + reason if reason else "")
