"""A fixed run on fake targets writes the same evidence as the committed golden copy.

The golden files were written by this test (``FASTTRACK_WRITE_GOLDEN=1``) before the engine's
redesign, so a change of structure that changes what the gate records shows up here. What a run
cannot repeat is left out before comparing: timestamps, durations, the tool version, the machine
description, commit shas (the fixture repositories are committed afresh each time) and everything
derived from them (input digests, artifact hashes), and timing measurements (``*_s``, ``*_ms``).
Floats are compared to a relative 1e-6: the fake targets' KL and chi-square figures move in their
last bits with the BLAS build and thread count, which is not a change of what the gate records.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.projects import commit_all, materialise

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "fixtures" / "golden"
FAKE_MANIFEST = ROOT / "tests" / "unit" / "probes" / "fake_manifest.yaml"

# Keys whose values differ between two runs of the same code on the same inputs.
VOLATILE_KEYS = {
    "started_at",
    "finished_at",
    "duration_s",
    "id",
    "inputs_digest",
    "sha256",
    "bytes",
    "tool_version",
    "environment",
    "head",
    "base",
    "argv",
    "dirty",
    "digest",
    "wall_s",
    "elapsed_s",
    "pid",
}
VOLATILE_SUFFIXES = ("_s", "_ms", "_us", "_per_s", "_seconds")
SHA = re.compile(r"\b[0-9a-f]{12,64}\b")


def normalise(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        return {
            k: normalise(v, k)
            for k, v in sorted(value.items())
            if k not in VOLATILE_KEYS and not k.endswith(VOLATILE_SUFFIXES)
        }
    if isinstance(value, list):
        return [normalise(v, key) for v in value]
    if isinstance(value, str):
        return SHA.sub("<sha>", value)
    return value


def run_check(project: Path, out: Path, *args: str) -> dict[str, Any]:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fasttrack",
            "check",
            "fasttrack.yaml",
            "--out",
            str(out),
            "--no-reports",
            "--quiet",
            "--base",
            "HEAD",
            *args,
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode in (0, 1, 3), proc.stderr
    data = json.loads((out / "evidence.json").read_text(encoding="utf-8"))
    checks = sorted(data["checks"], key=lambda c: c["id"])
    return normalise({**data, "checks": checks, "run_state": data["run"]["state"]})


def fake_project(dest: Path) -> Path:
    """A git repository holding the fake-target manifest and the file it names as model code."""
    (dest / "fasttrack" / "probes").mkdir(parents=True)
    shutil.copy(FAKE_MANIFEST, dest / "fasttrack.yaml")
    (dest / "fasttrack" / "probes" / "fake.py").write_text("# the fake target's code path\n", encoding="utf-8")
    return commit_all(dest)


CASES = {
    "toy-base": (lambda tmp: materialise(tmp / "toy"), ()),
    "fake-probes": (lambda tmp: fake_project(tmp / "fake"), ("--only", "features,divergence,speculative,claims")),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
def test_fixed_run_writes_the_golden_evidence(case, tmp_path):
    make, args = CASES[case]
    evidence = run_check(make(tmp_path), tmp_path / "out", *args)
    path = GOLDEN / f"{case}.evidence.json"
    if os.environ.get("FASTTRACK_WRITE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(evidence, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    golden = json.loads(path.read_text(encoding="utf-8"))
    differences = list(differ(evidence, golden))
    assert not differences, "\n".join(differences[:40])


def differ(new: Any, old: Any, where: str = "") -> Iterator[str]:
    """Where ``new`` and ``old`` differ, floats within a relative 1e-6 counted as equal."""
    if isinstance(new, float) and isinstance(old, (int, float)) and not isinstance(old, bool):
        if not math.isclose(new, old, rel_tol=1e-6, abs_tol=1e-15):
            yield f"{where}: {new!r} != {old!r}"
    elif isinstance(new, dict) and isinstance(old, dict):
        for key in sorted(set(new) | set(old)):
            if key not in old:
                yield f"{where}/{key}: new, not in the golden copy"
            elif key not in new:
                yield f"{where}/{key}: missing, the golden copy has it"
            else:
                yield from differ(new[key], old[key], f"{where}/{key}")
    elif isinstance(new, list) and isinstance(old, list):
        if len(new) != len(old):
            yield f"{where}: {len(new)} items != {len(old)}"
        for i, (a, b) in enumerate(zip(new, old)):
            yield from differ(a, b, f"{where}[{i}]")
    elif new != old or type(new) is not type(old):
        yield f"{where}: {new!r} != {old!r}"
