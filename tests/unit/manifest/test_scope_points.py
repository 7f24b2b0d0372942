"""Scope expansion: representative batches, union over hardware entries, projection."""

from pathlib import Path

import pytest

from fasttrack.manifest import ScopePoint, load_manifest, representative_batches

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    ("low", "high", "expected"),
    [
        (1, 64, (1, 2, 4, 8, 16, 17, 32, 64)),
        (1, 1, (1,)),
        (1, 8, (1, 2, 3, 4, 8)),  # 17 is outside: the odd size falls back to 3
        (2, 4, (2, 3, 4)),
        (5, 6, (5, 6)),  # nothing fits in between
        (20, 40, (20, 21, 32, 40)),
        (21, 23, (21, 23)),  # no odd size strictly inside: none added
        (30, 10**9, (30, 31, *(2**k for k in range(5, 30)), 10**9)),  # huge ranges stay cheap
    ],
)
def test_representative_batches(low, high, expected):
    assert representative_batches(low, high) == expected


def test_scope_point_identity_is_sorted_and_stable():
    a = ScopePoint.of({"tensor_parallel": 2, "accelerator": "cpu", "batch": 17, "dtype": "bf16"})
    b = ScopePoint.of([("dtype", "bf16"), ("batch", 17), ("accelerator", "cpu"), ("tensor_parallel", 2)])
    assert a == b and hash(a) == hash(b)
    assert a.id == "accelerator=cpu,batch=17,dtype=bf16,tensor_parallel=2"
    assert a.get("batch") == 17 and a.get("draft_length") is None and a.get("x", 5) == 5
    assert a.as_dict() == {"accelerator": "cpu", "batch": 17, "dtype": "bf16", "tensor_parallel": 2}
    assert a.project(["batch"]).id == "batch=17"


def test_mini_k3_scope_is_the_union_of_hardware_entries():
    m = load_manifest(REPO / "tests/fixtures/manifests/valid/cpu-and-h200.yaml")
    setups = [p.id for p in m.hardware_setups()]
    assert setups == [
        "accelerator=cpu,device_count=1,tensor_parallel=1",
        "accelerator=cpu,device_count=1,tensor_parallel=2",
        "accelerator=cpu,device_count=1,tensor_parallel=4",
        "accelerator=NVIDIA H200,device_count=1,tensor_parallel=1",
    ]
    # listed batch points are used as they are
    assert sorted({p.get("batch") for p in m.scope_points(["batch"])}) == [1, 3, 8, 17, 32, 64]
    # 4 hardware setups x 6 batches x 2 dtypes x 7 draft lengths x 3 context buckets
    assert len(m.scope_points()) == 4 * 6 * 2 * 7 * 3
    assert len(set(m.scope_points())) == len(m.scope_points())


def test_gpu_tensor_parallel_must_divide_device_count():
    m = load_manifest(REPO / "examples/kimi-k3-latency/fasttrack.yaml")
    pairs = [(p.get("device_count"), p.get("tensor_parallel")) for p in m.hardware_setups()]
    assert pairs == [(8, 8), (16, 8), (16, 16)]  # TP16 on 8 GPUs is not a setup


def test_projection_deduplicates_and_keeps_only_requested_dims():
    m = load_manifest(REPO / "tests/fixtures/manifests/valid/cpu-and-h200.yaml")
    points = m.scope_points(["accelerator", "dtype"])
    assert [p.id for p in points] == [
        "accelerator=cpu,dtype=fp32",
        "accelerator=cpu,dtype=bf16",
        "accelerator=NVIDIA H200,dtype=fp32",
        "accelerator=NVIDIA H200,dtype=bf16",
    ]


def test_absent_dimensions_are_left_out_and_unknown_ones_rejected():
    m = load_manifest(REPO / "tests/fixtures/manifests/valid/minimal.yaml")
    assert [p.id for p in m.scope_points(["accelerator", "draft_length"])] == ["accelerator=cpu"]
    with pytest.raises(ValueError, match="unknown scope dimension"):
        m.scope_points(["heads"])


def test_hardware_entry_lookup():
    m = load_manifest(REPO / "tests/fixtures/manifests/valid/full.yaml")
    gpu = ScopePoint.of({"accelerator": "NVIDIA GB300", "device_count": 16, "tensor_parallel": 8})
    assert m.hardware_entry_for(gpu).index == 1
    assert m.hardware_entry_for(ScopePoint.of({"accelerator": "NVIDIA B200"})) is None
