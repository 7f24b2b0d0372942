"""The in-process inference engine: batched generation and teacher-forced scoring.

One ``generate`` call runs all its sequences (requests × n) as one batch: a padded prefill, then
batched decode steps over the KV cache, each row at its own position. Every sequence samples with
its own seeded generator, so its tokens do not depend on what else is in the batch. With
``speculative_draft_tokens > 0`` each decode step feeds the last token plus a prompt-lookup draft
and verifies the draft in the same forward pass (see speculative.py).

``tensor_parallel_size > 1`` runs the model's forward passes on that many ranks (worker
processes, see model_runner.py); sampling, drafts, grammars and statistics stay here, so a
request is treated the same at every tensor-parallel size. Call `Engine.close` (or use the engine
as a context manager) to stop the ranks; they also stop when this process exits or dies.
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Self

import torch

from mini_k3.model_runner import (
    LATENCY_PATH,
    STOCK_PATH,
    LocalRunner,
    TensorParallelRunner,
    check_shardable,
)
from mini_k3.sampling import (
    SamplingParams,
    draw_from,
    log_softmax_rows,
    make_generator,
    sampling_probs,
    top_logprobs,
)
from mini_k3.speculative import (
    MAX_DRAFT_TOKENS,
    SpeculativeStats,
    accept_draft,
    propose_draft,
)

if TYPE_CHECKING:  # structured output needs xgrammar, loaded only when a request asks for it
    from mini_k3.grammar import GrammarCompiler, TokenConstraint

DTYPES = {"fp32": torch.float32, "float32": torch.float32, "bf16": torch.bfloat16,
          "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16}
_SEED_STRIDE = 0x9E3779B97F4A7C15  # spreads the seeds of the n samples of one request


class RequestError(ValueError):
    """A request the engine cannot serve as asked (the server answers it with HTTP 400)."""


@dataclass(frozen=True)
class GenerationRequest:
    """One prompt and how to continue it."""

    prompt: str | Sequence[int]
    max_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None  # None: drawn from the engine's own seeded generator
    stop: tuple[str, ...] = ()
    n: int = 1
    logprobs: int | None = None  # top-k logprobs per generated token (0: only the chosen token)
    prompt_logprobs: int | None = None  # teacher-forced logprobs of the prompt tokens (echo)
    json_schema: dict[str, Any] | str | None = None
    json_object: bool = False  # any JSON value (response_format json_object)
    ignore_eos: bool = False


@dataclass(frozen=True)
class TokenLogprob:
    """The model's logprob of one token and the most likely alternatives at that position."""

    token_id: int
    logprob: float
    top: tuple[tuple[int, float], ...] = ()


@dataclass(frozen=True)
class CompletionOutput:
    """One of the ``n`` continuations of a request."""

    index: int
    text: str
    token_ids: tuple[int, ...]
    logprobs: tuple[TokenLogprob, ...] | None
    finish_reason: str  # "stop", "length" or "error" (non-finite logits)
    non_finite_logits: bool = False


@dataclass(frozen=True)
class GenerationResult:
    """Everything a request produced."""

    prompt_token_ids: tuple[int, ...]
    outputs: tuple[CompletionOutput, ...]
    prompt_logprobs: tuple[TokenLogprob | None, ...] | None  # first entry None: nothing before it

    @property
    def prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def completion_tokens(self) -> int:
        return sum(len(o.token_ids) for o in self.outputs)

    @property
    def non_finite_logits(self) -> bool:
        return any(o.non_finite_logits for o in self.outputs)


@dataclass
class EngineStats:
    """Running totals since the engine started (what /metrics exposes)."""

    prompt_tokens: int = 0
    generation_tokens: int = 0
    sequences: int = 0
    corrupted_requests: int = 0
    prefill_seconds: float = 0.0  # wall time inside prefill forward passes
    decode_seconds: float = 0.0  # wall time inside decode (and verification) forward passes
    decode_steps_by_path: dict[str, int] = field(default_factory=lambda: {STOCK_PATH: 0, LATENCY_PATH: 0})
    # decode steps per path and batch size: which path ran at which scope point
    decode_steps_by_batch_size: dict[str, dict[int, int]] = field(default_factory=dict)
    # decode steps per latency technique that ran in them (none on the stock path)
    decode_steps_by_technique: dict[str, int] = field(default_factory=dict)
    speculative: SpeculativeStats = field(default_factory=SpeculativeStats)
    # Guards the dicts against a scrape copying them while a step adds a key; plain counters
    # are single assignments and need no lock.
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def record_decode_step(self, path: str, batch_size: int, techniques: Sequence[str] = ()) -> None:
        with self._lock:
            self.decode_steps_by_path[path] = self.decode_steps_by_path.get(path, 0) + 1
            by_batch = self.decode_steps_by_batch_size.setdefault(path, {})
            by_batch[batch_size] = by_batch.get(batch_size, 0) + 1
            for name in techniques:
                self.decode_steps_by_technique[name] = self.decode_steps_by_technique.get(name, 0) + 1

    def snapshot(self) -> EngineStats:
        """A copy that later updates do not change (safe to take while a batch runs)."""
        with self._lock:
            return self._copy()

    def _copy(self) -> EngineStats:
        return EngineStats(
            prompt_tokens=self.prompt_tokens,
            generation_tokens=self.generation_tokens,
            sequences=self.sequences,
            corrupted_requests=self.corrupted_requests,
            prefill_seconds=self.prefill_seconds,
            decode_seconds=self.decode_seconds,
            decode_steps_by_path=dict(self.decode_steps_by_path),
            decode_steps_by_batch_size={p: dict(b) for p, b in self.decode_steps_by_batch_size.items()},
            decode_steps_by_technique=dict(self.decode_steps_by_technique),
            speculative=SpeculativeStats(**vars(self.speculative)),
        )


@dataclass
class _Sequence:
    """Mutable decoding state of one sequence inside a ``generate`` call."""

    request_index: int
    sample_index: int
    prompt_ids: list[int]
    request: GenerationRequest
    params: SamplingParams
    generator: torch.Generator | None
    constraint: TokenConstraint | None
    tokens: list[int] = field(default_factory=list)
    logprobs: list[TokenLogprob] = field(default_factory=list)
    pending: int | None = None  # sampled but not yet fed to the model
    finish_reason: str | None = None
    text: str | None = None  # set when a stop string cut the text
    non_finite: bool = False

    @property
    def position(self) -> int:
        """Position of the pending token (tokens before it are in the cache)."""
        return len(self.prompt_ids) + len(self.tokens) - 1

    @property
    def done(self) -> bool:
        return self.finish_reason is not None


class Engine:
    """Loads mini-K3 and serves generation and scoring requests (one call at a time)."""

    def __init__(
        self,
        model_path: str | None = None,
        device: str = "cpu",
        dtype: str = "fp32",
        latency_specialized: bool = False,
        tensor_parallel_size: int = 1,
        max_model_len: int = 4096,
        speculative_draft_tokens: int = 0,
        seed: int = 0,
        model: Any = None,
        tokenizer: Any = None,
        latency_techniques: Sequence[str] | None = None,
    ):
        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {sorted(DTYPES)}, got {dtype!r}")
        if not 0 <= speculative_draft_tokens <= MAX_DRAFT_TOKENS:
            raise ValueError(f"speculative_draft_tokens must be 0..{MAX_DRAFT_TOKENS}")
        if tensor_parallel_size < 1:
            raise ValueError("tensor_parallel_size must be at least 1")
        self.device = torch.device(device)
        self.dtype = DTYPES[dtype]
        # latency_techniques: run the latency path with exactly these techniques (latency.SWITCHABLE;
        # the per-technique opt-ins); None: latency_specialized alone decides, every technique on.
        self.latency_options: Any = None
        if latency_techniques is not None:
            from mini_k3.latency import LatencyOptions

            self.latency_options = LatencyOptions.only(*latency_techniques)
            latency_specialized = latency_specialized or bool(latency_techniques)
        self.latency_specialized = latency_specialized
        self.tensor_parallel_size = tensor_parallel_size
        self.speculative_draft_tokens = speculative_draft_tokens
        # The drafter, per engine (mini_k3.faults plants a degraded one on the candidate's alone).
        self.propose_draft = propose_draft
        # At TP > 1 the ranks hold the weights on their own devices; this copy stays on the CPU.
        home = self.device if tensor_parallel_size == 1 else torch.device("cpu")
        if model is None:
            from mini_k3.model import load_pretrained

            model, _config, tokenizer = load_pretrained(model_path, device=home, dtype=self.dtype)
        self.model = model.to(device=home, dtype=self.dtype).eval()
        self.tokenizer = tokenizer
        self.config = model.config
        self.vocab_size = int(self.config.vocab_size)
        self.max_model_len = min(int(max_model_len), int(self.config.max_position))
        self._check_path_options()
        self._seed_source = make_generator(seed)
        self._lock = threading.Lock()
        self.stats = EngineStats()
        self._grammars: GrammarCompiler | None = None
        if tensor_parallel_size == 1:
            self.runner: LocalRunner | TensorParallelRunner = LocalRunner(
                self.model, self.device, self.dtype, latency_specialized, self.latency_options)
        else:
            self.runner = TensorParallelRunner(self.model, tensor_parallel_size, self.device, self.dtype,
                                               latency_specialized, self.latency_options)

    # ---- setup -------------------------------------------------------------------------------
    def _check_path_options(self) -> None:
        """Fail rather than run a path or a parallelism that was not asked for."""
        accepted = inspect.signature(self.model.forward).parameters
        if self.latency_specialized and "latency_specialized" not in accepted:
            raise ValueError("this model has no latency_specialized decode path")
        if self.tensor_parallel_size > 1:
            from mini_k3.model import MiniK3

            if not isinstance(self.model, MiniK3):
                raise ValueError("tensor parallelism needs a mini_k3.model.MiniK3 (its weights are sharded by layer)")
            check_shardable(self.config, self.tensor_parallel_size)

    def close(self) -> None:
        """Stop the tensor-parallel ranks, if any (idempotent). A TP > 1 engine refuses to generate
        afterwards rather than start new ranks; at TP 1 there is nothing to stop."""
        with self._lock:
            self.runner.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def decode_path(self) -> str:
        return LATENCY_PATH if self.latency_specialized else STOCK_PATH

    @property
    def grammars(self) -> GrammarCompiler:
        if self._grammars is None:
            from mini_k3.grammar import GrammarCompiler, byte_vocabulary

            self._grammars = GrammarCompiler(byte_vocabulary(self.vocab_size, self.tokenizer.stop_ids))
        return self._grammars

    def stats_snapshot(self) -> EngineStats:
        """Current totals; does not wait for a running batch."""
        return self.stats.snapshot()

    # ---- model calls -------------------------------------------------------------------------
    def _forward(self, ids: torch.Tensor, positions: torch.Tensor, decode: bool,
                 cache_rows: torch.Tensor | None = None,
                 select: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """Float32 logits of one pass over the current cache; ``select`` = (rows, columns) keeps
        only those positions (``[K, V]``), so a long prefill returns just what is needed."""
        started = time.perf_counter()
        logits, path, techniques = self.runner.forward(ids, positions, decode, cache_rows, select)
        elapsed = time.perf_counter() - started
        if decode:
            # the path the runner reports it ran (at TP > 1: what rank 0's decoder is), not the flag
            self.stats.record_decode_step(path, int(ids.shape[0]), techniques)
            self.stats.decode_seconds += elapsed
        else:
            self.stats.prefill_seconds += elapsed
        return logits

    def _new_cache(self, batch_size: int, max_len: int) -> None:
        self.runner.new_cache(batch_size, max_len)

    # ---- validation --------------------------------------------------------------------------
    def encode_prompt(self, prompt: str | Sequence[int]) -> list[int]:
        if isinstance(prompt, str):
            ids = self.tokenizer.encode(prompt)
        else:
            ids = [int(t) for t in prompt]
            if any(not 0 <= t < self.vocab_size for t in ids):
                raise RequestError(f"prompt token ids must be in [0, {self.vocab_size})")
        if not ids:
            raise RequestError("prompt is empty")
        return ids

    def _validate(self, request: GenerationRequest, prompt_ids: list[int]) -> None:
        if request.max_tokens < 0:
            raise RequestError("max_tokens must be non-negative")
        if request.n < 1:
            raise RequestError("n must be at least 1")
        if request.temperature < 0:
            raise RequestError("temperature must be non-negative")
        if not 0 < request.top_p <= 1:
            raise RequestError("top_p must be in (0, 1]")
        if request.logprobs is not None and request.logprobs < 0:
            raise RequestError("logprobs must be non-negative")
        total = len(prompt_ids) + request.max_tokens
        if total > self.max_model_len:
            raise RequestError(
                f"this model's maximum context length is {self.max_model_len} tokens; the request "
                f"asks for {total} ({len(prompt_ids)} prompt + {request.max_tokens} completion)"
            )

    def check_request(self, request: GenerationRequest) -> None:
        """Raise RequestError / InvalidSchemaError if ``request`` cannot be served; do no model work."""
        self._validate(request, self.encode_prompt(request.prompt))
        self._constraint(request)

    def _constraint(self, request: GenerationRequest) -> TokenConstraint | None:
        if request.json_schema is None and not request.json_object:
            return None
        from mini_k3.grammar import TokenConstraint

        if request.json_schema is not None:
            return TokenConstraint(self.grammars.json_schema(request.json_schema), self.vocab_size)
        if request.json_object:
            return TokenConstraint(self.grammars.any_json(), self.vocab_size)
        return None

    # ---- generation --------------------------------------------------------------------------
    def generate(self, requests: Sequence[GenerationRequest]) -> list[GenerationResult]:
        """Run all ``requests`` as one batch. Raises RequestError before any work if one is bad."""
        prompts = [self.encode_prompt(r.prompt) for r in requests]
        for request, ids in zip(requests, prompts):
            self._validate(request, ids)
        with self._lock:
            sequences = self._make_sequences(requests, prompts)
            prompt_logprobs = self._run(sequences, requests, prompts)
            return self._collect(requests, prompts, sequences, prompt_logprobs)

    def _make_sequences(self, requests: Sequence[GenerationRequest], prompts: list[list[int]]) -> list[_Sequence]:
        sequences = []
        for r_index, (request, ids) in enumerate(zip(requests, prompts)):
            base_seed = request.seed
            if base_seed is None:
                base_seed = int(torch.randint(0, 2**62, (), generator=self._seed_source))
            params = SamplingParams(temperature=request.temperature, top_p=request.top_p)
            for s_index in range(request.n):
                seed = (int(base_seed) + s_index * _SEED_STRIDE) % 2**64
                sequences.append(_Sequence(
                    request_index=r_index, sample_index=s_index, prompt_ids=list(ids), request=request,
                    params=params, generator=None if params.greedy else make_generator(seed),
                    constraint=self._constraint(request),
                ))
        return sequences

    def _run(self, sequences: list[_Sequence], requests: Sequence[GenerationRequest],
             prompts: list[list[int]]) -> list[list[TokenLogprob | None] | None]:
        longest = max(len(s.prompt_ids) + s.request.max_tokens for s in sequences)
        # Room for a verification step's draft and padding past the longest sequence, within the
        # model's positions (near that limit _decode_step shortens the drafts instead).
        cache_len = min(longest + self.speculative_draft_tokens + 1, int(self.config.max_position))
        self._new_cache(len(sequences), cache_len)
        prompt_logprobs = self._prefill(sequences, requests, prompts)
        while any(not s.done for s in sequences):
            self._decode_step(sequences, cache_len)
        return prompt_logprobs

    def _prefill(self, sequences: list[_Sequence], requests: Sequence[GenerationRequest],
                 prompts: list[list[int]]) -> list[list[TokenLogprob | None] | None]:
        """One padded forward over all prompts; samples each sequence's first token."""
        width = max(len(s.prompt_ids) for s in sequences)
        ids = torch.full((len(sequences), width), self.tokenizer.pad_id, dtype=torch.long)
        for row, s in enumerate(sequences):
            ids[row, : len(s.prompt_ids)] = torch.tensor(s.prompt_ids)
        positions = torch.arange(width).expand(len(sequences), width)
        # Only the logits used: every row's last prompt position, and all prompt positions of the
        # rows whose request scores its prompt. spans[row] = (first selected index, count).
        select_rows, select_cols, spans = [], [], []
        for row, s in enumerate(sequences):
            length = len(s.prompt_ids)
            scores_prompt = s.sample_index == 0 and s.request.prompt_logprobs is not None
            first = 0 if scores_prompt else length - 1
            spans.append((len(select_rows), length - first))
            select_rows += [row] * (length - first)
            select_cols += range(first, length)
        logits = self._forward(ids, positions, decode=False,
                               select=(torch.tensor(select_rows), torch.tensor(select_cols)))
        finite = torch.isfinite(logits).all(dim=-1).tolist()
        self.stats.prompt_tokens += sum(len(p) for p in prompts)
        scored: list[list[TokenLogprob | None] | None] = [None] * len(requests)
        for row, s in enumerate(sequences):
            start, count = spans[row]
            last = start + count - 1
            if s.sample_index == 0 and s.request.prompt_logprobs is not None:
                scored[s.request_index] = self._score_rows(logits[start:last], s.prompt_ids[1:], s.request.prompt_logprobs)
            self._emit(s, [logits[last]], [], finite[last])
        return scored

    def _score_rows(self, logits: torch.Tensor, targets: Sequence[int], k: int) -> list[TokenLogprob | None]:
        rows = log_softmax_rows(logits)
        out: list[TokenLogprob | None] = [None]
        for row, token in zip(rows, targets):
            out.append(TokenLogprob(int(token), float(row[token]), tuple(top_logprobs(row, k))))
        return out

    def _decode_step(self, sequences: list[_Sequence], cache_len: int) -> None:
        """Feed every live sequence its pending token (plus a draft) and emit what it verifies.

        Finished sequences leave the batch; the live ones keep their own cache rows.
        """
        live = [row for row, s in enumerate(sequences) if not s.done]
        # Every row's fed tokens and padding must stay inside the cache.
        room = min(cache_len - sequences[row].position for row in live) - 1
        drafts = [self._draft_for(sequences[row])[:room] for row in live]
        width = 1 + max(len(d) for d in drafts)
        ids = torch.full((len(live), width), self.tokenizer.pad_id, dtype=torch.long)
        positions = torch.zeros((len(live), width), dtype=torch.long)
        for i, (row, draft) in enumerate(zip(live, drafts)):
            s = sequences[row]
            fed = [s.pending] + draft
            ids[i, : len(fed)] = torch.tensor(fed)
            # Padding after a short draft writes slots past the sequence's end, which no live
            # query reads before they are rewritten.
            positions[i] = torch.arange(s.position, s.position + width)
        logits = self._forward(ids, positions, decode=True, cache_rows=torch.tensor(live))
        finite = torch.isfinite(logits).all(dim=-1).tolist()
        for i, (row, draft) in enumerate(zip(live, drafts)):
            s = sequences[row]
            s.pending = None
            used = len(draft) + 1
            self._emit(s, [logits[i, j] for j in range(used)], draft, all(finite[i][:used]))

    def _draft_for(self, s: _Sequence) -> list[int]:
        if s.done or s.constraint is not None or self.speculative_draft_tokens == 0:
            return []
        remaining = s.request.max_tokens - len(s.tokens)
        # The pending token is already emitted; a draft may add at most remaining - 1 more.
        budget = min(self.speculative_draft_tokens, remaining - 1)
        return self.propose_draft(s.prompt_ids + s.tokens, budget)

    def _emit(self, s: _Sequence, rows: list[torch.Tensor], draft: list[int], finite: bool) -> None:
        """Choose and record the sequence's next token(s) from its logits ``rows``.

        ``finite`` says whether all of ``rows`` are finite (checked once per batch by the caller).
        """
        if s.request.max_tokens == 0:
            s.finish_reason = "length"
            return
        if not finite:
            s.non_finite = True
            s.finish_reason = "error"
            return
        if s.constraint is not None:
            chosen = [self._sample_constrained(s, rows[0])]
        elif not draft and s.params.greedy:  # the common case, without building distributions
            chosen = [int(torch.argmax(rows[0]))]
        else:
            probs = [sampling_probs(r, s.params) for r in rows]
            chosen = accept_draft(draft, probs, s.generator)
            self.stats.speculative.record(len(draft), len(chosen) - 1)
        for position, token in enumerate(chosen):
            self._append(s, token, rows[position])
            if s.done:
                return
        s.pending = s.tokens[-1]

    def _sample_constrained(self, s: _Sequence, row: torch.Tensor) -> int:
        masked = s.constraint.mask_logits(row)
        probs = sampling_probs(masked, s.params)
        if s.params.greedy:
            token = int(torch.argmax(probs))
        else:
            token = draw_from(probs, s.generator)
        if not s.constraint.accept(token):
            raise RuntimeError(f"grammar rejected token {token} it allowed")  # a bug, not a request error
        return token

    def _append(self, s: _Sequence, token: int, logits_row: torch.Tensor) -> None:
        if s.request.logprobs is not None:
            row = log_softmax_rows(logits_row)
            s.logprobs.append(TokenLogprob(token, float(row[token]), tuple(top_logprobs(row, s.request.logprobs))))
        s.tokens.append(token)
        self.stats.generation_tokens += 1
        if token in self.tokenizer.stop_ids and not s.request.ignore_eos:
            s.finish_reason = "stop"
            return
        if s.constraint is not None and s.constraint.finished:
            s.finish_reason = "stop"
            return
        if s.request.stop:
            text = self.tokenizer.decode(s.tokens, skip_special=True)
            cut = _first_stop(text, s.request.stop)
            if cut is not None:
                s.text = text[:cut]
                s.finish_reason = "stop"
                return
        if len(s.tokens) >= s.request.max_tokens:
            s.finish_reason = "length"

    def _collect(self, requests: Sequence[GenerationRequest], prompts: list[list[int]],
                 sequences: list[_Sequence], prompt_logprobs: list) -> list[GenerationResult]:
        results = []
        for r_index, (request, ids) in enumerate(zip(requests, prompts)):
            outputs = []
            for s in (s for s in sequences if s.request_index == r_index):
                text = s.text if s.text is not None else self.tokenizer.decode(s.tokens, skip_special=True)
                outputs.append(CompletionOutput(
                    index=s.sample_index, text=text, token_ids=tuple(s.tokens),
                    logprobs=tuple(s.logprobs) if request.logprobs is not None else None,
                    finish_reason=s.finish_reason or "length", non_finite_logits=s.non_finite,
                ))
            result = GenerationResult(
                prompt_token_ids=tuple(ids), outputs=tuple(outputs),
                prompt_logprobs=tuple(prompt_logprobs[r_index]) if prompt_logprobs[r_index] is not None else None,
            )
            self.stats.sequences += len(outputs)
            if result.non_finite_logits:
                self.stats.corrupted_requests += 1
            results.append(result)
        return results

    # ---- scoring -----------------------------------------------------------------------------
    def next_token_logprobs(self, token_ids: Sequence[int], through_decode: bool = False) -> torch.Tensor:
        """``[T, V]`` float32 logprobs: row ``t`` is the distribution of the token after ``ids[:t+1]``.

        ``through_decode`` feeds the tokens one at a time through the decode path (the path a
        latency-specialised build changes) instead of one prefill pass.
        """
        ids = self.encode_prompt(token_ids)
        if len(ids) > self.max_model_len:
            raise RequestError(f"{len(ids)} tokens exceed the maximum context length {self.max_model_len}")
        with self._lock:
            # positions 0..len-1 need exactly len slots (len + 1 would exceed max_position at the limit)
            self._new_cache(1, len(ids))
            if not through_decode:
                logits = self._forward(torch.tensor([ids]), torch.arange(len(ids)).unsqueeze(0), decode=False)[0]
            else:
                rows = [self._forward(torch.tensor([ids[:1]]), torch.tensor([[0]]), decode=False)[0, 0]]
                for pos in range(1, len(ids)):
                    rows.append(self._forward(torch.tensor([[ids[pos]]]), torch.tensor([[pos]]), decode=True)[0, 0])
                logits = torch.stack(rows)
            self.stats.prompt_tokens += len(ids)
            if not bool(torch.isfinite(logits).all()):
                self.stats.corrupted_requests += 1
            return log_softmax_rows(logits).cpu()

    def next_token_logprobs_batch(self, rows: Sequence[Sequence[int]], through_decode: bool = False) -> torch.Tensor:
        """``[B, T, V]`` float32 logprobs of equal-length token rows scored together: one prefill
        pass over the batch, or (``through_decode``) the first position by prefill and every
        other one as a decode step of the whole batch (the path a latency build changes)."""
        ids = [self.encode_prompt(list(r)) for r in rows]
        length = len(ids[0]) if ids else 0
        if any(len(r) != length for r in ids):
            raise RequestError("next_token_logprobs_batch needs rows of equal length")
        if length > self.max_model_len:
            raise RequestError(f"{length} tokens exceed the maximum context length {self.max_model_len}")
        batch = torch.tensor(ids)
        with self._lock:
            self._new_cache(len(ids), length)
            positions = torch.arange(length).expand(len(ids), length)
            if not through_decode:
                logits = self._forward(batch, positions, decode=False)
            else:
                steps = [self._forward(batch[:, :1], positions[:, :1], decode=False)]
                rows_in_cache = torch.arange(len(ids))
                for pos in range(1, length):
                    steps.append(self._forward(batch[:, pos : pos + 1], positions[:, pos : pos + 1], decode=True,
                                               cache_rows=rows_in_cache))
                logits = torch.cat(steps, dim=1)
            self.stats.prompt_tokens += len(ids) * length
            if not bool(torch.isfinite(logits).all()):
                self.stats.corrupted_requests += 1
            return log_softmax_rows(logits).cpu()

    def score(self, context_ids: Sequence[int], continuation_ids: Sequence[int],
              through_decode: bool = False) -> tuple[float, bool]:
        """lm-eval loglikelihood: (sum of continuation logprobs, whether greedy decoding gives it)."""
        context, continuation = list(context_ids), list(continuation_ids)
        if not context or not continuation:
            raise RequestError("context and continuation must both be non-empty")
        rows = self.next_token_logprobs(context + continuation, through_decode=through_decode)
        rows = rows[len(context) - 1 : len(context) - 1 + len(continuation)]
        targets = torch.tensor(continuation)
        picked = rows.gather(1, targets.unsqueeze(1)).squeeze(1)
        return float(picked.sum()), bool((rows.argmax(dim=1) == targets).all())

    def prompt_logprobs(self, token_ids: Sequence[int], k: int = 0) -> list[TokenLogprob | None]:
        """Teacher-forced logprob of every prompt token after the first (first entry None)."""
        ids = self.encode_prompt(token_ids)
        rows = self.next_token_logprobs(ids)
        out: list[TokenLogprob | None] = [None]
        for row, token in zip(rows[:-1], ids[1:]):
            out.append(TokenLogprob(token, float(row[token]), tuple(top_logprobs(row, k))))
        return out


def _first_stop(text: str, stops: Sequence[str]) -> int | None:
    """Index where the earliest stop string starts in ``text``, or None."""
    hits = [text.find(stop) for stop in stops if stop]
    hits = [h for h in hits if h >= 0]
    return min(hits) if hits else None
