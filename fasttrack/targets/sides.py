"""Open the two sides of a comparison at one scope point, and close them: the one place that
turns the manifest's ``target`` into running systems. Probes, evals, divergence, the speculative
check, benchmarks and the switch's proof of path all open their sides here.

In-process (``target.kind: python``): the factory ``module:function`` (``target.python.path`` put
on the import path) is called once per side with ``target.python.options`` plus the keyword
conventions fasttrack uses: each switch's ``engine_arg`` (False for the baseline, True for the
candidate, False for a switch an ablation arm leaves off; left out for the baseline of the proof
of path, which must see the target's own default), and, where the scope point asks for them,
``device`` (``cuda`` off CPU, ``cpu`` at a cpu point, where the engine also hides every GPU from
the process), ``tensor_parallel_size``, ``dtype``, ``speculative_draft_tokens`` and every engine
dimension of the scope under its own name (``kv_cache_dtype``, ``decode_context_parallel`` ...). A keyword the factory
does not accept is left out where the point does not need it (tensor parallel 1, CPU, no
dtype) and is a `TargetError` where it does: a target that cannot be told to run a point's
setting cannot run that point, and pretending it did would pass a point that never ran.
Environment switches (``enable.env: NAME=value``) are set while the candidate's factory runs and
around every call into the target it returns, and removed around the baseline's (`EnvScope`):
a target should read its switches when it is created.

HTTP (``target.kind: openai``): a side with a ``url`` is used as it is; a side with a ``command``
is started by `ManagedServer` (own process group, health wait, log kept under ``log_dir``) with
the scope point's ``{dimension}`` placeholders filled in and, at a draft length, the manifest's
``speculative_args`` appended. Environment switches are set in the candidate server's
environment and removed from the baseline's; an ablation arm's candidate command drops the
``server_flag`` of every switch the arm leaves off. `OpenedSide.close` stops it.

Every failure to open a side is a `TargetError` (or `TargetDependencyMissing`, its subclass for
a Python module the target's code needs and this machine lacks).
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from fasttrack.errors import TargetError
from fasttrack.targets.build import from_server, write_side
from fasttrack.targets.http import DEFAULT_TIMEOUT_S
from fasttrack.targets.openai_server import ManagedServer, OpenAITarget, ServerSpec

if TYPE_CHECKING:
    from fasttrack.manifest import Manifest

Side = Literal["baseline", "candidate"]
# Engine dimensions whose value 1 is the engine's default (no such parallelism): not needed then.
PARALLEL_NAMES = frozenset({"decode_context_parallel", "expert_parallel"})
SIDES: tuple[Side, Side] = ("baseline", "candidate")


class TargetDependencyMissing(TargetError):
    """The target's code needs a Python module that is not installed here (not_run(dependency))."""

    def __init__(self, module: str, factory: str):
        self.module = module
        super().__init__(f"the target {factory} needs the Python module {module!r}, which is not installed here")


@dataclass
class OpenedSide:
    """One running side. ``target`` is what the factory returned (in-process) or an
    `OpenAITarget` client (HTTP); ``server`` is set when fasttrack started the server."""

    name: Side
    kind: str  # "python" | "openai"
    target: Any
    server: ManagedServer | None = None
    url: str | None = None
    logs: list[Path] = field(default_factory=list)  # server logs to keep as artifacts

    def close(self) -> None:
        """Release the target (its own ``close``, e.g. tensor-parallel ranks) and stop the server."""
        try:
            closer = getattr(self.target, "close", None)
            if callable(closer) and self.kind == "python":
                closer()
        finally:
            if self.server is not None:
                self.server.stop()


# ------------------------------------------------------------------------------ in-process


def load_factory(manifest: Manifest) -> Callable[..., Any]:
    python = manifest.target.python
    if python is None:
        raise TargetError("target.kind is python but target.python is missing")
    module_name, _, attr = python.factory.partition(":")
    folder = str(manifest.resolve_path(python.path)) if python.path else str(manifest.root)
    if folder not in sys.path:
        sys.path.insert(0, folder)  # the target's own import path, as the manifest declares it
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        missing = err.name or str(err)
        if missing == module_name or module_name.startswith(missing + "."):
            raise TargetError(
                f"the target factory module {module_name!r} is not under {folder} and not installed"
            ) from None
        raise TargetDependencyMissing(missing, python.factory) from None
    except ImportError as err:
        raise TargetError(f"cannot import the target factory module {module_name!r}: {err}") from None
    factory = getattr(module, attr or "create", None)
    if not callable(factory):
        raise TargetError(f"{python.factory}: {module_name} has no callable {attr or 'create'!r}")
    return factory


def accepts(function: Callable[..., Any], name: str) -> bool:
    """Whether ``function`` takes the keyword ``name`` (or any keyword)."""
    try:
        params = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return True  # a builtin or C callable: let the call itself say
    return any(p.kind is p.VAR_KEYWORD or p.name == name for p in params)


def factory_options(
    manifest: Manifest,
    side: Side,
    point: Mapping[str, Any] | None,
    draft_length: int | None = None,
    *,
    factory: Callable[..., Any] | None = None,
    switch_default: bool = False,
) -> dict[str, Any]:
    """The keyword arguments of one side's factory call (see the module docstring).
    ``switch_default``: leave the baseline's switch at the target's own default."""
    point = dict(point or {})
    takes: Callable[[str], bool] = (lambda name: True) if factory is None else (lambda name: accepts(factory, name))
    options: dict[str, Any] = dict(manifest.target.python.options) if manifest.target.python else {}
    for switch in manifest.switches:
        on = manifest.switch_on(switch, side)
        if switch.keyword is not None and (on or not switch_default):
            options[switch.keyword] = on
    needed: list[tuple[str, Any, bool]] = []  # (keyword, value, whether the point cannot run without it)
    if str(point.get("accelerator", "cpu")).lower() != "cpu":
        needed.append(("device", options.get("device", "cuda"), True))
    elif point.get("accelerator") is not None:
        # A cpu point is the CPU on any machine (a GPU host too): say so where the factory listens.
        needed.append(("device", "cpu", False))
    if point.get("tensor_parallel") is not None:
        tp = int(point["tensor_parallel"])
        needed.append(("tensor_parallel_size", tp, tp > 1))
    if point.get("dtype"):
        needed.append(("dtype", point["dtype"], True))
    if draft_length:
        needed.append(("speculative_draft_tokens", int(draft_length), True))
    for name in manifest.scope.engine_values():  # engine dimensions: the keyword is the dimension's name
        if name in point:
            needed.append((name, point[name], not (name in PARALLEL_NAMES and point[name] == 1)))
    for keyword, value, required in needed:
        if takes(keyword):
            options[keyword] = value
        elif required:
            name = manifest.target.python.factory if manifest.target.python else "the target factory"
            raise TargetError(
                f"{name} takes no {keyword!r} argument, so it cannot run this scope point "
                f"({keyword}={value!r}); accept it or narrow the scope"
            )
    return options


def switch_environment(manifest: Manifest, side: Side) -> tuple[dict[str, str], tuple[str, ...]]:
    """(variables to set, variables to remove) for one side: every environment switch that side
    runs with on is set to its value, every other one removed (the gate's own environment must
    not turn the baseline's switch on)."""
    set_: dict[str, str] = {}
    unset: list[str] = []
    for switch in manifest.switches:
        if switch.env_name is None:
            continue
        if manifest.switch_on(switch, side):
            set_[switch.env_name] = switch.env_value or ""
        else:
            unset.append(switch.env_name)
    return set_, tuple(unset)


class EnvScope:
    """Set and remove environment variables for a block, then restore them (in-process sides)."""

    def __init__(self, set_: Mapping[str, str], unset: Sequence[str] = ()) -> None:
        self.set_, self.unset = dict(set_), tuple(unset)
        self._saved: dict[str, str | None] = {}

    @property
    def empty(self) -> bool:
        return not self.set_ and not self.unset

    def __enter__(self) -> EnvScope:
        for name in (*self.set_, *self.unset):
            self._saved.setdefault(name, os.environ.get(name))
        for name in self.unset:
            os.environ.pop(name, None)
        os.environ.update(self.set_)
        return self

    def __exit__(self, *exc: object) -> None:
        for name, value in self._saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        self._saved = {}


class EnvScopedTarget:
    """A target whose every method call runs inside its side's environment switches (attributes
    that are not callable are passed through). Only used when the manifest has env switches."""

    def __init__(self, target: Any, scope: EnvScope) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_scope", scope)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._target, name)
        if not callable(value):
            return value
        scope = self._scope

        def call(*args: Any, **kwargs: Any) -> Any:
            with EnvScope(scope.set_, scope.unset):
                return value(*args, **kwargs)

        return call

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._target, name, value)


def _open_in_process(
    manifest: Manifest, side: Side, point: Mapping[str, Any] | None, draft_length: int | None, switch_default: bool
) -> OpenedSide:
    factory = load_factory(manifest)
    options = factory_options(manifest, side, point, draft_length, factory=factory, switch_default=switch_default)
    spec = manifest.target.python
    scope = EnvScope(*switch_environment(manifest, side))
    try:
        with scope:
            made = _call_factory(factory, options, manifest)
    except TargetError:
        raise
    except ModuleNotFoundError as exc:  # the target's code needs a module this machine lacks
        raise TargetDependencyMissing(exc.name or str(exc), spec.factory if spec else "the target") from None
    except Exception as exc:  # the system under test could not be built: a target problem, not ours
        raise TargetError(
            f"the {side} target could not be created by {spec.factory if spec else 'the factory'}: "
            f"{type(exc).__name__}: {exc}"
        ) from exc
    return OpenedSide(side, "python", made if scope.empty else EnvScopedTarget(made, scope))


def _call_factory(factory: Callable[..., Any], options: dict[str, Any], manifest: Manifest) -> Any:
    """The factory's target. ``device="cpu"`` at a cpu point is a courtesy (the engine already hides
    every GPU there): a factory that takes ``**options`` and hands them to a constructor without a
    ``device`` parameter is called again without it, rather than failing the point."""
    ours = options.get("device") == "cpu" and "device" not in (
        manifest.target.python.options if manifest.target.python else {}
    )
    try:
        return factory(**options)
    except TypeError as exc:
        if not ours or "'device'" not in str(exc) or "unexpected keyword argument" not in str(exc):
            raise
    return factory(**{k: v for k, v in options.items() if k != "device"})


# ------------------------------------------------------------------------------ HTTP servers


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
    if draft_length:
        command += [
            str(arg) for arg in (manifest.section("target") or {}).get("openai", {}).get("speculative_args") or ()
        ]
    return render_command(command, point=ScopePoint.of(values), leave=("port",))


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
    if command is None and side == "candidate" and manifest.candidate_switches is not None:
        raise TargetError(
            "an ablation arm turns on only some switches, which needs fasttrack to start the candidate "
            "server (target.openai.candidate.command); a running server at a url has the switches it was started with"
        )
    switch_set, switch_unset = switch_environment(manifest, side)
    env = {k: v for k, v in _rendered_env(conf.env, point).items() if k not in switch_set}
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
        unset_env=tuple(name for name in switch_unset if name not in conf.env),
    )


def _rendered_env(env: Mapping[str, str], point: Mapping[str, Any] | None) -> dict[str, str]:
    """A side's env with the scope point's ``{dimension}`` placeholders filled in."""
    from fasttrack.manifest import ScopePoint, render_command

    names, values = list(env), [str(v) for v in env.values()]
    return dict(zip(names, render_command(values, point=ScopePoint.of(dict(point or {})), leave=("port",))))


def _open_server(
    manifest: Manifest, side: Side, point: Mapping[str, Any] | None, draft_length: int | None, log_dir: Path | None
) -> OpenedSide:
    spec = server_spec(manifest, side, point, draft_length)
    server = ManagedServer(spec, Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="fasttrack-server-")))
    url = server.start()  # TargetError when it does not come up; the server is stopped then
    write_side(log_dir, side, from_server(url))  # the engine build it serves (vLLM's /version), for the evidence
    openai = manifest.target.openai
    client = OpenAITarget(
        url,
        model=openai.model_name if openai else None,
        server=server,
        timeout_s=openai.request_timeout_s if openai else DEFAULT_TIMEOUT_S,
        concurrency=openai.concurrency if openai else 64,
    )
    logs = [server.log_path] if spec.command else []
    return OpenedSide(side, "openai", client, server=server if spec.command else None, url=url, logs=logs)


# ------------------------------------------------------------------------------ both kinds


def open_side(
    manifest: Manifest,
    side: Side,
    point: Mapping[str, Any] | None = None,
    *,
    draft_length: int | None = None,
    log_dir: Path | None = None,
    switch_default: bool = False,
) -> OpenedSide:
    kind = manifest.target.kind
    if kind == "python":
        return _open_in_process(manifest, side, point, draft_length, switch_default)
    if kind == "openai":
        return _open_server(manifest, side, point, draft_length, log_dir)
    raise TargetError(f"target kind {kind!r} is not supported")


@contextmanager
def opened_pair(
    manifest: Manifest,
    point: Mapping[str, Any] | None = None,
    *,
    draft_length: int | None = None,
    log_dir: Path | None = None,
) -> Iterator[tuple[OpenedSide, OpenedSide]]:
    """(baseline, candidate), both closed (servers stopped) afterwards, also on error or Ctrl-C.
    ``draft_length`` applies to the candidate only."""
    baseline = open_side(manifest, "baseline", point, log_dir=log_dir)
    try:
        candidate = open_side(manifest, "candidate", point, draft_length=draft_length, log_dir=log_dir)
        try:
            yield baseline, candidate
        finally:
            candidate.close()
    finally:
        baseline.close()
