"""In-process targets (``target.kind: python``): the factory ``module:function``
(``target.python.path`` put on the import path) is called once per side with
``target.python.options`` plus the keyword conventions fasttrack uses: each switch's
``engine_arg`` (False for the baseline, True for the candidate, False for a switch an ablation arm
leaves off; left out for the baseline of the proof of path, which must see the target's own
default), and, where the scope point asks for them, ``device`` (``cuda`` off CPU, ``cpu`` at a cpu
point, where the engine also hides every GPU from the process), ``tensor_parallel_size``,
``dtype``, ``speculative_draft_tokens`` and every engine dimension of the scope under its own name
(``kv_cache_dtype``, ``decode_context_parallel`` ...). A keyword the factory does not accept is
left out where the point does not need it (tensor parallel 1, CPU, no dtype) and is a
`TargetError` where it does: a target that cannot be told to run a point's setting cannot run
that point, and pretending it did would pass a point that never ran. What the factory returns is
a `fasttrack.targets.protocol.Target`."""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable, Mapping
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fasttrack.errors import TargetError
from fasttrack.targets.protocol import OpenedSide, Side, TargetDependencyMissing, Unavailable
from fasttrack.targets.python.env import EnvScope, EnvScopedTarget
from fasttrack.targets.switches import switch_environment

if TYPE_CHECKING:
    from fasttrack.manifest import Manifest

# Engine dimensions whose value 1 is the engine's default (no such parallelism): not needed then.
PARALLEL_NAMES = frozenset({"decode_context_parallel", "expert_parallel", "data_parallel"})


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


def open_in_process(
    manifest: Manifest,
    side: Side,
    point: Mapping[str, Any] | None,
    draft_length: int | None,
    log_dir: Path | None,
    switch_default: bool,
) -> OpenedSide:
    """One side: the factory called with its options, inside its environment switches."""
    if manifest.side_args.get(side):  # validate refuses them: server arguments cannot reach a factory
        raise TargetError(
            f"an in-process target takes no server arguments (engine_args {list(manifest.side_args[side])})"
        )
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
    target = made if scope.empty else EnvScopedTarget(made, scope)
    return OpenedSide(side, "python", target, releases_target=True)


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


def unavailable(manifest: Manifest) -> Unavailable | None:
    """The factory's module is neither under ``target.python.path`` nor installed here."""
    python = manifest.target.python
    if python is None:
        return None
    module = python.factory.split(":", 1)[0]
    base = manifest.resolve_path(python.path) if python.path else manifest.root
    relative = Path(*module.split("."))
    if (
        (base / relative).with_suffix(".py").exists()
        or (base / relative / "__init__.py").exists()
        or find_spec(module.split(".")[0]) is not None
    ):
        return None
    return Unavailable(f"the target factory module {module!r} is not under {base} and not installed", module)
