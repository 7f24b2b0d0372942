"""Property test: whatever a manifest is mutated into, `fasttrack validate` never shows a
traceback and exits 0 (valid) or 2 (invalid, with file:line messages).

CI runs the "mutations-ci" profile (150 examples). For a thorough run:
    FASTTRACK_MUTATION_PROFILE=mutations-thorough pytest tests/unit/manifest/test_mutations.py
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import tempfile
import traceback
from pathlib import Path

import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from fasttrack.cli import main

REPO = Path(__file__).resolve().parents[3]
SEEDS = [
    REPO / "tests/fixtures/manifests/valid/minimal.yaml",
    REPO / "tests/fixtures/manifests/valid/full.yaml",
    REPO / "tests/fixtures/manifests/valid/openai-target.yaml",
    REPO / "tests/fixtures/manifests/valid/anchors.yaml",
    REPO / "examples/kimi-k3-latency/fasttrack.yaml",
]
SEED_TEXTS = [p.read_text() for p in SEEDS]

settings.register_profile(
    "mutations-ci",
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "mutations-thorough",
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
PROFILE = settings.get_profile(os.environ.get("FASTTRACK_MUTATION_PROFILE", "mutations-ci"))

JUNK = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3),
    max_leaves=6,
)


def run_validate(path: str) -> tuple[int, str]:
    """Run the real CLI entry point in-process; an escaping exception becomes its traceback."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(["validate", path])
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
        except BaseException:
            return -1, traceback.format_exc()
    return code, out.getvalue() + err.getvalue()


def _containers(node, path=()):
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _containers(value, (*path, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _containers(value, (*path, index))


def _mutate_data(draw, data):
    paths = [p for p, _ in _containers(data) if p]
    if not paths:
        return data
    path = draw(st.sampled_from(paths))
    parent = data
    for part in path[:-1]:
        parent = parent[part]
    action = draw(st.sampled_from(["delete", "replace", "insert"]))
    if action == "delete":
        del parent[path[-1]]
    elif action == "replace":
        parent[path[-1]] = draw(JUNK)
    elif isinstance(parent, dict):
        parent[draw(st.text(min_size=1, max_size=10))] = draw(JUNK)
    else:
        parent.insert(0, draw(JUNK))
    return data


def _mutate_text(draw, text):
    lines = text.splitlines(keepends=True)
    action = draw(st.sampled_from(["truncate", "duplicate_line", "delete_line", "insert_chars", "swap_indent"]))
    if action == "truncate" or not lines:
        return text[: draw(st.integers(0, len(text)))]
    index = draw(st.integers(0, max(0, len(lines) - 1)))
    if action == "duplicate_line":
        lines.insert(index, lines[index])  # duplicate keys, most of the time
    elif action == "delete_line":
        del lines[index]
    elif action == "insert_chars":
        junk = draw(
            st.text(alphabet=st.sampled_from(list(":-{}[]&*!|>'\"#%@` \t\n") + ["a", "1"]), min_size=1, max_size=6)
        )
        position = draw(st.integers(0, len(text)))
        return text[:position] + junk + text[position:]
    else:
        lines[index] = "  " + lines[index]
    return "".join(lines)


@st.composite
def mutated_manifests(draw):
    text = draw(st.sampled_from(SEED_TEXTS))
    for _ in range(draw(st.integers(1, 3))):
        if draw(st.booleans()):
            try:
                data = yaml.safe_load(text)
            except yaml.YAMLError:
                data = None
            if isinstance(data, (dict, list)):
                text = yaml.safe_dump(_mutate_data(draw, data), sort_keys=False, allow_unicode=True)
                continue
        text = _mutate_text(draw, text)
    return text


@settings(PROFILE)
@given(mutated_manifests())
def test_validate_never_shows_a_traceback(text):
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "fasttrack.yaml")
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
        code, output = run_validate(path)
    event(f"exit code {code}")
    assert code in (0, 2), output
    assert "Traceback" not in output
    if code == 2:
        assert re.search(re.escape(path) + r":\d+: ", output), output
