"""A deterministic fake target: a tiny fixed "language model" over printable ASCII.

It exists so that the probes, the speculative check and the benchmark runner can be tested (and
demonstrated) without the example model. The next-token logits depend only on the previous token
and the position, so teacher-forced distributions are cheap and exact. Faults can be planted, one
per preserved feature, to show that each probe catches the bug it is meant to catch:

- ``temperature_ignored``: sampling always uses temperature 1;
- ``grammar_skipped``: JSON-schema requests are decoded without the grammar mask;
- ``crash_at_max_context``: requests longer than 90 % of the context fail;
- ``far_position_drift``: logits are perturbed at positions past 75 % of the context;
- ``stop_ignored``: stop strings are not applied;
- ``n_ignored``: ``n > 1`` returns copies of one sample;
- ``logprobs_shifted``: returned logprobs are off by 0.5 nats;
- ``wrong_draft_accept_7``: at draft length 7 a drafted token the model rejects is accepted anyway;
- ``rejects_all_drafts``: every drafted token is rejected (output stays right);
- ``draft_off_by_one``: every second drafting step proposes the continuation one token late
  (output stays right; acceptance drops well below stock's but stays above a floor of 1.2);
- ``slow_at_batch_64``: decode steps at batch >= 64 are slower than the baseline's;
- ``bad_token_id``: the logits after token ``BAD_TOKEN_ID`` ('~') are not finite.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from fasttrack.probes.base import (
    Completion,
    CompletionRequest,
    SpeculativeCounters,
    TargetFailure,
    TokenLogprob,
)

ALPHABET = "".join(chr(c) for c in range(32, 127)) + "\n"
EOS_ID = len(ALPHABET)
VOCAB_SIZE = len(ALPHABET) + 1
FAULTS = frozenset(
    {
        "temperature_ignored",
        "grammar_skipped",
        "crash_at_max_context",
        "far_position_drift",
        "stop_ignored",
        "n_ignored",
        "logprobs_shifted",
        "wrong_draft_accept_7",
        "rejects_all_drafts",
        "draft_off_by_one",
        "slow_at_batch_64",
        "bad_token_id",
    }
)
BAD_TOKEN_ID = ALPHABET.index("~")
_SEED_STRIDE = 7919


def _model_tables(seed: int = 1234) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    transitions = rng.normal(size=(VOCAB_SIZE, VOCAB_SIZE)) * 2.0
    # JSON-friendly biases so that constrained greedy output closes strings and objects.
    for ch, bonus in (('"', 2.5), ("}", 1.5), (",", 1.0), ("]", 1.0), (" ", 1.0), ("e", 1.0), ("a", 1.0)):
        transitions[:, ALPHABET.index(ch)] += bonus
    transitions[:, EOS_ID] -= 3.0
    position_mix = rng.normal(size=(VOCAB_SIZE,)) * 0.5
    return transitions, position_mix


_TRANSITIONS, _POSITION_MIX = _model_tables()


def log_softmax(x: np.ndarray) -> np.ndarray:
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def sampling_distribution(logits: np.ndarray, temperature: float, top_p: float) -> np.ndarray:
    """softmax(logits / T) cut to the smallest top-p nucleus (the reference the probes test against)."""
    probs = np.exp(log_softmax(np.asarray(logits, dtype=np.float64) / temperature))
    if top_p < 1.0:
        order = np.argsort(-probs, kind="stable")
        before = np.cumsum(probs[order]) - probs[order]
        keep = np.zeros_like(probs, dtype=bool)
        keep[order[before < top_p]] = True
        keep[order[0]] = True
        probs = np.where(keep, probs, 0.0)
        probs /= probs.sum()
    return probs


@dataclass
class FakeTarget:
    """One side of a comparison. ``speed`` scales the simulated decode step time."""

    name: str = "baseline"
    faults: frozenset[str] = frozenset()
    draft_length: int = 0
    max_context: int = 256
    noise: float = 0.0  # deterministic logit perturbation (a candidate's numerical difference)
    noise_seed: int = 0  # which perturbation (another seed: another clean candidate of the same size)
    step_delay_s: float = 0.0  # simulated time of one decode step at batch 1
    speed: float = 1.0  # <1: faster than the baseline
    _counters: list[int] = field(default_factory=lambda: [0, 0, 0])

    def __post_init__(self) -> None:
        unknown = set(self.faults) - FAULTS
        if unknown:
            raise ValueError(f"unknown fake faults {sorted(unknown)}; known: {sorted(FAULTS)}")
        self.faults = frozenset(self.faults)

    # ---- the model -------------------------------------------------------------------------
    def logits(self, token: int, position: int) -> np.ndarray:
        row = _TRANSITIONS[token] + np.sin(position / 7.0) * _POSITION_MIX
        if self.noise:
            key = token * 100_003 + position
            rng = np.random.default_rng(key if not self.noise_seed else [key, self.noise_seed])
            row = row + self.noise * rng.normal(size=VOCAB_SIZE)
        if "far_position_drift" in self.faults and position > 0.75 * self.max_context:
            rng = np.random.default_rng(position)
            row = row + 3.0 * rng.normal(size=VOCAB_SIZE)
        if "bad_token_id" in self.faults and token == BAD_TOKEN_ID:
            row = np.full(VOCAB_SIZE, np.nan)
        return row

    def tokenize(self, text: str) -> list[int]:
        return [ALPHABET.index(c) if c in ALPHABET else ALPHABET.index("?") for c in text]

    def detokenize(self, ids: Iterable[int]) -> str:
        return "".join(ALPHABET[i] for i in ids if i < len(ALPHABET))

    def next_token_logprobs(self, token_ids: Sequence[int]) -> np.ndarray:
        if len(token_ids) > self.max_context:
            raise TargetFailure(f"{len(token_ids)} tokens exceed the context of {self.max_context}")
        return log_softmax(np.stack([self.logits(int(t), p) for p, t in enumerate(token_ids)]))

    def next_token_logprobs_batch(
        self, rows: Sequence[Sequence[int]], through_decode: bool | None = None
    ) -> np.ndarray:
        """``[B, T, V]``: the fake has one path, so prefill and decode score alike."""
        return np.stack([self.next_token_logprobs(r) for r in rows])

    def speculative_counters(self) -> SpeculativeCounters | None:
        return SpeculativeCounters(*self._counters) if self.draft_length else None

    # ---- generation ------------------------------------------------------------------------
    def complete(self, request: CompletionRequest) -> list[Completion]:
        return self.complete_batch([request])[0]

    def complete_batch(self, requests: Sequence[CompletionRequest]) -> list[list[Completion]]:
        results = [self._complete_one(r) for r in requests]
        batch = sum(r.n for r in requests)
        steps = max((len(c.token_ids) for outs in results for c in outs), default=0)
        if self.step_delay_s:
            time.sleep(self._step_time(batch) * max(steps - 1, 0) + self.step_delay_s * 2)  # + prefill
        return results

    def _step_time(self, batch: int) -> float:
        speed = self.speed
        if "slow_at_batch_64" in self.faults and batch >= 64:
            speed = 1.5
        return self.step_delay_s * (1.0 + batch / 32.0) * speed

    def _complete_one(self, request: CompletionRequest) -> list[Completion]:
        prompt = self.tokenize(request.prompt) if isinstance(request.prompt, str) else [int(t) for t in request.prompt]
        total = len(prompt) + request.max_tokens
        if total > self.max_context:
            raise TargetFailure(f"request of {total} tokens exceeds the context of {self.max_context}")
        if "crash_at_max_context" in self.faults and total > 0.9 * self.max_context:
            raise TargetFailure("internal error: attention workspace overflow")
        outputs = []
        cdfs: dict[tuple[int, int], np.ndarray] = {}  # the n samples share their distributions
        for index in range(request.n):
            seed = request.seed if "n_ignored" in self.faults else (request.seed or 0) + index * _SEED_STRIDE
            outputs.append(self._sample(prompt, request, np.random.default_rng(seed), cdfs))
        return outputs

    def _sample(
        self,
        prompt: list[int],
        request: CompletionRequest,
        rng: np.random.Generator,
        cdfs: dict[tuple[int, int], np.ndarray] | None = None,
    ) -> Completion:
        greedy = request.temperature <= 1e-5
        temperature = 1.0 if "temperature_ignored" in self.faults and not greedy else request.temperature
        matcher = None
        if request.json_schema is not None and "grammar_skipped" not in self.faults:
            matcher = _grammar_matcher(request.json_schema)
        ids = list(prompt)
        out: list[int] = []
        logprobs: list[TokenLogprob] = []
        finish = "length"
        while len(out) < request.max_tokens:
            if greedy and matcher is None and self.draft_length:
                chosen = self._speculative_step(ids, request.max_tokens - len(out))
            else:
                logits = self.logits(ids[-1], len(ids) - 1)
                if matcher is not None:
                    logits = matcher.mask(logits)
                if greedy:
                    token = int(np.argmax(logits))
                else:
                    key = (ids[-1], len(ids) - 1)
                    cached = cdfs.get(key) if cdfs is not None and matcher is None else None
                    if cached is None:
                        cached = np.cumsum(sampling_distribution(logits, temperature, request.top_p))
                        if cdfs is not None and matcher is None:
                            cdfs[key] = cached
                    token = min(int(np.searchsorted(cached, rng.random(), side="right")), VOCAB_SIZE - 1)
                    while token > 0 and cached[token] <= (cached[token - 1] if token else 0.0):
                        token -= 1  # a zero-probability token (a flat step of the CDF): step back
                if matcher is not None:
                    matcher.accept(token)
                chosen = [token]
            stop_now = False
            for token in chosen:
                if request.logprobs is not None:
                    row = log_softmax(self.logits(ids[-1], len(ids) - 1))
                    shift = 0.5 if "logprobs_shifted" in self.faults else 0.0
                    top = np.argsort(-row, kind="stable")[: request.logprobs]
                    logprobs.append(
                        TokenLogprob(token, float(row[token]) + shift, {int(t): float(row[t]) + shift for t in top})
                    )
                ids.append(token)
                out.append(token)
                if (token == EOS_ID and not request.ignore_eos) or (matcher is not None and matcher.finished):
                    finish, stop_now = "stop", True
                    break
                if request.stop and "stop_ignored" not in self.faults:
                    text = self.detokenize(out)
                    hits = [text.find(s) for s in request.stop if s in text]
                    if hits:
                        return Completion(
                            text[: min(hits)],
                            tuple(out),
                            "stop",
                            tuple(logprobs) if request.logprobs is not None else None,
                        )
                if len(out) >= request.max_tokens:
                    break
            if stop_now:
                break
        return Completion(
            self.detokenize(out), tuple(out), finish, tuple(logprobs) if request.logprobs is not None else None
        )

    def _speculative_step(self, ids: list[int], budget: int) -> list[int]:
        """Prompt-lookup draft of the last token's previous continuation, verified greedily."""
        last = ids[-1]
        draft: list[int] = []
        skip = 2 if "draft_off_by_one" in self.faults and self._counters[0] % 2 else 1
        for start in range(len(ids) - 2, -1, -1):
            if ids[start] == last:
                draft = ids[start + skip : start + skip + min(self.draft_length, budget - 1)]
                break
        emitted: list[int] = []
        context = list(ids)
        accepted = 0
        for token in draft:
            best = int(np.argmax(self.logits(context[-1], len(context) - 1)))
            wrong_ok = "wrong_draft_accept_7" in self.faults and self.draft_length == 7
            if "rejects_all_drafts" in self.faults or (best != token and not wrong_ok):
                emitted.append(best)
                break
            emitted.append(token)
            context.append(token)
            accepted += 1
        else:
            emitted.append(int(np.argmax(self.logits(context[-1], len(context) - 1))))
        if draft:
            self._counters[0] += 1
            self._counters[1] += len(draft)
            self._counters[2] += accepted
        return emitted[:budget]


class _Matcher:
    """xgrammar's matcher over the fake's one-character vocabulary."""

    def __init__(self, compiled) -> None:
        import torch
        import xgrammar

        self._xgr = xgrammar
        self._torch = torch
        self._matcher = xgrammar.GrammarMatcher(compiled)
        self._bitmask = xgrammar.allocate_token_bitmask(1, VOCAB_SIZE)

    def mask(self, logits: np.ndarray) -> np.ndarray:
        self._matcher.fill_next_token_bitmask(self._bitmask)
        row = self._torch.tensor(logits, dtype=self._torch.float32).unsqueeze(0)
        self._xgr.apply_token_bitmask_inplace(row, self._bitmask, vocab_size=VOCAB_SIZE)
        return row.squeeze(0).double().numpy()

    def accept(self, token: int) -> None:
        if not self._matcher.accept_token(int(token)):
            raise TargetFailure(f"grammar rejected token {token}")

    @property
    def finished(self) -> bool:
        return bool(self._matcher.is_terminated())


_COMPILER = None


def _grammar_matcher(schema) -> _Matcher:
    import xgrammar

    global _COMPILER
    if _COMPILER is None:
        encoded = [c.encode() for c in ALPHABET] + [b""]
        info = xgrammar.TokenizerInfo(encoded, xgrammar.VocabType.RAW, vocab_size=VOCAB_SIZE, stop_token_ids=[EOS_ID])
        _COMPILER = xgrammar.GrammarCompiler(info, max_threads=1)
    return _Matcher(_COMPILER.compile_json_schema(json.dumps(dict(schema)), any_whitespace=False))


def create(
    latency_specialized: bool = False,
    faults: Iterable[str] = (),
    speculative_draft_tokens: int = 0,
    max_context: int = 256,
    noise: float = 1e-4,
    step_delay_s: float = 0.0,
    candidate_speed: float = 0.7,
    noise_seed: int = 0,
    **_ignored: object,
) -> FakeTarget:
    """An in-process factory in the shape manifests name (``fasttrack.probes.fake:create``).

    The planted ``faults`` and the numerical ``noise`` apply to the candidate (switch on) only,
    as does ``candidate_speed``; other keyword arguments (device, dtype ...) are accepted and ignored.
    """
    candidate = bool(latency_specialized)
    return FakeTarget(
        name="candidate" if candidate else "baseline",
        faults=frozenset(faults) if candidate else frozenset(),
        draft_length=int(speculative_draft_tokens),
        max_context=max_context,
        noise=noise if candidate else 0.0,
        noise_seed=int(noise_seed),
        step_delay_s=step_delay_s,
        speed=candidate_speed if candidate else 1.0,
    )
