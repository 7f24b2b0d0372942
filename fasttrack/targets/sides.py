"""Open the two sides of a comparison at one scope point, and close them: the one place that
turns the manifest's ``target`` into running systems. Probes, evals, divergence, the speculative
check, benchmarks and the switch's proof of path all open their sides here.

In-process (``target.kind: python``): the factory ``module:function`` (``target.python.path`` put
on the import path) is called once per side with ``target.python.options`` plus the keyword
conventions fasttrack uses: the switch's ``engine_arg`` (False for the baseline, True for the
candidate; left out for the baseline of the proof of path, which must see the target's own
default), and, where the scope point asks for them, ``device`` (``cuda`` off CPU, ``cpu`` at a
cpu point, where the engine also hides every GPU from the process),
``tensor_parallel_size``, ``dtype`` and ``speculative_draft_tokens``. A keyword the factory
does not accept is left out where the point does not need it (tensor parallel 1, CPU, no
dtype) and is a `TargetError` where it does: a target that cannot be told to run a point's
setting cannot run that point, and pretending it did would pass a point that never ran.

HTTP (``target.kind: openai``): a side with a ``url`` is used as it is; a side with a ``command``
is started by `ManagedServer` (own process group, health wait, log kept under ``log_dir``) with
the scope point's ``{dimension}`` placeholders filled in and, at a draft length, the manifest's
``speculative_args`` appended. `OpenedSide.close` stops it.

Every failure to open a side is a `TargetError` (or `TargetDependencyMissing`, its subclass for
a Python module the target's code needs and this machine lacks).
"""

from __future__ import annotations

import importlib
import inspect
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from fasttrack.errors import TargetError
from fasttrack.targets.openai_server import ManagedServer, OpenAITarget, ServerSpec

if TYPE_CHECKING:
    from fasttrack.manifest import Manifest

Side = Literal["baseline", "candidate"]
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
    switch_arg = manifest.switch.engine_arg or manifest.switch.name
    if side == "candidate" or not switch_default:
        options[switch_arg] = side == "candidate"
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


def _open_in_process(
    manifest: Manifest, side: Side, point: Mapping[str, Any] | None, draft_length: int | None, switch_default: bool
) -> OpenedSide:
    factory = load_factory(manifest)
    options = factory_options(manifest, side, point, draft_length, factory=factory, switch_default=switch_default)
    spec = manifest.target.python
    try:
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
    return OpenedSide(side, "python", made)


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
    return ServerSpec(
        side,
        command=command,
        url=None if command else conf.url,
        health_path=openai.health_path,
        startup_timeout_s=openai.startup_timeout_s,
        env=dict(conf.env),
        cwd=str(manifest.resolve_path(conf.cwd)) if conf.cwd else str(manifest.root),
    )


def _open_server(
    manifest: Manifest, side: Side, point: Mapping[str, Any] | None, draft_length: int | None, log_dir: Path | None
) -> OpenedSide:
    spec = server_spec(manifest, side, point, draft_length)
    server = ManagedServer(spec, Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="fasttrack-server-")))
    url = server.start()  # TargetError when it does not come up; the server is stopped then
    openai = manifest.target.openai
    client = OpenAITarget(url, model=openai.model_name if openai else None, server=server)
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
