"""YAML loading: line numbers for every node, duplicate keys rejected, safe and JSON-only."""

from fasttrack.manifest.yaml_loader import load_yaml


def test_lines_point_at_keys_and_items():
    loaded = load_yaml("a: 1\nb:\n  c:\n    - x\n    - y\n  d: {e: 2}\n")
    assert loaded.problems == []
    assert loaded.data == {"a": 1, "b": {"c": ["x", "y"], "d": {"e": 2}}}
    assert loaded.lines[("a",)] == 1
    assert loaded.lines[("b", "c")] == 3
    assert loaded.lines[("b", "c", 1)] == 5
    assert loaded.lines[("b", "d", "e")] == 6


def test_line_of_missing_path_falls_back_to_nearest_ancestor():
    loaded = load_yaml("# comment\nsection:\n  key: 1\n")
    assert loaded.line_of(("section", "absent", 3)) == 2
    assert loaded.line_of(()) == 2  # the document starts after the comment


def test_duplicate_keys_are_reported_with_both_lines():
    loaded = load_yaml("a: 1\nb: 2\na: 3\n")
    [problem] = loaded.problems
    assert problem.line == 3
    assert "duplicate key 'a'" in problem.message
    assert "line 1" in problem.message and "line 3" in problem.message


def test_nested_duplicates_all_reported():
    loaded = load_yaml("s:\n  k: 1\n  k: 2\nt:\n  m: 1\n  m: 2\n")
    assert sorted(p.line for p in loaded.problems) == [3, 6]


def test_merge_keys_do_not_count_as_duplicates_and_own_keys_win():
    loaded = load_yaml("base: &b {x: 1, y: 2}\nderived:\n  <<: *b\n  y: 3\n")
    assert loaded.problems == []
    assert loaded.data["derived"] == {"x": 1, "y": 3}


def test_dates_stay_strings_so_data_stays_json():
    loaded = load_yaml("when: 2026-07-01\n")
    assert loaded.data == {"when": "2026-07-01"}


def test_non_finite_numbers_rejected():
    loaded = load_yaml("a: .nan\nb: -.inf\n")
    assert [p.line for p in loaded.problems] == [1, 2]
    assert all("finite" in p.message for p in loaded.problems)


def test_python_tags_are_not_executed():
    loaded = load_yaml("a: !!python/object/apply:os.system ['echo hi']\n")
    assert loaded.data is None or loaded.problems
    assert any("YAML" in p.message or "cannot read" in p.message for p in loaded.problems)


def test_non_string_keys_rejected():
    loaded = load_yaml("1: one\n? [a, b]\n: two\n")
    assert len(loaded.problems) == 2
    assert all("keys must be" in p.message for p in loaded.problems)


def test_syntax_error_has_line():
    loaded = load_yaml("a: 1\nb: [1, 2\nc: 3\n")
    [problem] = loaded.problems
    assert problem.message.startswith("YAML syntax error")
    assert problem.line >= 2


def test_alias_bomb_is_bounded():
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        prev = f"*a{i - 1}"
        lines.append(f"a{i}: &a{i} [{', '.join([prev] * 10)}]")
    loaded = load_yaml("\n".join(lines) + "\n")
    assert any("alias bomb" in p.message for p in loaded.problems)


def test_recursive_alias_rejected():
    loaded = load_yaml("a: &a [1, *a]\n")
    assert any("recursive" in p.message for p in loaded.problems)


def test_empty_document():
    loaded = load_yaml("# only a comment\n")
    assert loaded.data is None
    assert "empty" in loaded.problems[0].message


def test_nesting_is_capped_before_python_recurses():
    """#20 row 1: the depth is read off the parser's events, so no RecursionError at any depth."""
    from fasttrack.manifest.yaml_loader import MAX_DEPTH

    ok = load_yaml("x: " + "[" * (MAX_DEPTH - 1) + "1" + "]" * (MAX_DEPTH - 1))
    assert ok.problems == []
    for text in ("x:\n  " + "[" * MAX_DEPTH + "1" + "]" * MAX_DEPTH, "x: " + "{a: " * 100_000 + "1" + "}" * 100_000):
        loaded = load_yaml(text)
        assert loaded.data is None
        assert [p.message for p in loaded.problems] == [
            f"mappings and lists nest deeper than {MAX_DEPTH} levels here, the most a manifest may nest"
        ]
    assert load_yaml("x:\n  " + "[" * MAX_DEPTH + "1" + "]" * MAX_DEPTH).problems[0].line == 2
