"""Open the manifest's target as the two ProbeTargets of a comparison, at one scope point.

In-process (``target.kind: python``): the factory is called once per side with the in-process
keyword conventions fasttrack uses: the switch's ``engine_arg`` (False for the baseline, True for
the candidate), and, where the scope point asks for them, ``device`` (``cuda`` off CPU),
``tensor_parallel_size``, ``dtype`` and ``speculative_draft_tokens``, over ``target.python.options``.
A factory that already returns a `ProbeTarget` (such as ``fasttrack.probes.fake:create``) is used
as is; anything else is wrapped by `InProcessProbeTarget`.

HTTP (``target.kind: openai``): a side with a ``url`` is used directly; a side with a ``command``
is started by ``fasttrack.targets.openai_server.ManagedServer`` (its log goes to the check's
artifact folder) with the scope point's placeholders filled in and, at a draft length, the
manifest's ``speculative_args`` appended; `close` stops it. A server that does not come up makes
the check error with reason ``target``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fasttrack.probes.adapters import InProcessProbeTarget, OpenAIProbeTarget
from fasttrack.probes.base import ProbeTarget


class TargetUnavailable(RuntimeError):
    """The manifest's target cannot be opened here (factory missing, no URL, import error)."""


def factory_options(manifest: Any, side: str, point: Mapping[str, Any] | None, draft_length: int | None = None) -> dict[str, Any]:
    point = dict(point or {})
    options: dict[str, Any] = dict(manifest.target.python.options) if manifest.target.python else {}
    switch_arg = manifest.switch.engine_arg or manifest.switch.name
    options[switch_arg] = side == "candidate"
    accelerator = str(point.get("accelerator", "cpu")).lower()
    if accelerator != "cpu":
        options.setdefault("device", "cuda")
    if int(point.get("tensor_parallel", 1) or 1) > 1:
        options["tensor_parallel_size"] = int(point["tensor_parallel"])
    if point.get("dtype"):
        options["dtype"] = point["dtype"]
    if draft_length:
        options["speculative_draft_tokens"] = int(draft_length)
    return options


def _factory(manifest: Any):
    spec = manifest.target.python
    if spec is None:
        raise TargetUnavailable("target.kind is python but target.python is missing")
    if spec.path:
        folder = str(manifest.resolve_path(spec.path))
        if folder not in sys.path:
            sys.path.insert(0, folder)
    module_name, _, attr = spec.factory.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise TargetUnavailable(f"cannot import the target factory module {module_name!r}: {exc}") from exc
    factory = getattr(module, attr or "create", None)
    if not callable(factory):
        raise TargetUnavailable(f"{spec.factory!r} is not a callable in {module_name}")
    return factory


def open_side(manifest: Any, side: str, point: Mapping[str, Any] | None = None, draft_length: int | None = None,
              log_dir: Path | None = None) -> ProbeTarget:
    target = manifest.target
    if target.kind == "python":
        factory = _factory(manifest)
        try:
            made = factory(**factory_options(manifest, side, point, draft_length))
        except Exception as exc:  # the system under test could not be built: a target problem, not ours
            raise TargetUnavailable(f"the {side} target could not be created by {manifest.target.python.factory}: "
                                    f"{type(exc).__name__}: {exc}") from exc
        if isinstance(made, ProbeTarget):
            made.name = side
            return made
        # The stock side is the reference: one prefill pass scores it (fast, and the stock path
        # is not under test); the candidate scores through its own decode path.
        through_decode = False if side == "baseline" and _accepts(made.next_token_logprobs, "through_decode") else None
        return InProcessProbeTarget(made, name=side, max_context=_declared_context(manifest), through_decode=through_decode)
    if target.kind == "openai" and target.openai is not None:
        conf = getattr(target.openai, side)
        server = None
        if conf.url:
            url = conf.url
        elif conf.command:
            server, url = _start_server(manifest, side, point, draft_length, log_dir)
        else:
            raise TargetUnavailable(f"target.openai.{side} has neither a url nor a command")
        probe = OpenAIProbeTarget(url, name=side, model=target.openai.model_name, max_context=_declared_context(manifest))
        probe.server = server
        return probe
    raise TargetUnavailable(f"target kind {target.kind!r} is not supported by the probes")


def server_command(manifest: Any, side: str, point: Mapping[str, Any] | None, draft_length: int | None) -> list[str]:
    """The side's command with the scope point's ``{dimension}`` placeholders filled in (``{port}``
    is left for the server manager) and, at a draft length, ``target.openai.speculative_args``."""
    from fasttrack.manifest import ScopePoint, render_command

    values = dict(point or {})
    if draft_length:
        values["draft_length"] = int(draft_length)
    command = [str(arg) for arg in getattr(manifest.target.openai, side).command or ()]
    if draft_length:
        command += [str(arg) for arg in (manifest.section("target") or {}).get("openai", {}).get("speculative_args") or ()]
    return render_command(command, point=ScopePoint.of(values), leave=("port",))


def _start_server(manifest: Any, side: str, point: Mapping[str, Any] | None, draft_length: int | None,
                  log_dir: Path | None) -> tuple[Any, str]:
    import tempfile

    from fasttrack.errors import TargetError
    from fasttrack.targets.openai_server import ManagedServer, ServerSpec

    oa = manifest.target.openai
    conf = getattr(oa, side)
    spec = ServerSpec(side, command=tuple(server_command(manifest, side, point, draft_length)), health_path=oa.health_path,
                      startup_timeout_s=oa.startup_timeout_s, env=dict(conf.env),
                      cwd=str(manifest.resolve_path(conf.cwd)) if conf.cwd else str(manifest.root))
    server = ManagedServer(spec, Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="fasttrack-server-")))
    try:
        return server, server.start()
    except TargetError as exc:
        raise TargetUnavailable(str(exc)) from exc


def _accepts(function: Any, name: str) -> bool:
    import inspect

    try:
        return name in inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False


def _declared_context(manifest: Any) -> int | None:
    context = manifest.scope.context
    return int(context.max_tokens) if context is not None else None


def close(target: Any) -> None:
    server = getattr(target, "server", None)
    if server is not None:
        server.stop()
    inner = getattr(target, "target", target)
    closer = getattr(inner, "close", None)
    if callable(closer):
        closer()


@contextmanager
def opened_pair(manifest: Any, point: Mapping[str, Any] | None = None, draft_length: int | None = None,
                log_dir: Path | None = None) -> Iterator[tuple[ProbeTarget, ProbeTarget]]:
    """(baseline, candidate), closed (servers stopped) afterwards."""
    baseline = open_side(manifest, "baseline", point, log_dir=log_dir)
    try:
        candidate = open_side(manifest, "candidate", point, draft_length, log_dir=log_dir)
        try:
            yield baseline, candidate
        finally:
            close(candidate)
    finally:
        close(baseline)


def repo_path(manifest: Any, relative: str) -> Path:
    return manifest.resolve_path(relative)
