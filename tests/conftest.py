"""Fixtures shared by every test folder. The builders behind them live in `tests/support/`
(importable as `support` through pytest's `pythonpath`); a folder's conftest or a test module may
override a fixture of the same name with its own project."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from support.projects import materialise


@pytest.fixture
def make_project(tmp_path: Path) -> Callable[..., Path]:
    """``make_project(fault=None, name="p")``: the fault fixtures' base project, plus one fault's
    files, copied under this test's tmp_path and committed on main."""

    def make(fault: str | None = None, name: str = "p") -> Path:
        return materialise(tmp_path / name, fault)

    return make


@pytest.fixture
def project(make_project: Callable[..., Path]) -> Path:
    """The clean base project (every check passes there)."""
    return make_project()


@pytest.fixture(autouse=True, scope="session")
def _not_in_ci_mode() -> None:
    """`fasttrack verify` fails without --manifest when CI=true (#35 row 6); the tests that verify
    the embedded copy on purpose run outside CI mode unless they set it themselves."""
    import os

    os.environ.pop("CI", None)
