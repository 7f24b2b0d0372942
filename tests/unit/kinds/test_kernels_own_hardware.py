"""A kernel suite on its own, smaller hardware (#36 item 6, ``kernel_tests[].device_count``): one
GPU of an 8-GPU deployment. Its instances sit at that device count, once per covered point
(not once per declared count), and a machine is judged against that need while the entry's
architecture requirement still applies."""

from __future__ import annotations

from dataclasses import replace

from fasttrack.environment import detect_environment
from fasttrack.kinds.registry import KINDS
from fasttrack.manifest import load_manifest
from fasttrack.plan import build_plan
from support.paths import ROOT

FIXTURE = ROOT / "tests" / "fixtures" / "manifests" / "valid" / "kernel-tests-own-hardware.yaml"


def kernel_instances(manifest, env):
    return [i for i in build_plan(manifest, env, KINDS).instances if i.kind == "kernels"]


def test_the_suite_runs_on_one_device_of_the_accelerator_once_per_point():
    manifest = load_manifest(FIXTURE)
    found = kernel_instances(manifest, detect_environment(accelerators=False, root=manifest.root))
    assert {i.scope_point.get("device_count") for i in found} == {1}
    assert sorted(i.id.split("@")[0] for i in found) == ["kernels/router", "kernels/router", "kernels/router:between"]
    assert all(not i.runnable and i.needs == "AMD Instinct MI355X x1" for i in found)
    # other checks keep the deployment's 8 devices
    others = [i for i in build_plan(manifest, detect_environment(accelerators=False), KINDS).instances]
    assert {i.scope_point.get("device_count") for i in others if i.kind != "kernels" and i.scope_point} <= {8, None}


def test_without_device_count_the_suite_runs_at_every_declared_count():
    manifest = load_manifest(FIXTURE)
    suite = replace(manifest.kernel_tests[0], device_count=None)
    manifest = replace(manifest, kernel_tests=(suite,))
    found = kernel_instances(manifest, detect_environment(accelerators=False))
    assert {i.scope_point.get("device_count") for i in found} == {8}


def test_the_entry_of_a_smaller_point_is_the_accelerators_own_so_its_architecture_still_applies():
    manifest = load_manifest(FIXTURE)
    point = next(i.scope_point for i in kernel_instances(manifest, detect_environment(accelerators=False)))
    entry = manifest.hardware_entry_for(point)
    assert entry is not None and entry.accelerator == "AMD Instinct MI355X"
