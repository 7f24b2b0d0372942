"""What a preserved-feature probe needs from the system under test, and what a probe returns.

A probe talks to a `ProbeTarget`: one side (baseline or candidate) of the comparison. Adapters in
``fasttrack.probes.adapters`` wrap the in-process example target and an OpenAI-compatible HTTP
server; ``fasttrack.probes.fake`` is a deterministic fake used by the tests.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar, cast, runtime_checkable

import numpy as np

T = TypeVar("T")
U = TypeVar("U")


class CapabilityMissing(RuntimeError):
    """The target cannot do what a probe needs (e.g. full next-token distributions over HTTP)."""


class TargetFailure(RuntimeError):
    """The target failed a request it should have served (a crash, an HTTP 5xx, non-finite logits)."""


class TargetUnreachable(RuntimeError):
    """The connection to a target server failed — refused, dropped, an answer cut short, timed
    out — and kept failing through the retries (fasttrack.targets.http). Not a TargetFailure: no
    probe judges the optimisation by it; the check errors (``target``) with the retries recorded."""


class RequestRefused(TargetFailure):
    """The server refused the request as invalid (HTTP 4xx): what it does not serve at all, such
    as vLLM's "n must be 1 when using greedy sampling"."""


class TargetContractError(RuntimeError):
    """The target answered in a shape fasttrack cannot read (e.g. results without ``.outputs``).
    Not a failure of the optimisation, and not a probe verdict: the check errors (``target``)
    with the precise reason, so that probes never judge a misread answer."""


@dataclass(frozen=True)
class CompletionRequest:
    """One prompt and how to continue it (the subset of the OpenAI completion fields probes use)."""

    prompt: str | tuple[int, ...]
    max_tokens: int = 16
    temperature: float = 0.0
    top_p: float = 1.0
    seed: int | None = None
    n: int = 1
    stop: tuple[str, ...] = ()
    logprobs: int | None = None  # top-k logprobs per generated token
    json_schema: Mapping[str, Any] | None = None
    ignore_eos: bool = False


@dataclass(frozen=True)
class TokenLogprob:
    token_id: int
    logprob: float
    top: Mapping[int, float] = field(default_factory=dict)  # token id -> logprob, most likely first


@dataclass(frozen=True)
class Completion:
    """One of the ``n`` continuations of a request."""

    text: str
    token_ids: tuple[int, ...]
    finish_reason: str  # stop | length | error
    logprobs: tuple[TokenLogprob, ...] | None = None


@dataclass(frozen=True)
class SpeculativeCounters:
    """Cumulative speculative-decoding counters (vLLM's spec_decode_num_* in the same sense)."""

    drafts: int  # verification steps that proposed at least one draft token
    draft_tokens: int
    accepted_tokens: int

    def minus(self, earlier: SpeculativeCounters) -> SpeculativeCounters:
        return SpeculativeCounters(
            self.drafts - earlier.drafts,
            self.draft_tokens - earlier.draft_tokens,
            self.accepted_tokens - earlier.accepted_tokens,
        )

    @property
    def acceptance_length(self) -> float | None:
        """Tokens emitted per drafting step (accepted drafts + the verified token); None without drafts."""
        return 1.0 + self.accepted_tokens / self.drafts if self.drafts else None


@runtime_checkable
class ProbeTarget(Protocol):
    """One side of the comparison, as the probes see it."""

    name: str  # "baseline" or "candidate" (used in messages)

    @property
    def max_context(self) -> int:
        """Longest prompt + completion the target serves, in tokens."""

    def tokenize(self, text: str) -> list[int]:
        """Token ids of ``text`` (no special tokens added)."""

    def complete(self, request: CompletionRequest) -> list[Completion]:
        """The ``request.n`` continuations of one request; raises TargetFailure when it fails."""

    def complete_batch(self, requests: Sequence[CompletionRequest]) -> list[list[Completion]]:
        """Several requests served together (one decode batch where the target supports it)."""

    def next_token_logprobs(self, token_ids: Sequence[int]) -> np.ndarray:
        """``[T, V]`` float log-probabilities: row t is the distribution after ``token_ids[:t+1]``.

        Raises CapabilityMissing where the target cannot return full distributions."""

    def speculative_counters(self) -> SpeculativeCounters | None:
        """Cumulative speculative counters, or None when the target does not report them."""


def independent_requests(target: ProbeTarget) -> bool:
    """Whether the target serves concurrent requests as it serves lone ones (a server: its own
    scheduler batches them, as it does for any client); an in-process target batches them into
    one decode step, which is a different thing to test (the mixed_batches probe's)."""
    return bool(getattr(target, "independent_requests", False))


def serve_each(target: ProbeTarget, requests: Sequence[CompletionRequest]) -> list[list[Completion]]:
    """Every request's answer: all at once where the target serves them independently, else one
    after the other."""
    if independent_requests(target):
        return target.complete_batch(requests)
    return [target.complete(request) for request in requests]


def serve_both(
    baseline: ProbeTarget, candidate: ProbeTarget, requests: Sequence[CompletionRequest]
) -> tuple[list[list[Completion]], list[list[Completion]]]:
    """`serve_each` on both sides, the two sides at the same time where both are servers."""
    base, cand = side_by_side(
        baseline, candidate, lambda: serve_each(baseline, requests), lambda: serve_each(candidate, requests)
    )
    return base.get(), cand.get()


class Answer(Generic[T]):
    """What one side's call returned, or raised (re-raised by ``get``, so the caller can say which
    side failed)."""

    def __init__(self, value: T | None = None, error: BaseException | None = None):
        self._value, self._error = value, error

    def get(self) -> T:
        if self._error is not None:
            raise self._error
        return cast(T, self._value)


def side_by_side(
    baseline: ProbeTarget, candidate: ProbeTarget, on_baseline: Callable[[], T], on_candidate: Callable[[], U]
) -> tuple[Answer[T], Answer[U]]:
    """Both sides' calls, at the same time where both sides are servers (each its own machine's
    work: one would otherwise wait idle while the other answers), else one after the other."""
    if independent_requests(baseline) and independent_requests(candidate):
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=2) as pool:
            base, cand = pool.submit(on_baseline), pool.submit(on_candidate)
            return _answer(base.result, base.exception), _answer(cand.result, cand.exception)
    return _call(on_baseline), _call(on_candidate)


def _answer(result: Callable[[], T], exception: Callable[[], BaseException | None]) -> Answer[T]:
    error = exception()
    return Answer(error=error) if error is not None else Answer(result())


def _call(fn: Callable[[], T]) -> Answer[T]:
    try:
        return Answer(fn())
    except Exception as exc:  # re-raised by Answer.get at the caller, which names the side
        return Answer(error=exc)


# ---------------------------------------------------------------------------------------------
# Probe results


PASSED = "passed"
FAILED = "failed"
NOT_RUN = "not_run"
ERRORED = "errored"


@dataclass(frozen=True)
class ProbeResult:
    """What one probe found; the features runner turns it into a CheckOutcome."""

    probe: str
    status: str  # passed | failed | not_run | errored
    reason: str | None = None  # one sentence when not passed
    reason_code: str | None = None  # one of fasttrack.evidence.REASON_CODES when not passed
    statistic: float | None = None
    p_value: float | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.status == PASSED


def passed(
    probe: str, details: Mapping[str, Any], statistic: float | None = None, p_value: float | None = None
) -> ProbeResult:
    return ProbeResult(probe, PASSED, None, None, statistic, p_value, dict(details))


def failed(
    probe: str,
    reason: str,
    details: Mapping[str, Any],
    code: str = "mismatch",
    statistic: float | None = None,
    p_value: float | None = None,
) -> ProbeResult:
    return ProbeResult(probe, FAILED, reason, code, statistic, p_value, dict(details))


def not_run(probe: str, reason: str, code: str, details: Mapping[str, Any] | None = None) -> ProbeResult:
    return ProbeResult(probe, NOT_RUN, reason, code, None, None, dict(details or {}))


def errored(probe: str, reason: str, code: str = "error", details: Mapping[str, Any] | None = None) -> ProbeResult:
    return ProbeResult(probe, ERRORED, reason, code, None, None, dict(details or {}))


def first_difference(a: Sequence[Any], b: Sequence[Any]) -> int | None:
    """Index of the first position where two sequences differ (a length difference counts)."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def clip(text: str, width: int = 80) -> str:
    """``text`` shortened for a reason line, with visible escapes."""
    shown = repr(text)
    return shown if len(shown) <= width else shown[: width - 3] + "..."
