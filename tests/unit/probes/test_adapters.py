"""ProbeTarget adapters: OpenAI HTTP (against an httpx mock transport) and in-process."""

from __future__ import annotations

import json
from types import SimpleNamespace

import httpx
import pytest

from fasttrack.probes.adapters import InProcessProbeTarget, OpenAIProbeTarget
from fasttrack.probes.base import CapabilityMissing, CompletionRequest, ProbeTarget, TargetFailure
from fasttrack.probes.fake import FakeTarget

METRICS = """# HELP minik3_spec_decode_num_drafts_total Speculative steps that proposed a draft.
minik3_spec_decode_num_drafts_total 10.0
minik3_spec_decode_num_draft_tokens_total{engine="0"} 40.0
minik3_spec_decode_num_accepted_tokens_total{engine="0"} 25.0
"""


def http_target(seen: list):
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/metrics":
            return httpx.Response(200, text=METRICS)
        body = json.loads(request.content)
        seen.append(body)
        if request.url.path == "/v1/chat/completions":
            return httpx.Response(
                200,
                json={
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": "{}"}, "finish_reason": "stop"}
                    ]
                },
            )
        if body.get("max_tokens") == 999:
            return httpx.Response(500, json={"error": {"message": "boom"}})
        choice = {
            "index": 0,
            "text": "ab",
            "finish_reason": "length",
            "logprobs": {
                "tokens": ["token_id:5", "token_id:7"],
                "token_logprobs": [-0.1, -0.2],
                "top_logprobs": [{"token_id:5": -0.1, "token_id:9": -2.0}, {"token_id:7": -0.2}],
            },
        }
        return httpx.Response(200, json={"choices": [choice]})

    client = httpx.Client(base_url="http://server", transport=httpx.MockTransport(handler))
    return OpenAIProbeTarget("http://server", model="m", max_context=128, client=client)


def test_openai_request_fields_and_parsed_logprobs():
    seen: list = []
    target = http_target(seen)
    (out,) = target.complete(CompletionRequest("hi", max_tokens=2, temperature=0.7, seed=3, stop=("\n",), logprobs=2))
    body = seen[0]
    assert body["model"] == "m" and body["seed"] == 3 and body["stop"] == ["\n"] and body["logprobs"] == 2
    assert out.token_ids == (5, 7) and out.logprobs[0].top == {5: -0.1, 9: -2.0}
    assert isinstance(target, ProbeTarget)
    (plain,) = target.complete(CompletionRequest("hi", max_tokens=2))
    assert seen[1]["logprobs"] == 0 and plain.token_ids == (5, 7) and plain.logprobs is None  # tokens without asking


def test_openai_json_schema_requests_use_chat_response_format():
    seen: list = []
    schema = {"type": "object"}
    (out,) = http_target(seen).complete(CompletionRequest("give JSON", max_tokens=9, json_schema=schema))
    assert seen[0]["messages"] == [{"role": "user", "content": "give JSON"}]
    assert seen[0]["response_format"] == {"type": "json_schema", "json_schema": {"name": "probe", "schema": schema}}
    assert out.text == "{}" and out.finish_reason == "stop"


def test_openai_errors_and_capabilities():
    target = http_target([])
    with pytest.raises(TargetFailure, match="HTTP 500"):
        target.complete(CompletionRequest("hi", max_tokens=999))
    with pytest.raises(CapabilityMissing):
        target.next_token_logprobs([1, 2])
    counters = target.speculative_counters()
    assert (counters.drafts, counters.draft_tokens, counters.accepted_tokens) == (10, 40, 25)
    assert counters.acceptance_length == pytest.approx(3.5)


def test_in_process_adapter_maps_the_example_shape():
    calls = []

    class Stub:
        max_context = 64

        def generate(self, requests):
            calls.append(requests)
            top = ((3, -0.5), (4, -1.0))
            output = SimpleNamespace(
                text="x",
                token_ids=(3,),
                finish_reason="length",
                logprobs=(SimpleNamespace(token_id=3, logprob=-0.5, top=top),),
            )
            return [SimpleNamespace(outputs=(output,))]

        def path_report(self):
            return {"speculative": {"drafts": 2, "draft_tokens": 6, "accepted_tokens": 3}}

    target = InProcessProbeTarget(Stub())
    (out,) = target.complete(CompletionRequest((1, 2), max_tokens=1, logprobs=2, stop=("z",)))
    assert calls[0][0]["prompt"] == [1, 2] and calls[0][0]["stop"] == ("z",)
    assert out.logprobs[0].top == {3: -0.5, 4: -1.0}
    assert target.max_context == 64 and target.speculative_counters().acceptance_length == pytest.approx(2.5)


def test_in_process_failures_become_target_failures():
    class Broken:
        def generate(self, requests):
            raise RuntimeError("CUDA error: an illegal memory access")

    with pytest.raises(TargetFailure, match="illegal memory access"):
        InProcessProbeTarget(Broken()).complete(CompletionRequest("x"))


def test_fake_target_satisfies_the_protocol():
    assert isinstance(FakeTarget(), ProbeTarget)


def test_in_process_scoring_path_is_chosen_per_side():
    seen = []

    class Scorer:
        def next_token_logprobs(self, ids, through_decode=True):
            seen.append(through_decode)
            return [[0.0]] * len(ids)

    InProcessProbeTarget(Scorer(), through_decode=False).next_token_logprobs([1, 2])
    InProcessProbeTarget(Scorer()).next_token_logprobs([1, 2])
    assert seen == [False, True]  # stock reference by prefill; candidate by the target's default (its decode path)


def _server(answer):
    def handler(request):
        return answer(request)

    client = httpx.Client(base_url="http://server", transport=httpx.MockTransport(handler))
    return OpenAIProbeTarget("http://server", model="m", max_context=128, client=client)


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        (lambda r: httpx.Response(404, json={"detail": "Not Found"}), "has no /tokenize endpoint (HTTP 404)"),
        (lambda r: httpx.Response(200, json={"choices": []}), "answered POST /tokenize without a 'tokens' list"),
        (lambda r: httpx.Response(200, json={"tokens": ["a", "b"]}), "without a 'tokens' list of token ids"),
    ],
)
def test_a_server_without_tokenize_is_named_as_lacking_it(answer, words):
    """#20 row 11: no raw KeyError: 'tokens'; the probe says what the server lacks."""
    from fasttrack.probes.base import CapabilityMissing

    with pytest.raises(CapabilityMissing, match=words.replace("(", r"\(").replace(")", r"\)")):
        _server(answer).tokenize("hello")
    assert _server(lambda r: httpx.Response(200, json={"tokens": [1, 2], "count": 2})).tokenize("hi") == [1, 2]


def test_an_answer_without_choices_is_a_contract_error_not_a_key_error():
    from fasttrack.probes.base import TargetContractError

    target = _server(lambda r: httpx.Response(200, json={"id": "x"}))
    with pytest.raises(TargetContractError, match="answered without a list of choices"):
        target.complete(CompletionRequest("hi"))
