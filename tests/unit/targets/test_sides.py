"""One way to open both sides: the factory's keywords per side and scope point, the server spec,
closing, and the one error family. Each case where the four earlier copies disagreed is here."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from fasttrack.errors import TargetError
from fasttrack.manifest import load_manifest
from fasttrack.targets.openai.side import server_spec
from fasttrack.targets.python.factory import factory_options
from fasttrack.targets.sides import TargetDependencyMissing, open_side, opened_pair
from support.paths import SUPPORT

MANIFEST = """\
fasttrack: 1
optimisation: {{id: sides, title: sides}}
model: {{id: org/m, code_paths: ["m/*.py"]}}
switch:
  name: fast
  default: false
  enable: {{engine_arg: fast, server_flag: --fast}}
  proof: {{source: metrics, metric: steps_total, label: path}}
scope:
  hardware:
    - {{accelerator: cpu, device_counts: [1], tensor_parallel: [1, 2]}}
  batch: {{min: 1, max: 4}}
preserve: {{full_context: true, temperature_sampling: true, structured_output: true}}
target:
{target}
"""

FACTORIES = """
closed = []

class Made:
    def __init__(self, **options):
        self.options = options
    def close(self):
        closed.append(self.options.get("fast"))

def any_keyword(**options):
    return Made(**options)

def narrow(fast=False):
    return Made(fast=fast)

def tp_only(fast=False, tensor_parallel_size=1):
    return Made(fast=fast, tensor_parallel_size=tensor_parallel_size)

def broken(**options):
    raise RuntimeError("cannot load weights")

def needs_missing_module(**options):
    import not_a_module_anyone_has  # noqa: F401
"""


def manifest_for(tmp_path: Path, target: str):
    (tmp_path / "sides_factories.py").write_text(textwrap.dedent(FACTORIES))
    path = tmp_path / "fasttrack.yaml"
    path.write_text(MANIFEST.format(target=textwrap.indent(target, "  ")))
    return load_manifest(path)


def python_target(tmp_path: Path, factory: str = "any_keyword"):
    return manifest_for(tmp_path, f'kind: python\npython: {{factory: "sides_factories:{factory}", path: "."}}')


CPU_TP1 = {"accelerator": "cpu", "device_count": 1, "tensor_parallel": 1}
CPU_TP2 = {**CPU_TP1, "tensor_parallel": 2}


def test_the_switch_is_off_for_the_baseline_on_for_the_candidate_and_left_alone_for_the_default(tmp_path):
    m = python_target(tmp_path)
    assert factory_options(m, "baseline", CPU_TP1)["fast"] is False
    assert factory_options(m, "candidate", CPU_TP1)["fast"] is True
    assert "fast" not in factory_options(m, "baseline", CPU_TP1, switch_default=True)  # the proof of path's stock side
    assert factory_options(m, "candidate", CPU_TP1, switch_default=True)["fast"] is True


def test_tensor_parallel_size_is_passed_where_the_factory_takes_it_and_required_above_one(tmp_path):
    m = python_target(tmp_path)
    # A factory taking **options gets the point's size at TP 1 too (the copies disagreed here).
    assert factory_options(m, "candidate", CPU_TP1)["tensor_parallel_size"] == 1
    assert open_side(m, "candidate", CPU_TP2).target.options["tensor_parallel_size"] == 2
    narrow = python_target(tmp_path, "narrow")
    assert open_side(narrow, "candidate", CPU_TP1).target.options == {"fast": True}  # not needed at TP 1: left out
    with pytest.raises(
        TargetError, match=r"takes no 'tensor_parallel_size' argument, so it cannot run this scope point"
    ):
        open_side(narrow, "candidate", CPU_TP2)  # silently running TP 1 would pass a point that never ran
    assert open_side(python_target(tmp_path, "tp_only"), "baseline", CPU_TP2).target.options == {
        "fast": False,
        "tensor_parallel_size": 2,
    }


def test_device_dtype_and_draft_length_follow_the_point(tmp_path):
    m = python_target(tmp_path)
    gpu = {"accelerator": "NVIDIA H200", "device_count": 1, "tensor_parallel": 1, "dtype": "bf16"}
    options = factory_options(m, "candidate", gpu, draft_length=4)
    assert (options["device"], options["dtype"], options["speculative_draft_tokens"]) == ("cuda", "bf16", 4)
    assert factory_options(m, "candidate", CPU_TP1)["device"] == "cpu"  # a cpu point is the CPU, on a GPU host too
    assert "device" not in factory_options(m, "candidate", None)  # no point: the factory's own default
    with pytest.raises(TargetError, match="takes no 'device' argument"):
        open_side(python_target(tmp_path, "narrow"), "candidate", gpu)


def test_a_factory_that_fails_or_lacks_a_module_is_a_target_error(tmp_path):
    with pytest.raises(
        TargetError,
        match=r"the candidate target could not be created by sides_factories:broken: RuntimeError: cannot load weights",
    ):
        open_side(python_target(tmp_path, "broken"), "candidate", CPU_TP1)
    with pytest.raises(TargetDependencyMissing, match="needs the Python module 'not_a_module_anyone_has'"):
        open_side(python_target(tmp_path, "needs_missing_module"), "candidate", CPU_TP1)
    with pytest.raises(TargetError, match="is not under"):
        open_side(
            manifest_for(tmp_path, 'kind: python\npython: {factory: "no_such_module:create", path: "."}'),
            "baseline",
            CPU_TP1,
        )
    assert issubclass(TargetDependencyMissing, TargetError)  # one family: runners catch TargetError


def test_opened_pair_closes_both_sides_also_on_error(tmp_path):
    m = python_target(tmp_path)
    with pytest.raises(ValueError), opened_pair(m, CPU_TP1) as (baseline, candidate):
        assert (baseline.name, candidate.name) == ("baseline", "candidate")
        raise ValueError("a probe failed")
    factories = sys.modules["sides_factories"]
    assert factories.closed[-2:] == [True, False]  # candidate closed first, then the baseline


def test_server_spec_fills_placeholders_and_needs_a_command_or_url(tmp_path):
    command = f'["{sys.executable}", "{SUPPORT / "fake_openai_server.py"}", "--port", "{{port}}", "--tp", "{{tensor_parallel}}"]'
    m = manifest_for(
        tmp_path,
        "kind: openai\nopenai:\n"
        f"  baseline: {{command: {command}}}\n"
        f'  candidate: {{command: {command[:-1]}, "--fast"]}}\n'
        '  speculative_args: [--draft, "{draft_length}"]\n',
    )
    spec = server_spec(m, "candidate", CPU_TP2, draft_length=3)
    assert spec.command is not None and spec.url is None
    assert "--fast" in spec.command
    assert spec.command[spec.command.index("--tp") + 1] == "2" and "{port}" in spec.command
    assert spec.command[-2:] == ("--draft", "3")
    baseline = server_spec(m, "baseline", CPU_TP1)
    assert "--fast" not in baseline.command and "--draft" not in baseline.command
    url_only = manifest_for(
        tmp_path,
        "kind: openai\nopenai:\n  baseline: {url: 'http://127.0.0.1:9'}\n  candidate: {url: 'http://127.0.0.1:9'}\n",
    )
    assert server_spec(url_only, "baseline", CPU_TP1).url == "http://127.0.0.1:9"


def test_a_passthrough_factory_whose_target_takes_no_device_still_opens_at_a_cpu_point(tmp_path):
    """``device="cpu"`` is a courtesy at a cpu point (the GPUs are hidden anyway): a factory that
    forwards ``**options`` to a constructor without ``device`` is called again without it."""
    (tmp_path / "passthrough.py").write_text(
        "class T:\n    def __init__(self, fast=False, tensor_parallel_size=1):\n        self.fast = fast\n"
        "def create(**options):\n    return T(**options)\n"
    )
    m = manifest_for(tmp_path, 'kind: python\npython: {factory: "passthrough:create", path: "."}')
    assert open_side(m, "candidate", CPU_TP1).target.fast is True
    with pytest.raises(TargetError, match="unexpected keyword argument 'device'"):
        open_side(m, "candidate", {"accelerator": "NVIDIA H200", "device_count": 1, "tensor_parallel": 1})
