"""`fasttrack check --previous EVIDENCE`: a speed-up that dropped beyond both runs' intervals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "tests" / "unit" / "probes" / "fake_manifest.yaml"


def manifest(tmp: Path, name: str, speed: float, regression: str) -> Path:
    text = FAKE.read_text().replace(
        "    points: {batch: [1, 8, 64]}\n", f"    points: {{batch: [8]}}\n    regression: {regression}\n"
    )
    text = text.replace("step_delay_s: 0.005}", f"step_delay_s: 0.005, candidate_speed: {speed}}}")
    path = tmp / name
    path.write_text(text)
    return path


def check(tmp: Path, path: Path, out: str, *extra: str) -> tuple[int, dict, str]:
    env = {**os.environ, "FASTTRACK_CACHE_DIR": str(tmp / "cache")}
    args = [sys.executable, "-m", "fasttrack", "check", str(path), "--only", "benchmarks", "--out", str(tmp / out)]
    done = subprocess.run(
        [*args, "--no-reports", "-q", *extra], cwd=tmp, env=env, capture_output=True, text=True, timeout=300
    )
    evidence_path = tmp / out / "evidence.json"
    evidence = json.loads(evidence_path.read_text()) if evidence_path.exists() else {}
    return done.returncode, evidence, done.stdout + done.stderr


def test_a_drop_against_the_previous_run_fails_where_the_manifest_asks(tmp_path):
    code, first, text = check(tmp_path, manifest(tmp_path, "fast.yaml", 0.7, "fail"), "before")
    assert code == 0, text
    code, now, text = check(
        tmp_path, manifest(tmp_path, "slow.yaml", 1.6, "fail"), "now", "--previous", str(tmp_path / "before")
    )
    assert code == 1, text
    (compared,) = [c for c in now["checks"] if c["id"].endswith("#previous")]
    assert compared["status"] == "failed" and compared["required"] and compared["reason_code"] == "regression"
    assert compared["measurements"]["now"]["high"] < compared["measurements"]["before"]["low"]
    assert "speed-up dropped beyond both intervals" in compared["reason"]
    # warn: the same drop shown, not counted
    code, warned, text = check(
        tmp_path, manifest(tmp_path, "warn.yaml", 0.7, "warn"), "warn", "--previous", str(tmp_path / "before")
    )
    (compared,) = [c for c in warned["checks"] if c["id"].endswith("#previous")]
    assert compared["required"] is False and compared["measurements"]["regression"] == "warn"


def test_previous_evidence_of_another_optimisation_is_a_usage_error(tmp_path):
    code, _first, text = check(tmp_path, manifest(tmp_path, "fast.yaml", 0.7, "fail"), "before")
    other = tmp_path / "other.yaml"
    other.write_text(manifest(tmp_path, "x.yaml", 0.7, "fail").read_text().replace("id: fake-latency", "id: other-opt"))
    code, _evidence, text = check(tmp_path, other, "now", "--previous", str(tmp_path / "before" / "evidence.json"))
    assert code == 2 and "--previous:" in text and "'fake-latency'" in text and "Traceback" not in text
    code, _evidence, text = check(tmp_path, other, "now2", "--previous", str(tmp_path / "missing.json"))
    assert code == 2 and "cannot read" in text and "Traceback" not in text
