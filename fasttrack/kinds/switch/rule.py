"""Switch and proof of path: a pass needs decode steps recorded
with default settings, none of them on the optimised path, and the optimised path at every
batch the proof exercises with the switch on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fasttrack.kinds.reading import Subject, number, status
from fasttrack.kinds.switch.counters import expected_path, proof_batches
from fasttrack.kinds.switch.measurements import SwitchMeasurements


def check(outcome: Mapping[str, Any], subject: Subject) -> list[str]:
    state = status(outcome)
    if state not in ("passed", "failed"):
        return []
    m = SwitchMeasurements.of(outcome)
    if str(outcome.get("id", "")).endswith("#census"):
        return census(state, m)
    if m.switches is not None:
        return switches(state, m.switches, subject, outcome.get("scope_point"), m.inert_outputs_match) + uncounted(
            state, m, subject, outcome.get("scope_point")
        )
    expected = expected_path(subject.manifest)
    default = m.default_path_counts
    by_batch = m.candidate_by_batch
    if default is None or by_batch is None:
        return [f"{state}, but it records no decode steps by path (default_path_counts, candidate_by_batch)"]
    on_by_default = (number(default.get(expected)) or 0.0) > 0
    batches = [str(b) for b in proof_batches(subject.manifest)]
    missing = [b for b in batches if (number((by_batch.get(b) or {}).get(expected)) or 0.0) <= 0]
    problems = []
    if m.expected_path != expected:
        problems.append(f"it looked for path {m.expected_path!r}; the manifest's switch proves {expected!r}")
    if state == "passed":
        if on_by_default:
            problems.append(f"passed, but the optimised path {expected!r} ran with default settings")
        if not any((number(v) or 0.0) > 0 for v in default.values()):
            problems.append("passed, but no decode step is recorded with default settings")
        if missing:
            problems.append(f"passed, but the optimised path never ran at batch {', '.join(missing)}")
    # A failure is not re-derived: an independent census can fail a path the counts show as taken.
    return problems


def census(state: str, m: SwitchMeasurements) -> list[str]:
    """The census proof at a benchmarked point (``benchmarks/<id>@<point>#census``): a pass needs
    both censuses recorded, no census problem, and the candidate's own counter (where it has one)
    counting steps on every switch's path."""
    problems = m.census_problems
    kernels = m.kernels_per_layer
    counter = m.path_counter
    if problems is None or kernels is None:
        return [f"{state}, but it records no census comparison (census_problems, kernels_per_layer)"]
    if state == "failed":
        silent = counter is not None and any((number(v) or 0.0) <= 0 for v in counter.values())
        return [] if problems or silent else ["failed, but it records no census problem and no silent counter"]
    found = []
    if problems:
        found.append(f"passed, but its census shows: {'; '.join(map(str, problems))}")
    if number(kernels.get("baseline")) is None or number(kernels.get("candidate")) is None:
        found.append("passed, but it records no kernels per layer of both sides")
    if counter is not None:
        silent_paths = sorted(str(k) for k, v in counter.items() if (number(v) or 0.0) <= 0)
        if silent_paths:
            found.append(f"passed, but the candidate's counter counted no step on {', '.join(silent_paths)}")
    return found


def switches(
    state: str, judged: Mapping[str, Any], subject: Subject, point: Any, judged_match: Any = None
) -> list[str]:
    """Several switches (``measurements.switches``, one entry per declared switch): a pass needs
    every switch off by default and, where its ``points`` say it acts, its own counter showing
    it at every batch the proof exercises with it on; where it is ``inert``, no step on its path
    and the candidate's greedy answers equal to stock's."""
    if state != "passed":
        return []  # a failure is not re-derived (see above)
    problems = []
    inert_match = judged_match
    for switch in subject.manifest.switches:
        entry = judged.get(switch.name)
        if not isinstance(entry, Mapping):
            problems.append(f"passed, but it records nothing for switch {switch.name!r}")
            continue
        where = point if isinstance(point, Mapping) else {}
        applies = switch.acts_at(where)
        if entry.get("applies") is not applies:
            problems.append(
                f"it says switch {switch.name!r} {'acts' if entry.get('applies') else 'does not act'} here; "
                f"the manifest's points say {'it does' if applies else 'it does not'}"
            )
        if switch.proof is not None and not switch.proof.counted:
            continue  # proven by its log or its census: `uncounted` re-derives it
        if (number(entry.get("default_steps")) or 0.0) > 0:
            problems.append(f"passed, but {switch.name!r} ran with default settings")
        if applies and ((number(entry.get("candidate_steps")) or 0.0) <= 0 or entry.get("missing_at_batch") != []):
            problems.append(f"passed, but with {switch.name!r} on its path did not run at every proof batch")
        if switch.inert_at(where):
            if (number(entry.get("candidate_steps")) or 0.0) > 0:
                problems.append(f"passed, but {switch.name!r} acted where it must not (inert)")
            if inert_match is not True:
                problems.append(f"passed, but it records no equality with stock where {switch.name!r} is inert")
    return problems


def uncounted(state: str, m: SwitchMeasurements, subject: Subject, point: Any) -> list[str]:
    """Switches proven without a counter (``proof.source`` log or census): a pass needs the log
    signature in the candidate's log where the switch acts, never in stock's (nor in the
    candidate's where it is inert), and a census proof with no problem at every proof batch."""
    if state != "passed":
        return []
    where = point if isinstance(point, Mapping) else {}
    problems = []
    signed = m.log_signatures or {}
    census_batches = m.census_by_batch
    for switch in subject.manifest.switches:
        source = switch.proof.source if switch.proof is not None else None
        acting = switch.acts_at(where) and subject.manifest.switch_on(switch, "candidate")
        if switch.proof is not None and switch.proof.log_signature:
            stock = (signed.get("baseline") or {}).get(switch.name)
            seen = (signed.get("candidate") or {}).get(switch.name)
            if stock is not False or seen is None:
                problems.append(f"passed, but it records no clean search of both logs for {switch.name!r}'s signature")
            elif (acting and not seen) or (switch.inert_at(where) and seen):
                problems.append(f"passed, but {switch.name!r}'s log signature says otherwise (candidate: {seen})")
        if source == "census" and acting:
            if not isinstance(census_batches, Mapping) or not census_batches:
                problems.append(f"passed, but it records no census proof for {switch.name!r}")
                continue
            bad = [b for b, c in census_batches.items() if not isinstance(c, Mapping) or c.get("census_problems")]
            if bad:
                problems.append(f"passed, but the census shows problems at batch {', '.join(map(str, bad))}")
    return problems
