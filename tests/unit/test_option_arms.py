"""Option-valued switches and rival arms (issue #36 item 1, vllm#49636): a switch that is a value
of an existing engine option (``--moe-backend``) whose stock is another value of it, and several
mutually exclusive values each judged as its own candidate against the one stock server."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from fasttrack.environment import Environment
from fasttrack.evidence import CheckOutcome, Status, Verdict, compute_verdict
from fasttrack.evidence.arms import arm_verdicts
from fasttrack.kinds.registry import KINDS
from fasttrack.kinds.switch.run import judge_switch
from fasttrack.manifest import check_text, load_manifest
from fasttrack.plan import build_plan
from fasttrack.plan.servers import shared_servers
from fasttrack.targets.pool import spec_key
from fasttrack.targets.registry import TARGET_KINDS
from fasttrack.targets.vllm.side import server_spec

REPO = Path(__file__).resolve().parents[2]
FIXTURE = REPO / "tests/fixtures/manifests/valid/option-arms.yaml"
EXAMPLE = REPO / "examples/vllm-deepseek-v4-mega-moe/fasttrack.yaml"
ARMS = ("mega_cutedsl", "mega_trtllm")
CPU = Environment("cpu", (), "test", "loopback", "Test CPU", 2, "Linux", "3.11")
POINT = {"accelerator": "cpu", "device_count": 1, "tensor_parallel": 1}


def errors(text: str) -> list[tuple[int | None, str]]:
    _, problems = check_text(text)
    return [(p.line, p.message) for p in problems if p.severity == "error"]


def test_the_arms_are_switches_of_their_own_named_and_counted_by_their_value():
    m = load_manifest(FIXTURE)
    assert m.rival_arms == ARMS
    assert [(s.name, s.option, s.option_value, s.option_stock, s.rival_of) for s in m.switches] == [
        (arm, "--moe-backend", arm, "cutlass", "mega_moe") for arm in ARMS
    ]
    assert [s.path_value for s in m.switches] == list(ARMS)  # the counter's label value per arm
    example = load_manifest(EXAMPLE)
    assert example.rival_arms == ("flashinfer_moe_ep_mega_cutedsl", "flashinfer_moe_ep_mega_trtllm")


def test_each_side_gets_the_option_once_stock_on_the_baseline_the_arm_on_its_candidate():
    m = load_manifest(FIXTURE)
    baselines = set()
    for arm in ARMS:
        armed = m.for_arm(m.arm_switches(arm))
        base = server_spec(armed, "baseline", POINT).command
        cand = server_spec(armed, "candidate", POINT).command
        assert base[-2:] == ("--moe-backend", "cutlass") and base.count("--moe-backend") == 1
        assert cand[-2:] == ("--moe-backend", arm) and cand.count("--moe-backend") == 1
        baselines.add(spec_key(server_spec(armed, "baseline", POINT)))
    assert len(baselines) == 1  # one stock server, whichever arm asks
    # "all on" never turns a rival arm on: the plain candidate is stock-valued, never two backends
    assert server_spec(m, "candidate", POINT).command.count("--moe-backend") == 1


def test_without_a_stock_value_the_baseline_runs_the_engine_default(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text(FIXTURE.read_text().replace("    stock: cutlass\n", ""))
    m = load_manifest(path)
    armed = m.for_arm(m.arm_switches("mega_trtllm"))
    assert "--moe-backend" not in server_spec(armed, "baseline", POINT).command
    assert server_spec(armed, "candidate", POINT).command[-2:] == ("--moe-backend", "mega_trtllm")


def test_one_value_is_one_candidate(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text(FIXTURE.read_text().replace("    arms: [mega_cutedsl, mega_trtllm]\n", "    value: mega_cutedsl\n"))
    path.write_text(path.read_text().replace(", arm: mega_cutedsl}", "}"))
    m = load_manifest(path)
    assert m.rival_arms == () and [s.name for s in m.switches] == ["mega_moe"]
    assert server_spec(m, "candidate", POINT).command[-2:] == ("--moe-backend", "mega_cutedsl")
    assert server_spec(m, "baseline", POINT).command[-2:] == ("--moe-backend", "cutlass")
    names = {i.name for i in build_plan(m, CPU, KINDS).instances}
    assert not any("~" in n for n in names)


@pytest.mark.parametrize(
    ("change", "line", "fragment"),
    [
        # the stock value is also a candidate's
        (("    stock: cutlass\n", "    stock: mega_trtllm\n"), 12, "mega_trtllm is also the stock value"),
        # a side's own arguments set the option, in either spelling
        (
            ('serve_args: [--max-model-len, "4096"]', 'serve_args: [--max-model-len, "4096", --moe-backend, x]'),
            27,
            "--moe-backend sets --moe-backend, the option of the switch at $.switch",
        ),
        (
            ('serve_args: [--max-model-len, "4096"]', 'serve_args: ["--moe_backend=x"]'),
            27,
            "--moe_backend=x sets --moe-backend",
        ),
        # a claim about a manifest with arms names its arm
        (("{switch: true, arm: mega_cutedsl}", "{switch: true}"), 38, "say which (candidate setup arm)"),
        (("arm: mega_cutedsl}", "arm: cutedsl}"), 38, "arm 'cutedsl' is not an arm of this manifest"),
        # value and arms, or neither
        (("    arms: [mega_cutedsl, mega_trtllm]\n", "    value: a\n    arms: [b, c]\n"), 13, "not both"),
        (("    arms: [mega_cutedsl, mega_trtllm]\n", ""), 9, "give the candidate's value (value) or rival arms"),
        # an option switch is turned on by its option alone
        (("    option: --moe-backend\n", "    option: --moe-backend\n    server_flag: --mega\n"), 11, "alone"),
    ],
)
def test_semantic_errors_name_the_line(change, line, fragment):
    text = FIXTURE.read_text().replace(*change)
    assert text != FIXTURE.read_text()
    found = errors(text)
    assert any(fragment in message and at == line for at, message in found), found


def test_an_in_process_target_or_a_running_server_cannot_be_given_the_option():
    text = FIXTURE.read_text()
    python = text.replace(
        "  kind: vllm\n  vllm:\n    model: org/tiny-moe\n    served_model_name: tiny-moe\n"
        '    serve_args: [--max-model-len, "4096"]\n',
        '  kind: python\n  python: {factory: "tiny:create"}\n',
    )
    assert any("needs a server target" in m for _l, m in errors(python))
    openai = text.replace(
        "  kind: vllm\n  vllm:\n    model: org/tiny-moe\n    served_model_name: tiny-moe\n"
        '    serve_args: [--max-model-len, "4096"]\n',
        '  kind: openai\n  openai:\n    baseline: {url: "http://127.0.0.1:8000"}\n'
        '    candidate: {command: [srv, --port, "{port}"]}\n',
    )
    assert any("a running server at a url" in m for _l, m in errors(openai))


def test_the_schema_wants_two_arms_or_more():
    text = FIXTURE.read_text().replace("arms: [mega_cutedsl, mega_trtllm]", "arms: [mega_cutedsl]")
    assert any("should be non-empty" in m or "too short" in m for _l, m in errors(text))


def test_ablation_beside_arms_and_a_second_switch_with_arms_are_refused():
    text = FIXTURE.read_text() + "ablation: {benchmarks: [decode]}\n"
    assert any("ablation beside rival arms" in m for _l, m in errors(text))


def test_every_check_that_compares_a_candidate_is_planned_once_per_arm_stock_only_once():
    m = load_manifest(FIXTURE)
    plan = build_plan(m, CPU, KINDS)
    names = {(i.kind, i.name) for i in plan.instances}
    for kind, name in (("switch", "mega_moe"), ("evals", "gsm8k"), ("benchmarks", "decode")):
        assert (kind, name) not in names
        assert {(kind, f"{name}~{arm}") for arm in ARMS} <= names
    assert ("features", "temperature_sampling~mega_trtllm") in names
    assert [i.name for i in plan.instances if i.kind == "stock_unchanged"] == ["greedy"]  # stock only: once
    bench = {i.name: i for i in plan.instances if i.kind == "benchmarks"}
    assert bench["decode~mega_cutedsl"].id.startswith("benchmarks/decode~mega_cutedsl@")
    assert bench["decode~mega_cutedsl"].config["arm"] == ["mega_cutedsl"]
    # a claim is measured by the arm it names only
    assert [c["id"] for c in bench["decode~mega_cutedsl"].config["claims"]] == ["cutedsl-faster"]
    assert bench["decode~mega_trtllm"].config["claims"] == []


def test_a_server_target_starts_one_candidate_per_arm_and_one_stock_server_per_point():
    m = load_manifest(FIXTURE)
    plan = build_plan(m, CPU, KINDS)
    runnable = [replace(i, runnable=True) for i in plan.instances]  # vLLM need not be installed here
    drives = {name for name, kind in KINDS.items() if kind.execution.drives_target}
    servers = shared_servers(m, runnable, drives, TARGET_KINDS["vllm"])
    assert sorted((s.side, s.arm or "") for s in servers) == [("baseline", ""), *(("candidate", a) for a in ARMS)]
    stock = next(s for s in servers if s.side == "baseline")
    assert any("~mega_cutedsl" in c for c in stock.checks) and any("~mega_trtllm" in c for c in stock.checks)
    from fasttrack.plan.render import render_plan_table

    text = render_plan_table(replace(plan, instances=tuple(runnable), servers=servers))
    assert "candidate (arm mega_cutedsl):" in text and "candidate (arm mega_trtllm):" in text
    assert text.count("] baseline:") == 1  # one stock server at the one point


def test_the_example_plans_one_candidate_per_arm_at_every_point():
    m = load_manifest(EXAMPLE)
    plan = build_plan(m, CPU, KINDS)
    bench = [i for i in plan.instances if i.kind == "benchmarks"]
    assert len(bench) == 2 * len(m.deployments())  # B200 and B300, each arm
    assert {i.name for i in bench} == {f"decode-throughput~{arm}" for arm in m.rival_arms}


def test_the_proof_of_path_of_an_arm_requires_its_own_value_and_not_the_other_arms():
    m = load_manifest(FIXTURE)
    armed = m.for_arm(m.arm_switches("mega_trtllm"))
    group = "vllm:moe_backend_calls_total/backend"
    counts = {1: {group: {"mega_trtllm": 4.0}}}
    stock = {1: {group: {"cutlass": 4.0}}}
    judged = {s.name: judge_switch(armed, s, POINT, stock, counts) for s in armed.switches}
    assert judged["mega_trtllm"].applies and not judged["mega_cutedsl"].applies


def outcome(name: str, status: Status, kind: str = "benchmarks") -> CheckOutcome:
    return CheckOutcome(f"{kind}/{name}@p", kind, name, status, reason="why")


def test_the_verdict_passes_only_when_every_arm_passes_and_each_arms_verdict_is_shown():
    data = load_manifest(FIXTURE).data
    checks = [
        outcome("code_paths", Status.PASSED, "scope_diff"),
        outcome("decode~mega_cutedsl", Status.PASSED),
        outcome("decode~mega_trtllm", Status.FAILED),
    ]
    per_arm = arm_verdicts(checks, data)
    assert per_arm["mega_cutedsl"].status is Verdict.PASS
    assert per_arm["mega_trtllm"].status is Verdict.FAIL
    assert compute_verdict(checks).status is Verdict.FAIL
    checks[2] = outcome("decode~mega_trtllm", Status.NOT_RUN)
    assert arm_verdicts(checks, data)["mega_trtllm"].status is Verdict.INCOMPLETE
    assert compute_verdict(checks).status is Verdict.INCOMPLETE
    assert arm_verdicts(checks, {"switch": {"name": "s", "enable": {"env": "A=1"}}}) == {}


def test_the_summary_shows_each_arms_verdict():
    from fasttrack.report.summary import summary_text
    from support.example_evidence import example_evidence

    evidence = example_evidence()
    manifest = replace(evidence.manifest, data=load_manifest(FIXTURE).data)
    checks = [
        outcome("code_paths", Status.PASSED, "scope_diff"),
        outcome("decode~mega_cutedsl", Status.PASSED),
        outcome("decode~mega_trtllm", Status.FAILED),
    ]
    evidence = replace(evidence, manifest=manifest).with_checks(checks, state="complete")
    lines = summary_text(evidence, KINDS).splitlines()
    assert lines[0].endswith(": FAIL")
    assert "  arm mega_cutedsl: PASS (2 passed, 0 failed, 0 not run)" in lines
    assert (
        "  arm mega_trtllm: FAIL (1 passed, 1 failed, 0 not run; failed: benchmarks/decode~mega_trtllm@p: why)" in lines
    )
    from fasttrack.report.html import render_html
    from fasttrack.report.markdown import render_markdown

    plain = evidence.to_dict()
    markdown = render_markdown(plain, "0" * 64, kinds=KINDS)
    assert (
        "- **arm `mega_trtllm`: FAIL** (1 passed, 1 failed, 0 not run; failed: benchmarks/decode~mega_trtllm@p: why)"
        in markdown
    )
    html = render_html(plain, "0" * 64, kinds=KINDS)
    assert "<b>arm mega_cutedsl: PASS</b>" in html and "<b>arm mega_trtllm: FAIL</b>" in html


def test_each_arms_verdict_is_stored_in_the_evidence_and_verify_rederives_it(tmp_path):
    """verdict.arms: per arm its verdict and required outcomes per status, written where the verdict
    is computed (Evidence.with_checks), read by the reports, re-derived by verify."""
    from fasttrack.evidence import read_evidence_dict, write_evidence
    from fasttrack.verification.verify import VerifyOptions, verify
    from support.example_evidence import example_evidence

    evidence = example_evidence()
    manifest = replace(evidence.manifest, data=load_manifest(FIXTURE).data)
    checks = [
        outcome("code_paths", Status.PASSED, "scope_diff"),
        outcome("decode~mega_cutedsl", Status.PASSED),
        outcome("decode~mega_trtllm", Status.FAILED),
        outcome("eval~mega_trtllm", Status.NOT_RUN, "evals"),
    ]
    evidence = replace(evidence, manifest=manifest).with_checks(checks, state="complete")
    path = tmp_path / "evidence.json"
    write_evidence(evidence, path)
    stored = read_evidence_dict(path)["verdict"]["arms"]  # schema-validated
    assert [(a["arm"], a["status"]) for a in stored] == [("mega_cutedsl", "PASS"), ("mega_trtllm", "FAIL")]
    assert stored[0]["counts"] == {"passed": 2, "failed": 0, "errored": 0, "not_run": 0}
    assert stored[1]["counts"] == {"passed": 1, "failed": 1, "errored": 0, "not_run": 1}
    assert stored[1]["reason"] == "failed: benchmarks/decode~mega_trtllm@p: why"

    def consistent(ev) -> tuple[bool, str]:
        write_evidence(ev, path)
        [found] = [f for f in verify(VerifyOptions(path), KINDS).findings if f.name == "verdict-consistent"]
        return found.ok, found.message

    assert consistent(evidence) == (
        True,
        "recorded verdict follows from the outcomes (so do the 2 rival arms' verdicts)",
    )
    forged = {**stored[1], "status": "PASS", "counts": {**stored[1]["counts"], "failed": 0}}
    ok, message = consistent(replace(evidence, verdict=replace(evidence.verdict, arms=(stored[0], forged))))
    assert not ok and "arm mega_trtllm: recorded PASS" in message and "the outcomes give FAIL" in message
    ok, message = consistent(replace(evidence, verdict=replace(evidence.verdict, arms=())))
    assert not ok and "arm mega_cutedsl: recorded nothing" in message
    plain = replace(evidence, manifest=replace(evidence.manifest, data={"switch": {"name": "s"}}))
    assert "arms" not in plain.with_checks(checks[:1], state="complete").to_dict()["verdict"]  # no rival arms


def test_the_report_shows_rival_arms_side_by_side_not_as_an_ablation():
    from fasttrack.kinds.benchmarks.report import ablation

    def bench(name: str, ratio: float) -> dict:
        return {"name": name, "status": "passed", "scope_point": POINT, "measurements": {"ratio": ratio}}

    table = ablation([bench("decode~mega_cutedsl", 1.3), bench("decode~mega_trtllm", 1.1)])
    assert table is not None and table["rival"] and table["switches"] == list(ARMS)
    assert table["rows"][0]["cells"] == ["1.30", "1.10"]
    assert not ablation([bench("decode", 1.4), bench("decode~fused", 1.2)])["rival"]  # an ablation


def test_the_runs_server_pool_starts_the_stock_server_once_and_each_arms_candidate():
    from fasttrack.engine.servers import point_manifests, point_specs

    m = load_manifest(FIXTURE)
    plan = build_plan(m, CPU, KINDS)
    driving = [i for i in plan.instances if KINDS[i.kind].execution.drives_target]
    by_point = point_manifests(m, driving)
    assert len(by_point) == 1  # one deployment
    manifests = by_point["accelerator=cpu,device_count=1,tensor_parallel=1"].values()
    assert len(manifests) == 3  # each arm's checks, and stock_unchanged (stock only)
    specs = point_specs(TARGET_KINDS["vllm"].shared_server, manifests, POINT)
    commands = sorted((s.name, s.command[-1]) for s in specs)
    assert commands == [("baseline", "cutlass"), ("candidate", "mega_cutedsl"), ("candidate", "mega_trtllm")]


def test_a_claim_whose_sides_pass_the_switchs_own_option_is_comparable():
    from fasttrack.kinds.claims.lint import lint_claims

    text = FIXTURE.read_text().replace(
        "        baseline: {setup: {switch: false}}\n        candidate: {setup: {switch: true, arm: mega_cutedsl}}\n",
        "        baseline: {setup: {switch: false, engine_args: [--moe-backend, cutlass, --enforce-eager]}}\n"
        "        candidate: {setup: {switch: true, arm: mega_cutedsl,\n"
        '                            engine_args: ["--moe_backend=mega_cutedsl", --enforce-eager]}}\n',
    )
    _, problems = check_text(text)
    assert [p.message for p in problems] == []  # no "not comparable" warning
    data, _ = check_text(text)
    assert [lint.comparable for lint in lint_claims(data)] == [True]
    other = text.replace(
        "--enforce-eager]}}\n        speedup", "--enforce-eager, --max-num-seqs, '8']}}\n        speedup"
    )
    _, problems = check_text(other)
    assert any("not comparable" in p.message and "engine_args" in p.message for p in problems)


def test_a_rival_arms_census_proof_is_its_own_switch_outcome():
    m = load_manifest(FIXTURE)
    assert m.switch_check_name == "mega_moe"
    assert m.for_arm(m.arm_switches("mega_trtllm")).switch_check_name == "mega_moe~mega_trtllm"
    assert m.for_arm(["mega_trtllm"]).switch_check_name == "mega_moe~mega_trtllm"


def test_validate_exits_2_naming_file_line_and_field_of_a_side_that_sets_the_option():
    from click.testing import CliRunner

    from fasttrack.cli.validate import validate

    bad = REPO / "tests/fixtures/manifests/invalid/option-set-by-serve-args.yaml"
    result = CliRunner().invoke(validate, [str(bad)], standalone_mode=False)
    assert result.return_value == 2, result.output
    assert f"{bad}:28: $.target.vllm.baseline.serve_args[1]: --moe_backend=cutlass sets --moe-backend" in result.output
    ok = CliRunner().invoke(validate, [str(EXAMPLE)], standalone_mode=False)
    assert ok.return_value == 0 and "ok: " in ok.output and "warning" not in ok.output
