"""benchmarks/main_job.py: the per-kind cost table and the per-instance CPU attribution."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "main_job.py"


def load_script():
    spec = importlib.util.spec_from_file_location("main_job_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check(kind, point, duration, status="passed", started=True):
    return {
        "id": f"{kind}/x@{point}",
        "kind": kind,
        "status": status,
        "duration_s": duration,
        "started_at": "2026-01-01T00:00:00Z" if started else None,
        "scope_point": point,
    }


def test_cost_table_sums_ran_instances_per_kind_and_hardware_setup():
    mj = load_script()
    tp1 = {"accelerator": "cpu", "device_count": 1, "tensor_parallel": 1}
    tp4 = {"accelerator": "cpu", "device_count": 1, "tensor_parallel": 4}
    gpu = {"accelerator": "NVIDIA H200", "device_count": 1, "tensor_parallel": 1}
    evidence = {
        "verdict": {"status": "INCOMPLETE", "counts": {"passed": 3, "failed": 0, "errored": 0, "not_run": 2}},
        "checks": [
            check("evals", tp1, 10.0),
            check("evals", tp4, 30.0),
            check("features", {**tp1, "batch": 8}, 2.5),
            check("features", tp1, 1.5),
            check("evals", gpu, 0.0, "not_run", started=False),
            check("scope_diff", None, 0.0, "not_run"),
        ],
    }
    summary = mj.summarise(evidence, top=2)
    assert summary["by_kind"]["evals"] == {"cpu TP1": {"n": 1, "s": 10.0}, "cpu TP4": {"n": 1, "s": 30.0}}
    assert summary["by_kind"]["features"] == {"cpu TP1": {"n": 2, "s": 4.0}}
    assert summary["by_kind"]["scope_diff"] == {"global": {"n": 1, "s": 0.0}}
    assert "NVIDIA H200 TP1" not in str(summary["by_kind"])  # never started: costs nothing
    assert [s["s"] for s in summary["slowest"]] == [30.0, 10.0]
    assert summary["instance_s"] == 44.0 and summary["verdict"] == "INCOMPLETE"


def test_cpu_sampler_attributes_a_process_and_its_children_to_the_instance_folder(tmp_path):
    """Each process burns 0.4 CPU-s, says so (a file) and stays until released, so the sampler
    sees its final CPU time however busy the host: the test waits for samples, not for time."""
    mj = load_script()
    out = tmp_path / "run"
    folder = out / "artifacts" / "features_logprobs_accelerator=cpu"
    marks = tmp_path / "marks"
    marks.mkdir()
    release = tmp_path / "release"
    burn = (
        "import os,time\nt=time.process_time()\nwhile time.process_time()-t<0.4: pass\n"
        f"open(os.path.join({str(marks)!r}, str(os.getpid())), 'w').close()\n"
        f"while not os.path.exists({str(release)!r}): time.sleep(0.01)"
    )
    parent = (
        f"import subprocess,sys\nchild=subprocess.Popen([sys.executable,'-c',{burn!r}])\nexec({burn!r})\nchild.wait()"
    )

    class Counting(mj.CpuSampler):
        samples = 0

        def sample(self) -> None:
            super().sample()
            self.samples += 1

    with Counting(out, every_s=0.05) as sampler:
        procs = [
            subprocess.Popen([sys.executable, "-c", parent, str(folder / "worker-job.pkl")]),
            subprocess.Popen([sys.executable, "-c", burn]),  # not an instance's process
        ]
        deadline = time.monotonic() + 300  # a guard against a hang, not a timing assumption
        while len(list(marks.iterdir())) < 3:
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
            time.sleep(0.02)
        seen = sampler.samples
        while sampler.samples < seen + 2:  # a full sample after every process finished burning
            time.sleep(0.02)
        release.touch()
        for p in procs:
            assert p.wait(timeout=300) == 0
    totals = sampler.per_instance()
    assert list(totals) == ["features_logprobs_accelerator=cpu"]
    assert 0.75 <= totals["features_logprobs_accelerator=cpu"] <= 1.2  # both processes' 0.4 s, and little more


def test_the_report_prints_the_machines_cpu_and_the_speed_probe_beside_the_wall_time(capsys):
    mj = load_script()
    speed = mj.host_speed(rounds=1)
    assert set(speed) == {"python_s", "memory_s"} and all(v > 0 for v in speed.values())
    host = mj.host_cpu()
    assert set(host) == {"busy", "idle", "steal"} and host["busy"] > 0
    evidence = {
        "verdict": {"status": "PASS", "counts": {"passed": 1, "failed": 0, "errored": 0, "not_run": 0}},
        "checks": [check("evals", {"accelerator": "cpu", "device_count": 1, "tensor_parallel": 1}, 5.0)],
    }
    timing = {
        "exit_code": 0,
        "wall_s": 221.1,
        "cpu_s": 150.0,
        "load": {"before": [0.4, 0.5, 0.6], "mean": 3.0, "max": 4.0, "after": [3.0, 2.0, 1.0]},
        "cores": 2,
        "host_cpu_s": {"busy": 420.0, "idle": 20.0, "steal": 0.5},
        "host_speed_s": {"python_s": 0.45, "memory_s": 0.14},
    }
    mj.print_report(timing, mj.summarise(evidence, top=1))
    out = capsys.readouterr().out
    assert "221.1 s wall (target 240 s at this load: met)" in out
    assert "busy 420 s, idle 20 s, stolen by the hypervisor 0.5 s" in out
    assert "pure Python 0.450 s, 256 MB through memory 8 times 0.140 s" in out
