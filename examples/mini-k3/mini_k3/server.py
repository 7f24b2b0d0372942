"""OpenAI-compatible HTTP server for mini-K3 (FastAPI + uvicorn).

Endpoints: /v1/completions, /v1/chat/completions, /v1/models, /health, /metrics, plus
/tokenizer_info and /tokenize (what lm-eval's "remote" tokenizer backend asks for). Every bad
request gets a 4xx JSON body in the OpenAI error shape and the server keeps serving.

One worker thread owns the engine: requests wait in a queue, and whatever has queued up while
the engine was busy runs together as one batch (each request keeps its own seed, so batching
does not change what a seeded request gets).

Run: ``python -m mini_k3.server --port 8000`` (see ``--help``).
"""

from __future__ import annotations

import argparse
import queue
import threading
import time
import uuid
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

import torch
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from mini_k3.engine import (
    Engine,
    GenerationRequest,
    GenerationResult,
    RequestError,
    TokenLogprob,
)
from mini_k3.fasttrack_target import TECHNIQUE_KEYWORDS
from mini_k3.grammar import InvalidSchemaError, parse_schema
from mini_k3.metrics import CONTENT_TYPE, ServerMetrics

DEFAULT_MODEL_NAME = "mini-k3"
MAX_BATCH_SEQUENCES = 64  # the largest batch the worker assembles from queued requests
# The tokenizer's chat template as Jinja, for clients that render prompts themselves (lm-eval's
# remote tokenizer); a test checks it renders exactly what ByteTokenizer.apply_chat_template does.
CHAT_TEMPLATE_JINJA = (
    "<|bos|>{% for message in messages %}<|{{ message['role'] }}|>{{ message['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


class ApiError(Exception):
    """A request error with its HTTP status and OpenAI error type."""

    def __init__(self, status: int, message: str, error_type: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.error_type, self.param, self.code = status, message, error_type, param, code

    def response(self) -> JSONResponse:
        body = {"error": {"message": self.message, "type": self.error_type, "param": self.param, "code": self.code}}
        return JSONResponse(status_code=self.status, content=body)


# ---- request bodies --------------------------------------------------------------------------
class _Body(BaseModel):
    model_config = ConfigDict(extra="allow")  # unknown OpenAI fields are accepted and ignored

    model: str | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    stop: str | list[str] | None = None
    n: int = 1
    stream: bool = False
    ignore_eos: bool = False  # vLLM's extra sampling parameter: keep going past end-of-sequence


class CompletionBody(_Body):
    prompt: str | list[str] | list[int] | list[list[int]]
    max_tokens: int | None = 16
    logprobs: int | None = None
    echo: bool = False


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")

    role: str
    content: str | list[dict[str, Any]] | None = None


class ChatBody(_Body):
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    logprobs: bool = False
    top_logprobs: int | None = None
    response_format: dict[str, Any] | None = None


# ---- the worker --------------------------------------------------------------------------------
class BatchingWorker:
    """Runs the engine on one thread; requests queued meanwhile form the next batch."""

    def __init__(self, engine: Engine, max_batch_sequences: int = MAX_BATCH_SEQUENCES):
        self.engine = engine
        self.max_batch_sequences = max_batch_sequences
        self._queue: queue.Queue[tuple[list[GenerationRequest], Future] | None] = queue.Queue()
        self._thread = threading.Thread(target=self._loop, name="mini-k3-engine", daemon=True)
        self._thread.start()

    def submit(self, requests: list[GenerationRequest]) -> list[GenerationResult]:
        future: Future = Future()
        self._queue.put((requests, future))
        return future.result()

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            batch = [item]
            sequences = sum(r.n for r in item[0])
            while sequences < self.max_batch_sequences:
                try:
                    extra = self._queue.get_nowait()
                except queue.Empty:
                    break
                if extra is None:
                    self._queue.put(None)
                    break
                batch.append(extra)
                sequences += sum(r.n for r in extra[0])
            self._run(batch)

    def _run(self, batch: list[tuple[list[GenerationRequest], Future]]) -> None:
        flat = [r for requests, _ in batch for r in requests]
        try:
            results = self.engine.generate(flat)
        except Exception as exc:  # noqa: BLE001 - handed to every waiting request
            for _, future in batch:
                future.set_exception(exc)
            return
        start = 0
        for requests, future in batch:
            future.set_result(results[start : start + len(requests)])
            start += len(requests)


# ---- token rendering ---------------------------------------------------------------------------
def token_text(engine: Engine, token_id: int) -> str:
    """A token as text: its character, its special spelling, or ``bytes:\\xNN`` for a partial byte."""
    tokenizer = engine.tokenizer
    if tokenizer.is_special(token_id):
        return tokenizer.decode([token_id])
    raw = tokenizer.token_bytes(token_id)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return "bytes:" + "".join(f"\\x{b:02x}" for b in raw)


def completion_logprobs(engine: Engine, entries: Sequence[TokenLogprob | None], prompt_ids: Sequence[int],
                        offset: int = 0) -> dict[str, list]:
    """Legacy completions ``logprobs`` object (tokens, token_logprobs, top_logprobs, text_offset)."""
    tokens, token_logprobs, tops, offsets = [], [], [], []
    position = offset
    for token_id, entry in zip(prompt_ids, entries):
        text = token_text(engine, token_id)
        tokens.append(text)
        offsets.append(position)
        position += len(engine.tokenizer.decode([token_id]))
        if entry is None:
            token_logprobs.append(None)
            tops.append(None)
        else:
            token_logprobs.append(entry.logprob)
            top = {token_text(engine, t): lp for t, lp in entry.top}
            top.setdefault(text, entry.logprob)
            tops.append(top)
    return {"tokens": tokens, "token_logprobs": token_logprobs, "top_logprobs": tops, "text_offset": offsets}


def chat_logprobs(engine: Engine, entries: Sequence[TokenLogprob]) -> dict[str, list]:
    def item(token_id: int, logprob: float) -> dict[str, Any]:
        return {"token": token_text(engine, token_id), "logprob": logprob,
                "bytes": list(engine.tokenizer.token_bytes(token_id))}

    return {"content": [
        {**item(e.token_id, e.logprob), "top_logprobs": [item(t, lp) for t, lp in e.top]} for e in entries
    ]}


# ---- the app -----------------------------------------------------------------------------------
def create_app(engine: Engine, model_name: str = DEFAULT_MODEL_NAME) -> FastAPI:
    """The FastAPI app serving ``engine`` under ``model_name``."""
    app = FastAPI(title="mini-K3 OpenAI-compatible server")
    worker = BatchingWorker(engine)
    metrics = ServerMetrics(engine.stats_snapshot)
    created = int(time.time())
    app.state.engine, app.state.worker, app.state.metrics = engine, worker, metrics
    app.router.add_event_handler("shutdown", worker.close)
    app.router.add_event_handler("shutdown", engine.close)  # stops tensor-parallel ranks, if any

    @app.middleware("http")
    async def count_requests(request: Request, call_next):
        try:
            response = await call_next(request)
        except Exception:
            metrics.count_request(request.url.path, 500)
            raise
        metrics.count_request(request.url.path, response.status_code)
        return response

    @app.exception_handler(ApiError)
    async def api_error(_request: Request, exc: ApiError) -> JSONResponse:
        return exc.response()

    @app.exception_handler(RequestValidationError)
    async def validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = exc.errors()
        first = errors[0] if errors else {}
        if first.get("type") == "json_invalid":
            return ApiError(400, "request body is not valid JSON").response()
        where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
        return ApiError(400, f"invalid request: {where}: {first.get('msg', 'invalid value')}", param=where or None).response()

    @app.exception_handler(Exception)
    async def internal_error(_request: Request, exc: Exception) -> JSONResponse:
        # A bug, not a bad request: say so in the OpenAI shape; the worker keeps running.
        return ApiError(500, f"internal error: {type(exc).__name__}: {exc}", "server_error").response()

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        kind = "not_found_error" if exc.status_code == 404 else "invalid_request_error"
        return ApiError(exc.status_code, str(exc.detail), kind).response()

    def check_model(body: _Body) -> None:
        if body.model is not None and body.model != model_name:
            raise ApiError(404, f"the model `{body.model}` does not exist; this server serves `{model_name}`",
                           "not_found_error", "model", "model_not_found")
        if body.stream:
            raise ApiError(400, "streaming is not supported by this server", param="stream")

    def run(requests: list[GenerationRequest]) -> list[GenerationResult]:
        try:
            for request in requests:  # reject bad requests before they can spoil a shared batch
                engine.check_request(request)
            return worker.submit(requests)
        except (RequestError, InvalidSchemaError) as exc:
            raise ApiError(400, str(exc)) from exc

    def usage(results: Sequence[GenerationResult]) -> dict[str, int]:
        prompt = sum(r.prompt_tokens for r in results)
        completion = sum(r.completion_tokens for r in results)
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    @app.get("/v1/models")
    def models() -> dict[str, Any]:
        return {"object": "list", "data": [{
            "id": model_name, "object": "model", "created": created, "owned_by": "fasttrack-examples",
            "max_model_len": engine.max_model_len,
        }]}

    @app.get("/metrics")
    def prometheus() -> Response:
        return Response(content=metrics.render(), media_type=CONTENT_TYPE)

    @app.get("/tokenizer_info")
    def tokenizer_info() -> dict[str, Any]:
        tokenizer = engine.tokenizer
        return {"eos_token": tokenizer.decode([tokenizer.end_id]), "bos_token": tokenizer.decode([tokenizer.bos_id]),
                "pad_token": tokenizer.decode([tokenizer.pad_id]), "model_max_length": engine.max_model_len,
                "tokenizer_class": "ByteTokenizer", "chat_template": CHAT_TEMPLATE_JINJA}

    @app.post("/tokenize")
    def tokenize(body: dict[str, Any]) -> dict[str, Any]:
        prompt = body.get("prompt")
        if not isinstance(prompt, str):
            raise ApiError(400, "prompt must be a string", param="prompt")
        tokens = engine.tokenizer.encode(prompt)
        return {"tokens": tokens, "count": len(tokens), "max_model_len": engine.max_model_len}

    @app.post("/detokenize")
    def detokenize(body: dict[str, Any]) -> dict[str, Any]:
        tokens = body.get("tokens")
        if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
            raise ApiError(400, "tokens must be a list of integers", param="tokens")
        return {"prompt": engine.tokenizer.decode(tokens)}

    @app.post("/v1/completions")
    def completions(body: CompletionBody) -> dict[str, Any]:
        check_model(body)
        prompts = _split_prompts(body.prompt)
        max_tokens = 16 if body.max_tokens is None else body.max_tokens
        requests = [GenerationRequest(
            prompt=p, max_tokens=max_tokens, temperature=body.temperature, top_p=body.top_p,
            seed=body.seed, stop=_stops(body.stop), n=body.n, logprobs=body.logprobs,
            prompt_logprobs=(body.logprobs or 0) if body.echo and body.logprobs is not None else None,
            ignore_eos=body.ignore_eos,
        ) for p in prompts]
        results = run(requests)
        choices = []
        for p_index, result in enumerate(results):
            prompt_text = engine.tokenizer.decode(result.prompt_token_ids) if body.echo else ""
            for out in result.outputs:
                logprobs = None
                if body.logprobs is not None:
                    entries: list[TokenLogprob | None] = []
                    ids: list[int] = []
                    if body.echo:
                        entries += list(result.prompt_logprobs or [None] * result.prompt_tokens)
                        ids += list(result.prompt_token_ids)
                    entries += list(out.logprobs or ())
                    ids += list(out.token_ids)
                    logprobs = completion_logprobs(engine, entries, ids)
                choices.append({"index": p_index * body.n + out.index, "text": prompt_text + out.text,
                                "logprobs": logprobs, "finish_reason": out.finish_reason})
        return {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion", "created": int(time.time()),
                "model": model_name, "choices": choices, "usage": usage(results)}

    @app.post("/v1/chat/completions")
    def chat_completions(body: ChatBody) -> dict[str, Any]:
        check_model(body)
        try:
            prompt = engine.tokenizer.apply_chat_template(
                [{"role": m.role, "content": _message_text(m)} for m in body.messages], add_generation_prompt=True)
        except ValueError as exc:
            raise ApiError(400, f"messages: {exc}", param="messages") from exc
        schema, json_object = _response_format(body.response_format)
        max_tokens = body.max_completion_tokens if body.max_completion_tokens is not None else body.max_tokens
        if max_tokens is None:  # as vLLM: whatever room the context leaves
            max_tokens = max(engine.max_model_len - len(engine.tokenizer.encode(prompt)), 0)
        if body.top_logprobs is not None and not body.logprobs:
            raise ApiError(400, "top_logprobs requires logprobs to be true", param="top_logprobs")
        request = GenerationRequest(
            prompt=prompt, max_tokens=max_tokens, temperature=body.temperature, top_p=body.top_p, seed=body.seed,
            stop=_stops(body.stop), n=body.n, logprobs=(body.top_logprobs or 0) if body.logprobs else None,
            json_schema=schema, json_object=json_object, ignore_eos=body.ignore_eos,
        )
        [result] = run([request])
        choices = [{
            "index": out.index, "message": {"role": "assistant", "content": out.text},
            "logprobs": chat_logprobs(engine, out.logprobs) if out.logprobs is not None else None,
            "finish_reason": out.finish_reason,
        } for out in result.outputs]
        return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
                "model": model_name, "choices": choices, "usage": usage([result])}

    return app


def _split_prompts(prompt: str | list) -> list[str | list[int]]:
    if isinstance(prompt, str):
        return [prompt]
    if not prompt:
        raise ApiError(400, "prompt is empty", param="prompt")
    if all(isinstance(p, int) for p in prompt):
        return [list(prompt)]
    return list(prompt)


def _stops(stop: str | list[str] | None) -> tuple[str, ...]:
    if stop is None:
        return ()
    return (stop,) if isinstance(stop, str) else tuple(stop)


def _message_text(message: ChatMessage) -> str:
    if message.content is None:
        return ""
    if isinstance(message.content, str):
        return message.content
    parts = []
    for part in message.content:
        if part.get("type") != "text" or not isinstance(part.get("text"), str):
            raise ApiError(400, "only text content parts are supported", param="messages")
        parts.append(part["text"])
    return "".join(parts)


def _response_format(fmt: dict[str, Any] | None) -> tuple[dict[str, Any] | None, bool]:
    """(schema, any-JSON flag) for a ``response_format``; schemas are checked here (400 if bad)."""
    if fmt is None or fmt.get("type") == "text":
        return None, False
    kind = fmt.get("type")
    if kind == "json_object":
        return None, True
    if kind == "json_schema":
        spec = fmt.get("json_schema")
        if not isinstance(spec, dict) or "schema" not in spec:
            raise ApiError(400, "response_format.json_schema must be an object with a `schema`", param="response_format")
        try:
            return parse_schema(spec["schema"]), False
        except InvalidSchemaError as exc:
            raise ApiError(400, str(exc), param="response_format") from exc
    raise ApiError(400, f"unsupported response_format type {kind!r}", param="response_format")


# ---- command line ------------------------------------------------------------------------------
def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m mini_k3.server", description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=None, help="weights folder (default: the shipped weights)")
    parser.add_argument("--served-model-name", default=DEFAULT_MODEL_NAME)
    parser.add_argument("--variant", choices=("stock", "latency_specialized"), default="stock",
                        help="decode path (latency_specialized is opt-in)")
    parser.add_argument("--latency-specialized", action="store_true", help="same as --variant latency_specialized")
    for name in TECHNIQUE_KEYWORDS:  # each technique alone; any of them: the latency path with exactly those
        parser.add_argument(f"--{name.replace('_', '-')}", dest=name, action="store_true",
                            help=f"latency path with the {name} technique (with the other technique flags given)")
    parser.add_argument("--tensor-parallel-size", type=int, default=1,
                        help="ranks for the model's forward passes (CPU: gloo worker processes; CUDA: one GPU each)")
    parser.add_argument("--max-model-len", type=int, default=4096)
    parser.add_argument("--speculative-draft-tokens", type=int, default=0, help="prompt-lookup draft length 0-7")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="fp32", choices=("fp32", "bf16", "fp16"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    import uvicorn

    args = parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    techniques = [name for name in TECHNIQUE_KEYWORDS if getattr(args, name)]
    engine = Engine(
        model_path=args.model, device=args.device, dtype=args.dtype,
        latency_specialized=args.latency_specialized or args.variant == "latency_specialized",
        tensor_parallel_size=args.tensor_parallel_size, max_model_len=args.max_model_len,
        speculative_draft_tokens=args.speculative_draft_tokens, seed=args.seed,
        latency_techniques=techniques or None,
    )
    try:
        uvicorn.run(create_app(engine, args.served_model_name), host=args.host, port=args.port, log_level="warning")
    finally:
        engine.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
