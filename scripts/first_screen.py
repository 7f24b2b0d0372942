"""Screenshots of the first screen of a run's reports, as a reviewer sees them at 1400x900 in
Chromium: the HTML report's top and summary.md rendered the way GitHub shows a step summary
(markdown-it, CommonMark + tables, HTML blocks kept). The README's pictures come from here:

    python scripts/first_screen.py out/mini-k3 docs/

writes docs/first-screen-report.png and docs/first-screen-summary.png (needs Playwright and
Debian's /usr/bin/chromium: `bash scripts/install.sh --test`).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from fasttrack.kinds.registry import KINDS

CHROMIUM = "/usr/bin/chromium"
VIEWPORT = {"width": 1400, "height": 900}
ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]

# Enough of GitHub's look for the picture to read like a step summary or a PR comment.
MARKDOWN_CSS = """
body { font: 14px/1.5 -apple-system, "Segoe UI", system-ui, sans-serif; color: #1f2328; margin: 0; }
main { max-width: 1012px; margin: 24px auto; padding: 24px 32px; border: 1px solid #d0d7de; border-radius: 6px; }
h2 { font-size: 1.5em; border-bottom: 1px solid #d8dee4; padding-bottom: .3em; margin-top: 0; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; background: #eff1f3; padding: .2em .4em; border-radius: 6px; }
table { border-collapse: collapse; } td, th { border: 1px solid #d0d7de; padding: 6px 13px; }
details summary { cursor: pointer; } sub { color: #59636e; }
"""


def markdown_page(markdown: str) -> str:
    """summary.md as a page: rendered by markdown-it (CommonMark with GitHub's tables)."""
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)
    return (
        '<!DOCTYPE html><html><head><meta charset="utf-8"><title>summary.md</title>'
        f"<style>{MARKDOWN_CSS}</style></head><body><main>{body}</main></body></html>"
    )


def render(evidence: Path, folder: Path) -> tuple[Path, Path]:
    """report.html and summary.md of ``evidence`` (a run folder or its evidence.json) in ``folder``,
    and summary.md as a page; returns (report page, summary page)."""
    from fasttrack.report.render import render_reports

    path = evidence / "evidence.json" if evidence.is_dir() else evidence
    done = render_reports(
        path, html=folder / "report.html", markdown=folder / "summary.md", annotate=False, kinds=KINDS
    )
    assert done.html is not None and done.markdown is not None
    page = folder / "summary.html"
    page.write_text(markdown_page(done.markdown.read_text(encoding="utf-8")), encoding="utf-8")
    return done.html, page


def screenshot(pages: dict[Path, Path]) -> None:
    """Each page's first screen (1400x900) to its png."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            for page_path, png in pages.items():
                page = browser.new_page(viewport=VIEWPORT)
                page.goto(page_path.as_uri(), wait_until="load")
                page.screenshot(path=str(png))
                page.close()
        finally:
            browser.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("evidence", type=Path, help="a run folder (or its evidence.json)")
    parser.add_argument("out", type=Path, help="folder for first-screen-report.png and first-screen-summary.png")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fasttrack-first-screen-") as scratch:
        report, summary = render(args.evidence, Path(scratch))
        screenshot({report: args.out / "first-screen-report.png", summary: args.out / "first-screen-summary.png"})
    print(f"wrote {args.out / 'first-screen-report.png'} and {args.out / 'first-screen-summary.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
