"""CI annotations: GitHub Actions workflow commands and Buildkite annotations.

Only when the CI says it is running us (GITHUB_ACTIONS=true, BUILDKITE=true); otherwise silent.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from typing import Any

MAX_GITHUB = 50  # GitHub shows at most 10 error annotations per step and 50 per job
_BUILDKITE_TIMEOUT_S = 30


def _gh_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_property(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def problems(evidence: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    order = {"failed": 0, "errored": 1, "not_run": 2}
    found = [c for c in evidence.get("checks", ()) if c["status"] != "passed" and c.get("required", True)]
    return sorted(found, key=lambda c: order.get(c["status"], 3))


def github_lines(evidence: Mapping[str, Any]) -> list[str]:
    """`::error` for failures and errors, `::warning` for outcomes that did not run."""
    verdict = evidence["verdict"]["status"]
    lines = []
    for c in problems(evidence)[:MAX_GITHUB]:
        level = "warning" if c["status"] == "not_run" else "error"
        title = f"fasttrack {c['status']}: {c['kind']}/{c['name']}"
        code = f"({c.get('reason_code')}) " if c.get("reason_code") else ""
        lines.append(
            f"::{level} title={_gh_property(title)}::{_gh_data(c['id'] + ': ' + code + (c.get('reason') or 'no reason recorded'))}"
        )
    if verdict != "PASS" and not lines:
        lines.append(
            f"::error title=fasttrack {verdict}::{_gh_data('; '.join(evidence['verdict'].get('reasons', [])))}"
        )
    return lines


def emit(
    evidence: Mapping[str, Any],
    markdown: str,
    echo: Callable[[str], None] = print,
    env: Mapping[str, str] | None = None,
) -> list[str]:
    """Annotate the CI we run under. Returns what was done, one line each (for tests and logs)."""
    env = os.environ if env is None else env
    done = []
    if env.get("GITHUB_ACTIONS") == "true":
        for line in github_lines(evidence):
            echo(line)
        done.append("github")
    if env.get("BUILDKITE") == "true":
        agent = shutil.which("buildkite-agent")
        if agent:
            style = {"PASS": "success", "FAIL": "error"}.get(evidence["verdict"]["status"], "warning")
            try:
                subprocess.run(
                    [agent, "annotate", "--style", style, "--context", "fasttrack"],
                    input=markdown.encode("utf-8"),
                    check=False,
                    timeout=_BUILDKITE_TIMEOUT_S,
                    capture_output=True,
                )
                done.append(f"buildkite:{style}")
            except (OSError, subprocess.TimeoutExpired):
                done.append("buildkite:failed")
    return done
