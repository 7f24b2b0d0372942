"""Code confinement: glob semantics and the violation list."""

from __future__ import annotations

import pytest

from fasttrack.kinds.scope_diff.confine import confine, matches


@pytest.mark.parametrize(
    ("path", "pattern", "hit"),
    [
        ("vllm/model_executor/models/kimi_k3.py", "vllm/model_executor/models/kimi_k3*.py", True),
        ("vllm/model_executor/models/kimi_k3_mla.py", "vllm/model_executor/models/kimi_k3*.py", True),
        (
            "vllm/model_executor/models/kimi_k3/attn.py",
            "vllm/model_executor/models/kimi_k3*.py",
            False,
        ),  # * stays in one folder
        ("vllm/model_executor/models/kimi_k3/attn.py", "vllm/model_executor/models/kimi_k3/**", True),
        ("tests/models/kimi_k3/a/b/test_x.py", "tests/models/kimi_k3/**", True),
        ("tests/models/kimi_k3", "tests/models/kimi_k3/**", False),
        ("docs/a.md", "docs/**/*.md", True),  # ** matches zero folders
        ("docs/x/y/a.md", "docs/**/*.md", True),
        ("docs/x/y/a.txt", "docs/**/*.md", False),
        ("examples/mini-k3/README.md", "examples/mini-k3/*.md", True),
        ("examples/mini-k3/sub/README.md", "examples/mini-k3/*.md", False),
        ("src/tiny/a.py", "src/tiny", True),  # a plain folder name covers its contents
        ("src/tinyx/a.py", "src/tiny", False),
        ("a/b1.py", "a/b[0-9].py", True),
        ("a/bx.py", "a/b[!x].py", False),
    ],
)
def test_glob_semantics(path, pattern, hit):
    assert (matches(path, [pattern]) is not None) is hit


def test_violations_are_listed_by_path_and_the_manifest_is_always_allowed():
    result = confine(
        ["toy/a.py", "tests/t.py", "fasttrack.yaml", "setup.cfg", "other/b.py"],
        ["toy/**"],
        ["tests/**"],
        "fasttrack.yaml",
    )
    assert [v["path"] for v in result.violations] == ["setup.cfg", "other/b.py"]
    assert confine(["toy/a.py"], ["toy/**"], [], None).violations == ()
