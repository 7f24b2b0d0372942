"""Start the candidate's server with a combination it must refuse (``switch.refused``) and judge
how it ended: exited non-zero before it served, with the declared message in its log (passed);
served (failed, ``not_refused``); exited without the message, or did not refuse within its time
(failed: a crash or a hang is no refusal). A server fasttrack cannot start (a ``url`` side, a
program missing) is errored(target)."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fasttrack.errors import TargetError
from fasttrack.evidence import CheckOutcome, Status
from fasttrack.kinds.refused.measurements import RefusedMeasurements
from fasttrack.kinds.refused.rule import refused
from fasttrack.targets.openai.server import ManagedServer, ServerSpec
from fasttrack.targets.openai.side import server_spec as openai_spec
from fasttrack.targets.registry import TARGET_KINDS

if TYPE_CHECKING:
    from fasttrack.kinds.context import RunContext
    from fasttrack.manifest import Manifest
    from fasttrack.plan.instance import CheckInstance

LOG_WINDOW = 32 * 1024 * 1024  # the end of a log searched for the message


def candidate_spec(manifest: Manifest, config: dict[str, Any], point: dict[str, Any] | None) -> ServerSpec:
    """The candidate's server with the combination added: its serve args after the side's own, its
    environment over the side's."""
    own = manifest.for_config({"engine_args": {"candidate": config.get("serve_args") or []}})
    kind = TARGET_KINDS.get(manifest.target.kind)
    spec_of = kind.shared_server if kind is not None and kind.shared_server is not None else openai_spec
    spec = spec_of(own, "candidate", point, None)
    if spec.command is None:
        raise TargetError("the candidate is a running server at a url: fasttrack cannot start it with the combination")
    return replace(spec, env={**spec.env, **(config.get("env") or {})})


def message_line(log: Path, pattern: str) -> str | None:
    """The first line of the log's end that matches ``pattern``, or None."""
    try:
        with log.open("rb") as handle:
            handle.seek(max(0, log.stat().st_size - LOG_WINDOW))
            text = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    compiled = re.compile(pattern)
    return next((line.strip() for line in text.splitlines() if compiled.search(line)), None)


def run(instance: CheckInstance, context: RunContext) -> CheckOutcome:
    config = dict(instance.config or {})
    point = instance.scope_point.as_dict() if instance.scope_point is not None else None
    found: dict[str, Any] = {
        "switch": config.get("switch"),
        "serve_args": list(config.get("serve_args") or []),
        "env": dict(config.get("env") or {}),
        "message": config.get("message"),
    }
    try:
        spec = candidate_spec(context.manifest, config, point)
        spec = replace(spec, startup_timeout_s=min(spec.startup_timeout_s, max(5.0, context.remaining_s() - 30)))
    except (TargetError, ValueError) as err:
        return context.outcome(instance, Status.ERRORED, reason_code="target", reason=str(err), measurements=found)
    server = ManagedServer(spec, context.artifact_dir)
    try:
        server.start()
        found["served"] = True
    except TargetError as err:
        if server.exit_code is None and server.process is None and not server.log_path.exists():
            return context.outcome(instance, Status.ERRORED, reason_code="target", reason=str(err), measurements=found)
        found["served"] = False
        found["exit_code"] = server.exit_code
    finally:
        server.stop()
    line = message_line(server.log_path, str(config.get("message")))
    found.update(message_found=line is not None, matched_line=line)
    artifacts = (
        [context.artifact(server.log_path, "log", "the candidate server's log")] if server.log_path.exists() else []
    )
    return judged(instance, context, RefusedMeasurements.of({"measurements": found}), found, artifacts)


def judged(
    instance: CheckInstance, context: RunContext, m: RefusedMeasurements, found: dict[str, Any], artifacts: list
) -> CheckOutcome:
    """The outcome by the kind's rule, with the reason a reviewer reads."""
    words = " ".join([*(m.serve_args or ()), *(f"{k}={v}" for k, v in (m.env or {}).items())])
    if refused(m):
        return context.outcome(instance, Status.PASSED, measurements=found, artifacts=artifacts)
    if m.served:
        why = f"the candidate served with {words!r}: the switch {m.switch!r} must make the server refuse it"
    elif m.exit_code is None:
        why = f"the candidate with {words!r} neither served nor exited within its startup time: a hang is no refusal"
    elif m.exit_code == 0:
        why = f"the candidate with {words!r} exited with code 0: a refusal exits non-zero"
    else:
        why = (
            f"the candidate with {words!r} exited with code {m.exit_code}, but its log never shows "
            f"{m.message!r}: a crash is no refusal"
        )
    return context.outcome(
        instance, Status.FAILED, reason_code="not_refused", reason=why, measurements=found, artifacts=artifacts
    )
