"""Evidence fixtures for the report tests, built once per session with the fixture generator."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from fasttrack.evidence import read_evidence_dict
from support import evidence_fixtures


@pytest.fixture(scope="session")
def fixture_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("evidence")
    for mode in ("pass", "fail", "incomplete"):
        evidence_fixtures.write_fixture(out, mode)
    return out


@pytest.fixture(scope="session")
def history_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("history")
    evidence_fixtures.write_history(out, samples=150)
    return out


@pytest.fixture
def load(fixture_dir):
    """mode -> (evidence dict, sha256 of its file)."""

    def _load(mode: str):
        path = fixture_dir / mode / "evidence.json"
        return read_evidence_dict(path), hashlib.sha256(path.read_bytes()).hexdigest()

    return _load
