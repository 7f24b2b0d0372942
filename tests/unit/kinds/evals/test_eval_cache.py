"""The content-addressed baseline cache."""

from __future__ import annotations

from fasttrack.kinds.evals.cache import BaselineCache, cache_key, code_identity
from fasttrack.kinds.evals.tasks import ItemRecord


def rec(i, non_finite=0):
    return ItemRecord(i, f"d{i}", f"p{i}", None, 0.5, (f"out{i}",), non_finite)


def test_cache_round_trip_and_partial_hits(tmp_path):
    material = {"baseline": {"model": "m", "code": "c"}, "task": "t"}
    c = BaselineCache.open(tmp_path, material)
    c.add({1: rec(1), 2: rec(2), 3: rec(3, non_finite=1)})
    again = BaselineCache.open(tmp_path, material)
    got, todo = again.take([1, 2, 3, 4])
    assert got == {1: rec(1), 2: rec(2)} and todo == [3, 4]  # broken responses are never cached
    assert again.hits == 2


def test_key_changes_with_any_ingredient_and_damaged_files_are_ignored(tmp_path):
    a = {"baseline": {"model": "m", "code": "c"}, "seed": 1}
    assert cache_key(a) != cache_key({**a, "seed": 2}) and cache_key(a) == cache_key(dict(reversed(list(a.items()))))
    c = BaselineCache.open(tmp_path, a)
    c.add({1: rec(1)})
    c.path.write_text("{not json")
    assert BaselineCache.open(tmp_path, a).items == {}
    assert BaselineCache.open(tmp_path, None).path is None  # no identity: no cache
    assert BaselineCache.open(tmp_path, a, enabled=False).path is None


def test_code_identity_follows_file_contents(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "model.py").write_text("x = 1\n")
    (tmp_path / "other.txt").write_text("ignored")
    first = code_identity(tmp_path, ["pkg/*.py"])
    (tmp_path / "other.txt").write_text("changed")
    assert code_identity(tmp_path, ["pkg/*.py"]) == first
    (tmp_path / "pkg" / "model.py").write_text("x = 2\n")
    assert code_identity(tmp_path, ["pkg/*.py"]) != first


def test_code_identity_of_a_recursive_code_path_follows_nested_files_and_weights(tmp_path):
    # Manifests declare code paths as "pkg/**"; pathlib before 3.13 matches only directories there,
    # which once made every version of the code (and the weights) share one cache key.
    nested = tmp_path / "pkg" / "weights"
    nested.mkdir(parents=True)
    (tmp_path / "pkg" / "model.py").write_text("x = 1\n")
    (nested / "model.safetensors").write_bytes(b"\x00" * 8)
    first = code_identity(tmp_path, ["pkg/**"])
    (nested / "model.safetensors").write_bytes(b"\x01" * 8)
    second = code_identity(tmp_path, ["pkg/**"])
    assert second != first
    (tmp_path / "pkg" / "model.py").write_text("x = 2\n")
    assert code_identity(tmp_path, ["pkg/**"]) != second


def test_code_identity_ignores_byte_code_caches(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "model.py").write_text("x = 1\n")
    first = code_identity(tmp_path, ["pkg/**"])
    (tmp_path / "pkg" / "__pycache__").mkdir()
    (tmp_path / "pkg" / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"compiled")
    assert code_identity(tmp_path, ["pkg/**"]) == first


def test_the_cache_keeps_what_each_item_cost_and_a_hit_reports_it(tmp_path):
    material = {"model": "m", "task": "t"}
    c = BaselineCache.open(tmp_path, material)
    c.add({i: rec(i) for i in range(4)}, 2.5)
    c.add({9: rec(9)})  # cost not measured
    again = BaselineCache.open(tmp_path, material)
    again.take([0, 1, 9, 42])
    assert (again.hits, again.saved_s, again.hits_of_unknown_cost) == (3, 5.0, 1)
