"""In-process targets whose answers fasttrack cannot read: the check errors with the precise
reason (what is missing, what shape is expected); it neither crashes nor lets a probe judge it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from fasttrack.evidence import Status
from fasttrack.kinds.context import RunContext
from fasttrack.kinds.features import run as features
from fasttrack.manifest import ScopePoint, load_manifest
from fasttrack.plan import CheckInstance
from fasttrack.probes.adapters import completions_of
from fasttrack.probes.base import CompletionRequest, TargetContractError, TargetFailure

FAKE_MANIFEST = Path(__file__).resolve().parent / "fake_manifest.yaml"
POINT = ScopePoint.of({"accelerator": "cpu", "device_count": 1, "tensor_parallel": 1})
# A target in the shape lm-eval's adapter accepts (dicts with text) but probes cannot use.
TEXT_ONLY_TARGET = """
class TextOnly:
    max_context = 256

    def generate(self, requests):
        return [{"text": "hello", "finish_reason": "stop"} for _ in requests]

    def next_token_logprobs(self, ids):
        raise RuntimeError("not used")


def create(**options):
    return TextOnly()
"""


def output(**fields):
    base = {"text": "hi", "token_ids": [1, 2], "finish_reason": "stop", "logprobs": None}
    base.update(fields)
    return SimpleNamespace(**{k: v for k, v in base.items() if v is not ...})


REQUEST = CompletionRequest("p")


def test_results_with_outputs_are_read():
    [[c]] = completions_of([SimpleNamespace(outputs=[output()])], [REQUEST])
    assert (c.text, c.token_ids, c.finish_reason, c.logprobs) == ("hi", (1, 2), "stop", None)


@pytest.mark.parametrize(
    "results, words",
    [
        ([{"text": "hi"}], "result 0 is a dict without .outputs"),
        (["hi"], "result 0 is a str without .outputs"),
        ([SimpleNamespace(outputs=[output(token_ids=...)])], "lacks .token_ids"),
        ([SimpleNamespace(outputs=[output(text=..., finish_reason=...)])], "lacks .text, .finish_reason"),
        ([SimpleNamespace(outputs=[output(logprobs=[1.5])])], "unreadable .logprobs"),
        ([SimpleNamespace(outputs=[output(token_ids=["a"])])], ".token_ids is not a sequence of ints"),
        (None, "returned NoneType, not a list"),
    ],
)
def test_unreadable_answers_name_what_is_missing(results, words):
    with pytest.raises(TargetContractError, match="expected one result per request|not a sequence|unreadable") as err:
        completions_of(results, [REQUEST], "TextOnly")
    assert words in str(err.value)


def test_a_lost_request_is_the_target_failing_not_a_shape_problem():
    with pytest.raises(TargetFailure, match="returned 1 results for 2 requests"):
        completions_of([SimpleNamespace(outputs=[output()])], [REQUEST, REQUEST])


def test_features_runner_errors_with_the_reason_on_a_text_only_target(tmp_path):
    (tmp_path / "text_only_target.py").write_text(TEXT_ONLY_TARGET)
    text = FAKE_MANIFEST.read_text().replace(
        'factory: "fasttrack.probes.fake:create"', f'factory: "text_only_target:create"\n    path: {tmp_path}'
    )
    path = tmp_path / "fasttrack.yaml"
    path.write_text(text)
    manifest = load_manifest(path)
    instance = CheckInstance(
        f"features/stop_strings@{POINT.id}",
        "features",
        "stop_strings",
        POINT,
        True,
        True,
        None,
        None,
        None,
        1.0,
        60.0,
        {"name": "stop_strings"},
    )
    outcome = features.run(instance, RunContext(manifest, None, tmp_path, tmp_path / "artifacts", 60.0))
    assert (outcome.status, outcome.reason_code) == (Status.ERRORED, "target")
    assert "cannot read the target's answer: TextOnly.generate() result 0 is a dict without .outputs" in outcome.reason


def test_example_server_commands_carry_the_scope_points_tensor_parallel_size():
    # Without the fill, a server target at TP 2/4 would have run at TP 1 (or failed on a literal brace).
    from pathlib import Path

    from fasttrack.targets.openai.side import server_command

    manifest = load_manifest(Path(__file__).resolve().parents[3] / "examples" / "mini-k3" / "fasttrack.yaml")
    for side in ("baseline", "candidate"):
        command = server_command(manifest, side, {"tensor_parallel": 4, "batch": 8}, None)
        assert command[command.index("--tensor-parallel-size") + 1] == "4"
        assert "{port}" in command  # left for the server manager, which picks a free port
    candidate = server_command(manifest, "candidate", {"tensor_parallel": 1}, None)
    assert all(s.server_flag in candidate for s in manifest.switches)  # every switch on
    assert "--latency-specialized" not in server_command(manifest, "baseline", {"tensor_parallel": 1}, None)
