"""Swap the runner of a check kind for a fake one in the kinds table, for engine tests."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import replace

import pytest

from fasttrack import runners


def use_runners(monkeypatch: pytest.MonkeyPatch, modules: Mapping[str, str | None]) -> None:
    """kind -> fake runner module (importable), or None to leave the kind without a runner. A fake
    module may say ``ISOLATION = "inprocess" | "subprocess"`` to override the kind's isolation."""
    table = dict(runners.KINDS)
    for kind, module in modules.items():
        if module is None:
            table.pop(kind, None)
            continue
        isolation = getattr(importlib.import_module(module), "ISOLATION", table[kind].isolation)
        table[kind] = replace(table[kind], module=module, isolation=isolation)
    monkeypatch.setattr(runners, "KINDS", table)
    # modules that imported the table by name see the same fake
    for name in (
        "fasttrack.engine.run",
        "fasttrack.engine.jobs",
        "fasttrack.engine.select",
        "fasttrack.plan",
        "fasttrack.cli.options",
    ):
        module = importlib.import_module(name)
        if hasattr(module, "KINDS"):
            monkeypatch.setattr(module, "KINDS", table)
