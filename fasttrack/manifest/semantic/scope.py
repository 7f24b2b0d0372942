"""Rules of the scope: hardware entries, batch range, context buckets, draft lengths, parallelism,
engine dimensions, and the checks narrowed to some of its points."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from fasttrack import rocm
from fasttrack.manifest.narrowing import narrowed_points
from fasttrack.manifest.problems import Problem
from fasttrack.manifest.semantic.common import (
    deployment_dimensions,
    dimension_values,
    error,
    increasing,
    point_in_scope,
)

MAX_DRAFT_LENGTH = 16


def scope(data: Mapping[str, Any]) -> Iterator[Problem]:
    scope = data["scope"]
    yield from _hardware(scope)
    yield from _workloads(scope)
    yield from _parallelism(scope)
    yield from _data_parallel(scope)


def _hardware(scope: Mapping[str, Any]) -> Iterator[Problem]:
    """Each hardware entry: a cpu entry on loopback, tensor degrees that divide a device count."""
    hardware = scope["hardware"]
    any_combo = False
    for index, entry in enumerate(hardware):
        path = ("scope", "hardware", index)
        is_cpu = entry["accelerator"].strip().lower() == "cpu"
        yield from _vocabulary(entry, path)
        if is_cpu:
            any_combo = True
            if entry.get("interconnect") in ("nvlink", "xgmi", "infiniband"):
                yield error(
                    (*path, "interconnect"),
                    f"a cpu entry cannot use interconnect {entry['interconnect']!r}; use loopback",
                )
            continue
        for j, tp in enumerate(entry["tensor_parallel"]):
            if not any(count % tp == 0 for count in entry["device_counts"]):
                yield error(
                    (*path, "tensor_parallel", j),
                    f"tensor_parallel {tp} divides none of the device counts {entry['device_counts']} of {entry['accelerator']}",
                )
            else:
                any_combo = True
    if not any_combo:
        yield error(
            ("scope", "hardware"), "no hardware entry yields a valid (device_count, tensor_parallel) combination"
        )


def _vocabulary(entry: Mapping[str, Any], path: tuple[Any, ...]) -> Iterator[Problem]:
    """What an entry says of its accelerator fits the vendor its name says: a CUDA compute
    capability and NVLink on NVIDIA, a gfx target and xGMI on AMD (of the product's own
    architecture), none of them on a cpu."""
    name = entry["accelerator"].strip()
    vendor = "cpu" if name.lower() == "cpu" else rocm.vendor_of(name)
    if entry.get("compute_capability") and entry.get("min_compute_capability"):
        yield error(
            (*path, "min_compute_capability"),
            "give compute_capability (exactly) or min_compute_capability (at least), not both",
        )
    cuda = [key for key in ("compute_capability", "min_compute_capability") if entry.get(key)]
    if vendor == "cpu":
        for key in [k for k in cuda if k != "compute_capability"] + (["gfx_arch"] if entry.get("gfx_arch") else []):
            yield error((*path, key), f"a cpu entry has no {key}")
    elif vendor == "amd":
        for key in cuda:
            yield error((*path, key), f"{name} is an AMD GPU: it has no CUDA compute capability; give gfx_arch")
        if entry.get("interconnect") == "nvlink":
            yield error((*path, "interconnect"), f"{name} is an AMD GPU: its GPUs link by xgmi, not nvlink")
        product = rocm.product_of(name)
        known = rocm.PRODUCT_ARCH.get(product or "")
        if entry.get("gfx_arch") and known and entry["gfx_arch"] != known:
            yield error((*path, "gfx_arch"), f"{name} is {known}, not {entry['gfx_arch']}")
    elif vendor == "nvidia":
        if entry.get("gfx_arch"):
            yield error((*path, "gfx_arch"), f"{name} is an NVIDIA GPU: it has no gfx target; give compute_capability")
        if entry.get("interconnect") == "xgmi":
            yield error((*path, "interconnect"), f"{name} is an NVIDIA GPU: xgmi links AMD GPUs; use nvlink")


def _workloads(scope: Mapping[str, Any]) -> Iterator[Problem]:
    """Batch range, context buckets and draft lengths."""
    batch = scope.get("batch")
    if batch:
        if batch["min"] > batch["max"]:
            yield error(("scope", "batch", "min"), f"batch min {batch['min']} is greater than max {batch['max']}")
        else:
            yield from _batch_points(batch)

    context = scope.get("context")
    if context and context.get("buckets"):
        buckets = context["buckets"]
        yield from increasing(buckets, ("scope", "context", "buckets"), "context buckets")
        for j, bucket in enumerate(buckets):
            if bucket > context["max_tokens"]:
                yield error(
                    ("scope", "context", "buckets", j),
                    f"context bucket {bucket} exceeds max_tokens {context['max_tokens']}",
                )

    spec = scope.get("speculative")
    if spec:
        lengths = spec["draft_lengths"]
        for j, length in enumerate(lengths):
            if not 1 <= length <= MAX_DRAFT_LENGTH:
                yield error(
                    ("scope", "speculative", "draft_lengths", j),
                    f"draft length {length} is out of bounds (1..{MAX_DRAFT_LENGTH})",
                )
            if length in lengths[:j]:
                yield error(("scope", "speculative", "draft_lengths", j), f"draft length {length} is listed twice")


def _parallelism(scope: Mapping[str, Any]) -> Iterator[Problem]:
    """scope.parallelism against the hardware entries; decode context parallelism in one NVLink domain."""
    hardware = scope["hardware"]
    tp_union = {tp for entry in hardware for tp in entry["tensor_parallel"]}
    par = scope.get("parallelism") or {}
    if par.get("tensor"):
        for index, entry in enumerate(hardware):
            for j, tp in enumerate(entry["tensor_parallel"]):
                if tp not in par["tensor"]:
                    yield error(
                        ("scope", "hardware", index, "tensor_parallel", j),
                        f"tensor_parallel {tp} is not listed in scope.parallelism.tensor {par['tensor']}",
                    )
        for j, tp in enumerate(par["tensor"]):
            if tp not in tp_union:
                yield error(
                    ("scope", "parallelism", "tensor", j),
                    f"tensor degree {tp} appears in no hardware entry's tensor_parallel",
                )
    if any(d > 1 for d in par.get("decode_context") or ()):
        for index, entry in enumerate(hardware):
            multi = any(c > 1 for c in entry["device_counts"])
            one_domain = entry.get("nvlink_domain") == "single" or entry.get("interconnect") == "xgmi"
            if multi and entry["accelerator"].strip().lower() != "cpu" and not one_domain:
                yield error(
                    ("scope", "hardware", index),
                    "decode context parallelism > 1 needs every multi-GPU entry within one NVLink domain (interconnect: nvlink, nvlink_domain: single) or one xGMI hive (interconnect: xgmi)",
                )


def _data_parallel(scope: Mapping[str, Any]) -> Iterator[Problem]:
    """Every data-parallel degree times every tensor-parallel degree of a GPU setup fits its device
    count: each combination is a scope point, and a point that needs more GPUs cannot be deployed."""
    degrees = [d for d in (scope.get("parallelism") or {}).get("data") or () if d > 1]
    for index, entry in enumerate(scope["hardware"] if degrees else ()):
        if entry["accelerator"].strip().lower() == "cpu":
            continue
        for count in entry["device_counts"]:
            for tp in (t for t in entry["tensor_parallel"] if count % t == 0):
                too_many = [d for d in degrees if d * tp > count]
                if too_many:
                    yield error(
                        ("scope", "parallelism", "data"),
                        f"data_parallel {too_many[0]} x tensor_parallel {tp} needs {too_many[0] * tp} GPUs, but "
                        f"hardware entry {index} ({entry['accelerator']}) has {count}: every combination is a scope point",
                    )
                    return


def _batch_points(batch: Mapping[str, Any]) -> Iterator[Problem]:
    for j, point in enumerate(batch.get("points") or ()):
        if not batch["min"] <= point <= batch["max"]:
            yield error(
                ("scope", "batch", "points", j),
                f"batch point {point} is outside min..max ({batch['min']}..{batch['max']})",
            )


def narrowed_checks(data: Mapping[str, Any]) -> Iterator[Problem]:
    """Checks narrowed by ``points`` (evals, divergence, feature probes, the speculative check) may
    name only deployment values (hardware and engine) the scope declares."""
    values = dimension_values(data["scope"])
    deployment = deployment_dimensions(data["scope"])
    for path, _label, points in narrowed_points(data):
        for dim, chosen in points.items():
            if dim not in deployment:
                yield error(
                    (*path, dim),
                    f"points may name deployment dimensions ({', '.join(sorted(deployment))}), not {dim!r}",
                )
                continue
            for j, value in enumerate(chosen):
                yield from point_in_scope(data["scope"], values, dim, value, (*path, dim, j))
