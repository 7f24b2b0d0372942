"""The runner API: what a runner gets besides its check instance (the manifest, the machine,
where to put artifacts, its timeout) and two helpers (build an outcome; run a subprocess that is
killed, with its whole process group, on timeout or Ctrl-C, through the run's table of live
processes, `fasttrack.process.logged.Processes`)."""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fasttrack.evidence import Artifact, CheckOutcome, Status
from fasttrack.process.logged import Processes, ProcessResult

if TYPE_CHECKING:
    from fasttrack.environment import Environment
    from fasttrack.manifest import Manifest
    from fasttrack.plan.instance import CheckInstance


def target_failure(err: Exception) -> tuple[Status, str]:
    """How a runner records a side it could not open or drive (CONTRIBUTING, "Adding a check kind"):
    the target's code needing a module this machine lacks (`TargetDependencyMissing`) is
    not_run(dependency), like a runner's own missing module; any other `TargetError` errored(target)."""
    from fasttrack.targets.protocol import TargetDependencyMissing

    if isinstance(err, TargetDependencyMissing):
        return Status.NOT_RUN, "dependency"
    return Status.ERRORED, "target"


@dataclass
class RunContext:
    """Per check instance. Picklable (the engine ships it to a worker process)."""

    manifest: Manifest
    environment: Environment | None  # None in some unit tests
    evidence_dir: Path
    artifact_dir: Path  # this instance's own folder under evidence_dir/artifacts/
    timeout_s: float  # the instance's timeout, already scaled by --timeout-scale
    base: str | None = None  # git base commit (resolved sha) or None
    head: str | None = None  # git head commit (resolved sha) or None
    timeout_scale: float = 1.0
    started_monotonic: float = field(default_factory=time.monotonic)
    # Runner-to-runner cache within one engine process (e.g. one pytest run shared by the
    # per-scope-point kernel instances). Not shipped to worker processes.
    shared: dict[str, Any] = field(default_factory=dict, repr=False)
    base_source: str | None = (
        None  # where the base came from (--base, merge-base with origin/main), or why there is none
    )
    no_cache: bool = False  # --no-cache: the eval baseline cache is neither read nor written
    # The run's live processes (the engine's table: stopped together on Ctrl-C). Not shipped to
    # worker processes: a worker starts its own with a table of its own.
    processes: Processes = field(default_factory=Processes, repr=False)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["shared"] = {}
        state.pop("processes", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.processes = Processes()

    @property
    def repo_root(self) -> Path:
        return Path(self.manifest.root)

    def remaining_s(self) -> float:
        return max(0.0, self.timeout_s - (time.monotonic() - self.started_monotonic))

    # ------------------------------------------------------------------ outcomes and artifacts

    def outcome(self, instance: CheckInstance, status: Status, **fields: Any) -> CheckOutcome:
        """A CheckOutcome for ``instance`` (id, kind, name, scope point, required filled in)."""
        point = fields.pop("scope_point", getattr(instance, "scope_point", None))
        base: dict[str, Any] = {
            "id": fields.pop("id", instance.id),
            "kind": fields.pop("kind", instance.kind),
            "name": fields.pop("name", instance.name),
            "status": status,
            "scope_point": scope_point_dict(point),
            "scope_point_id": fields.pop("scope_point_id", scope_point_id(point)),
            "required": fields.pop("required", bool(getattr(instance, "required", True))),
        }
        artifacts = tuple(a for a in fields.pop("artifacts", ()) if a is not None)
        return CheckOutcome(**base, artifacts=artifacts, **fields)

    def artifact(self, path: Path, kind: str = "log", description: str = "") -> Artifact:
        """``path`` recorded with its digest. A file outside this check's folder (a shared server's
        log, which keeps growing until the run stops the server) is recorded as a copy taken now,
        in the check's folder: the digest must hold for the file the evidence names."""
        path = Path(path)
        try:
            path.resolve().relative_to(self.artifact_dir.resolve())
        except ValueError:
            copy = self.artifact_path(f"{path.parent.name}-{path.name}" if path.parent.name else path.name)
            shutil.copyfile(path, copy)
            path = copy
        return Artifact.from_file(self.evidence_dir, path, kind, description)

    def artifact_path(self, name: str) -> Path:
        self.artifact_dir.mkdir(parents=True, exist_ok=True)
        return self.artifact_dir / name

    # ------------------------------------------------------------------ subprocesses

    def run_process(
        self,
        command: Sequence[str],
        *,
        log_name: str,
        cwd: Path | None = None,
        env: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        description: str = "",
    ) -> ProcessResult:
        """Run ``command`` with stdout+stderr into an artifact log; kill its process group on
        timeout (default: the instance's remaining time) or on Ctrl-C (then re-raise)."""
        log_path = self.artifact_path(log_name)
        limit = self.remaining_s() if timeout_s is None else timeout_s
        return self.processes.run_logged(
            command,
            log_path,
            cwd=cwd,
            env=env,
            timeout_s=limit,
            evidence_dir=self.evidence_dir,
            description=description or " ".join(command)[:200],
        )


def scope_point_dict(point: Any) -> dict[str, Any] | None:
    if point is None:
        return None
    if hasattr(point, "as_dict"):
        return point.as_dict()
    return dict(point)


def scope_point_id(point: Any) -> str | None:
    if point is None:
        return None
    if hasattr(point, "id"):
        return point.id
    return ",".join(f"{k}={v}" for k, v in sorted(dict(point).items()))


_UNSAFE = re.compile(r"[^A-Za-z0-9._=,-]+")


def safe_name(text: str, limit: int = 120) -> str:
    """A file-system-safe folder name for a check id."""
    name = _UNSAFE.sub("_", text).strip("._") or "check"
    if len(name) > limit:
        import hashlib

        name = name[: limit - 13] + "-" + hashlib.sha256(text.encode()).hexdigest()[:12]
    return name


def first_line(text: str | None, limit: int = 300) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()[:limit]
    return ""


def join_limited(items: Iterable[str], limit: int = 8) -> str:
    items = list(items)
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")
