"""The built wheel carries schemas/ and checks/, and its core install validates a manifest
without torch or lm-eval (the light CI footprint)."""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        text=True,
    )
    (whl,) = out.glob("fasttrack-*.whl")
    return whl


def test_wheel_ships_schemas_checks_and_package_data(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "fasttrack/_data/schemas/manifest.schema.json" in names
    assert "fasttrack/_data/schemas/evidence.schema.json" in names
    assert any(n.startswith("fasttrack/_data/checks/evals/mrcr/") for n in names)
    assert any(n.startswith("fasttrack/_data/checks/evals/aime25/") for n in names)
    assert "fasttrack/manifest/starter.yaml" in names
    assert any(n.startswith("fasttrack/report/templates/") for n in names)


def test_core_install_validates_example_in_fresh_venv(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True, system_site_packages=False)
    py = env_dir / "bin" / "python"
    # Core dependencies only: the wheel must not need torch or lm-eval to validate.
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)], check=True)
    check = subprocess.run(
        [str(py), "-c", "import importlib.util as u; print(u.find_spec('torch'), u.find_spec('lm_eval'))"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert check.stdout.split() == ["None", "None"]
    result = subprocess.run(
        [str(env_dir / "bin" / "fasttrack"), "validate", str(ROOT / "examples/kimi-k3-latency/fasttrack.yaml")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "ok" in result.stdout
    schema = subprocess.run([str(env_dir / "bin" / "fasttrack"), "schema", "evidence"], capture_output=True, text=True)
    assert '"$id": "https://fasttrack.dev/schemas/evidence/v1.json"' in schema.stdout
