"""#35 row 10 (and row 3's `validate`): manifest paths that leave the repository are refused."""

from __future__ import annotations

from fasttrack.manifest.loader import check_text
from support.paths import ROOT

BASE = (ROOT / "tests" / "fixtures" / "faults" / "base" / "fasttrack.yaml").read_text()


def errors(text: str) -> list[str]:
    return [p.format("m.yaml") for p in check_text(text)[1] if p.severity == "error"]


def test_the_base_manifest_is_clean():
    assert errors(BASE) == []


def test_absolute_and_climbing_paths_are_refused_with_their_line():
    text = BASE.replace('allowed_paths: ["tests/**"]', 'allowed_paths: ["tests/**", "/etc/**", "../**"]')
    text = text.replace("paths: [tests/kernels]", "paths: [../outside/test_x.py]")
    text = text.replace('test: "tests/kernels/test_toy.py::test_stress"', 'test: "/tmp/evil.py::test_x"')
    found = errors(text)
    assert (
        "m.yaml:7: $.model.allowed_paths[1]: '/etc/**' is absolute: paths are relative to the repository root" in found
    )
    assert any("$.model.allowed_paths[2]: '../**' climbs out with '..'" in p for p in found)
    assert any("$.kernel_tests[0].paths[0]: '../outside/test_x.py' climbs out" in p for p in found)
    assert any("$.audits[0].test: '/tmp/evil.py::test_x' is absolute" in p for p in found)
