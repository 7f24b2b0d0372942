"""`fasttrack validate` from the outside: exit codes, messages with file and line, no traceback."""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

from fasttrack.cli import main

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests/fixtures/manifests"
INVALID = sorted((FIXTURES / "invalid").glob("*.yaml"))
VALID = sorted((FIXTURES / "valid").glob("*.yaml"))
EXAMPLES = sorted(REPO.glob("examples/*/fasttrack.yaml"))


def run_cli(*args: str) -> tuple[int, str]:
    """The real entry point, in-process (fast); an escaping exception becomes its traceback."""
    out = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            main(list(args))
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
        except BaseException:
            return -1, traceback.format_exc()
    return code, out.getvalue()


def expectation(path: Path) -> tuple[str, int]:
    text = path.read_text()
    return re.search(r"^# expect: (.+)$", text, re.M).group(1), int(re.search(r"^# line: (\d+)$", text, re.M).group(1))


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.stem)
def test_invalid_fixture_exits_2_with_message_file_and_line(path):
    fragment, line = expectation(path)
    code, output = run_cli("validate", str(path))
    assert code == 2, output
    assert "Traceback" not in output
    located = [text for text in output.splitlines() if text.strip().startswith(f"{path}:{line}: ")]
    assert any(fragment in text for text in located), f"want {path.name}:{line} with {fragment!r}; got:\n{output}"


@pytest.mark.parametrize("path", VALID + EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_valid_manifest_exits_0(path):
    code, output = run_cli("validate", str(path))
    assert code == 0, output
    assert re.search(rf"^ok: {re.escape(str(path))} \(\d+ scope points?\)$", output, re.M), output


def test_several_files_report_all_and_fail_if_any_fails():
    good, bad1, bad2 = VALID[0], INVALID[0], INVALID[1]
    code, output = run_cli("validate", str(good), str(bad1), str(bad2))
    assert code == 2
    assert f"ok: {good}" in output
    assert f"invalid: {bad1}" in output and f"invalid: {bad2}" in output


def test_warning_is_shown_but_does_not_fail():
    path = FIXTURES / "valid/not-comparable-claim.yaml"
    code, output = run_cli("validate", str(path))
    assert code == 0
    assert "warning: $.benchmarks[0].claims[0]: claim 'before-after' is not comparable" in output


def test_missing_file_is_a_usage_error_without_traceback(tmp_path):
    code, output = run_cli("validate", str(tmp_path / "nope.yaml"))
    assert code == 2 and "cannot read file" in output and "Traceback" not in output


@pytest.mark.parametrize("name", ["switch-default-true", "yaml-unclosed-flow-mapping", "duplicate-top-level-key"])
def test_console_entry_point_in_a_subprocess(name):
    path = FIXTURES / "invalid" / f"{name}.yaml"
    fragment, line = expectation(path)
    done = subprocess.run(
        [sys.executable, "-m", "fasttrack", "validate", str(path)], capture_output=True, text=True, cwd=REPO, timeout=60
    )
    output = done.stdout + done.stderr
    assert done.returncode == 2, output
    assert f"{path}:{line}: " in output and fragment in output
    assert "Traceback" not in output
