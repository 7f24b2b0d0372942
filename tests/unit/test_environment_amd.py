"""AMD accelerators without AMD hardware (issue #36 item 7): ROCm's torch (a fake with the
properties ROCm's torch has) and rocm-smi (output captured as real rocm-smi prints it)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from fasttrack import environment, rocm
from fasttrack.environment import detect_environment, torch_accelerators

SMI = Path(__file__).resolve().parents[1] / "fixtures/rocm_smi"


def fake_torch(names: list[str], hip: str | None, arch: str = "gfx942:sramecc+:xnack-") -> SimpleNamespace:
    props = SimpleNamespace(total_memory=192 * 2**30, gcnArchName=arch)
    cuda = SimpleNamespace(
        is_available=lambda: True,
        device_count=lambda: len(names),
        get_device_name=lambda i: names[i],
        get_device_properties=lambda i: props,
        get_device_capability=lambda i: (9, 4) if hip else (10, 3),
    )
    return SimpleNamespace(version=SimpleNamespace(hip=hip, cuda=None if hip else "12.9"), cuda=cuda)


def test_rocm_torch_gives_the_gfx_target_and_no_cuda_capability():
    found = torch_accelerators(fake_torch(["AMD Instinct MI300X"] * 2, hip="6.4.43482"))
    assert [(a.name, a.arch, a.compute_capability) for a in found] == [("AMD Instinct MI300X", "gfx942", None)] * 2
    assert found[0].memory_bytes == 192 * 2**30


def test_cuda_torch_gives_the_capability_and_no_gfx_target():
    (found,) = torch_accelerators(fake_torch(["NVIDIA B300 SXM6"], hip=None))
    assert (found.compute_capability, found.arch) == ("10.3", None)


def _rocm_machine(monkeypatch: pytest.MonkeyPatch, outputs: dict[str, str]) -> None:
    """No torch, no nvidia-smi; rocm-smi answers each option with its captured output."""
    monkeypatch.setattr(environment, "find_spec", lambda name: None)
    monkeypatch.setattr(environment, "_nvidia_smi", lambda args: None)

    def rocm_smi(args: list[str]) -> str | None:
        return next((text for option, text in outputs.items() if option in args), None)

    monkeypatch.setattr(environment, "_rocm_smi", rocm_smi)


def test_rocm_smi_names_the_gpus_their_gfx_target_and_the_xgmi_link(monkeypatch):
    _rocm_machine(
        monkeypatch,
        {
            "--showproductname": (SMI / "mi300x-productname.json").read_text(),
            "--showtopotype": (SMI / "topotype-xgmi.json").read_text(),
        },
    )
    env = detect_environment()
    assert env.accelerator_source == "rocm-smi"
    assert [(a.index, a.name, a.arch) for a in env.accelerators] == [
        (0, "AMD Instinct MI300X OAM", "gfx942"),
        (1, "AMD Instinct MI300X OAM", "gfx942"),
    ]
    assert env.interconnect == "xgmi"
    assert env.count_of("AMD Instinct MI300X") == 2 and env.count_of("MI300X") == 2
    assert env.archs_of("AMD Instinct MI300X") == {"gfx942"} and env.capabilities_of("MI300X") == set()
    assert env.describe().startswith("2x AMD Instinct MI300X OAM (gfx942) over xgmi")


def test_an_older_rocm_smi_gives_the_gfx_target_through_showhw(monkeypatch):
    _rocm_machine(
        monkeypatch,
        {
            "--showproductname": (SMI / "mi355x-productname-old.json").read_text(),
            "--showhw": (SMI / "mi355x-showhw.txt").read_text(),
            "--showtopotype": (SMI / "topotype-pcie.json").read_text(),
        },
    )
    env = detect_environment()
    assert [(a.name, a.arch) for a in env.accelerators] == [("AMD Instinct MI355X", "gfx950")] * 2
    assert env.interconnect == "pcie"


def test_a_rocm_smi_without_topology_leaves_the_link_unknown(monkeypatch):
    _rocm_machine(monkeypatch, {"--showproductname": (SMI / "mi300x-productname.json").read_text()})
    assert detect_environment().interconnect == "unknown"


def test_no_torch_no_smi_is_a_cpu(monkeypatch):
    _rocm_machine(monkeypatch, {})
    env = detect_environment()
    assert (env.accelerator, env.accelerator_source, env.interconnect) == ("cpu", "none", "loopback")


def test_parsers_tolerate_what_is_not_their_output():
    assert rocm.product_names("ERROR: No AMD GPUs") == [] and rocm.product_names("[1]") == []
    assert rocm.hardware_archs("nothing\nhere") == {} and rocm.link_types("{}") == set()
    assert rocm.base_arch("amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-") == "gfx90a"


@pytest.mark.parametrize(
    ("name", "vendor", "product"),
    [
        ("AMD Instinct MI355X", "amd", "mi355x"),
        ("MI300X", "amd", "mi300x"),
        ("NVIDIA GB300", "nvidia", None),
        ("NVIDIA H200 NVL", "nvidia", None),
        ("cpu", None, None),
    ],
)
def test_vendor_and_product_from_a_name(name, vendor, product):
    assert (rocm.vendor_of(name), rocm.product_of(name)) == (vendor, product)
