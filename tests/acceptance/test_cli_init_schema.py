"""`fasttrack init` writes a starter manifest that validates; `fasttrack schema` prints schemas."""

from __future__ import annotations

import contextlib
import io
import json

from fasttrack.cli import main
from fasttrack.manifest import load_manifest


def run_cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            main(list(args))
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
    return code, out.getvalue()


def test_init_writes_a_commented_manifest_that_validates(tmp_path):
    path = tmp_path / "fasttrack.yaml"
    code, output = run_cli("init", str(path))
    assert code == 0 and str(path) in output
    text = path.read_text()
    assert text.count("#") > 10  # commented
    manifest = load_manifest(path)
    assert manifest.switch.default is False
    code, output = run_cli("validate", str(path))
    assert code == 0


def test_init_refuses_to_overwrite_without_force(tmp_path):
    path = tmp_path / "fasttrack.yaml"
    path.write_text("mine\n")
    code, output = run_cli("init", str(path))
    assert code == 2 and "--force" in output
    assert path.read_text() == "mine\n"
    code, _ = run_cli("init", "--force", str(path))
    assert code == 0 and path.read_text().startswith("# fasttrack manifest")


def test_schema_prints_the_manifest_schema_by_default():
    code, output = run_cli("schema")
    assert code == 0
    assert json.loads(output)["$id"] == "https://fasttrack.dev/schemas/manifest/v1.json"
    code, output = run_cli("schema", "manifest")
    assert json.loads(output)["title"] == "fasttrack manifest v1"


def test_schema_rejects_unknown_kind():
    code, output = run_cli("schema", "nonsense")
    assert code == 2 and "Traceback" not in output
