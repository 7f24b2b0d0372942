"""The sanitizer audit: the declared test under compute-sanitizer (racecheck, synccheck ...)
where it exists; any error it reports fails the audit."""

from __future__ import annotations

import shutil
import sys
from typing import TYPE_CHECKING, Any

from fasttrack.evidence import Status
from fasttrack.kinds.pytest_session import audited, plugin_autoloaded

if TYPE_CHECKING:
    from fasttrack.kinds.context import RunContext
    from fasttrack.plan.instance import CheckInstance


def run(instance: CheckInstance, context: RunContext) -> Any:
    audit, missing = audited(instance, context)
    if missing is not None:
        return missing
    return run_sanitizer(instance, context, audit)


def run_sanitizer(instance: CheckInstance, context: RunContext, audit: Any) -> Any:
    tool_path = shutil.which("compute-sanitizer")
    if tool_path is None:
        return context.outcome(
            instance, Status.NOT_RUN, reason_code="dependency", reason="compute-sanitizer (CUDA toolkit) is not on PATH"
        )
    tools = list(audit.tools) or ["racecheck", "synccheck"]
    artifacts, failures = [], []
    for tool in tools:
        command = [
            tool_path,
            "--tool",
            tool,
            "--error-exitcode",
            "97",
            "--target-processes",
            "all",
            sys.executable,
            "-m",
            "pytest",
            audit.test,
            "-q",
            "-p",
            "no:cacheprovider",
        ]
        if not plugin_autoloaded():
            command += ["-p", "fasttrack.pytest_plugin"]
        done = context.run_process(
            command,
            log_name=f"sanitizer-{tool}.log",
            cwd=context.repo_root,
            description=f"compute-sanitizer --tool {tool}",
        )
        artifacts.append(done.log)
        if done.timed_out:
            return context.outcome(
                instance,
                Status.ERRORED,
                reason_code="timeout",
                artifacts=artifacts,
                reason=f"compute-sanitizer --tool {tool} ran past the timeout",
                measurements={"tool": tool},
            )
        if done.returncode != 0:
            last = [ln for ln in done.tail().splitlines() if ln.strip()]
            failures.append(f"{tool}: exit {done.returncode}" + (f" ({last[-1][:200]})" if last else ""))
    measurements = {"tool": ",".join(tools), "errors": failures}
    if failures:
        return context.outcome(
            instance,
            Status.FAILED,
            reason_code="hazard",
            reason="; ".join(failures),
            measurements=measurements,
            artifacts=artifacts,
        )
    return context.outcome(instance, Status.PASSED, measurements=measurements, artifacts=artifacts)
