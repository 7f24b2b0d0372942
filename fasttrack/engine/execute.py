"""Running one check instance: reused from the previous run when its inputs are unchanged, else
through its kind's runner, in this process or in a worker process the engine can kill (timeout,
Ctrl-C), with its context (manifest, machine, artifact folder, timeout) and the run's processes:
the table of live ones, the zygote they fork from, the folder where target servers' guards
register; and the engine builds the servers reported. Fail closed: a runner that raises, returns
nothing, times out or crashes gives an errored outcome saying so."""

from __future__ import annotations

import errno
import json
import shutil
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from fasttrack import __version__
from fasttrack.engine.options import CheckOptions
from fasttrack.engine.progress import Progress
from fasttrack.engine.select import group_key, inputs_digest
from fasttrack.engine.servers import RunServers, shares_servers
from fasttrack.engine.setup import Setup
from fasttrack.engine.signals import Stop, ignore_sigint, restore_sigint
from fasttrack.errors import OutputError, missing_module, missing_module_reason
from fasttrack.evidence import CheckOutcome, Status, utc_now
from fasttrack.kinds.base import load_runner, preload_modules, starts_python
from fasttrack.kinds.context import RunContext, safe_name
from fasttrack.plan.instance import CheckInstance
from fasttrack.process.cpu import cpu_only_env
from fasttrack.process.groups import signal_name
from fasttrack.process.guard import REGISTRY_ENV, reap
from fasttrack.process.logged import Processes
from fasttrack.process.zygote import Zygote
from fasttrack.targets.build import identity, read_sides

REUSABLE = (Status.PASSED, Status.FAILED)


class BuildLog:
    """The engine builds a run saw: the declared one, and per side the first server build; a side
    that later reports another build is a conflict (the servers changed during the run)."""

    def __init__(self, declared: dict[str, Any] | None) -> None:
        self.declared = declared
        self.sides: dict[str, dict[str, Any]] = {}
        self.conflicts: list[dict[str, Any]] = []

    def add(self, instance_id: str, found: dict[str, dict[str, Any]]) -> None:
        for side, build in found.items():
            first = self.sides.setdefault(side, build)
            if identity(first) != identity(build):
                self.conflicts.append({"side": side, "check": instance_id, "build": build, "first": first})

    def record(self) -> dict[str, Any] | None:
        record: dict[str, Any] = dict(self.sides)
        if self.declared:
            record["declared"] = self.declared
        if self.conflicts:
            record["conflicts"] = list(self.conflicts)
        return record or None


def not_run(instance: CheckInstance, code: str, reason: str) -> CheckOutcome:
    """The outcome of an instance that did not run (or not yet: ``pending``), and why."""
    point = instance.scope_point
    return CheckOutcome(
        id=instance.id,
        kind=instance.kind,
        name=instance.name,
        status=Status.NOT_RUN,
        scope_point=None if point is None else point.as_dict(),
        scope_point_id=None if point is None else point.id,
        required=bool(instance.required),
        reason_code=code,
        reason=reason,
    )


class Executor:
    """Runs the selected instances of one run, one at a time or from several threads (--jobs)."""

    def __init__(
        self,
        options: CheckOptions,
        setup: Setup,
        selected: Sequence[CheckInstance],
        progress: Progress,
        last_written: Callable[[], str],
    ) -> None:
        self.options, self.setup, self.kinds = options, setup, setup.kinds
        self.out_dir = options.out_dir
        self.progress = progress
        self.last_written = last_written  # what the evidence file holds, for a full disk's message
        # Instances that share one run (a kernel suite's pytest session per hardware setup): how
        # many there are, and each one's share of that run's time once the first has measured it.
        self.group_size: dict[str, int] = {}
        for i in selected:
            key = group_key(i, self.kinds)
            self.group_size[key] = self.group_size.get(key, 0) + 1
        self.group_share: dict[str, float] = {}
        self.shared: dict[str, Any] = {}
        self._registry: str | None = None  # where the guards of target servers register (fasttrack.process.guard)
        self._registry_lock = threading.Lock()
        # Workers and pytest sessions forked from one pre-imported parent where possible
        # (fasttrack.process.zygote): started now, importing while the first checks run.
        self._zygote: Zygote | None = None
        if Zygote.wanted() and any(starts_python(self.kinds, i.kind) for i in selected):
            try:
                self._zygote = Zygote(preload_modules(self.kinds))
            except OSError:
                self._zygote = None
        # This run's live processes (stopped together on Ctrl-C); pytest sessions of kernel tests
        # and audits are forked through the zygote too.
        self.processes = Processes(self._zygote)
        self.builds = BuildLog(setup.engine_build)
        # One server per side per scope point, shared by the checks there (target kind vllm).
        self.servers: RunServers | None = None
        if shares_servers(setup.manifest):
            self.servers = RunServers(
                setup.manifest, self.kinds, selected, self.out_dir.resolve() / "servers", progress.message
            )

    def execute(self, instance: CheckInstance) -> tuple[list[CheckOutcome], bool]:
        digest = inputs_digest(self.setup.manifest.sha256, self.setup.code_identity, instance, __version__)
        previous = self.setup.previous.get(instance.id)
        if previous and all(o.inputs_digest == digest and o.status in REUSABLE for o in previous):
            return list(previous), True
        started_at, started = utc_now(), time.monotonic()
        try:
            outcomes = self.run_runner(instance)
        finally:
            if self.servers is not None:
                self.servers.done(instance)
        self.builds.add(instance.id, read_sides(self.out_dir / "artifacts" / safe_name(instance.id)))
        duration = time.monotonic() - started
        key = group_key(instance, self.kinds)
        if self.group_size.get(key, 1) > 1:
            # The first instance of a group ran the shared session; each member gets its share.
            duration = self.group_share.setdefault(key, duration / self.group_size[key])
        share = duration / max(1, len(outcomes))
        return [
            replace(
                o,
                started_at=o.started_at or started_at,
                duration_s=o.duration_s or share,
                inputs_digest=digest,
                required=o.required and bool(instance.required),
            )
            for o in outcomes
        ], False

    def context(self, instance: CheckInstance) -> RunContext:
        # Absolute: a check's worker runs in the repository root, a stock side in the base worktree,
        # and a relative --out means the invoking directory, which neither is.
        out_dir = self.out_dir.resolve()
        folder = out_dir / "artifacts" / safe_name(instance.id)
        folder.mkdir(parents=True, exist_ok=True)
        # an ablation or rival arm (the candidate turns on only its switches), a benchmark's own server arguments
        manifest = self.setup.manifest.for_config(instance.config)
        return RunContext(
            manifest,
            self.setup.environment,
            out_dir,
            folder,
            float(instance.timeout_s) * self.options.timeout_scale,
            self.setup.base,
            self.setup.head,
            self.options.timeout_scale,
            shared=self.shared,
            base_source=self.setup.git_record.base_source,
            no_cache=self.options.no_cache,
            processes=self.processes,
        )

    def close(self) -> None:
        if self.servers is not None:
            self.servers.close()
            self.servers = None
        self.processes.forker = None
        if self._zygote is not None:
            self._zygote.close()
            self._zygote = None
        if self._registry is not None:
            shutil.rmtree(self._registry, ignore_errors=True)

    def _server_registry(self) -> str:
        """One folder per run (outside --out) where workers' server guards register."""
        with self._registry_lock:
            if self._registry is None:
                self._registry = tempfile.mkdtemp(prefix="fasttrack-servers-")
            return self._registry

    def run_runner(self, instance: CheckInstance) -> list[CheckOutcome]:
        try:
            runner = load_runner(self.kinds, instance.kind)
        except ImportError as err:
            return [not_run(instance, "dependency", f"the {instance.kind} runner cannot be imported: {err}")]
        if runner is None:
            return [
                not_run(instance, "dependency", f"this fasttrack has no runner for check kind {instance.kind!r} yet")
            ]
        context = self.context(instance)
        try:
            if self.kinds[instance.kind].execution.isolation == "subprocess":
                result: Any = self.run_in_worker(instance, context, self.kinds[instance.kind].runner)
            else:
                result = runner.run(instance, context)
        except (KeyboardInterrupt, Stop):
            raise
        except Exception as err:  # a runner bug must not take the gate down: record it, fail closed
            module = missing_module(err)
            if module is not None:  # an optional dependency absent here, met at run time: as at import
                return [not_run(instance, "dependency", missing_module_reason(instance.kind, module))]
            if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
                # the disk is full: no outcome can be recorded faithfully; exit 3 with the last evidence intact
                why = "no space left on the device" if err.errno == errno.ENOSPC else "disk quota exceeded"
                raise OutputError(err.errno, why, str(err.filename or self.out_dir), self.last_written()) from None
            log = context.artifact_path("runner-error.txt")
            try:
                log.write_text(traceback.format_exc(), encoding="utf-8")
                artifacts: tuple[Any, ...] = (context.artifact(log, "log", "runner traceback"),)
            except OSError:
                artifacts = ()
            return [
                replace(
                    not_run(instance, "error", f"the {instance.kind} runner raised {type(err).__name__}: {err}"),
                    status=Status.ERRORED,
                    artifacts=artifacts,
                )
            ]
        outcomes = [result] if isinstance(result, CheckOutcome) else list(result or [])
        if not outcomes:
            return [
                replace(
                    not_run(instance, "error", f"the {instance.kind} runner returned no outcome"),
                    status=Status.ERRORED,
                )
            ]
        return outcomes

    def run_in_worker(self, instance: CheckInstance, context: RunContext, module: str) -> list[CheckOutcome]:
        from fasttrack.engine.worker import dump_job

        job, out = context.artifact_path("worker-job.pkl"), context.artifact_path("worker-outcome.json")
        out.unlink(missing_ok=True)
        dump_job(job, module, instance, context)
        servers = Path(tempfile.mkdtemp(prefix="servers-", dir=self._server_registry()))
        stopped: list[str] = []
        try:
            result = self.processes.run_logged(
                [sys.executable, "-m", "fasttrack.engine.worker", str(job), str(out), "--lifeline"],
                context.artifact_path("worker.log"),
                cwd=context.repo_root,
                env={
                    REGISTRY_ENV: str(servers),
                    **cpu_only_env(instance.scope_point),  # a cpu point never sees a GPU
                    **(self.servers.env() if self.servers is not None else {}),
                },
                timeout_s=context.timeout_s,
                evidence_dir=context.evidence_dir,
                description=f"log of {instance.id}",
                lifeline=True,
            )
        finally:
            # However the worker ended (done, timed out, crashed, killed on Ctrl-C), no server it
            # started outlives it (fasttrack.process.guard); a second Ctrl-C must not cut this short.
            handler = ignore_sigint()
            try:
                stopped = reap(servers)
                for line in stopped:
                    self.progress.message(f"{instance.id}: {line}")
            finally:
                restore_sigint(handler)
                shutil.rmtree(servers, ignore_errors=True)
        job.unlink(missing_ok=True)
        errored = replace(
            not_run(instance, "error", ""), status=Status.ERRORED, artifacts=(result.log,) if result.log else ()
        )
        left = f"; {len(stopped)} target server(s) it had started were stopped" if stopped else ""
        if result.timed_out:
            return [
                replace(
                    errored,
                    reason_code="timeout",
                    reason=f"ran past its timeout of {context.timeout_s:g}s; its process group was killed" + left,
                )
            ]
        if not out.exists():
            how = (
                f"died from {signal_name(result.signal)}" if result.signal else f"exited with code {result.returncode}"
            )
            last = [ln for ln in result.tail().splitlines() if ln.strip()]
            return [
                replace(
                    errored,
                    reason_code="crashed",
                    reason=f"the check's worker process {how} without a result"
                    + left
                    + (f"; last log line: {last[-1][:200]}" if last else ""),
                )
            ]
        data = json.loads(out.read_text(encoding="utf-8"))
        out.unlink(missing_ok=True)
        outcomes = [CheckOutcome.from_dict(d) for d in data]
        if stopped:  # what the check's servers left running is named in its outcome (#35 row 9)
            outcomes = [replace(o, reason="; ".join([*([o.reason] if o.reason else []), *stopped])) for o in outcomes]
        return [replace(o, artifacts=(*o.artifacts, result.log)) if result.log else o for o in outcomes]
