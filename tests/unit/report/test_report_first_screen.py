"""The first screen of every report (fasttrack.report.reasons): the verdict, one line per reason
group worst first, the next command; the same in the HTML verdict box, summary.md and the
terminal summary. Evidence shaped like the example's main job (support.example_evidence)."""

from __future__ import annotations

import hashlib
import re
from dataclasses import replace
from html import unescape
from pathlib import Path

import pytest

from fasttrack.evidence import CheckOutcome, Status, read_evidence, write_evidence
from fasttrack.kinds.registry import KINDS
from fasttrack.report.html import render_html
from fasttrack.report.markdown import render_markdown
from fasttrack.report.reasons import first_screen
from fasttrack.report.summary import summary_text, write_summary
from support.example_evidence import example_evidence


def rendered(evidence, tmp_path: Path) -> tuple[dict, str]:
    path = tmp_path / "evidence.json"
    write_evidence(evidence, path)
    from fasttrack.evidence import read_evidence_dict

    return read_evidence_dict(path), hashlib.sha256(path.read_bytes()).hexdigest()


def box_lines(html: str) -> list[str]:
    box = re.search(
        r'<div class="verdict-box[^"]*"[^>]*>(.*?)</div>\s*(?:<table class="what-ran"|</section>)', html, re.S
    ).group(1)
    blocks = re.findall(r"<(?:p|li)\b[^>]*>(.*?)</(?:p|li)>", box, re.S)
    return [" ".join(unescape(re.sub(r"<[^>]+>", " ", b)).split()) for b in blocks]


def test_example_first_screen_is_verdict_reasons_worst_first_and_next_command():
    screen = first_screen(example_evidence().to_dict(), KINDS)
    lines = screen.lines()
    assert len(lines) <= 8
    assert lines[0] == "INCOMPLETE: 276 of 387 required outcomes passed; 111 did not run"
    assert [g.key for g in screen.groups] == ["underpowered", "hardware"]
    under, hardware = screen.groups
    assert "mrcr, aime25" in under.text and "need ≥ 119" in under.text
    assert "--eval-limit mrcr=all --eval-limit aime25=all" in under.text
    assert hardware.count == 109 and "109 outcomes need NVIDIA H200" in hardware.text
    assert "--hardware 'NVIDIA H200'" in hardware.text
    assert screen.next is not None
    assert screen.next.command == (
        "fasttrack check examples/mini-k3/fasttrack.yaml --jobs 2 --out out/mini-k3 --resume "
        "--eval-limit mrcr=all --eval-limit aime25=all"
    )


def test_failed_then_errored_then_underpowered_then_hardware():
    screen = first_screen(example_evidence(failed=True, errored="target").to_dict(), KINDS)
    assert [g.key for g in screen.groups] == ["failed", "errored", "underpowered", "hardware"]
    failed, errored = screen.groups[:2]
    assert failed.text.startswith("kernels/mini-k3-kernels at cpu ×1 tp2 batch=1 draft_length=6 dtype=fp32")
    assert "features/n_samples at cpu ×1 tp1 (target): the candidate server did not come up" in errored.text
    assert screen.next.command.endswith("--only kernels") and "re-run" in screen.next.why


@pytest.mark.parametrize("code", ["target", "hardware", "dependency"])
def test_errored_outcomes_of_any_reason_code_reach_the_terminal_and_summary_txt(tmp_path, code):
    """An errored outcome whose reason code is also a not-run code (target, hardware, dependency)
    is still named under 'Errored' (#20, row 5): never hidden among missing capabilities."""
    evidence = example_evidence(errored=code)
    text = write_summary(evidence, tmp_path / "summary.txt", KINDS)
    line = next(ln for ln in text.splitlines() if ln.startswith("  Errored:"))
    assert f"features/n_samples at cpu ×1 tp1 ({code}): the candidate server did not come up" in line
    assert (tmp_path / "summary.txt").read_text() == text
    assert text.index("  Errored:") < text.index("  Underpowered:") < text.index("  Not on this machine:")


def test_terminal_summary_in_the_same_order_and_brief():
    text = summary_text(example_evidence(), KINDS)
    lines = text.splitlines()
    assert lines[0] == "fasttrack kimi-k3-latency: INCOMPLETE"
    assert lines[1] == "  276 of 387 required outcomes passed; 111 did not run"
    assert lines[2] == "  (387 outcomes (387 required) of 387 check instances at 12 declared scope points)"
    assert lines[3].startswith("  Underpowered: ") and lines[4].startswith("  Not on this machine: ")
    assert lines[5].startswith("next: fasttrack check examples/mini-k3/fasttrack.yaml")
    assert len(lines) <= 11 and "needs NVIDIA H200 x1 (scope" not in text  # no per-instance lines


def test_html_verdict_box_holds_at_most_eight_lines_and_no_instance(tmp_path):
    html = render_html(*rendered(example_evidence(), tmp_path), kinds=KINDS)
    lines = box_lines(html)
    assert 3 <= len(lines) <= 8
    assert lines[0].startswith("INCOMPLETE 276 of 387 required outcomes passed")
    assert lines[1].startswith("Underpowered 2 evals (mrcr, aime25)") and lines[2].startswith("Not on this machine 109")
    assert lines[-1].startswith(
        "Next fasttrack check examples/mini-k3/fasttrack.yaml --jobs 2 --out out/mini-k3 --resume"
    )
    head = html[: html.index('<section id="scope"')]
    assert "accelerator=NVIDIA H200,batch" not in head and "… and" not in head


def test_summary_md_opens_the_same_way_and_stays_under_sixty_lines(tmp_path):
    text = render_markdown(*rendered(example_evidence(), tmp_path), kinds=KINDS)
    lines = text.splitlines()
    assert len(lines) <= 60
    top = [
        ln
        for ln in lines[
            : lines.index("<details><summary>Outcomes per check kind, coverage, evals, failures and claims</summary>")
        ]
        if ln
    ]
    assert top[1].startswith("**INCOMPLETE**: 276 of 387 required outcomes passed; 111 did not run <sub>(387 outcomes")
    assert top[2].startswith("- **Underpowered**: 2 evals") and top[3].startswith("- **Not on this machine**: 109")
    assert top[4].startswith("**Next:** `fasttrack check examples/mini-k3/fasttrack.yaml --jobs 2")
    assert "needs NVIDIA H200 x1 (scope" not in "\n".join(top)


def test_next_command_per_situation():
    base = example_evidence()

    def next_of(evidence) -> str:
        return first_screen(evidence.to_dict(), KINDS).next.command

    interrupted = example_evidence(state="interrupted")
    assert next_of(interrupted).endswith("--out out/mini-k3 --resume")
    timeout = base.with_checks(
        [
            replace(c, status=Status.ERRORED, reason_code="timeout", reason="ran past its timeout of 600s")
            if c.kind == "divergence" and c.status is Status.PASSED
            else c
            for c in base.checks
        ]
    )
    assert "--resume --timeout-scale 2" in next_of(timeout)
    decided = base.with_checks(
        [
            replace(c, status=Status.PASSED, reason_code=None) if c.reason_code == "underpowered" else c
            for c in base.checks
        ]
    )
    assert next_of(decided) == (
        "fasttrack check examples/mini-k3/fasttrack.yaml --jobs 2 --hardware 'NVIDIA H200' --out out/mini-k3-h200"
    )
    assert "fasttrack merge out/mini-k3 out/mini-k3-h200" in first_screen(decided.to_dict(), KINDS).next.why
    passed = decided.with_checks([c for c in decided.checks if c.status is Status.PASSED])
    assert next_of(passed) == "fasttrack verify out/mini-k3/evidence.json --manifest examples/mini-k3/fasttrack.yaml"
    assert first_screen(passed.to_dict(), KINDS).groups == ()


def test_a_deciding_run_gets_the_time_its_items_need():
    """Eight items took 80 s here: the ~119 items per bin a decision needs take far longer than
    the eval's 600 s limit, so the command scales the limits instead of timing out."""
    base = example_evidence()
    slow = base.with_checks([replace(c, duration_s=80.0) if c.kind == "evals" else c for c in base.checks])
    command = first_screen(slow.to_dict(), KINDS).next.command
    assert "--timeout-scale 6" in command  # mrcr: 80 / 8 x 119 x 3 bins = 3,570 s over 600 s


def test_partial_pass_names_what_it_left_out_and_how_to_finish(tmp_path):
    base = example_evidence()
    cpu_only = [
        replace(c, reason_code="out_of_scope", required=False, reason="NVIDIA H200 excluded by --hardware cpu")
        if c.reason_code == "hardware"
        else replace(c, status=Status.PASSED, reason_code=None)
        if c.reason_code == "underpowered"
        else c
        for c in base.checks
    ]
    partial = base.with_checks(cpu_only, hardware=("cpu",), argv=(*base.run.argv, "--hardware", "cpu"))
    screen = first_screen(partial.to_dict(), KINDS)
    assert screen.verdict == "PASS" and [g.key for g in screen.groups] == ["partial"]
    assert "--hardware cpu: 109 outcomes left out and not counted (NVIDIA H200)" in screen.groups[0].text
    assert screen.next.command.endswith("--hardware 'NVIDIA H200' --out out/mini-k3-h200")


def test_many_groups_are_capped_and_counted():
    base = example_evidence()
    extra = [
        CheckOutcome(
            f"kernels/k{i}",
            "kernels",
            f"k{i}",
            Status.NOT_RUN,
            {"accelerator": f"GPU{i}"},
            f"p{i}",
            True,
            "hardware",
            f"needs GPU{i}",
        )
        for i in range(8)
    ]
    screen = first_screen(base.with_checks([*base.checks, *extra]).to_dict(), KINDS)
    assert len(screen.groups) == 6 and screen.more_groups == 4 and len(screen.lines()) <= 9


def test_round_trip_through_the_file_changes_nothing(tmp_path):
    evidence = example_evidence(failed=True)
    path = tmp_path / "evidence.json"
    write_evidence(evidence, path)
    assert first_screen(read_evidence(path).to_dict(), KINDS) == first_screen(evidence.to_dict(), KINDS)


# ------------------------------------------------------------------------------ sections show what ran


def test_evals_not_run_keep_their_manifest_identity_and_say_why(tmp_path):
    html = render_html(*rendered(example_evidence(), tmp_path), kinds=KINDS)
    section = html[html.index('<section id="evals">') : html.index('<section id="flipped">')]
    text = " ".join(unescape(re.sub(r"<[^>]+>", " ", section)).split())
    assert "mrcr (mrcr_local, grade, margin 0.050) at H200 ×1 tp1: not run needs NVIDIA H200 x1" in text
    assert "aime25 (aime25_chat_local, exact_match, margin 0.050) at H200 ×1 tp1" in text
    assert "mrcr ()" not in text and "aime25 ()" not in text and "margin 0.0 " not in text and "-0.000" not in text


def test_undecided_bins_are_grey_and_the_dots_have_a_legend(tmp_path):
    html = render_html(*rendered(example_evidence(), tmp_path), kinds=KINDS)
    forest = re.search(r'<svg[^>]*class="chart forest".*?</svg>', html, re.S).group(0)
    assert 'fill="#c62828"' not in forest  # nothing failed: no red dot
    assert "passed: lower bound above −margin" in html and "not decided (underpowered" in html


def test_speed_up_colours_follow_the_interval():
    from fasttrack.report.charts import SPEED_LEGEND, speed_colour

    grey = SPEED_LEGEND[2][1]
    assert speed_colour(1.23, 0.9, 1.5) == grey and speed_colour(0.99, 0.8, 1.2) == grey
    assert speed_colour(1.21, 1.02, 1.35).startswith("rgb(") and speed_colour(0.7, 0.6, 0.8) == SPEED_LEGEND[1][1]
    assert speed_colour(1.5, None, None) == grey  # no interval: no claim
    assert speed_colour(None, None, None) == SPEED_LEGEND[3][1]


def test_heatmap_cells_of_the_example(tmp_path):
    html = render_html(*rendered(example_evidence(), tmp_path), kinds=KINDS)
    svg = re.search(r'<svg[^>]*class="chart heatmap".*?</svg>', html, re.S).group(0)
    by_batch = {b: f for f, b in re.findall(r'fill="([^"]+)"[^>]*><title>cpu ×1 tp1 · batch (\d+):', svg)}
    assert by_batch["1"].startswith("rgb(") and by_batch["8"] == "#e0e0e0" and by_batch["64"] == "#e0e0e0"
    assert "faster: the lower bound of the speed-up lies above 1×" in html


def test_numbers_for_people_details_as_key_values_and_no_stray_braces(tmp_path):
    html = render_html(*rendered(example_evidence(), tmp_path), kinds=KINDS)
    assert "2.0933014464984187e-08" not in html and "2.09e-08" in html
    assert not re.search(r"\{&#34;|\{\"|\s\{\}<", html)  # no raw JSON anywhere, no ' {}' after a reason
    features = html[html.index('<section id="features">') : html.index('<section id="kernels">')]
    assert "<dt>cases</dt><dd>8</dd>" in features
    assert features.count("needs NVIDIA H200") == 1  # the probes not run here: one line


def test_kernel_tests_per_point_with_the_worst_ratio_and_one_line_per_missing_accelerator(tmp_path):
    from fasttrack.report.view import build_view

    evidence, digest = rendered(example_evidence(failed=True), tmp_path)
    km = build_view(evidence, digest, KINDS).section("kernels")
    setups = {g["setup"]: g for g in km["setups"]}
    assert set(setups) == {"cpu ×1 tp1", "cpu ×1 tp2", "cpu ×1 tp4"}
    assert all(g["points"] == 84 and len(g["rows"]) == 84 for g in setups.values())
    assert km["setups"][0]["setup"] == "cpu ×1 tp2" and km["setups"][0]["problem"]  # the failure first, open
    bad = km["setups"][0]["rows"][0]
    assert bad["status"] == "failed" and bad["worst"] == "41.50×" and bad["worst_level"] == "bad"
    assert setups["cpu ×1 tp4"]["worst"].startswith("0.30× (test_decode_step_matches_stock[all] at batch=")
    assert [(n["accelerator"], n["count"], n["code"]) for n in km["not_here"]] == [("NVIDIA H200", 84, "hardware")]
    html = render_html(evidence, digest, kinds=KINDS)
    section = html[html.index('<section id="kernels">') : html.index('<section id="benchmarks">')]
    assert section.count("needs NVIDIA H200") == 1 and section.count("<tr><td>batch=") == 252


def _evals_with(base, duration_s: float, **measured):
    return base.with_checks(
        [
            replace(c, duration_s=duration_s, measurements={**c.measurements, **measured}) if c.kind == "evals" else c
            for c in base.checks
        ]
    )


def test_a_deciding_run_counts_the_baseline_the_cache_served_at_what_it_cost():
    """A second run on a warm cache times only the candidate: the deciding run's new items run both
    sides, so the cached items count at their stored cost (mrcr: (12 + 68) / 8 x 119 x 3 bins =
    3,570 s over 600 s), and hits of unknown cost at what a candidate item cost here."""
    base = example_evidence()
    assert "--timeout-scale" not in first_screen(_evals_with(base, 12.0).to_dict(), KINDS).next.command
    stored = _evals_with(
        base,
        12.0,
        cache={"enabled": True, "baseline_hits": 8, "baseline_saved_s": 68.0, "baseline_hits_of_unknown_cost": 0},
        timings={"baseline_s": 0.0, "candidate_s": 10.0},
    )
    assert "--timeout-scale 6" in first_screen(stored.to_dict(), KINDS).next.command
    unknown = _evals_with(
        base,
        12.0,
        cache={"enabled": True, "baseline_hits": 8},  # written before costs were stored
        timings={"baseline_s": 0.0, "candidate_s": 10.0},
    )
    assert "--timeout-scale 2" in first_screen(unknown.to_dict(), KINDS).next.command  # (12 + 8 x 1.25) / 8 x 357 / 600
