"""The code stays in pieces a reader takes in at once: no module of fasttrack/ over 500 lines and
no function over 80 (issue 33). Split along the seams the package already has (a kind's package,
a topic of the manifest's rules) rather than raising the limits."""

from __future__ import annotations

import ast
from pathlib import Path

from support.paths import ROOT

PACKAGE = ROOT / "fasttrack"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80


def sizes(package: Path = PACKAGE) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(modules over the limit, functions over the limit), as (lines, where)."""
    modules, functions = [], []
    for path in sorted(package.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        where = path.relative_to(package.parent).as_posix()
        lines = len(source.splitlines())
        if lines > MAX_MODULE_LINES:
            modules.append((lines, where))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    functions.append((length, f"{where}:{node.lineno} {node.name}"))
    return modules, functions


def test_no_module_over_500_lines_and_no_function_over_80():
    modules, functions = sizes()
    assert not modules, f"modules over {MAX_MODULE_LINES} lines: {modules}"
    assert not functions, f"functions over {MAX_FUNCTION_LINES} lines: {functions}"


def test_the_check_finds_a_long_module_and_a_long_function(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (package / "sub" / "long.py").write_text(f"def long():\n{body}\n" + "\n" * MAX_MODULE_LINES)
    (package / "short.py").write_text("def short():\n    return 1\n")
    modules, functions = sizes(package)
    assert [where for _, where in modules] == ["pkg/sub/long.py"]
    assert [where for _, where in functions] == ["pkg/sub/long.py:1 long"]
