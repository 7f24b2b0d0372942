"""The next command of the first screen: the one command that moves the evidence towards a
verdict, for its worst actionable reason group, built from the run's own command line (its
options kept, only what the step needs changed)."""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fasttrack.selection import hardware_exclusions

if TYPE_CHECKING:
    from fasttrack.report.sections import Kinds


def _as_map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


@dataclass(frozen=True)
class NextStep:
    command: str  # shell-quoted, ready to paste
    why: str  # what running it settles


class _Command:
    """The run's own command line, edited: the next command keeps the user's options (manifest,
    --out, --jobs, --hardware ...) and changes only what the step needs."""

    VALUED = frozenset(
        {"--only", "--skip", "--shard", "--eval-limit", "--hardware", "--out", "--base", "--head", "--jobs"}
    )
    VALUED |= frozenset({"--timeout-scale"})

    def __init__(self, evidence: Mapping[str, Any]):
        run = _as_map(evidence.get("run"))
        argv = [str(a) for a in run.get("argv") or () if isinstance(a, (str, int, float))]
        manifest = str(_as_map(evidence.get("manifest")).get("path") or "fasttrack.yaml")
        self.is_check = len(argv) >= 3 and argv[1] == "check"
        self.manifest = argv[2] if self.is_check else manifest
        self.options: list[tuple[str, str | None]] = []
        rest = argv[3:] if self.is_check else argv[2:]
        i = 0
        while i < len(rest):
            arg = rest[i]
            name, eq, value = arg.partition("=")
            if eq and name in self.VALUED:
                self.options.append((name, value))
            elif arg in self.VALUED and i + 1 < len(rest):
                self.options.append((arg, rest[i + 1]))
                i += 1
            else:
                self.options.append((arg, None))
            i += 1
        # where this evidence lies: the next `verify` reads it there
        self.out_dir = self.value("--out") or "fasttrack-out"
        if not self.is_check:
            # a merge: the parts' hardware selection is the merge's own, and its --out is no option
            # of the check commands it suggests (they would overwrite the merged evidence)
            self.options = [("--hardware", h) for h in run.get("hardware") or () if isinstance(h, str)]
        self.eval_limits = {str(k): v for k, v in _as_map(run.get("eval_limits")).items()}

    def value(self, name: str) -> str | None:
        found = [v for n, v in self.options if n == name]
        return found[-1] if found else None

    def build(
        self,
        *,
        drop: Iterable[str] = (),
        add: Sequence[tuple[str, str | None]] = (),
        eval_limits: Mapping[str, Any] | None = None,
    ) -> str:
        dropped = {"--resume", "--no-cache", "--eval-limit", *drop}
        kept = [(n, v) for n, v in self.options if n not in dropped]
        limits = dict(self.eval_limits if eval_limits is None else eval_limits)
        words = ["fasttrack", "check", self.manifest]
        for name, value in [*kept, *add, *(("--eval-limit", f"{k}={_size(v)}") for k, v in limits.items())]:
            words.append(name)
            if value is not None:
                words.append(value)
        return " ".join(shlex.quote(w) for w in words)


def _size(n: Any) -> str:
    return "all" if n is None or n == "all" else str(n)


def next_step(evidence: Mapping[str, Any], keys: Sequence[str], kinds: Kinds) -> NextStep | None:
    """The one command that moves this evidence towards a verdict, for its worst actionable group."""
    command = _Command(evidence)
    checks = [c for c in evidence.get("checks") or () if isinstance(c, Mapping)]
    required = [c for c in checks if c.get("required", True)]
    resume = "--resume" if command.is_check else None
    if "failed" in keys:
        failed = list(dict.fromkeys(str(c.get("kind")) for c in required if c.get("status") == "failed"))
        return NextStep(
            command.build(drop=("--only", "--skip", "--shard"), add=[("--only", ",".join(failed))]),
            "after a fix, re-run the kinds that failed",
        )
    if "interrupted" in keys and resume:
        return NextStep(
            command.build(add=[(resume, None)]), "finish the interrupted run; completed outcomes are reused"
        )
    if "errored" in keys:
        timeouts = any(c.get("reason_code") == "timeout" for c in required if c.get("status") == "errored")
        add: list[tuple[str, str | None]] = [(resume, None)] if resume else []
        drop: tuple[str, ...] = ()
        if timeouts:
            scale = _number(command.value("--timeout-scale")) or 1.0
            add.append(("--timeout-scale", f"{scale * 2:g}"))
            drop = ("--timeout-scale",)
        why = "re-run what errored" + ("; completed outcomes are reused" if resume else "")
        return NextStep(command.build(drop=drop, add=add), why + ("; twice the time limits" if timeouts else ""))
    if "underpowered" in keys:
        names = list(
            dict.fromkeys(
                str(c.get("name"))
                for c in required
                if c.get("reason_code") == "underpowered" and c.get("kind") == "evals"
            )
        )
        if names:
            limits = {**command.eval_limits, **dict.fromkeys(names)}
            extra: list[tuple[str, str | None]] = [(resume, None)] if resume else []
            needed = _deciding_scale(evidence, required, _number(command.value("--timeout-scale")) or 1.0, kinds)
            if needed is not None:
                extra.append(("--timeout-scale", f"{needed:g}"))
            return NextStep(
                command.build(drop=("--timeout-scale",) if needed is not None else (), add=extra, eval_limits=limits),
                "decide the underpowered evals on their whole data sets"
                + ("; completed outcomes are reused" if resume else "")
                + ("; time limits scaled to the measured time per item" if needed is not None else ""),
            )
    if "hardware" in keys:
        acc = _first_missing_accelerator(required)
        if acc:
            out = f"{command.out_dir.rstrip('/')}-{_slug(acc)}"
            run_there = command.build(
                drop=("--hardware", "--out", "--only", "--skip", "--shard"),
                add=[("--hardware", acc), ("--out", out)],
            )
            merge = " ".join(shlex.quote(w) for w in ("fasttrack", "merge", command.out_dir, out))
            return NextStep(run_there, f"on a machine with {acc}; then `{merge}` gives the verdict of both")
    if "partial" in keys and evidence.get("verdict", {}).get("status") == "PASS":
        left = list(hardware_exclusions(_as_map(evidence.get("run")), checks))
        if left:
            out = f"{command.out_dir.rstrip('/')}-{_slug(left[0])}"
            run_there = command.build(drop=("--hardware", "--out"), add=[("--hardware", left[0]), ("--out", out)])
            merge = " ".join(shlex.quote(w) for w in ("fasttrack", "merge", command.out_dir, out))
            return NextStep(run_there, f"on a machine with {left[0]}; then `{merge}` gives the full-scope verdict")
        return NextStep(command.build(drop=("--only", "--skip", "--shard")), "run every kind for the gate's verdict")
    if not keys and evidence.get("verdict", {}).get("status") == "PASS":
        out = command.out_dir.rstrip("/")
        return NextStep(
            " ".join(
                shlex.quote(w) for w in ("fasttrack", "verify", f"{out}/evidence.json", "--manifest", command.manifest)
            ),
            "what a CI job that requires this evidence runs",
        )
    return None


def _deciding_scale(
    evidence: Mapping[str, Any], required: Sequence[Mapping[str, Any]], current: float, kinds: Kinds
) -> float | None:
    """The --timeout-scale a deciding run of the underpowered evals needs (the evals' own estimate)."""
    section = kinds["evals"].report if "evals" in kinds else None
    if section is None or section.deciding_time_scale is None:
        return None
    return section.deciding_time_scale(evidence, [c for c in required if c.get("kind") == "evals"], current)


def _first_missing_accelerator(required: Sequence[Mapping[str, Any]]) -> str | None:
    found = Counter(
        str(_as_map(c.get("scope_point")).get("accelerator"))
        for c in required
        if c.get("reason_code") == "hardware" and _as_map(c.get("scope_point")).get("accelerator") is not None
    )
    return found.most_common(1)[0][0] if found else None


def _slug(name: str) -> str:
    return "-".join(name.lower().replace("nvidia", "").split()) or "other"


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None
