"""What the first screen of every report says, computed once from the evidence: the verdict with
its counts, one line per reason group (worst first) and the next command to run. The HTML
report's verdict box, summary.md and the terminal summary (summary.txt) render this and nothing
else at their top; per-instance lines belong further down ("All outcomes", evidence.json).

Groups, worst first: failed checks (by name), errored ones, underpowered ones (with what decides
them), uncovered points, an interrupted run, missing software, missing hardware (one line per
accelerator, with the count), anything else that did not run, and what a partial run left out.
Reads plain evidence (the JSON form), tolerating missing keys like every reporter.
"""

from __future__ import annotations

import math
import shlex
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fasttrack.selection import Selection, hardware_exclusions

MAX_GROUPS = 6  # reason lines in the box; the rest are counted
MAX_NAMES = 4  # checks named per line
MAX_REASON_CHARS = 160


@dataclass(frozen=True)
class ReasonGroup:
    """One line of the first screen: ``title`` (a short label) and ``text`` (which checks, where,
    why, what decides them); ``count`` outcomes share it."""

    key: str  # failed | errored | underpowered | uncovered | interrupted | dependency | hardware | not_run | partial
    title: str
    count: int
    text: str

    def line(self) -> str:
        return f"{self.title}: {self.text}"


@dataclass(frozen=True)
class NextStep:
    command: str  # shell-quoted, ready to paste
    why: str  # what running it settles


@dataclass(frozen=True)
class FirstScreen:
    verdict: str  # PASS | FAIL | INCOMPLETE
    counts_text: str  # "276 of 387 required outcomes passed; 111 did not run"
    groups: tuple[ReasonGroup, ...]  # at most MAX_GROUPS, worst first
    more_groups: int  # reason groups left out of the box
    next: NextStep | None

    @property
    def headline(self) -> str:
        return f"{self.verdict}: {self.counts_text}"

    def lines(self) -> list[str]:
        """The first screen as plain text lines (the terminal's order)."""
        out = [self.headline, *(g.line() for g in self.groups)]
        if self.more_groups:
            out.append(f"... and {self.more_groups} more reason groups (see All outcomes)")
        if self.next is not None:
            out.append(f"next: {self.next.command}  ({self.next.why})")
        return out


# ------------------------------------------------------------------------------ points


def short_point(dims: Mapping[str, Any] | None) -> str:
    """'GB300 ×8 tp8 batch=17' for a scope point's dimensions; 'global' for none."""
    if not dims:
        return "global"
    parts = []
    acc = dims.get("accelerator")
    if acc is not None:
        parts.append(str(acc).replace("NVIDIA ", ""))
    if "device_count" in dims:
        parts.append(f"×{dims['device_count']}")
    if "tensor_parallel" in dims:
        parts.append(f"tp{dims['tensor_parallel']}")
    parts += [
        f"{k}={v}" for k, v in sorted(dims.items()) if k not in ("accelerator", "device_count", "tensor_parallel")
    ]
    return " ".join(parts)


def hardware_label(dims: Mapping[str, Any] | None) -> str:
    """The hardware setup of a scope point: 'cpu ×1 tp2'; 'global' for none."""
    if not dims:
        return "global"
    return (
        short_point({k: dims[k] for k in ("accelerator", "device_count", "tensor_parallel") if k in dims})
        or "any hardware"
    )


def _as_map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _clip(text: Any, limit: int = MAX_REASON_CHARS) -> str:
    value = " ".join(str(text or "").split())
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _label(c: Mapping[str, Any]) -> str:
    return f"{c.get('kind', '?')}/{c.get('name', '?')}"


def _where(members: Sequence[Mapping[str, Any]]) -> str:
    """'at cpu ×1 tp1' / 'at 12 points (cpu ×1 tp2, cpu ×1 tp4)' / '' for global checks."""
    points = [c.get("scope_point") for c in members]
    if all(not p for p in points):
        return ""
    if len(members) == 1:
        return f" at {short_point(points[0])}"
    setups = list(dict.fromkeys(hardware_label(p) for p in points))
    shown = ", ".join(setups[:3]) + (f" +{len(setups) - 3}" if len(setups) > 3 else "")
    return f" at {len(members)} points ({shown})"


def _by_check(outcomes: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    named: dict[str, list[Mapping[str, Any]]] = {}
    for c in outcomes:
        named.setdefault(_label(c), []).append(c)
    return dict(sorted(named.items(), key=lambda kv: -len(kv[1])))


def _name_checks(outcomes: Sequence[Mapping[str, Any]], *, codes: bool = False) -> str:
    """The checks by name, most outcomes first: 'kernels/k at 12 points (...); features/n at cpu ×1 tp1'.
    With one check, its first reason follows; with ``codes``, each check's reason codes."""
    named = _by_check(outcomes)
    parts = []
    for label, members in list(named.items())[:MAX_NAMES]:
        part = label + _where(members)
        if codes:
            found = list(dict.fromkeys(str(m.get("reason_code") or "error") for m in members))
            part += f" ({', '.join(found)})"
        parts.append(part)
    text = "; ".join(parts) + (f"; and {len(named) - MAX_NAMES} more checks" if len(named) > MAX_NAMES else "")
    if len(named) == 1 and outcomes[0].get("reason"):
        text += f": {_clip(_strip_point(outcomes[0]))}"
    return text


def _strip_point(c: Mapping[str, Any]) -> str:
    """A reason without the ' at <point id>' it may end with (the line names the points)."""
    reason = str(c.get("reason") or "")
    point = c.get("scope_point_id")
    return reason.replace(f" at {point}", "") if point else reason


# ------------------------------------------------------------------------------ commands


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


# ------------------------------------------------------------------------------ groups


def _ints(outcomes: Iterable[Mapping[str, Any]], key: str) -> list[int]:
    """The distinct integer values of a measurement over some outcomes, sorted."""
    found = (_as_map(c.get("measurements")).get(key) for c in outcomes)
    return sorted({v for v in found if isinstance(v, int) and not isinstance(v, bool)})


def _underpowered_text(members: Sequence[Mapping[str, Any]]) -> str:
    evals = [c for c in members if c.get("kind") == "evals"]
    others = [c for c in members if c.get("kind") != "evals"]
    parts = []
    if evals:
        names = list(dict.fromkeys(str(c.get("name")) for c in evals))
        ns = _ints(evals, "n")
        needed = _ints(evals, "n_needed")
        setups = list(dict.fromkeys(hardware_label(c.get("scope_point")) for c in evals))
        text = f"{_plural(len(evals), 'eval')} ({', '.join(names)}) at {', '.join(setups[:3])}"
        if ns:
            text += f": {'/'.join(str(n) for n in ns)} items cannot decide the margin"
            if needed:
                text += f" (need ≥ {needed[0]})"
        text += "; decide with " + " ".join(f"--eval-limit {n}=all" for n in names)
        parts.append(text)
    if others:
        parts.append(_name_checks(others))
    return "; ".join(parts)


def _hardware_groups(members: Sequence[Mapping[str, Any]]) -> list[ReasonGroup]:
    by_acc: dict[str, list[Mapping[str, Any]]] = {}
    for c in members:
        acc = _as_map(c.get("scope_point")).get("accelerator")
        by_acc.setdefault(str(acc) if acc is not None else "other hardware", []).append(c)
    groups = []
    for acc, found in sorted(by_acc.items(), key=lambda kv: -len(kv[1])):
        kinds = Counter(str(c.get("kind")) for c in found)
        found_counts = {_as_map(c.get("scope_point")).get("device_count") for c in found} - {None}
        counts = [
            str(n) for n in sorted(found_counts, key=lambda n: (0, n, "") if isinstance(n, int) else (1, 0, str(n)))
        ]
        need = acc + (f" ×{'/'.join(counts)}" if counts and counts != ["1"] else "")
        here = next(
            (
                str(c.get("reason")).split("this machine has: ", 1)[1]
                for c in found
                if "this machine has: " in str(c.get("reason"))
            ),
            "",
        )
        kinds_text = ", ".join(f"{k} ×{n}" if n > 1 else k for k, n in kinds.most_common(4))
        text = (
            f"{_plural(len(found), 'outcome')} need {need} ({kinds_text})"
            + (f"; this machine has {_clip(here, 60)}" if here else "")
            + f"; run them there with --hardware {shlex.quote(acc)} and merge"
        )
        groups.append(ReasonGroup("hardware", "Not on this machine", len(found), text))
    return groups


def _partial_text(evidence: Mapping[str, Any]) -> tuple[str, int] | None:
    run = _as_map(evidence.get("run"))
    checks = [c for c in evidence.get("checks") or () if isinstance(c, Mapping)]
    left_out = [c for c in checks if c.get("reason_code") == "out_of_scope" and not c.get("required", True)]
    parts = []
    if run.get("only"):
        parts.append("--only " + ",".join(str(k) for k in run["only"]))
    if run.get("skip"):
        parts.append("--skip " + ",".join(str(k) for k in run["skip"]))
    if run.get("hardware"):
        parts.append(Selection(hardware=tuple(str(h) for h in run["hardware"])).describe_hardware())
    shard = _as_map(run.get("shard"))
    if shard:
        parts.append(f"shard {shard.get('index')}/{shard.get('count')}")
    if not parts and not left_out:
        return None
    accelerators = list(hardware_exclusions(run, checks))
    text = f"{', '.join(parts) or 'a narrowed run'}: {_plural(len(left_out), 'outcome')} left out and not counted"
    if accelerators:
        text += f" ({', '.join(accelerators)})"
    text += "; only a run of the whole scope (or a merge of its parts) is the gate's verdict"
    return text, len(left_out)


def reason_groups(evidence: Mapping[str, Any]) -> list[ReasonGroup]:
    """Every reason group of the evidence, worst first (the box shows the first MAX_GROUPS)."""
    checks = [c for c in evidence.get("checks") or () if isinstance(c, Mapping)]
    required = [c for c in checks if c.get("required", True)]
    failed = [c for c in required if c.get("status") == "failed"]
    errored = [c for c in required if c.get("status") == "errored"]
    not_run = [c for c in required if c.get("status") == "not_run"]

    def code(*codes: str) -> list[Mapping[str, Any]]:
        return [c for c in not_run if c.get("reason_code") in codes]

    underpowered, uncovered = code("underpowered"), code("uncovered")
    interrupted, dependency, hardware = code("interrupted", "pending"), code("dependency"), code("hardware")
    named = {id(c) for c in (*underpowered, *uncovered, *interrupted, *dependency, *hardware)}
    other = [c for c in not_run if id(c) not in named]
    run = _as_map(evidence.get("run"))
    groups: list[ReasonGroup] = []
    if failed:
        groups.append(ReasonGroup("failed", "Failed", len(failed), _name_checks(failed)))
    if errored:
        groups.append(ReasonGroup("errored", "Errored", len(errored), _name_checks(errored, codes=True)))
    if underpowered:
        groups.append(ReasonGroup("underpowered", "Underpowered", len(underpowered), _underpowered_text(underpowered)))
    if uncovered:
        groups.append(ReasonGroup("uncovered", "Not covered", len(uncovered), _name_checks(uncovered)))
    if interrupted or run.get("state") not in (None, "complete"):
        state = run.get("state") or "unknown"
        text = {
            "complete": "some checks did not run",
            "running": "the run has not finished (still running, or killed)",
        }.get(str(state), f"the run ended {state}")
        if interrupted:
            kinds = Counter(str(c.get("kind")) for c in interrupted)
            text += (
                f"; {_plural(len(interrupted), 'outcome')} did not run ("
                + ", ".join(f"{k} ×{n}" if n > 1 else k for k, n in kinds.most_common(4))
                + ")"
            )
        groups.append(ReasonGroup("interrupted", "Interrupted", len(interrupted), text))
    if dependency:
        # the checks by name (with their code), then what is missing
        text = "software missing here for " + _name_checks(dependency, codes=True)
        if len(_by_check(dependency)) > 1:
            reasons = list(dict.fromkeys(_clip(_strip_point(c), 100) for c in dependency))
            text += ": " + "; ".join(reasons[:2]) + (f"; and {len(reasons) - 2} more" if len(reasons) > 2 else "")
        groups.append(ReasonGroup("dependency", "Missing software", len(dependency), text))
    groups.extend(_hardware_groups(hardware))
    if other:
        codes = ", ".join(dict.fromkeys(str(c.get("reason_code") or "no reason") for c in other))
        groups.append(ReasonGroup("not_run", "Not run", len(other), f"({codes}) {_name_checks(other)}"))
    partial = _partial_text(evidence)
    if partial is not None:
        groups.append(ReasonGroup("partial", "Partial run", partial[1], partial[0]))
    return groups


# ------------------------------------------------------------------------------ next command


def next_step(evidence: Mapping[str, Any], groups: Sequence[ReasonGroup]) -> NextStep | None:
    """The one command that moves this evidence towards a verdict, for its worst actionable group."""
    command = _Command(evidence)
    checks = [c for c in evidence.get("checks") or () if isinstance(c, Mapping)]
    required = [c for c in checks if c.get("required", True)]
    keys = [g.key for g in groups]
    resume = "--resume" if command.is_check else None
    if "failed" in keys:
        kinds = list(dict.fromkeys(str(c.get("kind")) for c in required if c.get("status") == "failed"))
        return NextStep(
            command.build(drop=("--only", "--skip", "--shard"), add=[("--only", ",".join(kinds))]),
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
            needed = _timeout_scale_for_whole_sets(evidence, required, _number(command.value("--timeout-scale")) or 1.0)
            if needed is not None:
                extra.append(("--timeout-scale", f"{needed:g}"))
            return NextStep(
                command.build(drop=("--timeout-scale",) if needed is not None else (), add=extra, eval_limits=limits),
                "decide the underpowered evals on their whole data sets"
                + ("; completed outcomes are reused" if resume else "")
                + ("; time limits scaled to the measured time per item" if needed is not None else ""),
            )
    hardware = [g for g in groups if g.key == "hardware"]
    if hardware:
        acc = _first_missing_accelerator(required)
        if acc:
            out = f"{command.out_dir.rstrip('/')}-{_slug(acc)}"
            run_there = command.build(
                drop=("--hardware", "--out", "--only", "--skip", "--shard"),
                add=[("--hardware", acc), ("--out", out)],
            )
            merge = " ".join(shlex.quote(w) for w in ("fasttrack", "merge", command.out_dir, out))
            return NextStep(run_there, f"on a machine with {acc}; then `{merge}` gives the verdict of both")
    partial = next((g for g in groups if g.key == "partial"), None)
    if partial is not None and evidence.get("verdict", {}).get("status") == "PASS":
        left = list(hardware_exclusions(_as_map(evidence.get("run")), checks))
        if left:
            out = f"{command.out_dir.rstrip('/')}-{_slug(left[0])}"
            run_there = command.build(drop=("--hardware", "--out"), add=[("--hardware", left[0]), ("--out", out)])
            merge = " ".join(shlex.quote(w) for w in ("fasttrack", "merge", command.out_dir, out))
            return NextStep(run_there, f"on a machine with {left[0]}; then `{merge}` gives the full-scope verdict")
        return NextStep(command.build(drop=("--only", "--skip", "--shard")), "run every kind for the gate's verdict")
    if not groups and evidence.get("verdict", {}).get("status") == "PASS":
        out = command.out_dir.rstrip("/")
        return NextStep(
            " ".join(
                shlex.quote(w) for w in ("fasttrack", "verify", f"{out}/evidence.json", "--manifest", command.manifest)
            ),
            "what a CI job that requires this evidence runs",
        )
    return None


def _timeout_scale_for_whole_sets(
    evidence: Mapping[str, Any], required: Sequence[Mapping[str, Any]], current: float
) -> float | None:
    """The --timeout-scale a deciding run of the underpowered evals needs, from what this run
    measured: seconds per item x the items each bin needs (``n_needed`` per bin), against the
    eval's time limit. Baseline items served from the cache count at what they cost when they ran
    (the new items of the deciding run are not cached). None when that fits in the current limits
    or cannot be told."""
    data = _as_map(_as_map(evidence.get("manifest")).get("data"))
    timeouts = _as_map(data.get("timeouts"))
    declared = {str(_as_map(e).get("id")): _as_map(e) for e in data.get("evals") or () if isinstance(e, Mapping)}
    wanted = current
    for c in required:
        m = _as_map(c.get("measurements"))
        if c.get("kind") != "evals" or c.get("reason_code") != "underpowered":
            continue
        values = [
            _positive(v)
            for v in (
                m.get("n"),
                m.get("n_needed"),
                c.get("duration_s"),
                declared.get(str(c.get("name")), {}).get("timeout_s")
                or _as_map(timeouts.get("per_kind")).get("evals", timeouts.get("default_s")),
            )
        ]
        n, needed, spent, limit = values
        if n is None or needed is None or spent is None or limit is None:
            continue
        spent += _uncached_baseline_cost(m, n)
        bins = max(1, len([b for b in m.get("bins") or () if isinstance(b, Mapping)]))
        wanted = max(wanted, math.ceil(spent / n * needed * bins / limit))
    return float(wanted) if wanted > current else None


def _uncached_baseline_cost(measurements: Mapping[str, Any], n: float) -> float:
    """Seconds the eval's cached baseline items would have cost to run: their stored cost, and for
    hits of unknown cost what an item cost this run (a fresh baseline item where there was one,
    else a candidate item: the stock path is rarely the faster one)."""
    cache = _as_map(measurements.get("cache"))
    timings = _as_map(measurements.get("timings"))
    saved = _positive(cache.get("baseline_saved_s")) or 0.0
    # evidence from before costs were stored has no count of its own: every hit's cost is unknown
    unknown = _positive(cache.get("baseline_hits_of_unknown_cost", cache.get("baseline_hits")))
    if unknown is None:
        return saved
    fresh = n - (_positive(cache.get("baseline_hits")) or 0.0)
    base_each = (_positive(timings.get("baseline_s")) or 0.0) / fresh if fresh > 0 else 0.0
    cand_each = (_positive(timings.get("candidate_s")) or 0.0) / n
    return saved + unknown * max(base_each, cand_each)


def _positive(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        return None
    return float(value)


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


# ------------------------------------------------------------------------------ the screen


def counts_text(evidence: Mapping[str, Any]) -> str:
    counts = _as_map(_as_map(evidence.get("verdict")).get("counts"))
    total = sum(int(v) for v in counts.values() if isinstance(v, int))
    passed = int(counts.get("passed", 0) or 0)
    text = f"{passed} of {total} required outcomes passed"
    for status, word in (("failed", "failed"), ("errored", "errored"), ("not_run", "did not run")):
        n = int(counts.get(status, 0) or 0)
        if n:
            text += f"; {n} {word}"
    return text


def first_screen(evidence: Mapping[str, Any]) -> FirstScreen:
    groups = reason_groups(evidence)
    status = str(_as_map(evidence.get("verdict")).get("status", "?"))
    return FirstScreen(
        status,
        counts_text(evidence),
        tuple(groups[:MAX_GROUPS]),
        max(0, len(groups) - MAX_GROUPS),
        next_step(evidence, groups),
    )
