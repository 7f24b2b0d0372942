"""Evals through lm-eval's own ``local-completions`` client against two servers, asked at once
(`fasttrack.kinds.evals.native`, ``lm_eval_model``), and bins judged at their own margin.

The servers are small stdlib HTTP servers that solve the MRCR-format rows lm-eval sends them
(the task's context is the JSON message list, sent as the completion prompt), one of them with a
planted long-context bug."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("lm_eval")

from fasttrack.kinds.evals import native
from fasttrack.kinds.evals.compare import run_eval_comparison
from fasttrack.kinds.evals.run import side_models
from fasttrack.targets.lm_adapter import TargetLM
from fasttrack.targets.protocol import OpenedSide
from support.eval_fakes import solve_mrcr, write_mrcr
from support.paths import ROOT


class _Solver(BaseHTTPRequestHandler):
    break_after_chars: int | None = None
    prompts: list[str]

    def do_GET(self) -> None:
        self._send({"data": [{"id": "fake-model"}]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        prompts = body["prompt"] if isinstance(body["prompt"], list) else [body["prompt"]]
        self.prompts.extend(prompts)
        choices = [{"index": i, "text": self._answer(p), "finish_reason": "stop"} for i, p in enumerate(prompts)]
        self._send({"choices": choices})

    def _answer(self, prompt: str) -> str:
        answer = solve_mrcr(json.loads(prompt))
        if self.break_after_chars is not None and len(prompt) > self.break_after_chars:
            return answer[::-1]  # the planted bug: long prompts come back garbled
        return answer

    def _send(self, obj: Any) -> None:
        data = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def _serve(break_after_chars: int | None = None) -> tuple[ThreadingHTTPServer, list[str]]:
    prompts: list[str] = []
    handler = type("Solver", (_Solver,), {"break_after_chars": break_after_chars, "prompts": prompts})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, prompts


@pytest.fixture
def servers() -> Iterator[Any]:
    started: list[ThreadingHTTPServer] = []

    def start(break_after_chars: int | None = None) -> tuple[str, list[str]]:
        server, prompts = _serve(break_after_chars)
        started.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}", prompts

    yield start
    for server in started:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def mrcr(tmp_path_factory):
    return write_mrcr(tmp_path_factory.mktemp("native") / "mrcr.jsonl", 240)


def cfg(mrcr, **kw):
    base = {
        "id": "mrcr",
        "task": "mrcr_local",
        "task_dir": "checks/evals/mrcr",
        "data_files": str(mrcr),
        "metric": "grade",
        "margin": 0.05,
        "alpha": 0.05,
        "generation": {"temperature": 0.0, "max_tokens": 64, "seed": 7},
        "bins": {"field": "n_chars", "edges": [0, 2000, 4000], "margin": 0.15},
        "sequential": {"enabled": True, "batch_size": 10, "min_samples": 80},
        "lm_eval_model": "local-completions",
        "model_args": {"num_concurrent": 8},
    }
    return {**base, **kw}


def client(url: str, **model_args: Any) -> Any:
    args = native.client_args("local-completions", url, "fake-model", model_args, concurrency=8)
    return native.lm_eval_client("local-completions", args)


def test_lm_evals_own_client_is_made_with_the_servers_endpoint_and_the_declared_args():
    args = native.client_args("local-completions", "http://h:1/", "m", {"max_gen_toks": 9, "timeout": 60}, 16)
    assert args["base_url"] == "http://h:1/v1/completions" and args["model"] == "m"
    assert args["num_concurrent"] == 16 and args["timeout"] == 60 and "max_gen_toks" not in args
    assert args["tokenizer_backend"] is None and args["tokenized_requests"] is False
    chat = native.client_args("local-chat-completions", "http://h:1", "m", {}, 1)
    assert chat["base_url"] == "http://h:1/v1/chat/completions"
    lm = client("http://h:1")
    assert type(lm).__name__ == "LocalCompletionsAPI"


def test_server_sides_get_lm_evals_client_and_in_process_sides_the_adapter(mrcr):
    served = SimpleNamespace(model="mini-k3")  # the side's client knows the served model
    servers = [
        OpenedSide(n, "vllm", served, url=f"http://127.0.0.1:{p}") for n, p in (("baseline", 1), ("candidate", 2))
    ]
    (base, cand), parallel = side_models(cfg(mrcr), servers, 8)
    assert parallel and type(base).__name__ == "LocalCompletionsAPI" and base.base_url.endswith(":1/v1/completions")
    assert cand.base_url.endswith(":2/v1/completions") and cand._concurrent == 8 and cand.model == "mini-k3"
    in_process = [OpenedSide(n, "python", object()) for n in ("baseline", "candidate")]
    lms, parallel = side_models(cfg(mrcr), in_process, 8)
    assert not parallel and all(isinstance(lm, TargetLM) for lm in lms)
    undeclared, parallel = side_models(cfg(mrcr, lm_eval_model=None), servers, 8)
    assert not parallel and all(isinstance(lm, TargetLM) for lm in undeclared)


def test_both_servers_answer_through_lm_eval_and_the_bins_settle_together(mrcr, servers):
    (base_url, base_prompts), (cand_url, cand_prompts) = servers(), servers()
    r = run_eval_comparison(cfg(mrcr), client(base_url), client(cand_url), root=ROOT, parallel=True)
    m = r.to_measurements()
    assert r.status == "passed", r.reason
    assert m["n"] == m["sequential"]["n_used"] < 240 and m["diff"] == 0
    assert len({b["n"] for b in m["bins"]}) == 1  # one per bin in turn: every bin grew alike
    assert sorted(base_prompts) == sorted(cand_prompts) and len(base_prompts) == m["n"]
    assert all(b["margin"] == 0.15 for b in m["bins"]) and m["margin"] == 0.05


def test_a_long_context_bug_on_the_candidate_server_fails_its_bin(mrcr, servers):
    (base_url, _), (cand_url, _) = servers(), servers(break_after_chars=4000)
    r = run_eval_comparison(cfg(mrcr), client(base_url), client(cand_url), root=ROOT, parallel=True)
    assert r.status == "failed" and r.reason_code == "regression"
    assert "2000-4000" in r.reason and "margin 0.15" in r.reason


def test_interleaving_takes_one_item_per_bin_in_turn_in_the_seeded_order():
    from fasttrack.kinds.evals.items import interleaved

    labels = {0: "a", 1: "b", 2: "a", 3: "c", 4: "b", 5: "a", 6: "c", 7: "a"}
    order = [7, 6, 5, 4, 3, 2, 1, 0]
    # two whole cycles (b and c have two items each); a's extra items are left out
    assert interleaved(order, labels, ["a", "b", "c"]) == [7, 4, 6, 5, 1, 3]
