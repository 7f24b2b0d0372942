"""Load an in-process Python target from the manifest's ``target.python``: import
``module:function`` (with ``target.python.path`` put on sys.path) and call it with the
manifest's options, the switch setting and the scope point's parallelism."""

from __future__ import annotations

import importlib
import inspect
import sys
from typing import Any

from fasttrack.errors import TargetError


class TargetDependencyMissing(TargetError):
    """The target's code needs a Python module that is not installed here."""

    def __init__(self, module: str, factory: str):
        self.module = module
        super().__init__(f"the target {factory} needs the Python module {module!r}, which is not installed here")


def load_factory(manifest: Any) -> Any:
    python = manifest.target.python
    if python is None:
        raise TargetError("target.python is not set in the manifest")
    module_name, _, attr = python.factory.partition(":")
    folder = str(manifest.resolve_path(python.path)) if python.path else str(manifest.root)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        missing = err.name or str(err)
        if missing == module_name or module_name.startswith(missing + "."):
            raise TargetError(f"target factory module {module_name!r} not found under {folder}") from None
        raise TargetDependencyMissing(missing, python.factory) from None
    factory = getattr(module, attr or "create", None)
    if not callable(factory):
        raise TargetError(f"{python.factory}: {module_name} has no callable {attr or 'create'!r}")
    return factory


def accepts(factory: Any, name: str) -> bool:
    try:
        params = inspect.signature(factory).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.kind is p.VAR_KEYWORD or p.name == name for p in params)


def create_target(manifest: Any, *, switch_on: bool | None, scope_point: Any = None, **extra: Any) -> Any:
    """A target instance. ``switch_on=None`` leaves the switch at the target's own default (the
    proof-of-path check needs exactly that: the stock setting is whatever the code defaults to)."""
    factory = load_factory(manifest)
    options = dict(manifest.target.python.options or {})
    arg = manifest.switch.engine_arg or manifest.switch.name
    if switch_on is not None:
        options[arg] = bool(switch_on)
    tp = scope_point.get("tensor_parallel") if scope_point is not None else None
    if tp is not None and accepts(factory, "tensor_parallel_size"):
        options.setdefault("tensor_parallel_size", int(tp))
    options.update(extra)
    return factory(**options)
