"""Fixtures shared by every test folder. The builders behind them live in `tests/support/`
(importable as `support` through pytest's `pythonpath`); a folder's conftest or a test module may
override a fixture of the same name with its own project."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
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
    os.environ.pop("CI", None)


@pytest.fixture(autouse=True, scope="session")
def _own_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The session's own fasttrack cache (eval baselines, remembered check costs), shared by the
    xdist workers and fresh each session: what a test finds there never depends on the runs a
    developer made on this machine before."""
    base = tmp_path_factory.getbasetemp()
    root = base.parent if "PYTEST_XDIST_WORKER" in os.environ else base
    os.environ["FASTTRACK_CACHE_DIR"] = str(root / "fasttrack-cache")


@pytest.fixture(autouse=True)
def _cpu_share(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Under pytest-xdist (the README runs ``-n 2``) tests share the host's cores; a test marked
    ``exclusive`` (a timing decision on pinned cores) runs with no other test beside it. A
    readers-writer lock over two files every worker sees: the turnstile stops new tests from
    starting while an exclusive one waits, so it cannot starve behind the other worker."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        yield
        return
    root = tmp_path_factory.getbasetemp().parent  # shared by the workers of one session
    exclusive = request.node.get_closest_marker("exclusive") is not None
    with open(root / "cpu-turnstile.lock", "a") as turnstile, open(root / "cpu-share.lock", "a") as share:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        fcntl.flock(share, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        if not exclusive:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(share, fcntl.LOCK_UN)
            fcntl.flock(turnstile, fcntl.LOCK_UN)
