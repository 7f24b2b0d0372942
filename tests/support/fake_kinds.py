"""A registry of check kinds for engine tests: the built-in kinds, each planning exactly the
instances a test gives it and running the fake runner module the test names. The engine, the
planner and verification receive it like the real one: nothing is patched."""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping
from dataclasses import replace

from fasttrack.kinds.base import Kind
from fasttrack.kinds.registry import KINDS
from fasttrack.plan import CheckInstance

NO_RUNNER = "ft_fake_no_such_runner"  # a module that does not exist: the kind has no runner here


def fake_kinds(instances: Iterable[CheckInstance], runners: Mapping[str, str | None]) -> dict[str, Kind]:
    """Kinds that plan ``instances`` (each kind its own, in the given order) and run ``runners``:
    kind -> fake runner module (importable), or None for a kind without a runner. A fake module
    may say ``ISOLATION = "inprocess" | "subprocess"`` to override the kind's isolation."""
    planned = list(instances)
    kinds: dict[str, Kind] = {}
    for name, kind in KINDS.items():
        own = tuple(i for i in planned if i.kind == name)
        changes: dict = {"plan": lambda planner, own=own: own}
        if name in runners:
            module = runners[name]
            changes["runner"] = module or NO_RUNNER
            if module is not None:
                isolation = getattr(importlib.import_module(module), "ISOLATION", kind.execution.isolation)
                changes["execution"] = replace(kind.execution, isolation=isolation)
        kinds[name] = replace(kind, **changes)  # type: ignore[type-var]
    return kinds
