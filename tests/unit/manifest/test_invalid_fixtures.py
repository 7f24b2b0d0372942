"""Every invalid fixture produces its expected message at its expected line (in-process)."""

import re
from pathlib import Path

import pytest

from fasttrack.manifest import check_text

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures/manifests"
INVALID = sorted((FIXTURES / "invalid").glob("*.yaml"))


def expectation(path: Path) -> tuple[str, int]:
    text = path.read_text()
    fragment = re.search(r"^# expect: (.+)$", text, re.M)
    line = re.search(r"^# line: (\d+)$", text, re.M)
    assert fragment and line, f"{path.name} lacks '# expect:' / '# line:' headers"
    return fragment.group(1), int(line.group(1))


def test_there_are_at_least_thirty_invalid_fixtures():
    assert len(INVALID) >= 30


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_fixture_reports_its_problem(path):
    fragment, line = expectation(path)
    _, problems = check_text(path.read_text())
    errors = [p for p in problems if p.severity == "error"]
    assert errors, "expected at least one error"
    matching = [p for p in errors if fragment in p.message]
    assert matching, f"no error contains {fragment!r}; got {[p.message for p in errors]}"
    assert line in {p.line for p in matching}, f"expected line {line}, got {[p.line for p in matching]}"


@pytest.mark.parametrize("path", sorted((FIXTURES / "valid").glob("*.yaml")), ids=lambda p: p.stem)
def test_valid_fixture_has_no_errors(path):
    _, problems = check_text(path.read_text())
    assert [p.message for p in problems if p.severity == "error"] == []
