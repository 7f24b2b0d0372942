"""The HTML report: sections in order, self-contained, strict CSP, model outputs inert, caps."""

from __future__ import annotations

import hashlib
import json
import re
from html import unescape

import pytest

from fasttrack.evidence import CheckOutcome, Status, read_evidence_dict, write_evidence
from fasttrack.kinds.evals.report import MAX_CONCORDANT_PER_EVAL, MAX_OUTPUT_CHARS
from fasttrack.kinds.registry import KINDS
from fasttrack.report.html import render_html, script_hash
from support import evidence_fixtures

SECTIONS = [
    "verdict",
    "scope",
    "confinement",
    "where",
    "evals",
    "flipped",
    "features",
    "kernels",
    "benchmarks",
    "audits",
    "provenance",
    "checklist",
    "outcomes",
]


def items_json(html: str) -> list:
    block = re.search(r'<script type="application/json" id="items-data">(.*?)</script>', html, re.S)
    assert block, "the items data block is missing"
    return json.loads(block.group(1))


@pytest.mark.parametrize("mode", ["pass", "fail", "incomplete"])
def test_sections_in_the_order_a_reviewer_reads_them(load, mode):
    html = render_html(*load(mode), kinds=KINDS)
    positions = [html.index(f'<section id="{s}"') for s in SECTIONS]
    assert positions == sorted(positions)
    verdict = {"pass": "PASS", "fail": "FAIL", "incomplete": "INCOMPLETE"}[mode]
    assert f'data-verdict="{verdict}"' in html
    assert html.index("data-verdict=") < html.index('<section id="scope"')


def test_self_contained_with_a_strict_csp(load):
    evidence, digest = load("fail")
    html = render_html(evidence, digest, kinds=KINDS)
    csp = unescape(re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', html).group(1))
    assert "default-src 'none'" in csp and "img-src data:" in csp
    scripts = re.findall(r"<script>(.*?)</script>", html, re.S)
    assert len(scripts) == 1, "exactly one executable inline script"
    assert f"script-src '{script_hash(scripts[0])}'" in csp, "the CSP hash must match the inline script byte for byte"
    assert "unsafe-eval" not in csp and "'unsafe-inline'" not in csp.split("script-src")[1].split(";")[0]
    assert not re.search(r"<(link|img|iframe|object|embed)\b", html), "no external resources"
    assert not re.search(r'\s(src|href)="(https?:)?//', html), "no network URLs in src/href"
    assert digest in html


def test_model_outputs_are_text_never_markup(load):
    html = render_html(*load("fail"), kinds=KINDS)
    # No payload survives unescaped anywhere in the document.
    for payload in evidence_fixtures.XSS_PAYLOADS[:5]:
        assert payload not in html
    assert html.count("<script") == 2  # our script and the JSON data block
    assert "<img" not in html and "<svg onload" not in html
    # The JSON block for the script has no raw < > & and round-trips to the exact outputs.
    block = re.search(r'id="items-data">(.*?)</script>', html, re.S).group(1)
    assert not set("<>&") & set(block)
    outputs = " ".join(row[7] + row[8] for row in items_json(html))
    assert "<script>window.__xss = 1; alert(1)</script>" in outputs
    assert '"><img src=x onerror="window.__xss=2;alert(1)">' in outputs


def test_server_rendered_items_escape_payloads(load):
    evidence, digest = load("fail")
    checks = [c for c in evidence["checks"] if c["kind"] == "evals"][:1]
    checks[0]["measurements"]["samples"][0]["candidate_output"] = "<script>window.__xss=9</script>"
    checks[0]["measurements"]["samples"][0]["candidate_score"] = 0.0
    checks[0]["measurements"]["samples"][0]["baseline_score"] = 1.0
    html = render_html(evidence, digest, kinds=KINDS)
    assert "&lt;script&gt;window.__xss=9&lt;/script&gt;" in html
    assert "<script>window.__xss=9" not in html


def test_flipped_items_first_and_concordant_capped(load):
    evidence, digest = load("fail")
    rows = items_json(render_html(evidence, digest, kinds=KINDS))
    directions = [r[3] for r in rows]
    first_same = directions.index("same")
    assert all(d != "same" for d in directions[:first_same])
    assert "same" not in directions[first_same:] or all(d == "same" for d in directions[first_same:])
    assert directions[0] == "right_to_wrong"
    flips = sum(
        c["measurements"]["flips"]["right_to_wrong"] + c["measurements"]["flips"]["wrong_to_right"]
        for c in evidence["checks"]
        if c["kind"] == "evals"
    )
    assert first_same == flips, "every discordant item is embedded"
    n_evals = sum(1 for c in evidence["checks"] if c["kind"] == "evals")
    assert len(rows) - first_same <= MAX_CONCORDANT_PER_EVAL * n_evals


def test_long_outputs_are_truncated_with_a_mark(load):
    rows = items_json(render_html(*load("pass"), kinds=KINDS))
    long_rows = [r for r in rows if r[9]]
    assert long_rows, "the fixture has a very long generation"
    assert all(len(r[8]) <= MAX_OUTPUT_CHARS for r in rows)


def test_heatmap_forest_and_kernel_matrix_show_the_failure(load):
    html = render_html(*load("fail"), kinds=KINDS)
    assert 'class="chart heatmap"' in html and 'class="chart forest"' in html
    assert "−margin 0.02" not in html and "−margin -0.02" in html
    # kernel matrix: the failed cell at batch 17 is marked bad with its error / tolerance
    assert re.search(
        r'<td class="num bad" title="failed: worst \|err\| 8\.3e-02 vs atol 2\.0e-03 — max abs error[^"]*">41\.50× ✗</td>',
        html,
    )
    assert "vllm/distributed/all_reduce.py" in html and "(outside scope)" in html
    # labelled claims are shown as labels
    for label in ("synthetic acceptance", "prefill excluded", "not comparable"):
        assert f'<span class="badge label">{label}</span>' in html


def test_incomplete_report_says_why(load):
    html = render_html(*load("incomplete"), kinds=KINDS)
    assert "needs 16x NVIDIA GB300; this machine has 8" in html
    assert "must run before a PASS" in html


def test_sparse_measurements_do_not_break_the_report(load, tmp_path):
    """A runner that wrote fewer keys than docs/evidence.md lists gives a sparser report, not a crash."""
    ev = evidence_fixtures.build_evidence(samples=20)
    sparse = tuple(
        CheckOutcome(
            c.id, c.kind, c.name, c.status, c.scope_point, c.scope_point_id, c.required, c.reason_code, c.reason
        )
        for c in ev.checks
    )
    path = tmp_path / "evidence.json"
    write_evidence(ev.with_checks(sparse), path)
    html = render_html(read_evidence_dict(path), "0" * 64, kinds=KINDS)
    assert '<section id="checklist">' in html and "No eval samples recorded." in html


def test_ten_thousand_samples_stay_small(tmp_path):
    """Size is a property of the output; render time is measured by benchmarks/report_speed.py."""
    path = tmp_path / "evidence.json"
    write_evidence(evidence_fixtures.build_evidence(samples=10_000), path)
    html = render_html(read_evidence_dict(path), hashlib.sha256(path.read_bytes()).hexdigest(), kinds=KINDS)
    assert len(html.encode()) <= 10 * 1000 * 1000
    assert "unchanged items left out" in html


def test_not_run_status_is_never_shown_as_passed(load):
    evidence, digest = load("incomplete")
    html = render_html(evidence, digest, kinds=KINDS)
    not_run = sum(1 for c in evidence["checks"] if c["status"] == Status.NOT_RUN.value)
    assert html.count('<span class="badge s-not_run">not run</span>') >= not_run


def test_kernel_matrix_columns_rows_and_caps():
    from fasttrack.kinds.kernels.report import MAX_KERNEL_ROWS, _short_test, kernel_matrix

    assert _short_test("k.py::test_decode[batch=1,dtype=fp32-all]") == "test_decode[all]"
    assert _short_test("k.py::test_fused[batch=1,tensor_parallel=2]") == "test_fused"
    assert _short_test("k.py::test_plain") == "test_plain"
    tests = [
        {"nodeid": "k.py::test_stress[tensor_parallel=1]", "outcome": "passed", "tolerance": None, "worst_error": None}
    ]
    kernels = [
        {
            "kind": "kernels",
            "name": "k",
            "status": "passed",
            "scope_point": {"batch": i},
            "measurements": {"tests": tests},
        }
        for i in range(MAX_KERNEL_ROWS + 5)
    ]
    kernels.append(
        {
            "kind": "kernels",
            "name": "k",
            "status": "failed",
            "scope_point": {"batch": 999},
            "reason": "boom",
            "measurements": {},
        }
    )
    (setup,) = kernel_matrix({}, kernels)["setups"]
    assert setup["rows"][0]["point"] == "batch=999" and setup["rows"][0]["reason"] == "boom" and setup["problem"]
    assert len(setup["rows"]) == MAX_KERNEL_ROWS and setup["omitted"] == 6 and setup["points"] == MAX_KERNEL_ROWS + 6
    assert setup["rows"][1]["cells"]["test_stress"]["text"] == "passed"  # no tolerance recorded: outcome only


def test_heatmap_letters_count_only_checks_that_ran(load):
    evidence, digest = load("incomplete")
    html = render_html(evidence, digest, kinds=KINDS)
    svg = re.search(r'<svg[^>]*class="chart heatmap".*?</svg>', html, re.S).group(0)
    tips = re.findall(r"<title>(GB300 ×16 tp8 · batch 1: [^<]*)</title>", svg)
    # kernels and evals were planned there but did not run (hardware): they do not count as coverage
    assert tips and "worst status: errored" in tips[0]
    covered = tips[0].split("checks: ")[1].split(";")[0].split(", ")
    assert "kernels" not in covered and "evals" not in covered and "stress" in covered


def test_provenance_names_hardware_commits_and_digests(load):
    evidence, digest = load("pass")
    html = render_html(evidence, digest, kinds=KINDS)
    prov = html[html.index('<section id="provenance">') : html.index('<section id="checklist">')]
    assert "16 × NVIDIA GB300 · interconnect nvlink" in prov
    assert evidence["git"]["head"] in prov and evidence["manifest"]["sha256"] in prov and digest in prov
    evidence["environment"] = {
        "accelerator": "cpu",
        "accelerators": [],
        "accelerator_count": 0,
        "interconnect": "loopback",
    }
    assert "cpu, no GPU · interconnect loopback" in render_html(evidence, digest, kinds=KINDS)


def test_confinement_not_run_says_why(load):
    evidence, digest = load("pass")
    scope_diff = next(c for c in evidence["checks"] if c["kind"] == "scope_diff")
    scope_diff.update(
        status="not_run", reason_code="dependency", reason="no base commit to compare with", measurements={}
    )
    html = render_html(evidence, digest, kinds=KINDS)
    section = html[html.index('<section id="confinement">') : html.index('<section id="where">')]
    assert "no base commit to compare with" in section and "not run" in section


def test_long_outputs_on_every_item_still_fit_in_ten_megabytes():
    """Thousands of discordant items with long generations: the embedded text is budgeted."""
    from dataclasses import replace

    from fasttrack.kinds.evals.report import MAX_EMBEDDED_CHARS, MAX_OUTPUT_CHARS

    ev = evidence_fixtures.build_evidence(samples=20)
    first = next(c for c in ev.checks if c.kind == "evals")
    long = "x<y & z " * (MAX_OUTPUT_CHARS // 4)
    n = 2 * MAX_EMBEDDED_CHARS // (2 * MAX_OUTPUT_CHARS)  # over twice what the budget holds (escapes count)
    samples = [
        {
            "doc_id": i,
            "prompt": f"p{i}",
            "baseline_output": long,
            "candidate_output": long + "!",
            "baseline_score": 1.0,
            "candidate_score": 0.0,
            "bin": "b",
            "flipped": True,
        }
        for i in range(n)
    ]
    checks = tuple(
        replace(c, measurements={**c.measurements, "samples": samples}) if c is first else c for c in ev.checks
    )
    html = render_html(ev.with_checks(checks).to_dict(), "0" * 64, kinds=KINDS)
    assert len(html.encode()) <= 10 * 1000 * 1000
    left_out = int(re.search(r"(\d+) discordant items left out \(cap\)", html).group(1))
    assert n // 2 < left_out < n


def test_checklist_names_narrowed_checks_and_command_line_eval_limits(load):
    from fasttrack.report.view import narrowed_checks

    evidence, digest = load("pass")
    first = evidence["manifest"]["data"]["evals"][0]["id"]
    # What the planner records (Plan.narrowed), read back without manifest code.
    evidence["plan"] = {
        "narrowed": [
            {"check": f"evals {first}", "points": {"tensor_parallel": [1]}},
            {"check": "features temperature_sampling", "points": {"accelerator": ["cpu"], "tensor_parallel": [1, 2]}},
            {"check": "speculative", "points": {"tensor_parallel": [1]}},
        ]
    }
    assert narrowed_checks(evidence) == [
        f"evals {first} at tensor_parallel 1",
        "features temperature_sampling at accelerator cpu, tensor_parallel 1/2",
        "speculative at tensor_parallel 1",
    ]
    evidence["run"]["eval_limits"] = {first: None}
    checklist = unescape(
        render_html(evidence, digest, kinds=KINDS).split('<section id="checklist">')[1].split("</section>")[0]
    )
    assert f"fewer hardware setups than its scope (points): evals {first} at tensor_parallel 1;" in checklist
    assert f"not the manifest (--eval-limit): {first}=all." in checklist
    plain, _ = load("pass")
    assert "(points)" not in unescape(render_html(plain, digest, kinds=KINDS))


def test_the_ablation_table_shows_each_switch_alone_and_left_out_beside_all_on():
    from dataclasses import replace

    from fasttrack.evidence import CheckOutcome, Status
    from fasttrack.report.html import render_html
    from support import evidence_fixtures

    ev = evidence_fixtures.build_evidence("kimi-k3-latency", "pass")
    point = {"accelerator": "NVIDIA H200", "batch": 1, "device_count": 1, "tensor_parallel": 1}
    arms = [
        CheckOutcome(
            f"benchmarks/{name}@x", "benchmarks", name, Status.PASSED, point, "x", False, measurements={"ratio": r}
        )
        for name, r in (("decode~fused", 1.1), ("decode~graphs", 4.9), ("decode~-fused", 5.0), ("decode", 5.5))
    ]
    html = render_html(replace(ev, checks=(*ev.checks, *arms)).to_dict(), "0" * 64, kinds=KINDS)
    table = html[html.index('<table id="ablation">') :]
    table = table[: table.index("</table>")]
    # a leave-one-out arm (every switch but one on) is headed as such
    assert "<th>fused alone</th><th>graphs alone</th><th>all but fused</th><th>all on</th>" in table
    assert (
        '<td class="num">1.10</td><td class="num">4.90</td><td class="num">5.00</td><td class="num">5.50</td>' in table
    )


def test_speculative_rows_show_the_candidates_and_stocks_acceptance_side_by_side(load):
    html = unescape(render_html(*load("pass"), kinds=KINDS))
    audits = html[html.index('<section id="audits"') : html.index('<section id="provenance"')]
    assert "acceptance length" in audits and "stock acceptance length" in audits and "acceptance margin" in audits


def test_the_evals_section_shows_the_reference_and_the_family_each_eval_was_held_to():
    """evals[].reference (an expected value with rtol) and eval_families (one alpha shared,
    Bonferroni) are recorded per outcome; the evals section of report.html and summary.md shows
    them beside the paired test."""
    from dataclasses import replace

    from fasttrack.report.markdown import render_markdown

    ev = evidence_fixtures.build_evidence("kimi-k3-latency", "pass")
    point = {"accelerator": "NVIDIA H200", "device_count": 1, "tensor_parallel": 1}
    base = {"task": "gsm8k", "metric": "exact_match", "margin": 0.02, "alpha": 0.025, "n": 400, "diff": 0.0}
    family = {"name": "accuracy", "alpha": 0.05, "correction": "bonferroni", "members": ["gsm8k", "mmlu"]}
    reference = {"value": 0.62, "rtol": 0.05, "rule": "at_least", "measured": 0.6, "low": 0.589, "high": None}
    evals = [
        CheckOutcome(
            "evals/gsm8k@x",
            "evals",
            "gsm8k",
            Status.PASSED,
            point,
            "x",
            True,
            measurements={
                **base,
                "reference": {**reference, "higher_is_better": True, "passed": True},
                "family": {**family, "adjusted_alpha": 0.025},
            },
        ),
        CheckOutcome(
            "evals/mmlu@x",
            "evals",
            "mmlu",
            Status.FAILED,
            point,
            "x",
            True,
            reason_code="regression",
            measurements={**base, "task": "mmlu", "reference": {**reference, "measured": 0.55, "passed": False}},
        ),
    ]
    plain = replace(ev, checks=(*[c for c in ev.checks if c.kind != "evals"], *evals)).to_dict()
    html = unescape(render_html(plain, "0" * 64, kinds=KINDS))
    section = html[html.index('<section id="evals"') : html.index('<section id="flipped"')]
    met = "reference 0.6200 (rtol 0.050, at_least): accepts at least 0.5890; the candidate's mean 0.6000, met"
    assert met in section and "the candidate's mean 0.5500, missed" in section
    shared = "family accuracy: alpha 0.050 shared by 2 evals (gsm8k, mmlu), Bonferroni: each at alpha 0.0250"
    assert shared in section
    markdown = render_markdown(plain, "0" * 64, kinds=KINDS)
    assert "| reference / family |" in markdown and f"{met}; {shared}" in markdown
    no_rules = render_markdown(ev.to_dict(), "0" * 64, kinds=KINDS)
    assert "reference / family" not in no_rules  # no column where no eval declares either
