"""benchmarks/false_alarms.py: the calibration table's rule and a short run of its cheap sections."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "false_alarms.py"


def load():
    spec = importlib.util.spec_from_file_location("false_alarms_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_a_rate_is_within_its_alpha_only_with_the_interval_inside_twice_alpha():
    fa = load()
    assert fa.Row("x", 0.05, 8, 200).within  # 4 %, upper bound 7.7 % < 10 %
    assert not fa.Row("x", 0.05, 12, 200).within  # 6 % > 5 %
    assert not fa.Row("x", 0.001, 0, 200).within  # 0 of 200 cannot show a rate below 0.002
    assert fa.Row("x", 0.001, 0, 2000).within
    assert fa.Row("deterministic", 0.0, 0, 10).within and not fa.Row("deterministic", 0.0, 1, 10).within
    low, high = fa.Row("x", 0.05, 10, 200).interval
    assert 0.024 < low < 0.025 and 0.090 < high < 0.091  # Clopper-Pearson


def test_summarising_real_runs_from_result_files(tmp_path):
    runs = tmp_path / "runs.jsonl"
    runs.write_text(
        "".join(
            json.dumps(
                {
                    "seed": s,
                    "failed": ["temperature_sampling"] if s == 3 else [],
                    "probes": {"temperature_sampling": {}},
                    "seconds": 1,
                }
            )
            + "\n"
            for s in range(1, 5)
        )
    )
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--only", "real", "--real-runs", "0", "--from", str(runs)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and done.stdout.strip().endswith("false alarms: 1 of 4 clean runs"), done.stdout


def test_the_eval_section_runs_and_is_calibrated():
    fa = load()
    rows = fa.section_evals(200)
    assert len(rows) == 7 and all(r.fails == 0 or r.fails / r.trials <= 0.05 for r in rows)
    assert rows[-1].check.startswith("eval family of 3 at the margin")  # eval_families: one alpha shared


def test_the_reference_and_family_statements_run():
    fa = load()
    [n40, _n100, n250] = fa.section_reference(400)
    assert n40.startswith("reference 0.82 rtol 0.08 (at_least), n=40: fails 0.1") and "n=250: fails 0.00" in n250
    [power] = fa.family_power(100)
    assert power.startswith("eval family power, n=240")
