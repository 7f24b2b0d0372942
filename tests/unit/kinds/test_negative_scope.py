"""Negative scope (switch ``inert`` and ``refused``): where a switch must not act, the proof of path
runs the candidate with it on and passes only when its counter did not move and its greedy
answers equal stock's; a combination the server must refuse passes only when the server exits
non-zero with the declared message before it serves, and fails when it serves."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from fasttrack.environment import Environment
from fasttrack.kinds.context import RunContext
from fasttrack.kinds.reading import Subject
from fasttrack.kinds.refused import rule as refused_rule
from fasttrack.kinds.refused import run as refused_runner
from fasttrack.kinds.registry import KINDS
from fasttrack.kinds.switch import rule as switch_rule
from fasttrack.kinds.switch import run as switch_runner
from fasttrack.manifest import load_manifest
from fasttrack.plan import build_plan

SUPPORT = Path(__file__).resolve().parents[2] / "support"
CPU = Environment("cpu", (), "test", "loopback", "cpu", 2, "Linux", "3.11")

INERT = """\
fasttrack: 1
optimisation: {id: moe, title: moe}
model: {id: org/a, code_paths: ["m/*.py"]}
switch:
  name: fast
  default: false
  enable: {engine_arg: fast}
  proof: {source: inprocess}
  points: {model: [org/a]}
  inert: {model: [org/b]}
scope:
  hardware: [{accelerator: cpu, device_counts: [1], tensor_parallel: [1]}]
  models: [org/a, org/b]
  batch: {min: 1, max: 2, points: [1, 2]}
preserve: {full_context: true, temperature_sampling: true, structured_output: true}
target: {kind: python, python: {factory: "neg_target:create", path: ".", options: {OPTIONS}}}
"""

# The fast path exists for org/a only; on org/b the switch falls back to stock. Planted faults:
# ``leaky`` runs the fast path on org/b too; ``drift`` takes the stock path on org/b but answers
# differently with the switch on.
TARGET = """
class Target:
    def __init__(self, model, fast=False, leaky=False, drift=False, **_settings):
        self.fast = fast and (model == "org/a" or leaky)
        self.drift = fast and drift and model == "org/b"
        self.path = {}

    def generate(self, requests):
        key = "fast" if self.fast else "stock"
        self.path[key] = self.path.get(key, 0) + max(r.get("max_tokens", 1) for r in requests)
        return [{"text": r["prompt"] + (" drifted" if self.drift else " ok")} for r in requests]

    def path_report(self):
        return {"decode_steps_by_path": dict(self.path)}

def create(**options):
    return Target(**options)
"""


def inert_check(tmp_path: Path, model: str, options: str = ""):
    (tmp_path / "neg_target.py").write_text(textwrap.dedent(TARGET))
    (tmp_path / "fasttrack.yaml").write_text(INERT.replace("{OPTIONS}", "{" + options + "}"))
    (tmp_path / ".git").mkdir(exist_ok=True)
    sys.modules.pop("neg_target", None)
    m = load_manifest(tmp_path / "fasttrack.yaml")
    plan = build_plan(m, CPU, KINDS)
    instance = next(i for i in plan.instances if i.kind == "switch" and i.scope_point.get("model") == model)
    outcome = switch_runner.run(instance, RunContext(m, None, tmp_path, tmp_path / "a", 60.0))
    return m, outcome


def test_the_switch_is_inert_on_the_other_checkpoint(tmp_path):
    m, acts = inert_check(tmp_path, "org/a")
    assert acts.status.value == "passed", acts.reason
    assert acts.measurements["switches"]["fast"]["applies"] is True
    m, inert = inert_check(tmp_path, "org/b")
    assert inert.status.value == "passed", inert.reason
    entry = inert.measurements["switches"]["fast"]
    assert entry["inert"] is True and entry["applies"] is False and entry["candidate_steps"] == 0
    assert inert.measurements["inert_outputs_match"] is True
    assert switch_rule.check(inert.to_dict(), Subject(m, {})) == []


def test_a_switch_that_acts_on_the_other_checkpoint_fails(tmp_path):
    m, outcome = inert_check(tmp_path, "org/b", "leaky: true")
    assert outcome.status.value == "failed" and outcome.reason_code == "acts_out_of_scope"
    assert "fast must not act here (inert)" in outcome.reason
    # verify refuses a pass recorded over it
    forged = {**outcome.to_dict(), "status": "passed", "reason_code": None}
    assert any("acted where it must not" in p for p in switch_rule.check(forged, Subject(m, {})))


def test_stock_path_with_other_answers_fails(tmp_path):
    _m, outcome = inert_check(tmp_path, "org/b", "drift: true")
    assert outcome.status.value == "failed" and outcome.reason_code == "mismatch"
    assert "3 of 3 greedy answers differ from stock's" in outcome.reason


REFUSED = """\
fasttrack: 1
optimisation: {id: moe, title: moe}
model: {id: org/a, code_paths: ["m/*.py"]}
switch:
  name: fast
  default: false
  enable: {server_flag: --fast}
  proof: {source: metrics, metric: steps_total, label: path}
  refused:
    - {id: eplb, serve_args: [--enable-eplb], message: "EPLB is not supported with the fast backend"}
scope:
  hardware: [{accelerator: cpu, device_counts: [1], tensor_parallel: [1]}]
preserve: {full_context: true, temperature_sampling: true, structured_output: true}
target:
  kind: openai
  openai:
    baseline: {command: [PY, SERVER, --port, "{port}"]}
    candidate: {command: [PY, SERVER, --port, "{port}", --fast], env: {ENV}}
    startup_timeout_s: 20
"""


def refused_check(tmp_path: Path, env: str = "", extra: str = ""):
    text = REFUSED.replace("PY", sys.executable).replace("SERVER", str(SUPPORT / "fake_openai_server.py"))
    text = text.replace("{ENV}", "{" + env + "}").replace("[--enable-eplb]", f"[--enable-eplb{extra}]")
    (tmp_path / "fasttrack.yaml").write_text(text)
    (tmp_path / ".git").mkdir(exist_ok=True)
    m = load_manifest(tmp_path / "fasttrack.yaml")
    plan = build_plan(m, CPU, KINDS)
    [instance] = [i for i in plan.instances if i.kind == "refused"]
    assert instance.runnable and instance.id.startswith("refused/eplb@")
    return m, refused_runner.run(instance, RunContext(m, None, tmp_path, tmp_path / "a", 60.0))


def test_a_refused_combination_passes_when_the_server_refuses_with_the_message(tmp_path):
    m, outcome = refused_check(tmp_path)
    assert outcome.status.value == "passed", outcome.reason
    assert outcome.measurements["served"] is False and outcome.measurements["exit_code"] == 1
    assert "EPLB is not supported" in outcome.measurements["matched_line"]
    assert refused_rule.check(outcome.to_dict(), Subject(m, {})) == []


@pytest.mark.parametrize(
    ("env", "extra", "words"),
    [
        ("FAKE_ACCEPTS_EPLB: '1'", "", "served"),
        ("FAKE_EPLB_CRASH: '1'", "", "a crash is no refusal"),
    ],
)
def test_a_combination_that_is_served_or_crashes_fails(tmp_path, env, extra, words):
    m, outcome = refused_check(tmp_path, env, extra)
    assert outcome.status.value == "failed" and outcome.reason_code == "not_refused"
    assert words in outcome.reason
    forged = {**outcome.to_dict(), "status": "passed", "reason_code": None}
    assert refused_rule.check(forged, Subject(m, {}))


def test_refused_combinations_have_a_report_section_in_html_and_markdown():
    """The refused kind's report section (kinds/refused/report.py): a table per combination in
    report.html (linked from the contents) and summary.md, from the evidence alone; none without."""
    from dataclasses import replace
    from html import unescape

    from fasttrack.evidence import CheckOutcome, Status
    from fasttrack.report.html import render_html
    from fasttrack.report.markdown import render_markdown
    from support import evidence_fixtures

    ev = evidence_fixtures.build_evidence("kimi-k3-latency", "pass")
    point = {"accelerator": "NVIDIA H200", "device_count": 1, "tensor_parallel": 1}
    found = {"switch": "fast", "serve_args": ["--enable-eplb"], "env": {"EPLB_LOG": "1"}, "message": "EPLB is not"}
    outcomes = [
        CheckOutcome(
            "refused/eplb@x",
            "refused",
            "eplb",
            Status.PASSED,
            point,
            "x",
            True,
            measurements={
                **found,
                "served": False,
                "exit_code": 1,
                "message_found": True,
                "matched_line": "ValueError: EPLB is not supported with this backend",
            },
        ),
        CheckOutcome(
            "refused/dbo@x",
            "refused",
            "dbo",
            Status.FAILED,
            point,
            "x",
            True,
            reason_code="not_refused",
            measurements={**found, "serve_args": ["--enable-dbo"], "served": True, "message_found": False},
        ),
    ]
    assert 'id="refused"' not in render_html(ev.to_dict(), "0" * 64, kinds=KINDS)  # none recorded: no section
    plain = replace(ev, checks=(*ev.checks, *outcomes)).to_dict()
    html = unescape(render_html(plain, "0" * 64, kinds=KINDS))
    assert '<a href="#refused">Refused combinations</a>' in html
    section = html[html.index('id="refused"') :]
    assert "--enable-eplb EPLB_LOG=1" in section and "exited 1 before serving" in section
    assert "/EPLB is not/ found: ValueError: EPLB is not supported with this backend" in section
    assert "--enable-dbo EPLB_LOG=1" in section and "served" in section and "/EPLB is not/ not found" in section
    markdown = render_markdown(plain, "0" * 64, kinds=KINDS)
    assert "### Refused combinations" in markdown
    assert "| fast | --enable-eplb EPLB_LOG=1 | passed | exited 1 before serving |" in markdown
