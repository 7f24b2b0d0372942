"""What a run is asked to do: the engine's one input (the CLI builds it from the command line)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from fasttrack.selection import Selection


@dataclass(frozen=True)
class CheckOptions:
    manifest: str
    out_dir: Path = Path("fasttrack-out")
    base: str | None = None
    head: str | None = None
    selection: Selection = field(default_factory=Selection)
    resume: bool = False
    no_cache: bool = False  # also ignore (and do not write) the eval baseline cache
    timeout_scale: float = 1.0
    argv: tuple[str, ...] = ()
    progress_stream: TextIO | None = None  # default: stderr
    live_progress: bool | None = None  # None: a live line only on a terminal
    quiet: bool = False
    jobs: int = 1  # checks of the target that may run side by side (fasttrack.engine.jobs)
    eval_limits: tuple[tuple[str, int | None], ...] = ()  # --eval-limit: (eval id, items or None for all)
    costs_from: Path | None = None  # --costs-from: an earlier run's evidence to seed the progress ETA with
    previous: Path | None = None  # --previous: an earlier run's evidence to compare speed-ups and eval means with
    policy_from: str | None = None  # --policy-from: the git ref whose manifest holds the gate's policy (the base)
    accept_policy_change: bool = False  # --accept-policy-change: a reviewer accepted the PR's looser policy
    keep_out_lock: bool = False  # the CLI keeps the --out lock until the reports are written, then drops it
