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

import shlex
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fasttrack.evidence.arms import arm_lines
from fasttrack.evidence.counts import RunCounts
from fasttrack.report.format import hardware_label, short_point
from fasttrack.report.next_step import NextStep, next_step
from fasttrack.selection import Selection, hardware_exclusions

if TYPE_CHECKING:
    from fasttrack.report.sections import Kinds

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
class FirstScreen:
    verdict: str  # PASS | FAIL | INCOMPLETE
    counts_text: str  # "276 of 387 required outcomes passed; 111 did not run"
    sizes_text: str  # "405 outcomes (396 required) of 402 check instances at 1,008 declared scope points"
    groups: tuple[ReasonGroup, ...]  # at most MAX_GROUPS, worst first
    more_groups: int  # reason groups left out of the box
    next: NextStep | None
    arms: tuple[tuple[str, str, str], ...] = ()  # rival arms: (arm, its verdict, why), fasttrack.evidence.arms

    @property
    def headline(self) -> str:
        return f"{self.verdict}: {self.counts_text}"

    def lines(self) -> list[str]:
        """The first screen as plain text lines (the terminal's order)."""
        out = [self.headline, *(f"arm {arm}: {status} ({why})" for arm, status, why in self.arms)]
        out += [g.line() for g in self.groups]
        if self.more_groups:
            out.append(f"... and {self.more_groups} more reason groups (see All outcomes)")
        if self.next is not None:
            out.append(f"next: {self.next.command}  ({self.next.why})")
        return out


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


# ------------------------------------------------------------------------------ groups


def _underpowered_text(members: Sequence[Mapping[str, Any]], kinds: Kinds) -> str:
    """Each kind's own words for its underpowered outcomes (what decides them), in registry order;
    the outcomes of kinds without such words by name."""
    parts: list[str] = []
    said: set[int] = set()
    for name, kind in kinds.items():
        section = kind.report
        own = [c for c in members if c.get("kind") == name]
        if own and section is not None and section.underpowered is not None:
            parts.append(section.underpowered(own))
            said.update(id(c) for c in own)
    others = [c for c in members if id(c) not in said]
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
        kinds_text = _breakdown(kinds)
        text = (
            f"{_plural(len(found), 'outcome')} need {need} ({kinds_text})"
            + (f"; this machine has {_clip(here, 60)}" if here else "")
            + f"; run them there with --hardware {shlex.quote(acc)} and merge"
        )
        groups.append(ReasonGroup("hardware", "Not on this machine", len(found), text))
    return groups


def _breakdown(kinds: Counter[str], shown: int = 4) -> str:
    """'kernels ×90, evals ×4, ...': the kinds most common first; the rest summed as 'N others', so
    the parts always add up to the line's count."""
    top = kinds.most_common()
    if len(top) > shown + 1:
        rest = sum(n for _, n in top[shown:])
        top = [*top[:shown], (f"{len(kinds) - shown} other kinds", rest)]
    return ", ".join(f"{k} ×{n}" for k, n in top)


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


def _policy_groups(checks: list[Mapping[str, Any]]) -> list[ReasonGroup]:
    """A PR that changes the gate's own policy (--policy-from) is the first line, accepted or not."""
    out = []
    for c in checks:
        changes = _as_map(c.get("measurements")).get("changes")
        if not str(c.get("id", "")).endswith("#policy") or not isinstance(changes, list) or not changes:
            continue
        shown = [x for x in changes if isinstance(x, Mapping) and x.get("loosens")] or [
            x for x in changes if isinstance(x, Mapping)
        ]
        text = "this PR changes the gate's policy: " + "; ".join(str(x.get("text")) for x in shown[:4])
        if len(shown) > 4:
            text += f"; and {len(shown) - 4} more"
        if c.get("status") == "failed":
            text += " — not accepted: judged by the base's rules, and failed"
        elif _as_map(c.get("measurements")).get("accepted") is True:
            text += " — accepted with --accept-policy-change"
        out.append(ReasonGroup("policy", "Policy changed", 1, text))
    return out


def reason_groups(evidence: Mapping[str, Any], kinds: Kinds) -> list[ReasonGroup]:
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
    groups: list[ReasonGroup] = _policy_groups(checks)
    if failed:
        groups.append(ReasonGroup("failed", "Failed", len(failed), _name_checks(failed)))
    if errored:
        groups.append(ReasonGroup("errored", "Errored", len(errored), _name_checks(errored, codes=True)))
    if underpowered:
        groups.append(
            ReasonGroup("underpowered", "Underpowered", len(underpowered), _underpowered_text(underpowered, kinds))
        )
    if uncovered:
        groups.append(ReasonGroup("uncovered", "Not covered", len(uncovered), _name_checks(uncovered)))
    if interrupted or run.get("state") not in (None, "complete"):
        state = run.get("state") or "unknown"
        text = {
            "complete": "some checks did not run",
            "running": "the run has not finished (still running, or killed)",
        }.get(str(state), f"the run ended {state}")
        if interrupted:
            per_kind = Counter(str(c.get("kind")) for c in interrupted)
            text += (
                f"; {_plural(len(interrupted), 'outcome')} did not run ("
                + ", ".join(f"{k} ×{n}" if n > 1 else k for k, n in per_kind.most_common(4))
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


# ------------------------------------------------------------------------------ the screen


def counts_text(evidence: Mapping[str, Any]) -> str:
    return RunCounts.of(evidence).headline()


def first_screen(evidence: Mapping[str, Any], kinds: Kinds) -> FirstScreen:
    """The first screen of the evidence; ``kinds`` (the registry) words their own reasons."""
    groups = reason_groups(evidence, kinds)
    status = str(_as_map(evidence.get("verdict")).get("status", "?"))
    return FirstScreen(
        status,
        counts_text(evidence),
        RunCounts.of(evidence).sizes(),
        tuple(groups[:MAX_GROUPS]),
        max(0, len(groups) - MAX_GROUPS),
        next_step(evidence, [g.key for g in groups], kinds),
        arm_lines(evidence),
    )
