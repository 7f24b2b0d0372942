"""Timing a ``vllm_bench`` point in pairs: one `vllm bench serve` run per side per pair, the
per-pair ratio of the benchmark's metric judged by the same sequential rule as every benchmark
(`decide`): more pairs until it decides, up to ``max_pairs``.

How a pair is timed is the workload's ``order``:

- ``alternating`` (default): stock, candidate, stock, candidate ...: every run follows a run
  of the other side, so every run meets its server in the same state. On the 2-core host a
  server that sat idle while the other side ran came back slower for over a second (at
  concurrency 8, even after 16 warm-up requests, the run that followed the other side's was
  10-20 % slower than one that followed its own): counterbalanced pairs (AB BA) split into two
  clusters there and the sequential test needed 2-3x the pairs. The price: drift during one
  run favours the side timed first in every pair (small beside that effect; stated).
- ``counterbalanced``: AB BA AB ... (the built-in runner's order): drift favours neither side;
  for engines whose servers do not cool down between runs.

A pair costs two runs, so runs are made cheap: where vLLM is importable here, its bench code
runs in this worker (`fasttrack.targets.vllm.bench.InProcessBench`: vLLM imported once, not once
per run, which was most of a run's ~9 s on the CPU build); elsewhere (``vllm`` on PATH, another
interpreter) each run is a ``vllm bench serve`` process.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from fasttrack.errors import TargetError
from fasttrack.kinds.benchmarks.decide import pair_ratios
from fasttrack.kinds.benchmarks.speed import OPEN, Sequential, min_pairs, sequential
from fasttrack.kinds.benchmarks.timing import timed_pair

if TYPE_CHECKING:
    from fasttrack.kinds.benchmarks.serving_bench import Repetition
    from fasttrack.kinds.context import RunContext

ORDERS = ("alternating", "counterbalanced")


class BenchRunner(Protocol):
    """Runs one benchmark client run (`vllm bench serve`, `sglang.bench_serving`: its arguments,
    without the program): (exit code, log tail)."""

    def __call__(self, args: Sequence[str], log_name: str) -> tuple[int, str]: ...


def runner_for(context: RunContext, program: Sequence[str]) -> BenchRunner:
    """vLLM's bench code in this process where this interpreter runs it, else one process per run."""
    from fasttrack.targets.vllm.bench import InProcessBench

    if tuple(program[1:]) == ("-m", "fasttrack.targets.vllm.bench") and InProcessBench.available():
        bench = InProcessBench()

        def in_process(args: Sequence[str], log_name: str) -> tuple[int, str]:
            return bench.run(list(args), context.artifact_path(log_name))

        return in_process
    return subprocess_runner(context, program)


def subprocess_runner(context: RunContext, program: Sequence[str], tool: str = "vllm bench serve") -> BenchRunner:
    """One ``program ARGS`` process per run (group-killed on the instance's time limit)."""

    def subprocess_run(args: Sequence[str], log_name: str) -> tuple[int, str]:
        result = context.run_process([*program, *args], log_name=log_name)
        if result.timed_out:
            raise TargetError(f"{tool} ran past the time limit")
        return (result.returncode if result.returncode is not None else -1), result.tail(400)

    return subprocess_run


@dataclass
class PairedRuns:
    """What one concurrency's pairs found: both sides' runs, in pair order, and the decision state."""

    baseline: list[Repetition]
    candidate: list[Repetition]
    seq: Sequential | None = None
    stopped: str | None = None  # why timing stopped before the test decided or max_pairs
    skipped: str | None = None  # why the point was not timed at all

    def problems(self) -> bool:
        return any(r.problems for r in (*self.baseline, *self.candidate))

    def unusable(self, metric: str) -> list[str]:
        """Runs whose ``metric`` is missing or not positive (no ratio can be made of them)."""
        found = []
        for side, reps in (("baseline", self.baseline), ("candidate", self.candidate)):
            for index, rep in enumerate(reps, start=1):
                value = rep.values.get(metric)
                if value is None or not value > 0:
                    found.append(f"{side} run {index}: {metric} {'missing' if value is None else value}")
        return found


@contextmanager
def off_the_timed_cpus(timed: Sequence[int]) -> Iterator[None]:
    """The load generator (this thread, and a bench process it starts) on the CPUs the timed
    server is not pinned to (its side's ``cpus``), for one run: where both sides' servers are
    pinned, the client then shares a core with the idle side only. Unpinned (no ``cpus``, or no
    other CPU left) it stays where it is."""
    allowed = os.sched_getaffinity(0)
    rest = allowed - set(timed)
    if not timed or not rest or rest == allowed:
        yield
        return
    os.sched_setaffinity(0, rest)
    try:
        yield
    finally:
        os.sched_setaffinity(0, allowed)


# One pair: (pair index, -1 for the untimed warm-up) -> (stock's run, the candidate's run).
PairTimer = Callable[[int], "tuple[Repetition, Repetition]"]


def pair_timer(run_side: Callable[[str, int], Repetition], order: str) -> PairTimer:
    """A pair as the workload's ``order`` says (module docstring); ``run_side(side, index)``
    makes one run of pair ``index``."""

    def pair(index: int) -> tuple[Repetition, Repetition]:
        first = max(index, 0) if order == "counterbalanced" else 0
        return timed_pair(lambda: run_side("baseline", index), lambda: run_side("candidate", index), first)

    return pair


def time_concurrency(
    one_pair: PairTimer,
    metric: str,
    higher: bool,
    floor: float,
    alpha: float,
    least: int,
    max_pairs: int,
    remaining_s: Callable[[], float],
) -> PairedRuns:
    """One untimed pair, then timed pairs: at least ``least`` (and the fewest that can decide at
    ``alpha``), then one at a time until the sequential test against ``floor`` decides,
    ``max_pairs`` is reached, the time would run out, or a run is unusable (the verdict's
    business, `serving_bench.judge`)."""
    one_pair(-1)
    runs = PairedRuns([], [])
    first = min(max(least, min_pairs(alpha)), max_pairs)
    pair_s = 0.0
    while len(runs.baseline) < max_pairs:
        if runs.baseline and remaining_s() < 3 * pair_s + 5:
            runs.stopped = f"the instance's time limit left room for no more pairs after {len(runs.baseline)}"
            break
        started = time.monotonic()
        b, c = one_pair(len(runs.baseline))
        pair_s = max(pair_s, time.monotonic() - started)
        runs.baseline.append(b)
        runs.candidate.append(c)
        if runs.problems() or runs.unusable(metric):
            return runs
        if len(runs.baseline) < first:
            continue
        runs.seq = sequential(ratios(runs, metric, higher), floor, alpha, bounds=False)
        if runs.seq.decision != OPEN:
            break
    if not runs.problems() and runs.baseline:
        runs.seq = sequential(ratios(runs, metric, higher), floor, alpha)
    return runs


def ratios(runs: PairedRuns, metric: str, higher: bool) -> list[float]:
    values = pair_ratios([r.values[metric] for r in runs.baseline], [r.values[metric] for r in runs.candidate], higher)
    return [float(v) for v in values]


def read_json(path: Path) -> Mapping[str, Any]:
    data: Mapping[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def read_run(
    path: Path,
    code: int,
    tail: str,
    describe: str,
    tool: str = "vllm bench serve",
    load: Callable[[Path], Mapping[str, Any]] = read_json,
) -> Mapping[str, Any]:
    """The result of one run (``load`` reads its file), or a TargetError saying why there is none."""
    if code != 0 or not path.exists():
        raise TargetError(f"{tool} ({describe}) exited {code} without a result: {tail}")
    try:
        return load(path)
    except (OSError, ValueError) as exc:
        raise TargetError(f"{tool} ({describe}) wrote no readable result to {path.name}: {exc}") from exc
