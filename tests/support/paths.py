"""Where things are, for tests that copy fixture projects or run the example."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository
TESTS = ROOT / "tests"
SUPPORT = TESTS / "support"
FIXTURES = TESTS / "fixtures"
FAULTS = FIXTURES / "faults"
MANIFESTS = FIXTURES / "manifests"
EXAMPLE = ROOT / "examples" / "mini-k3"
