"""The first screen in Chromium at 1400x900 (Playwright + Debian's chromium): the top of the
report of an example-shaped run states the verdict, why and the next command, and nothing else
is above the fold; summary.md rendered (markdown-it, as GitHub shows it) opens the same way.
Asserted on the rendered text; the screenshots go to $FASTTRACK_SCREENSHOT_DIR (CI keeps them)."""

from __future__ import annotations

import importlib.util
import os
import re
from pathlib import Path

import pytest

from fasttrack.evidence import write_evidence
from support.example_evidence import example_evidence
from support.paths import ROOT

CHROMIUM = Path("/usr/bin/chromium")
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)"
    ),
]
FOLD = 900

# The first screen's text, and where the first section after it starts.
FIRST_SCREEN = """() => {
  const box = document.querySelector('#verdict .verdict-box').getBoundingClientRect();
  const scope = document.querySelector('#scope').getBoundingClientRect();
  const visible = [...document.querySelectorAll('body *')].filter(e => {
    const r = e.getBoundingClientRect();
    return e.children.length === 0 && r.height > 0 && r.top < innerHeight && e.innerText && e.innerText.trim();
  }).map(e => e.innerText.trim());
  return {box_top: box.top, box_bottom: box.bottom, scope_top: scope.top, height: innerHeight,
          text: document.querySelector('#verdict .verdict-box').innerText, visible: visible,
          matrix_top: document.querySelector('#verdict table.what-ran').getBoundingClientRect().top,
          matrix_rows: [...document.querySelectorAll('#verdict table.what-ran tbody tr')].map(
            tr => [tr.querySelector('a').getAttribute('href'), ...[...tr.querySelectorAll('td')].map(td => td.innerText)])};
}"""


def first_screen_script():
    spec = importlib.util.spec_from_file_location("first_screen", ROOT / "scripts" / "first_screen.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("first-screen")
    write_evidence(example_evidence(), folder / "run" / "evidence.json")
    report, summary = first_screen_script().render(folder / "run", folder)
    return {"report": report, "summary": summary}


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"], headless=True)
        yield b
        b.close()


def shot(page, name: str, tmp_path: Path) -> None:
    folder = Path(os.environ.get("FASTTRACK_SCREENSHOT_DIR") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / name))


def test_the_reports_first_screen_states_the_verdict_why_and_the_next_command(browser, pages, tmp_path):
    page = browser.new_page(viewport={"width": 1400, "height": FOLD})
    page.goto(pages["report"].as_uri(), wait_until="load")
    seen = page.evaluate(FIRST_SCREEN)
    shot(page, "first-screen-report.png", tmp_path)
    page.close()
    lines = [ln.strip() for ln in seen["text"].splitlines() if ln.strip()]
    assert 3 <= len(lines) <= 8, lines
    assert lines[0].startswith("INCOMPLETE 276 of 387 required outcomes passed; 111 did not run (387 outcomes")
    assert lines[1].startswith("Underpowered 2 evals (mrcr, aime25)") and "--eval-limit mrcr=all" in lines[1]
    assert lines[2].startswith("Not on this machine 109 outcomes need NVIDIA H200")
    next_line = " ".join(lines[3:])
    assert next_line.startswith("Next fasttrack check examples/mini-k3/fasttrack.yaml --jobs 2 --out out/mini-k3")
    assert "decide the underpowered evals" in next_line
    assert seen["box_top"] > 0 and seen["box_bottom"] < FOLD  # all of it on the first screen
    assert seen["scope_top"] >= seen["height"]  # and the first section below the fold
    above = " ".join(seen["visible"])
    assert "needs NVIDIA H200 x1" not in above and "Scope of the optimisation" not in above  # no instance, no section
    # Under the box, at a glance: what ran, kinds x hardware setups, starting above the fold,
    # each row linked to its section; the cells add up to the headline's counts.
    assert seen["box_bottom"] <= seen["matrix_top"] < FOLD
    rows = seen["matrix_rows"]
    assert rows and all(href.startswith("#") for href, *_ in rows)
    cells = " ".join(" ".join(cells) for _, *cells in rows)
    passed = sum(int(n) for n in re.findall(r"(\d+)✓", cells))
    not_run = sum(int(n) for n in re.findall(r"(\d+)○", cells))
    assert (passed, not_run) == (276, 111)


COVERAGE = """() => ({
  flags: [...document.querySelectorAll('#coverage .coverage-flags li')].map(li => li.innerText.trim()),
  rows: [...document.querySelectorAll('#coverage table.coverage tbody tr')].map(
    tr => [tr.dataset.dimension, tr.dataset.value, tr.querySelector('td.reach').innerText.trim()]),
  link: document.querySelector('nav.toc a[href="#coverage"]') !== null,
})"""


def test_the_coverage_map_shows_the_declared_values_and_flags_the_hardware_nothing_ran(browser, pages, tmp_path):
    page = browser.new_page(viewport={"width": 1400, "height": FOLD})
    page.goto(pages["report"].as_uri(), wait_until="load")
    page.click('nav.toc a[href="#coverage"]')  # the contents link scrolls the section into view
    page.wait_for_function("location.hash === '#coverage'")
    assert 0 <= page.evaluate("document.querySelector('#coverage h2').getBoundingClientRect().top") < FOLD
    section = page.locator("section#coverage")
    assert section.locator("h2").inner_text() == "Coverage" and section.locator("table.coverage").is_visible()
    assert section.locator(".coverage-flags").is_visible()
    seen = page.evaluate(COVERAGE)
    section.screenshot(path=str(Path(os.environ.get("FASTTRACK_SCREENSHOT_DIR") or tmp_path) / "coverage.png"))
    page.close()
    assert seen["link"]
    # Every H200 outcome of the example is not run: the map flags it above the table, in words.
    assert seen["flags"] == [
        "accelerator: end-to-end checks ran cpu only; no outcome that ran reached NVIDIA H200 "
        "(109 outcomes there did not run or errored)"
    ]
    assert seen["rows"] == [
        ["accelerator", "cpu", "end to end"],
        ["accelerator", "NVIDIA H200", "not reached"],
        ["device_count", "1", "end to end"],
        ["tensor_parallel", "1", "end to end"],
        ["tensor_parallel", "2", "end to end"],  # the switch's proof of path ran at TP 2 and 4
        ["tensor_parallel", "4", "end to end"],
        ["batch", "1", "end to end"],
        ["batch", "8", "end to end"],
        ["batch", "64", "end to end"],
    ]


def test_summary_md_rendered_opens_the_same_way(browser, pages, tmp_path):
    page = browser.new_page(viewport={"width": 1400, "height": FOLD})
    page.goto(pages["summary"].as_uri(), wait_until="load")
    shot(page, "first-screen-summary.png", tmp_path)
    text = page.inner_text("main")
    tables_hidden = page.evaluate("() => [...document.querySelectorAll('table')].every(t => !t.checkVisibility())")
    page.close()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    assert lines[1].startswith("INCOMPLETE: 276 of 387 required outcomes passed; 111 did not run")
    assert lines[2].startswith("Underpowered: 2 evals") and lines[3].startswith("Not on this machine: 109")
    assert lines[4].startswith("Next: fasttrack check examples/mini-k3/fasttrack.yaml --jobs 2 --out out/mini-k3")
    assert tables_hidden  # the tables are folded under "Outcomes per check kind ..."
