"""The check engine's own cost: per check instance (a plan of no-op checks, so all the time is
the engine's: selection, digests, context, evidence writes, progress) and `diff-scope` on this
repository. Targets: < 50 ms per instance, < 1 s for diff-scope.

    python benchmarks/engine_overhead.py [--instances 200]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


NOOP_RUNNER = (
    "from fasttrack.evidence import Status\n"
    "def run(instance, context):\n    return context.outcome(instance, Status.PASSED)\n"
)


def noop_kinds(folder: Path, points, isolation: str):
    """The registry with one kind (claims) that plans a no-op check per point and runs the no-op
    runner (a module written to ``folder``) with ``isolation``."""
    from dataclasses import replace

    from fasttrack.kinds.registry import KINDS
    from fasttrack.plan import CheckInstance

    (folder / "fasttrack_noop_runner.py").write_text(NOOP_RUNNER)
    sys.path.insert(0, str(folder))
    os.environ["PYTHONPATH"] = str(folder) + os.pathsep + str(ROOT)
    instances = tuple(
        CheckInstance(f"claims/noop@{p.id}", "claims", "noop", p, True, True, None, None, None, 0.01, 60.0, {})
        for p in points
    )
    claims = KINDS["claims"]
    execution = replace(claims.execution, isolation=isolation)
    noop = replace(claims, plan=lambda planner: instances, runner="fasttrack_noop_runner", execution=execution)
    return {"claims": noop}


def engine_overhead(count: int) -> float:
    """Seconds per instance for ``count`` no-op checks through the real engine."""
    from fasttrack.engine.run import CheckOptions, run_check
    from fasttrack.manifest import load_manifest

    manifest = load_manifest(ROOT / "examples" / "mini-k3" / "fasttrack.yaml")
    points = manifest.scope_points()[:count]
    with tempfile.TemporaryDirectory() as out:
        kinds = noop_kinds(Path(out), points, "inprocess")  # claims run in-process
        options = CheckOptions(
            manifest=str(ROOT / "examples" / "mini-k3" / "fasttrack.yaml"), out_dir=Path(out) / "out", quiet=True
        )
        run_check(options, kinds)  # warm-up: imports, environment detection
        started = time.perf_counter()
        result = run_check(options, kinds)
        elapsed = time.perf_counter() - started
    n = len(result.evidence.checks)
    assert n == len(points) and result.evidence.verdict.status.value == "PASS"
    return elapsed / n, n, elapsed


def worker_overhead(count: int = 5) -> float:
    """Seconds per instance when a check runs isolated in a worker process (the default for
    checks that drive the target): mostly the interpreter start and imports."""
    from fasttrack.engine.run import CheckOptions, run_check
    from fasttrack.manifest import load_manifest

    points = load_manifest(ROOT / "examples" / "mini-k3" / "fasttrack.yaml").scope_points()[:count]
    with tempfile.TemporaryDirectory() as folder:
        # claims, made to run in a worker process as the checks of the target do
        kinds = noop_kinds(Path(folder), points, "subprocess")
        options = CheckOptions(
            manifest=str(ROOT / "examples" / "mini-k3" / "fasttrack.yaml"), out_dir=Path(folder) / "out", quiet=True
        )
        started = time.perf_counter()
        result = run_check(options, kinds)
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
