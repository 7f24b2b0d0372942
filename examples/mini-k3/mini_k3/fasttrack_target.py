"""The in-process target fasttrack drives: a thin adapter over `Engine`.

``create(**options)`` takes the `Engine` keyword arguments (``latency_specialized``,
``tensor_parallel_size``, ``speculative_draft_tokens``, ``device`` ...) and returns a
`MiniK3Target`. At ``tensor_parallel_size > 1`` the engine runs worker processes: `close` stops
them (they also stop when this process exits or dies).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

import torch

from mini_k3.engine import Engine, GenerationRequest, GenerationResult


class MiniK3Target:
    """Generation, scoring and proof-of-path for one engine: a `fasttrack.targets.protocol.Target`
    that reports its path (``PathReporting``) and its layers (``Layered``)."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.tokenizer = engine.tokenizer

    def generate(self, requests: Sequence[GenerationRequest | Mapping[str, Any]]) -> list[GenerationResult]:
        """Run requests (dataclasses or dicts of `GenerationRequest` fields) as one batch."""
        return self.engine.generate([_as_request(r) for r in requests])

    def loglikelihood(self, pairs: Sequence[tuple[str | Sequence[int], str | Sequence[int]]],
                      through_decode: bool = False) -> list[tuple[float, bool]]:
        """lm-eval loglikelihood: (sum logprob of continuation, is it the greedy continuation)."""
        return [self.engine.score(self._ids(context), self._ids(continuation), through_decode=through_decode)
                for context, continuation in pairs]

    def next_token_logprobs(self, tokens: str | Sequence[int], through_decode: bool = True) -> torch.Tensor:
        """``[T, V]`` teacher-forced logprobs; by default through the decode path (the one a
        latency-specialised build changes), one token per step."""
        return self.engine.next_token_logprobs(self._ids(tokens), through_decode=through_decode)

    def next_token_logprobs_batch(self, rows: Sequence[Sequence[int]], through_decode: bool = True) -> torch.Tensor:
        """``[B, T, V]`` teacher-forced logprobs of equal-length rows, scored as one batch; by
        default through the decode path (one decode step of the whole batch per position)."""
        return self.engine.next_token_logprobs_batch([self._ids(r) for r in rows], through_decode=through_decode)

    @property
    def max_context(self) -> int:
        """Longest prompt + completion the engine serves, in tokens."""
        return int(self.engine.max_model_len)

    @property
    def n_layers(self) -> int:
        """Decoder layers: the kernel census attributes kernels to them (``Layered``)."""
        return int(self.engine.config.n_layers)

    @property
    def model(self) -> Any:
        """The torch module whose ``layers`` the kernel census times (None when the engine keeps
        its model in other processes)."""
        return getattr(self.engine, "model", None)

    def apply_chat_template(self, messages: Sequence[Mapping[str, str]]) -> str:
        return self.tokenizer.apply_chat_template(messages, add_generation_prompt=True)

    def path_report(self) -> dict[str, Any]:
        """Which decode path ran, how often and at which batch sizes, plus speculative statistics."""
        stats = self.engine.stats_snapshot()
        return {
            "latency_specialized": self.engine.latency_specialized,
            "tensor_parallel_size": self.engine.tensor_parallel_size,
            "decode_steps_by_path": dict(stats.decode_steps_by_path),
            "decode_steps_by_batch_size": {p: dict(b) for p, b in stats.decode_steps_by_batch_size.items()},
            "decode_steps_by_technique": dict(stats.decode_steps_by_technique),
            "speculative": {**asdict(stats.speculative),
                            "mean_acceptance_length": stats.speculative.mean_acceptance_length},
            "corrupted_requests": stats.corrupted_requests,
        }

    def close(self) -> None:
        """Stop the engine's tensor-parallel ranks (if any) and release the model. Idempotent."""
        if self.engine is not None:
            self.engine.close()
        self.engine = None  # type: ignore[assignment]

    def _ids(self, value: str | Sequence[int]) -> list[int]:
        return self.tokenizer.encode(value) if isinstance(value, str) else [int(t) for t in value]


def _as_request(value: GenerationRequest | Mapping[str, Any]) -> GenerationRequest:
    if isinstance(value, GenerationRequest):
        return value
    fields = dict(value)
    if isinstance(fields.get("stop"), str):
        fields["stop"] = (fields["stop"],)
    elif fields.get("stop") is not None:
        fields["stop"] = tuple(fields["stop"])
    return GenerationRequest(**fields)


# The per-technique switches (mini_k3.latency.SWITCHABLE) as factory keywords.
TECHNIQUE_KEYWORDS = ("small_batch_kernels", "fused_allreduce", "split_projections", "prefetch", "cuda_graphs")


def create(**options: Any) -> MiniK3Target:
    """A target over a new `Engine(**options)` (shipped weights unless ``model_path`` is given).

    Each technique of the latency path is also a keyword of its own (``small_batch_kernels=True``,
    ..., `TECHNIQUE_KEYWORDS`): given any of them, the engine runs the latency path with exactly
    the techniques set True (``latency_techniques``), and the stock path when none is."""
    given = {name: bool(options.pop(name)) for name in TECHNIQUE_KEYWORDS if name in options}
    if given:
        on = [name for name in TECHNIQUE_KEYWORDS if given.get(name)]
        if on or options.get("latency_specialized"):
            options["latency_techniques"] = on
    return MiniK3Target(Engine(**options))
