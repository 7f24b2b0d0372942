"""The OpenAI-compatible server: endpoints, 4xx errors that leave it serving, /metrics counters."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import pytest
import torch
from fastapi.testclient import TestClient
from mini_k3.config import MiniK3Config
from mini_k3.engine import Engine
from mini_k3.model import MiniK3
from mini_k3.server import create_app, parse_args
from mini_k3.tokenizer import ByteTokenizer
from prometheus_client.parser import text_string_to_metric_families

TOKENIZER = ByteTokenizer()
SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 0, "maximum": 9}},
    "required": ["ok", "n"],
    "additionalProperties": False,
}



def tiny_model() -> MiniK3:
    torch.manual_seed(0)
    model = MiniK3(MiniK3Config.tiny())
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.mul_(4.0)
    return model.eval()


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine(model=tiny_model(), tokenizer=TOKENIZER, speculative_draft_tokens=3)


@pytest.fixture(scope="module")
def client(engine: Engine):
    with TestClient(create_app(engine)) as test_client:
        yield test_client


def metric_values(client: TestClient) -> dict[tuple[str, tuple], float]:
    response = client.get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    values = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            values[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return values


def test_health_and_models(client: TestClient) -> None:
    assert client.get("/health").json() == {"status": "ok"}
    models = client.get("/v1/models").json()
    assert [m["id"] for m in models["data"]] == ["mini-k3"]


def test_completion_with_several_prompts_and_n(client: TestClient) -> None:
    body = {"model": "mini-k3", "prompt": ["first", "second"], "max_tokens": 5, "temperature": 0.9,
            "seed": 4, "n": 2}
    response = client.post("/v1/completions", json=body)
    assert response.status_code == 200, response.text
    data = response.json()
    assert sorted(c["index"] for c in data["choices"]) == [0, 1, 2, 3]
    assert data["usage"]["prompt_tokens"] == len("first") + len("second")
    assert data["usage"]["total_tokens"] == data["usage"]["prompt_tokens"] + data["usage"]["completion_tokens"]
    again = client.post("/v1/completions", json=body).json()
    assert [c["text"] for c in again["choices"]] == [c["text"] for c in data["choices"]]


def test_echo_with_logprobs_gives_teacher_forced_prompt_logprobs(client: TestClient, engine: Engine) -> None:
    prompt = "score this prompt"
    data = client.post("/v1/completions", json={"prompt": prompt, "max_tokens": 1, "temperature": 0,
                                                 "logprobs": 1, "echo": True}).json()
    choice = data["choices"][0]
    assert choice["text"].startswith(prompt)
    logprobs = choice["logprobs"]
    assert len(logprobs["tokens"]) == len(prompt) + 1 and logprobs["token_logprobs"][0] is None
    expected = engine.prompt_logprobs(TOKENIZER.encode(prompt))
    assert logprobs["token_logprobs"][1 : len(prompt)] == pytest.approx([e.logprob for e in expected[1:]], abs=1e-4)
    assert "".join(logprobs["tokens"][: len(prompt)]) == prompt
    # lm-eval's greedy check reads the maximum of top_logprobs at each position.
    last = logprobs["top_logprobs"][-1]
    assert max(last.values()) == pytest.approx(logprobs["token_logprobs"][-1])


def test_completion_stop_string(client: TestClient) -> None:
    full = client.post("/v1/completions", json={"prompt": "go", "max_tokens": 20, "temperature": 0}).json()
    text = full["choices"][0]["text"]
    start = next(i for i in range(1, len(text) - 1) if "\ufffd" not in text[i : i + 2])
    stopped = client.post("/v1/completions", json={"prompt": "go", "max_tokens": 20, "temperature": 0,
                                                    "stop": text[start : start + 2]}).json()["choices"][0]
    assert stopped["finish_reason"] == "stop" and stopped["text"] == text[: text.find(text[start : start + 2])]


def test_chat_json_schema_output_is_valid(client: TestClient) -> None:
    body = {"messages": [{"role": "user", "content": "Give me JSON"}], "max_completion_tokens": 60, "n": 4,
            "temperature": 1.0, "seed": 9,
            "response_format": {"type": "json_schema", "json_schema": {"name": "flags", "schema": SCHEMA}}}
    data = client.post("/v1/chat/completions", json=body).json()
    assert len(data["choices"]) == 4
    for choice in data["choices"]:
        assert choice["message"]["role"] == "assistant" and choice["finish_reason"] == "stop"
        jsonschema.validate(json.loads(choice["message"]["content"]), SCHEMA)


def test_chat_logprobs_and_top_logprobs(client: TestClient) -> None:
    body = {"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": [{"type": "text", "text": "hi"}]}],
            "max_tokens": 4, "temperature": 0, "logprobs": True, "top_logprobs": 3}
    data = client.post("/v1/chat/completions", json=body).json()
    content = data["choices"][0]["logprobs"]["content"]
    assert 1 <= len(content) <= 4
    for entry in content:
        tops = entry["top_logprobs"]
        assert len(tops) == 3 and tops[0]["logprob"] == pytest.approx(entry["logprob"])  # greedy
        assert [t["logprob"] for t in tops] == sorted((t["logprob"] for t in tops), reverse=True)
    prompt = TOKENIZER.apply_chat_template([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}])
    assert data["usage"]["prompt_tokens"] == len(TOKENIZER.encode(prompt))


BAD_REQUESTS = [
    ("/v1/completions", "{not json", 400),
    ("/v1/completions", json.dumps({"prompt": "x", "max_tokens": -1}), 400),
    ("/v1/completions", json.dumps({"prompt": "x", "n": 0}), 400),
    ("/v1/completions", json.dumps({"prompt": "x", "model": "gpt-4"}), 404),
    ("/v1/completions", json.dumps({"prompt": "x" * 250, "max_tokens": 10}), 400),  # context is 256
    ("/v1/completions", json.dumps({"max_tokens": 3}), 400),
    ("/v1/completions", json.dumps({"prompt": "x", "stream": True}), 400),
    ("/v1/completions", json.dumps({"prompt": "x", "top_p": 0}), 400),
    ("/v1/chat/completions", json.dumps({"messages": [{"role": "wizard", "content": "x"}]}), 400),
    ("/v1/chat/completions", json.dumps({"messages": []}), 400),
    ("/v1/chat/completions", json.dumps({"messages": [{"role": "user", "content": "x"}], "response_format": {
        "type": "json_schema", "json_schema": {"name": "bad", "schema": {"type": "objectx"}}}}), 400),
    ("/v1/chat/completions", json.dumps({"messages": [{"role": "user", "content": "x"}], "response_format": {
        "type": "grammar"}}), 400),
    ("/v1/chat/completions", json.dumps({"messages": [{"role": "user", "content": "x"}], "logprobs": False,
                                         "top_logprobs": 2}), 400),
]


@pytest.mark.parametrize(("path", "body", "status"), BAD_REQUESTS)
def test_bad_requests_get_openai_errors_and_the_server_keeps_serving(client: TestClient, path, body, status) -> None:
    response = client.post(path, content=body, headers={"content-type": "application/json"})
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["message"] and error["type"] in {"invalid_request_error", "not_found_error"}
    ok = client.post("/v1/completions", json={"prompt": "still alive", "max_tokens": 2})
    assert ok.status_code == 200


def test_unknown_route_is_a_json_404(client: TestClient) -> None:
    response = client.get("/v1/nothing")
    assert response.status_code == 404 and "error" in response.json()


def test_concurrent_requests_get_the_same_answers_as_sequential_ones(client: TestClient) -> None:
    bodies = [{"prompt": f"request {i}", "max_tokens": 6, "temperature": 1.0, "seed": i} for i in range(6)]
    sequential = [client.post("/v1/completions", json=b).json()["choices"][0]["text"] for b in bodies]
    with ThreadPoolExecutor(max_workers=6) as pool:
        concurrent = list(pool.map(lambda b: client.post("/v1/completions", json=b).json()["choices"][0]["text"], bodies))
    assert concurrent == sequential


def test_metrics_count_requests_tokens_paths_and_speculation(client: TestClient) -> None:
    before = metric_values(client)
    # Every byte below 200 occurs in the prompt, so prompt lookup finds drafts for most tokens.
    response = client.post("/v1/completions", json={"prompt": list(range(200)), "max_tokens": 12, "temperature": 0})
    usage = response.json()["usage"]
    client.post("/v1/completions", json={"prompt": "x", "max_tokens": -5})
    after = metric_values(client)

    def delta(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert delta("minik3_requests_total", endpoint="/v1/completions", status="200") == 1
    assert delta("minik3_requests_total", endpoint="/v1/completions", status="400") == 1
    assert delta("minik3_prompt_tokens_total") == usage["prompt_tokens"]
    assert delta("minik3_generation_tokens_total") == usage["completion_tokens"]
    assert delta("minik3_decode_steps_total", path="stock") >= 1
    assert after[("minik3_decode_steps_total", (("path", "latency_specialized"),))] == 0
    assert after[("minik3_spec_decode_num_drafts_total", ())] > 0
    assert after[("minik3_spec_decode_num_draft_tokens_total", ())] >= after[("minik3_spec_decode_num_accepted_tokens_total", ())]
    assert after[("minik3_corrupted_requests_total", ())] == 0


def test_requests_with_non_finite_logits_are_counted() -> None:
    model = tiny_model()
    with torch.no_grad():
        model.lm_head.weight[7, :] = float("inf")
    with TestClient(create_app(Engine(model=model, tokenizer=TOKENIZER))) as broken:
        data = broken.post("/v1/completions", json={"prompt": "x", "max_tokens": 3}).json()
        assert data["choices"][0]["finish_reason"] == "error"
        assert metric_values(broken)[("minik3_corrupted_requests_total", ())] == 1


def test_command_line_flags() -> None:
    args = parse_args(["--latency-specialized", "--tensor-parallel-size", "2", "--max-model-len", "1024",
                       "--speculative-draft-tokens", "4", "--port", "9001", "--host", "0.0.0.0", "--seed", "3"])
    assert (args.latency_specialized, args.tensor_parallel_size, args.max_model_len) == (True, 2, 1024)
    assert (args.speculative_draft_tokens, args.port, args.host, args.seed) == (4, 9001, "0.0.0.0", 3)
    assert parse_args([]).variant == "stock" and parse_args([]).latency_specialized is False


def test_an_engine_failure_is_a_json_500_and_the_server_recovers(monkeypatch) -> None:
    engine = Engine(model=tiny_model(), tokenizer=TOKENIZER)
    with TestClient(create_app(engine), raise_server_exceptions=False) as fresh:
        real_generate = engine.generate
        monkeypatch.setattr(engine, "generate", lambda requests: (_ for _ in ()).throw(RuntimeError("boom")))
        response = fresh.post("/v1/completions", json={"prompt": "x", "max_tokens": 2})
        assert response.status_code == 500
        assert response.json()["error"]["type"] == "server_error" and "boom" in response.json()["error"]["message"]
        monkeypatch.setattr(engine, "generate", real_generate)
        assert fresh.post("/v1/completions", json={"prompt": "x", "max_tokens": 2}).status_code == 200
        assert metric_values(fresh)[("minik3_requests_total", (("endpoint", "/v1/completions"), ("status", "500")))] == 1


def test_metrics_show_the_latency_specialized_path_when_switched_on() -> None:
    engine = Engine(model=tiny_model(), tokenizer=TOKENIZER, latency_specialized=True)
    with TestClient(create_app(engine)) as candidate:
        assert candidate.post("/v1/completions", json={"prompt": "fast", "max_tokens": 5, "temperature": 0}).status_code == 200
        values = metric_values(candidate)
    assert values[("minik3_decode_steps_total", (("path", "latency_specialized"),))] >= 1
    assert values[("minik3_decode_steps_total", (("path", "stock"),))] == 0


class AlwaysEndModel(MiniK3):
    """The tiny model with <|end|> made every step's greedy choice."""

    def forward(self, *args, **kwargs):
        logits = super().forward(*args, **kwargs)
        logits[..., TOKENIZER.end_id] += 1e4
        return logits


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/chat/completions"])
def test_ignore_eos_is_passed_through(path: str) -> None:
    model = AlwaysEndModel(MiniK3Config.tiny())
    model.load_state_dict(tiny_model().state_dict())
    with TestClient(create_app(Engine(model=model.eval(), tokenizer=TOKENIZER))) as ends:
        body = {"max_tokens": 6, "temperature": 0}
        body.update({"prompt": "x"} if path == "/v1/completions" else {"messages": [{"role": "user", "content": "x"}]})
        stops = ends.post(path, json=body).json()
        assert stops["choices"][0]["finish_reason"] == "stop" and stops["usage"]["completion_tokens"] == 1
        goes_on = ends.post(path, json={**body, "ignore_eos": True}).json()
        assert goes_on["choices"][0]["finish_reason"] == "length" and goes_on["usage"]["completion_tokens"] == 6
