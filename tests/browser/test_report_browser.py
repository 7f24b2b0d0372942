"""Reports in a real browser (headless Debian Chromium via Playwright): no console errors, no CSP
violations, sections present, the flipped-items filter works, and hostile model outputs show as
text without running. Screenshots go to $FASTTRACK_SCREENSHOT_DIR (CI keeps them) or tmp."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fasttrack.kinds.registry import KINDS
from fasttrack.report.dashboard import build_site
from fasttrack.report.render import render_reports
from support import evidence_fixtures

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
SECTIONS = [
    "verdict",
    "scope",
    "confinement",
    "where",
    "coverage",
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
# Recorded before any page script runs; the CSP cannot block Playwright's init scripts.
WATCH = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', e => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI));
"""

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium (apt-get install chromium)"
    ),
]


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("reports")
    paths = {}
    for mode in ("pass", "fail", "incomplete"):
        evidence = evidence_fixtures.write_fixture(out, mode)
        paths[mode] = render_reports(evidence, html=out / f"{mode}.html", annotate=False, kinds=KINDS).html
    return paths


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    chosen = os.environ.get("FASTTRACK_SCREENSHOT_DIR")
    path = Path(chosen) if chosen else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


class Page:
    """A page with every console error, page error, CSP violation and dialog recorded."""

    def __init__(self, browser, url: str, javascript: bool = True):
        self.context = browser.new_context(viewport={"width": 1280, "height": 900}, java_script_enabled=javascript)
        self.page = self.context.new_page()
        self.problems: list[str] = []
        self.dialogs: list[str] = []
        self.page.add_init_script(WATCH)
        self.page.on(
            "console",
            lambda m: self.problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None,
        )
        self.page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        self.page.on("dialog", self._dialog)
        self.page.on(
            "request",
            lambda r: (
                None if r.url.startswith(("file:", "data:", "about:")) else self.problems.append(f"request {r.url}")
            ),
        )
        self.page.goto(url, wait_until="load")

    def _dialog(self, dialog) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def check_clean(self) -> None:
        csp = self.page.evaluate("window.__csp || []")
        assert csp == [], f"CSP violations: {csp}"
        assert self.problems == [], self.problems
        assert self.dialogs == [], f"a model output opened a dialog: {self.dialogs}"
        assert self.page.evaluate("window.__xss") is None, "a model output ran script"

    def close(self) -> None:
        self.context.close()


@pytest.mark.parametrize("mode", ["pass", "fail", "incomplete"])
def test_report_renders_clean(browser, reports, shots, mode):
    p = Page(browser, reports[mode].as_uri())
    try:
        for section in SECTIONS:
            assert p.page.locator(f"section#{section}").count() == 1, section
        verdict = {"pass": "PASS", "fail": "FAIL", "incomplete": "INCOMPLETE"}[mode]
        assert p.page.locator(".verdict").first.inner_text() == verdict
        assert p.page.locator("#where svg.heatmap").count() == 1
        assert p.page.locator("#coverage table.coverage tbody tr").count() > 0
        assert p.page.locator("#evals svg.forest").count() >= 1
        assert p.page.locator("#items-body .item").count() > 0, "the script paged in the flipped items"
        p.page.screenshot(path=str(shots / f"report-{mode}-top.png"))
        for section in ("where", "coverage", "evals", "flipped", "kernels", "benchmarks"):
            p.page.locator(f"section#{section}").screenshot(path=str(shots / f"report-{mode}-{section}.png"))
        p.check_clean()
    finally:
        p.close()


def test_xss_payloads_show_as_text_and_never_run(browser, reports, shots):
    p = Page(browser, reports["fail"].as_uri())
    try:
        p.page.fill("#item-filter", "__xss")
        cards = p.page.locator("#items-body .item")
        assert cards.count() > 0
        text = p.page.locator("#items-body").inner_text()
        assert "<script>window.__xss = 1; alert(1)</script>" in text or 'onerror="window.__xss=2' in text
        assert p.page.locator("#items-body img, #items-body script, #items-body svg").count() == 0
        # Page through every match: none of them may turn into markup either.
        for _ in range(20):
            if p.page.locator("#item-next").is_disabled():
                break
            p.page.click("#item-next")
            assert p.page.locator("#items-body img, #items-body script").count() == 0
        p.page.locator("section#flipped").screenshot(path=str(shots / "report-fail-xss-filter.png"))
        p.check_clean()
    finally:
        p.close()


def test_flipped_filter_by_direction_and_text(browser, reports):
    p = Page(browser, reports["fail"].as_uri())
    try:
        info = p.page.locator("#item-info")
        before = info.inner_text()
        p.page.select_option("#item-dir", "wrong_to_right")
        directions = p.page.locator("#items-body .item").evaluate_all("els => els.map(e => e.dataset.direction)")
        assert directions and set(directions) == {"wrong_to_right"}
        assert info.inner_text() != before
        p.page.select_option("#item-dir", "")
        p.page.fill("#item-filter", "no such text anywhere 1b2c3d")
        assert p.page.locator("#items-body .item").count() == 0
        assert info.inner_text().startswith("0 of ")
        p.check_clean()
    finally:
        p.close()


def test_readable_without_javascript(browser, reports, shots):
    p = Page(browser, reports["fail"].as_uri(), javascript=False)
    try:
        assert p.page.locator(".verdict").first.inner_text() == "FAIL"
        assert p.page.locator("#items-body .item").count() == 20, "the first page is server-rendered"
        assert not p.page.locator("#item-filter").is_visible()
        p.page.screenshot(path=str(shots / "report-fail-nojs.png"))
        assert p.problems == [] and p.dialogs == []
    finally:
        p.close()


def test_dashboard_lists_runs_and_links_to_reports(browser, tmp_path, shots):
    history = tmp_path / "history"
    evidence_fixtures.write_history(history, samples=150)
    site = build_site([history], tmp_path / "site", KINDS)
    p = Page(browser, site.index.as_uri())
    try:
        rows = p.page.locator("#optimisations tbody tr")
        assert rows.count() == 3
        latest = {r.get_attribute("data-optimisation"): r.locator(".verdict").inner_text() for r in rows.all()}
        assert latest == {
            "kimi-k3-latency": "PASS",
            "deepseek-v4.1-flash-mtp": "FAIL",
            "glm5.3-fp8-attention": "INCOMPLETE",
        }
        p.page.screenshot(path=str(shots / "dashboard.png"))
        p.check_clean()
        p.page.locator('tr[data-optimisation="kimi-k3-latency"] td:nth-child(3) a').click()
        p.page.wait_for_load_state("load")
        assert p.page.locator(".verdict").first.inner_text() == "PASS"
        p.check_clean()
    finally:
        p.close()


def test_csp_blocks_a_script_that_slipped_through(browser, reports, tmp_path):
    """Defence in depth: if escaping ever failed, the CSP still stops an injected inline script
    and an inline event handler (and our watcher sees the violation)."""
    html = reports["fail"].read_text()
    injected = html.replace(
        "</main>", '<script>window.__xss = "inline"</script><img src="x" onerror="window.__xss=\'img\'"></main>'
    )
    page_path = tmp_path / "injected.html"
    page_path.write_text(injected)
    p = Page(browser, page_path.as_uri())
    try:
        p.page.wait_for_function("window.__csp && window.__csp.length >= 2")  # both blocked: the signal, not a sleep
        assert p.page.evaluate("window.__xss") is None
        violations = p.page.evaluate("window.__csp")
        assert any(v.startswith("script-src") for v in violations), violations
        assert p.page.locator("#items-body .item").count() > 0, "our own (hashed) script still runs"
    finally:
        p.close()
