"""OpenAI-compatible server targets (``target.kind: openai``): a side with a ``url`` is used as it
is; a side with a ``command`` is started by `ManagedServer` (own process group, health wait, log
kept under ``log_dir``) with the scope point's ``{dimension}`` placeholders filled in and, at a
draft length, the manifest's ``speculative_args`` appended (after a benchmark's own
``engine_args`` for that side, `Manifest.side_args`) and its ``speculative_env`` set. Environment switches are set in the
candidate server's environment and removed from the baseline's; an ablation arm's candidate
command drops the ``server_flag`` of every switch the arm leaves off; an option-valued switch
appends ``OPTION VALUE`` to the candidate's command (its arm's value) and ``OPTION STOCK`` to the
baseline's where a stock value is given. `OpenedSide.close` stops it."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fasttrack.errors import TargetError
from fasttrack.targets.build import from_server, write_side
from fasttrack.targets.http import DEFAULT_TIMEOUT_S
from fasttrack.targets.openai.client import OpenAITarget
from fasttrack.targets.openai.server import ManagedServer, ServerSpec
from fasttrack.targets.protocol import OpenedSide, Side, Unavailable
from fasttrack.targets.side_profiler import side_profiler
from fasttrack.targets.switches import switch_environment

if TYPE_CHECKING:
    from fasttrack.manifest import Manifest


def server_command(
    manifest: Manifest, side: Side, point: Mapping[str, Any] | None, draft_length: int | None = None
) -> list[str]:
    """The side's command with the scope point's ``{dimension}`` placeholders filled in (``{port}``
    is left for the server manager) and, at a draft length, ``target.openai.speculative_args``."""
    from fasttrack.manifest import ScopePoint, render_command

    openai = manifest.target.openai
    if openai is None:
        raise TargetError("target.kind is openai but target.openai is missing")
    values = dict(point or {})
    if draft_length:
        values["draft_length"] = int(draft_length)
    command = [str(arg) for arg in getattr(openai, side).command or ()]
    if side == "candidate":
        # An ablation arm: the candidate command passes only the flags of the switches it turns on.
        off = {s.server_flag for s in manifest.switches if s.server_flag and not manifest.switch_on(s, side)}
        command = [arg for arg in command if arg not in off]
    # A benchmark's own server settings (setups.<side>.engine_args): after the side's own arguments.
    command += list(manifest.side_args.get(side, ()))
    # Option-valued switches: the candidate's value (its arm's), the stock value on the baseline.
    command += manifest.option_args(side)
    if draft_length:
        command += list(openai.speculative_args)
    return render_command(command, point=ScopePoint.of(values), leave=("port", "server_dir"))


def server_spec(
    manifest: Manifest, side: Side, point: Mapping[str, Any] | None, draft_length: int | None = None
) -> ServerSpec:
    """How to start (``command``) or reach (``url``) one side's server."""
    openai = manifest.target.openai
    if openai is None:
        raise TargetError("target.kind is openai but target.openai is missing")
    conf = getattr(openai, side)
    if not conf.url and not conf.command:
        raise TargetError(f"target.openai.{side} has neither a url nor a command")
    command = tuple(server_command(manifest, side, point, draft_length)) if conf.command else None
    if command is None and manifest.side_args.get(side):
        raise TargetError(
            f"engine_args {list(manifest.side_args[side])} need fasttrack to start the {side} server "
            f"(target.openai.{side}.command); a running server at a url has the arguments it was started with"
        )
    if command is None and side == "candidate" and manifest.candidate_switches is not None:
        raise TargetError(
            "an ablation arm turns on only some switches, which needs fasttrack to start the candidate "
            "server (target.openai.candidate.command); a running server at a url has the switches it was started with"
        )
    switch_set, switch_unset = switch_environment(manifest, side)
    own = {**conf.env, **(openai.speculative_env if draft_length else {})}  # a drafting server's own env too
    env = {k: v for k, v in _rendered_env(own, point).items() if k not in switch_set}
    env.update(switch_set)
    return ServerSpec(
        side,
        command=command,
        url=None if command else conf.url,
        health_path=openai.health_path,
        startup_timeout_s=openai.startup_timeout_s,
        env=env,
        cwd=str(manifest.resolve_path(conf.cwd)) if conf.cwd else str(manifest.root),
        # An off value the manifest gives explicitly stays; otherwise the variable is removed.
        unset_env=tuple(name for name in switch_unset if name not in own),
        cpus=conf.cpus,
    )


def _rendered_env(env: Mapping[str, str], point: Mapping[str, Any] | None) -> dict[str, str]:
    """A side's env with the scope point's ``{dimension}`` placeholders filled in."""
    from fasttrack.manifest import ScopePoint, render_command

    names, values = list(env), [str(v) for v in env.values()]
    return dict(
        zip(names, render_command(values, point=ScopePoint.of(dict(point or {})), leave=("port", "server_dir")))
    )


def open_server(
    manifest: Manifest,
    side: Side,
    point: Mapping[str, Any] | None,
    draft_length: int | None,
    log_dir: Path | None,
    switch_default: bool = False,
) -> OpenedSide:
    """One side: the server started from its command (or reached at its url), and a client."""
    return open_spec(manifest, server_spec(manifest, side, point, draft_length), log_dir, "openai")


def open_spec(manifest: Manifest, spec: ServerSpec, log_dir: Path | None, kind: str) -> OpenedSide:
    """A side from its server spec: started (or reached), its engine build recorded, a client."""
    side: Side = spec.name  # type: ignore[assignment]
    server = ManagedServer(spec, Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="fasttrack-server-")))
    url = server.start()  # TargetError when it does not come up; the server is stopped then
    write_side(log_dir, side, from_server(url))  # the engine build it serves (vLLM's /version), for the evidence
    client = client_for(manifest, url, server)
    logs = [server.log_path] if spec.command else []
    # A server with its engine's torch profiler (vLLM's --profiler-config, SGLang's
    # SGLANG_TORCH_PROFILER_DIR) gives the side a kernel census.
    profiler = (
        side_profiler(kind, spec, url, model=client.model, server_dir=server.log_path.parent) if spec.command else None
    )
    return OpenedSide(
        side, kind, client, server=server if spec.command else None, url=url, logs=logs, profiler=profiler
    )


def client_for(manifest: Manifest, url: str, server: ManagedServer | None = None) -> OpenAITarget:
    """The client the checks drive one side's server through, as the manifest configures it."""
    openai = manifest.target.openai
    return OpenAITarget(
        url,
        model=openai.model_name if openai else None,
        server=server,
        timeout_s=openai.request_timeout_s if openai else DEFAULT_TIMEOUT_S,
        concurrency=openai.concurrency if openai else 64,
    )


def unavailable(manifest: Manifest) -> Unavailable | None:
    """A side's server command is not installed here."""
    openai = manifest.target.openai
    if openai is None:
        return None
    for side in ("baseline", "candidate"):
        conf = getattr(openai, side)
        if conf.command and shutil.which(conf.command[0]) is None:
            return Unavailable(
                f"{conf.command[0]!r} (target.openai.{side}.command) is not installed here", conf.command[0]
            )
    return None
