"""One pytest session of a kernel-test suite or an audited test: the command (the fasttrack
plugin parametrises the tests over the manifest's scope and records each result), run as a
check's subprocess, and what it left behind (`PytestSession`). Kernel tests, stress audits and
the sanitizer audit share it."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import TYPE_CHECKING, Any

from fasttrack.evidence import Artifact, Status
from fasttrack.process.cpu import cpu_only_env

if TYPE_CHECKING:
    from fasttrack.evidence import CheckOutcome
    from fasttrack.kinds.context import RunContext
    from fasttrack.plan.instance import CheckInstance


@dataclass
class PytestSession:
    """One pytest run and what it left behind."""

    results: list[dict[str, Any]]
    returncode: int | None
    timed_out: bool = False
    signal: int | None = None
    running: str | None = None  # test that was running when the process died or was killed
    collected: int | None = None
    artifacts: list[Artifact] = field(default_factory=list)
    log_tail: str = ""
    timeout_s: float = 0.0

    @property
    def died(self) -> bool:
        return self.timed_out or self.signal is not None

    def last_words(self) -> str:
        """``": <the log's last non-blank line>"`` for a reason, or "" where the log is empty."""
        last = [ln for ln in self.log_tail.splitlines() if ln.strip()]
        return f": {last[-1][:300]}" if last else ""


def plugin_autoloaded() -> bool:
    if os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD"):
        return False
    return any(ep.value == "fasttrack.pytest_plugin" for ep in metadata.entry_points(group="pytest11"))


MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([^']+)'")


def pytest_command(
    paths: Sequence[str],
    *,
    manifest_path: str,
    results: str,
    junit: str,
    where: dict[str, Any],
    root: str,
    extra: Sequence[str] = (),
) -> list[str]:
    command = [
        sys.executable,
        "-m",
        "pytest",
        *paths,
        "-p",
        "no:cacheprovider",
        "--rootdir",
        root,
        "--fasttrack-manifest",
        manifest_path,
        "--fasttrack-results",
        results,
        "--junitxml",
        junit,
        "-q",
        "-o",
        "junit_family=xunit2",
    ]
    if where:
        command += ["--fasttrack-where", ",".join(f"{k}={v}" for k, v in where.items())]
    if not plugin_autoloaded():
        command += ["-p", "fasttrack.pytest_plugin"]
    return [*command, *extra]


def run_pytest(
    context: RunContext,
    paths: Sequence[str],
    *,
    tag: str,
    where: dict[str, Any],
    extra: Sequence[str] = (),
    env: dict[str, str] | None = None,
) -> PytestSession:
    """Run pytest on ``paths`` (relative to the repository root) and read the plugin's results."""
    from fasttrack.pytest_plugin import load_results

    results_path = context.artifact_path(f"{tag}-results.jsonl")
    results_path.unlink(missing_ok=True)
    junit = context.artifact_path(f"{tag}-junit.xml")
    command = pytest_command(
        paths,
        manifest_path=str(context.manifest.path.resolve()),
        results=str(results_path),
        junit=str(junit),
        where=where,
        root=str(context.repo_root),
        extra=extra,
    )
    done = context.run_process(
        command,
        log_name=f"{tag}.log",
        cwd=context.repo_root,
        env=cpu_only_env(where, env),  # a cpu point's tests and ranks never see a GPU
        description=f"pytest output ({tag})",
    )
    records = load_results(results_path)
    results = [r for r in records if r.get("event") == "result"]
    finished = {r["nodeid"] for r in results}
    started = [r["nodeid"] for r in records if r.get("event") == "start"]
    running = next((n for n in reversed(started) if n not in finished), None)
    collected = next((r["count"] for r in records if r.get("event") == "collected"), None)
    artifacts = [a for a in (done.log,) if a is not None]
    for path, kind, what in (
        (junit, "junit", "JUnit XML of the kernel tests"),
        (results_path, "jsonl", "per-test scope point, tolerance and worst error"),
    ):
        if path.exists():
            artifacts.append(context.artifact(path, kind, what))
    return PytestSession(
        results,
        done.returncode,
        done.timed_out,
        done.signal if not done.timed_out else None,
        running,
        collected,
        artifacts,
        done.tail(1500),
        context.timeout_s,
    )


def audited(instance: CheckInstance, context: RunContext) -> tuple[Any, CheckOutcome | None]:
    """The manifest's audit an audit instance runs, and an errored outcome when its test file is missing."""
    audit = next((a for a in context.manifest.audits if a.id == instance.name), None)
    if audit is None:
        raise LookupError(f"audits has no audit {instance.name!r}")
    test_file = audit.test.split("::", 1)[0]
    if (context.repo_root / test_file).exists():
        return audit, None
    return audit, context.outcome(
        instance,
        Status.ERRORED,
        reason_code="error",
        reason=f"the audited test file {test_file} (audits {audit.id}) does not exist",
    )
