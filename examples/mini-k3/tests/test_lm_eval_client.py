"""lm-eval's own `local-completions` and `local-chat-completions` models against the server.

The server runs in a subprocess on a free localhost port with a tiny random-init model; lm-eval
runs offline on two small local tasks (one generate_until, one multiple-choice scored by
loglikelihood through the server's echo logprobs and its /tokenize endpoint). Its answers are
compared with the same model run in-process.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import jinja2
import pytest
import torch
from mini_k3.config import MiniK3Config
from mini_k3.engine import Engine, GenerationRequest
from mini_k3.model import MiniK3
from mini_k3.server import CHAT_TEMPLATE_JINJA
from mini_k3.tokenizer import ByteTokenizer
from safetensors.torch import save_file

pytestmark = pytest.mark.slow
PACKAGE_ROOT = Path(__file__).resolve().parents[1]
TOKENIZER = ByteTokenizer()
QUESTIONS = [{"question": f"{a} + {b} =", "answer": str(a + b), "choices": [str(a + b), str(a + b + 1)], "label": 0}
             for a, b in [(1, 2), (3, 4), (5, 6), (7, 1)]]
GEN_TASK = """\
task: mini_k3_gen
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: generate_until
doc_to_text: "{{{{question}}}}"
doc_to_target: "{{{{answer}}}}"
generation_kwargs:
  until: ["\\n"]
  max_gen_toks: 6
  do_sample: false
  temperature: 0.0
metric_list:
  - metric: exact_match
"""
MC_TASK = """\
task: mini_k3_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: label
target_delimiter: " "
metric_list:
  - metric: acc
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    torch.manual_seed(0)
    model = MiniK3(MiniK3Config.tiny())
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.mul_(4.0)
    folder = tmp_path_factory.mktemp("weights")
    model.config.save(folder / "config.json")
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(folder / "model.safetensors"))
    return folder


@pytest.fixture(scope="module")
def server(model_dir: Path, tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PACKAGE_ROOT), os.environ.get("PYTHONPATH", "")])}
    with open(log, "w") as log_file:
        process = subprocess.Popen(
            [sys.executable, "-m", "mini_k3.server", "--model", str(model_dir), "--port", str(port),
             "--max-model-len", "256", "--threads", "1"],
            stdout=log_file, stderr=subprocess.STDOUT, env=env,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300  # a guard: a loaded host may take a while to start it
        while True:
            if process.poll() is not None:
                pytest.fail(f"server exited early: {log.read_text()}")
            try:
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"server did not become healthy: {log.read_text()}")
            time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        process.wait(timeout=120)


@pytest.fixture(scope="module")
def task_dir(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tasks")
    data = folder / "questions.jsonl"
    data.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    (folder / "mini_k3_gen.yaml").write_text(GEN_TASK.format(data=data))
    (folder / "mini_k3_mc.yaml").write_text(MC_TASK.format(data=data))
    return folder


@pytest.fixture(scope="module")
def local_engine(model_dir: Path) -> Engine:
    return Engine(model_path=str(model_dir))


@pytest.fixture()
def offline(monkeypatch, tmp_path) -> None:
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.setenv(name, "1")
    monkeypatch.setenv("HF_UPDATE_DOWNLOAD_COUNTS", "0")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "datasets"))


def evaluate(model: str, model_args: dict, tasks: list[str], task_dir: Path, **kwargs) -> dict:
    import lm_eval
    from lm_eval.tasks import TaskManager

    return lm_eval.simple_evaluate(
        model=model, model_args=model_args, tasks=tasks, task_manager=TaskManager(include_path=str(task_dir)),
        log_samples=True, bootstrap_iters=0, **kwargs,
    )


def metrics_text(base: str) -> str:
    return httpx.get(f"{base}/metrics").text


def test_chat_template_jinja_matches_the_tokenizer() -> None:
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}, {"role": "assistant", "content": "a"}]
    rendered = jinja2.Template(CHAT_TEMPLATE_JINJA).render(messages=messages, add_generation_prompt=True)
    assert rendered == TOKENIZER.apply_chat_template(messages, add_generation_prompt=True)


def test_local_completions(server: str, task_dir: Path, local_engine: Engine, offline) -> None:
    args = {"base_url": f"{server}/v1/completions", "model": "mini-k3", "tokenizer_backend": "remote",
            "tokenized_requests": True, "num_concurrent": 1, "max_retries": 1, "max_length": 256}
    results = evaluate("local-completions", args, ["mini_k3_gen", "mini_k3_mc"], task_dir)
    assert 0.0 <= results["results"]["mini_k3_gen"]["exact_match,none"] <= 1.0
    assert 0.0 <= results["results"]["mini_k3_mc"]["acc,none"] <= 1.0
    assert len(results["samples"]["mini_k3_gen"]) == len(results["samples"]["mini_k3_mc"]) == len(QUESTIONS)
    # Generations equal the in-process greedy continuation, cut at the task's stop string.
    for sample in results["samples"]["mini_k3_gen"]:
        question = sample["doc"]["question"]
        [expected] = local_engine.generate([GenerationRequest(question, max_tokens=6, temperature=0.0, stop=("\n",))])
        assert sample["resps"][0][0] == expected.outputs[0].text
    # Loglikelihoods equal in-process teacher-forced scores.
    for sample in results["samples"]["mini_k3_mc"]:
        doc = sample["doc"]
        for choice, response in zip(doc["choices"], sample["resps"]):
            logprob, _ = local_engine.score(TOKENIZER.encode(doc["question"]), TOKENIZER.encode(" " + choice))
            assert response[0][0] == pytest.approx(logprob, abs=1e-3)
    assert 'minik3_requests_total{endpoint="/v1/completions",status="200"}' in metrics_text(server)


def test_local_chat_completions(server: str, task_dir: Path, local_engine: Engine, offline) -> None:
    args = {"base_url": f"{server}/v1/chat/completions", "model": "mini-k3", "num_concurrent": 1, "max_retries": 1}
    results = evaluate("local-chat-completions", args, ["mini_k3_gen"], task_dir, apply_chat_template=True)
    assert 0.0 <= results["results"]["mini_k3_gen"]["exact_match,none"] <= 1.0
    assert len(results["samples"]["mini_k3_gen"]) == len(QUESTIONS)
    for sample in results["samples"]["mini_k3_gen"]:
        prompt = TOKENIZER.apply_chat_template([{"role": "user", "content": sample["doc"]["question"]}])
        [expected] = local_engine.generate([GenerationRequest(prompt, max_tokens=6, temperature=0.0, stop=("\n",))])
        assert sample["resps"][0][0] == expected.outputs[0].text
    assert 'minik3_requests_total{endpoint="/v1/chat/completions",status="200"} 4.0' in metrics_text(server)
