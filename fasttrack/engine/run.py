"""Run a plan: every check instance, isolated, with its timeout, into incrementally written
evidence; interruptible (Ctrl-C/SIGTERM: valid evidence, state ``interrupted``) and resumable.

    result = run_check(CheckOptions(manifest="fasttrack.yaml", out_dir=Path("fasttrack-out")))
    sys.exit(result.exit_code)

Fail closed: an instance that did not run for any reason (not runnable here, no runner yet,
excluded, interrupted, crashed, timed out) is recorded as such, never as passed.

Partial runs, decided for CI maintainers:
- ``--only``/``--skip`` narrow the gate on purpose (a fast pre-merge job, a pipeline that runs
  the evals elsewhere). Excluded instances are recorded as not_run(out_of_scope) with
  ``required=false``: visible in the evidence, not counted, and the verdict line says so
  ("PASS for the selected kinds scope_diff, kernels, stress; excluded: evals, ..."), with
  ``run.only``/``run.skip`` kept in the evidence for `fasttrack verify` and reviewers. The
  gate's own required check should run every kind.
- ``--hardware ACCEL`` narrows the gate to the scope points of some accelerators (a CPU runner
  checks the cpu points, an H200 machine the H200 ones). Like ``--only``: the other hardware's
  instances are not_run(out_of_scope), not required, named in the summary; ``run.hardware`` is
  kept in the evidence. `fasttrack merge` of runs that together cover every declared accelerator
  gives the full-scope verdict; an instance no merged run covered is required again (INCOMPLETE).
- ``--shard K/N`` splits one run over machines. The other shards' instances stay *required*
  not_run(out_of_scope), so a shard alone is INCOMPLETE; `fasttrack merge` joins the shards
  into the verdict one unsharded run would give.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fasttrack.engine import jobs, previous
from fasttrack.engine.execute import Executor, not_run
from fasttrack.engine.options import CheckOptions
from fasttrack.engine.policy import POLICY_ID, policy_outcome
from fasttrack.engine.progress import Estimator, Progress
from fasttrack.engine.select import group_key, shard_assignment
from fasttrack.engine.servers import shares_servers
from fasttrack.engine.setup import Setup, prepare
from fasttrack.engine.signals import Stop, ignore_sigint, restore_sigint, sigterm_as_interrupt
from fasttrack.engine.writer import EvidenceWriter
from fasttrack.errors import EXIT_FAIL, EXIT_INCOMPLETE, EXIT_INTERRUPTED, EXIT_PASS, OutputError
from fasttrack.evidence import (
    CheckOutcome,
    Evidence,
    PlanRecord,
    RunRecord,
    Status,
    Verdict,
    utc_now,
    write_evidence,
)
from fasttrack.kinds.base import Kinds
from fasttrack.outlock import release_out
from fasttrack.plan.instance import CheckInstance
from fasttrack.plan.remembered import measured_costs, remember
from fasttrack.selection import Selection
from fasttrack.targets.dependencies import dependency_record

REUSABLE = (Status.PASSED, Status.FAILED)
VERDICT_EXIT = {Verdict.PASS: EXIT_PASS, Verdict.FAIL: EXIT_FAIL, Verdict.INCOMPLETE: EXIT_INCOMPLETE}


@dataclass(frozen=True)
class CheckResult:
    evidence: Evidence
    evidence_path: Path
    exit_code: int
    progress: Progress  # for messages after the run (the CLI's report warnings)


def exit_code_of(evidence: Evidence) -> int:
    return EXIT_INTERRUPTED if evidence.run.state == "interrupted" else VERDICT_EXIT[evidence.verdict.status]


def run_check(options: CheckOptions, kinds: Kinds) -> CheckResult:
    """Run the plan of ``options.manifest`` for the check kinds of ``kinds`` (the registry)."""
    try:
        setup = prepare(options, kinds)
        engine = _Engine(options, setup)
        with sigterm_as_interrupt():
            try:
                evidence = engine.run()
            finally:
                engine.executor.close()
    finally:
        if not options.keep_out_lock:
            release_out(options.out_dir)
    return CheckResult(evidence, options.out_dir / "evidence.json", exit_code_of(evidence), engine.progress)


class _Engine:
    def __init__(self, options: CheckOptions, setup: Setup):
        self.options = options
        self.setup = setup
        self.out_dir = options.out_dir
        self.evidence_path = options.out_dir / "evidence.json"
        self.selection: Selection = setup.selection
        plan = setup.plan
        self.kinds = kinds = setup.kinds
        shard = self.selection.shard
        self.assignment = shard_assignment(plan.instances, shard[1], kinds) if shard else {}
        self.selected = [i for i in plan.instances if self._in_selection(i) and i.runnable]
        if shares_servers(setup.manifest):
            self.selected = jobs.servers_first(self.selected, kinds)
        estimated, seed = self.selected, None
        measured, _ = measured_costs(
            options.costs_from, setup.manifest.id, setup.environment.to_dict(), memory=not options.no_cache
        )
        if measured is not None:  # the ETA from what a run measured, not the built-in guesses
            estimated, seed = measured.calibrate(self.selected), measured.wall_factor
        self.progress = Progress(
            len(self.selected),
            sum(i.est_seconds for i in estimated),
            stream=options.progress_stream,
            live=options.live_progress,
            quiet=options.quiet,
            estimator=Estimator(
                estimated,
                lambda i: group_key(i, kinds),
                lambda i: options.jobs if options.jobs > 1 and jobs.shares_cores(i, kinds) else 1,
                seed_factor=seed,
            ),
        )
        # Instances that share one run (a kernel suite's pytest session per hardware setup): how
        # many there are, and each one's share of that run's time once the first has measured it.
        self.written: Evidence | None = None  # the last evidence written whole (for a failed write's message)
        self.executor = Executor(options, setup, self.selected, self.progress, self._last_written)
        self.writer = EvidenceWriter(self.evidence_path)
        # read before the first check: a bad --previous is a usage error, not a lost run
        self.earlier = (
            previous.load_earlier(options.previous, setup.manifest, setup.kinds) if options.previous else None
        )

    # -------------------------------------------------------------------------------- run

    def run(self) -> Evidence:
        setup, options = self.setup, self.options
        slots: dict[str, list[CheckOutcome]] = {i.id: [self._initial(i)] for i in setup.plan.instances}
        if setup.policy is not None:  # required whatever the selection: a part cannot leave it out
            slots[POLICY_ID] = [policy_outcome(setup.policy)]
        evidence = Evidence(
            run=RunRecord(
                uuid.uuid4().hex,
                utc_now(),
                None,
                "running",
                options.argv,
                self.selection.shard,
                self.selection.only,
                self.selection.skip,
                self.selection.hardware,
                options.eval_limits,
                setup.resume_note,
            ),
            manifest=setup.manifest_record,
            git=setup.git_record,
            environment=setup.environment.to_dict(),
            scope_points=tuple({"id": p.id, "dims": p.as_dict()} for p in setup.manifest.scope_points()),
            checks=(),
            verdict=None,  # type: ignore[arg-type]  # filled by with_checks
            plan=PlanRecord(setup.plan.narrowed()),
            dependencies=dependency_record(setup.manifest, setup.environment.dependencies),
        )
        evidence = self._save(evidence, slots, "running")
        self.progress.message(
            f"fasttrack check {setup.manifest.id}: {len(self.selected)} of "
            f"{len(setup.plan.instances)} check instances to run here -> {self.out_dir}"
        )
        if setup.resume_note:
            self.progress.message(setup.resume_note)
        current: set[str] = set()  # ids of the instances running now
        try:
            if self.options.jobs > 1:
                evidence = self._run_side_by_side(evidence, slots, current)
            else:
                for instance in self.selected:
                    current.add(instance.id)
                    self.progress.start(instance)
                    outcomes, reused = self.executor.execute(instance)
                    slots[instance.id] = outcomes
                    current.discard(instance.id)
                    self.progress.done(instance, outcomes, reused)
                    evidence = self._save(evidence, slots, "running", background=True)
        except (KeyboardInterrupt, Stop):
            # A second Ctrl-C must not break the evidence being written now.
            previous_handler = ignore_sigint()
            self.progress.message("interrupted: stopping; unfinished checks are recorded as not_run(interrupted)")
            for instance in self.selected:
                if slots[instance.id][0].reason_code == "pending" or instance.id in current:
                    during = instance.id in current
                    slots[instance.id] = [
                        not_run(
                            instance,
                            "interrupted",
                            "interrupted while running" if during else "interrupted before this check ran",
                        )
                    ]
            evidence = self._save(evidence, slots, "interrupted", finished=True)
            self.progress.finish()
            restore_sigint(previous_handler)
            return evidence
        if self.earlier is not None and options.previous is not None:
            slots["#previous"] = previous.outcomes(
                evidence, self.earlier, setup.manifest, str(options.previous), self.kinds
            )
        evidence = self._save(evidence, slots, "complete", finished=True)
        self.progress.finish()
        if not options.no_cache:
            remember(evidence.to_dict())  # for the next plan's and run's estimates; never fails the run
        return evidence

    def _run_side_by_side(
        self, evidence: Evidence, slots: dict[str, list[CheckOutcome]], current: set[str]
    ) -> Evidence:
        """``--jobs N``: up to N checks of the target at once, the rest alone (engine.jobs). Each
        thread only waits on its worker process; outcomes are recorded here, in one thread."""
        from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

        pending = list(self.selected)
        running: dict[Any, Any] = {}
        pool = ThreadPoolExecutor(max_workers=self.options.jobs, thread_name_prefix="fasttrack-check")
        try:
            while pending or running:
                while (
                    index := jobs.next_to_start(pending, running.values(), self.options.jobs, self.kinds)
                ) is not None:
                    instance = pending.pop(index)
                    current.add(instance.id)
                    self.progress.start(instance)
                    running[pool.submit(self.executor.execute, instance)] = instance
                finished, _ = wait(list(running), return_when=FIRST_COMPLETED)
                for future in finished:
                    instance = running.pop(future)
                    outcomes, reused = future.result()
                    slots[instance.id] = outcomes
                    current.discard(instance.id)
                    self.progress.done(instance, outcomes, reused)
                    evidence = self._save(evidence, slots, "running", background=True)
        finally:
            if running:  # interrupted: stop the workers (and any starting now) so that the threads can end
                self.executor.processes.stop_all()
            pool.shutdown(wait=True, cancel_futures=True)
        return evidence

    def _save(
        self,
        evidence: Evidence,
        slots: dict[str, list[CheckOutcome]],
        state: str,
        finished: bool = False,
        background: bool = False,
    ) -> Evidence:
        """The evidence with the current outcomes, written atomically: now (start and end of the
        run) or by the background writer (after each check; see engine.writer)."""
        checks = [o for outcomes in slots.values() for o in outcomes]
        if state != "running":
            # Nothing may stay "pending" in final evidence.
            checks = [self._pending_to_not_run(o) for o in checks]
        evidence = evidence.with_checks(checks, state=state, finished_at=utc_now() if finished else None)
        evidence = replace(evidence, engine_build=self.executor.builds.record())
        if background:
            self.writer.submit(evidence)
        else:
            self.writer.close()
            self.written = self.writer.written or self.written
            try:
                write_evidence(evidence, self.evidence_path)
            except OutputError as err:  # a full disk: exit 3, the last complete evidence stays as it was
                raise err.with_context(self._last_written()) from None
            self.written = evidence
            if not finished:
                self.writer = EvidenceWriter(self.evidence_path)
        return evidence

    def _last_written(self) -> str:
        """What the evidence file holds after a failed write: the last snapshot written whole."""
        last = self.written
        if last is None:
            return "no evidence was written and no check ran"
        ran = sum(1 for o in last.checks if o.reason_code != "pending")
        return (
            f"{self.evidence_path} is the last complete evidence written (state {last.run.state}, "
            f"{ran} of {len(last.checks)} outcomes settled) and verifies as such; free space and run again "
            "with --resume to reuse its outcomes"
        )

    @staticmethod
    def _pending_to_not_run(o: CheckOutcome) -> CheckOutcome:
        if o.reason_code != "pending":
            return o
        return replace(o, reason_code="interrupted", reason="the run ended before this check ran")

    # -------------------------------------------------------------------------------- instances

    def _in_selection(self, instance: CheckInstance) -> bool:
        sel = self.selection
        if not sel.kind_selected(instance.kind) or not sel.hardware_selected(instance.scope_point):
            return False
        return not sel.shard or self.assignment.get(instance.id) == sel.shard[0]

    def _initial(self, instance: CheckInstance) -> CheckOutcome:
        """The outcome an instance has before (or instead of) running."""
        sel = self.selection
        if not sel.kind_selected(instance.kind):
            # Excluded on request: visible, but not counted (the summary names what was excluded).
            return replace(
                not_run(instance, "out_of_scope", f"kind {instance.kind} excluded by {sel.describe_exclusion()}"),
                required=False,
            )
        if not sel.hardware_selected(instance.scope_point):
            # Likewise: another machine's part of the scope; `fasttrack merge` with that machine's run fills it in.
            accelerator = instance.scope_point.get("accelerator") if instance.scope_point is not None else None
            return replace(
                not_run(
                    instance,
                    "out_of_scope",
                    f"{accelerator} excluded by {sel.describe_hardware()}; "
                    f"run it with --hardware {accelerator!r} and merge (fasttrack merge)",
                ),
                required=False,
            )
        if sel.shard and self.assignment.get(instance.id) != sel.shard[0]:
            # Still required: a shard alone is never the gate's verdict; `fasttrack merge` fills it in.
            shard = self.assignment.get(instance.id)
            return not_run(
                instance, "out_of_scope", f"runs in shard {shard}/{sel.shard[1]}; merge the shards (fasttrack merge)"
            )
        if not instance.runnable:
            return not_run(
                instance, instance.reason_code or "hardware", instance.reason or "not runnable on this machine"
            )
        return not_run(instance, "pending", "not run yet: the run is still in progress")
