"""The check engine's own cost: per check instance (a plan of no-op checks, so all the time is
the engine's: selection, digests, context, evidence writes, progress) and `diff-scope` on this
repository. Targets: < 50 ms per instance, < 1 s for diff-scope.

    python benchmarks/engine_overhead.py [--instances 200]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def noop_run(instance, context):
    from fasttrack.evidence import Status

    return context.outcome(instance, Status.PASSED)


def engine_overhead(count: int) -> float:
    """Seconds per instance for ``count`` no-op checks through the real engine."""
    import fasttrack.engine.run as run_module
    import fasttrack.engine.setup as setup_module
    from fasttrack.engine.run import CheckOptions, run_check
    from fasttrack.manifest import load_manifest
    from fasttrack.plan import CheckInstance, Plan

    module = types.ModuleType("fasttrack_noop_runner")
    module.run = noop_run  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module
    run_module.load_runner = lambda kind: module  # type: ignore[assignment]  # claims run in-process
    manifest = load_manifest(ROOT / "examples" / "mini-k3" / "fasttrack.yaml")
    points = manifest.scope_points()

    def fake_plan(m, env):
        instances = tuple(
            CheckInstance(f"claims/noop@{p.id}", "claims", "noop", p, True, True, None, None, None, 0.01, 60.0, {})
            for p in points[:count]
        )
        return Plan(m, env, instances)

    setup_module.build_plan = fake_plan
    with tempfile.TemporaryDirectory() as out:
        options = CheckOptions(
            manifest=str(ROOT / "examples" / "mini-k3" / "fasttrack.yaml"), out_dir=Path(out), quiet=True
        )
        run_check(options)  # warm-up: imports, environment detection
        started = time.perf_counter()
        result = run_check(options)
        elapsed = time.perf_counter() - started
    n = len(result.evidence.checks)
    assert n == min(count, len(points)) and result.evidence.verdict.status.value == "PASS"
    return elapsed / n, n, elapsed


def worker_overhead(count: int = 5) -> float:
    """Seconds per instance when a check runs isolated in a worker process (the default for
    checks that drive the target): mostly the interpreter start and imports."""
    from dataclasses import replace

    import fasttrack.engine.run as run_module
    import fasttrack.engine.setup as setup_module
    from fasttrack.engine.run import CheckOptions, run_check

    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "fasttrack_noop_worker_runner.py").write_text(
            "from fasttrack.evidence import Status\n"
            "def run(instance, context):\n    return context.outcome(instance, Status.PASSED)\n"
        )
        sys.path.insert(0, folder)
        import os

        os.environ["PYTHONPATH"] = folder + os.pathsep + str(ROOT)
        import importlib

        module = importlib.import_module("fasttrack_noop_worker_runner")
        run_module.load_runner = lambda kind: module  # type: ignore[assignment]
        # claims, made to run in a worker process as the checks of the target do
        run_module.KINDS = {**run_module.KINDS, "claims": replace(run_module.KINDS["claims"], isolation="subprocess")}
        from fasttrack.manifest import load_manifest
        from fasttrack.plan import CheckInstance, Plan

        points = load_manifest(ROOT / "examples" / "mini-k3" / "fasttrack.yaml").scope_points()[:count]
        setup_module.build_plan = lambda m, env: Plan(
            m,
            env,
            tuple(
                CheckInstance(f"claims/noop@{p.id}", "claims", "noop", p, True, True, None, None, None, 0.01, 60.0, {})
                for p in points
            ),
        )
        options = CheckOptions(
            manifest=str(ROOT / "examples" / "mini-k3" / "fasttrack.yaml"), out_dir=Path(folder) / "out", quiet=True
        )
        started = time.perf_counter()
        result = run_check(options)
        elapsed = time.perf_counter() - started
    assert result.evidence.verdict.status.value == "PASS", result.evidence.verdict.reasons
    return elapsed / len(points)


def diff_scope_seconds() -> float:
    first = subprocess.run(
        ["git", "rev-list", "--max-parents=0", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()[0]
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "fasttrack", "diff-scope", "examples/mini-k3/fasttrack.yaml", "--base", first],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--instances", type=int, default=200)
    args = parser.parse_args()
    per, n, total = engine_overhead(args.instances)
    print(
        f"engine overhead: {per * 1000:.1f} ms per check instance ({n} no-op instances in {total:.2f} s, "
        f"including environment detection, plan and evidence writes; target < 50 ms)"
    )
    print(
        f"isolated worker process per check (checks that drive the target): {worker_overhead() * 1000:.0f} ms "
        "(interpreter start + imports; these checks run for seconds to minutes)"
    )
    seconds = diff_scope_seconds()
    print(
        f"diff-scope on this repository (whole history): {seconds * 1000:.0f} ms wall, including interpreter start (target < 1 s)"
    )
    return 0 if per < 0.05 and seconds < 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
