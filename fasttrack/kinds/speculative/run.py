"""Speculative decoding at one draft length: output unchanged, and drafts really accepted.

For the instance's ``draft_length`` the candidate runs greedy requests (shipped prompts with
repeated text, which n-gram and model drafters predict well) with speculation on and off:
the outputs must be identical token for token. Accuracy alone passes when every draft is
rejected, so the mean acceptance length (tokens emitted per drafting step, from the target's
counters: in-process stats or the server's ``spec_decode_num_*`` metrics) must also reach the
manifest's ``scope.speculative.min_acceptance_length``, and stock, run at the same draft length
on the same prompts, sets a relative floor: the candidate's length must reach
``1 - scope.speculative.acceptance_margin`` of stock's (`stock.py`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fasttrack.errors import TargetError
from fasttrack.evidence import CheckOutcome, Status, utc_now
from fasttrack.kinds.context import target_failure
from fasttrack.kinds.speculative.rule import below_minimum
from fasttrack.kinds.speculative.stock import DEFAULT_MARGIN, judge_against_stock, per_prompt_acceptance
from fasttrack.probes.base import (
    CapabilityMissing,
    Completion,
    CompletionRequest,
    ProbeTarget,
    SpeculativeCounters,
    TargetContractError,
    TargetFailure,
    TargetUnreachable,
    clip,
    first_difference,
)
from fasttrack.probes.content import prompts as shipped_prompts
from fasttrack.probes.sides import probe_side
from fasttrack.process.cpu import is_cpu_point, pin_single_thread
from fasttrack.targets.sides import prestart_sides

if TYPE_CHECKING:
    from fasttrack.kinds.context import RunContext
    from fasttrack.plan.instance import CheckInstance


@dataclass(frozen=True)
class SpeculativeResult:
    status: str  # passed | failed | not_run
    reason_code: str | None
    reason: str | None
    measurements: dict[str, Any]


def reference_outputs(reference: ProbeTarget, prompts: Sequence[str], max_tokens: int = 48) -> list[Completion]:
    """Greedy outputs without speculation (the reference the speculative outputs must equal)."""
    return [reference.complete(CompletionRequest(p, max_tokens=max_tokens, temperature=0.0))[0] for p in prompts]


def check_draft_length(
    reference: ProbeTarget,
    speculative: ProbeTarget,
    draft_length: int,
    min_acceptance_length: float | None,
    prompts: Sequence[str],
    max_tokens: int = 48,
) -> SpeculativeResult:
    """Compare greedy outputs with and without speculation and measure the acceptance length."""
    return check_against(
        reference_outputs(reference, prompts, max_tokens),
        speculative,
        draft_length,
        min_acceptance_length,
        prompts,
        max_tokens,
    )


def greedy_cases(
    wanted: Sequence[Completion],
    speculative: ProbeTarget,
    prompts: Sequence[str],
    max_tokens: int,
    before: SpeculativeCounters | None,
) -> tuple[list[dict[str, Any]], Any, SpeculativeCounters | None]:
    """Each prompt's greedy output against the reference (where it differs, its own acceptance
    length), the first mismatch (index, token, wanted, got) or None, and the counters after."""
    current = before
    cases = []
    mismatch = None
    for index, (prompt, want) in enumerate(zip(prompts, wanted)):
        got = speculative.complete(CompletionRequest(prompt, max_tokens=max_tokens, temperature=0.0))[0]
        now = speculative.speculative_counters()
        own = now.minus(current).acceptance_length if now is not None and current is not None else None
        current = now
        at = (
            first_difference(want.token_ids, got.token_ids)
            if want.token_ids and got.token_ids
            else first_difference(want.text, got.text)
        )
        cases.append({"prompt": prompt, "tokens": len(got.token_ids), "mismatch_at": at, "acceptance_length": own})
        if at is not None and mismatch is None:
            mismatch = (index, at, want, got)
    return cases, mismatch, current


def check_against(
    wanted: Sequence[Completion],
    speculative: ProbeTarget,
    draft_length: int,
    min_acceptance_length: float | None,
    prompts: Sequence[str],
    max_tokens: int = 48,
) -> SpeculativeResult:
    """The speculative side's greedy outputs against the reference outputs, and its acceptance."""
    before = speculative.speculative_counters()
    cases, mismatch, after = greedy_cases(wanted, speculative, prompts, max_tokens, before)
    measurements: dict[str, Any] = {
        "draft_length": draft_length,
        "min_acceptance_length": min_acceptance_length,
        "greedy_equal": mismatch is None,
        "mismatch_at": None if mismatch is None else {"prompt": mismatch[0], "token": mismatch[1]},
        "acceptance_length": None,
        "cases": cases,
    }
    if mismatch is not None:
        index, at, want, got = mismatch
        return SpeculativeResult(
            "failed",
            "mismatch",
            (
                f"at draft length {draft_length} greedy output differs from non-speculative decoding at token {at} of prompt {index}: "
                f"expected {clip(want.text[max(0, at - 8) : at + 12], 40)}, got {clip(got.text[max(0, at - 8) : at + 12], 40)}"
            ),
            measurements,
        )
    if before is None or after is None:
        return SpeculativeResult(
            "not_run",
            "dependency",
            (
                "outputs match, but the target reports no speculative-decoding counters, so the acceptance length "
                "(which catches drafts that are always rejected) cannot be measured"
            ),
            measurements,
        )
    delta = after.minus(before)
    measurements.update(
        {
            "drafts": delta.drafts,
            "draft_tokens": delta.draft_tokens,
            "accepted_tokens": delta.accepted_tokens,
            "acceptance_length": delta.acceptance_length,
        }
    )
    if delta.drafts == 0:
        return SpeculativeResult(
            "not_run",
            "path_not_exercised",
            f"no draft was proposed at draft length {draft_length}: speculation never ran",
            measurements,
        )
    if below_minimum(delta.acceptance_length, min_acceptance_length):
        return SpeculativeResult(
            "failed",
            "regression",
            (
                f"mean acceptance length {delta.acceptance_length:.2f} tokens/step at draft length {draft_length} is below the "
                f"declared minimum {min_acceptance_length} ({delta.accepted_tokens} of {delta.draft_tokens} draft tokens accepted)"
            ),
            measurements,
        )
    return SpeculativeResult("passed", None, None, measurements)


def run(instance: CheckInstance, context: RunContext) -> CheckOutcome:
    started, clock = utc_now(), time.monotonic()
    config = dict(instance.config or {})
    point = instance.scope_point.as_dict() if instance.scope_point is not None else {}
    draft_length = int(point.get("draft_length") or config.get("draft_length") or 0)

    def outcome(status: Status, **fields: Any) -> CheckOutcome:
        return context.outcome(instance, status, started_at=started, duration_s=time.monotonic() - clock, **fields)

    if draft_length < 1:
        return outcome(
            Status.ERRORED, reason_code="error", reason="the speculative check's scope point has no draft_length"
        )
    prompts = tuple(config.get("prompts") or shipped_prompts()["speculative"])
    minimum = config.get("min_acceptance_length")
    max_tokens = int(config.get("max_tokens", 48))
    margin = float(config.get("acceptance_margin", DEFAULT_MARGIN))
    pin_single_thread(context.manifest, point)

    def stock_acceptance() -> tuple[SpeculativeCounters | None, list[float | None]]:
        """Stock's acceptance on the same prompts, at the same draft length."""
        with probe_side(
            context.manifest, "baseline", point, draft_length=draft_length, log_dir=context.artifact_dir
        ) as stock:
            return per_prompt_acceptance(stock, prompts, max_tokens)

    # One side at a time: a large model's reference and speculative servers need not fit together.
    # At a CPU point (host memory) of a run that shares its servers, both drafting servers start
    # now, together, in its pool (one start's wait instead of two), and stock's drafting side
    # runs its prompts beside the candidate's: each server has its own processes and core.
    try:
        side_by_side = is_cpu_point(point) and prestart_sides(
            context.manifest, [("candidate", draft_length), ("baseline", draft_length)], point
        )
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="speculative-stock") as beside:
            stock_run = beside.submit(stock_acceptance) if side_by_side else None
            with probe_side(context.manifest, "candidate", point, log_dir=context.artifact_dir) as reference:
                wanted = reference_outputs(reference, prompts, max_tokens)
            with probe_side(
                context.manifest, "candidate", point, draft_length=draft_length, log_dir=context.artifact_dir
            ) as speculative:
                result = check_against(wanted, speculative, draft_length, minimum, prompts, max_tokens)
            if result.status == "passed":  # a failed candidate is judged without stock, as before
                counters, per_prompt = stock_run.result() if stock_run is not None else stock_acceptance()
                result = judge_against_stock(result, counters, per_prompt, margin)
    except TargetError as exc:
        status, code = target_failure(exc)
        return outcome(status, reason_code=code, reason=str(exc), measurements={"draft_length": draft_length})
    except CapabilityMissing as exc:  # e.g. a server without /tokenize: say what it lacks
        return outcome(
            Status.NOT_RUN, reason_code="dependency", reason=str(exc), measurements={"draft_length": draft_length}
        )
    except TargetContractError as exc:
        return outcome(
            Status.ERRORED,
            reason_code="target",
            reason=f"cannot read the target's answer: {exc}",
            measurements={"draft_length": draft_length},
        )
    except TargetUnreachable as exc:
        return outcome(
            Status.ERRORED,
            reason_code="target",
            reason=f"the target could not be reached at draft length {draft_length}: {exc}",
            measurements={"draft_length": draft_length},
        )
    except TargetFailure as exc:
        return outcome(
            Status.FAILED,
            reason_code="crashed",
            reason=f"a request failed at draft length {draft_length}: {exc}",
            measurements={"draft_length": draft_length},
        )
    status = {"passed": Status.PASSED, "failed": Status.FAILED, "not_run": Status.NOT_RUN}[result.status]
    return outcome(status, reason_code=result.reason_code, reason=result.reason, measurements=result.measurements)
