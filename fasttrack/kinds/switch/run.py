"""Switches and proof of path: with default settings the target must run the stock path only;
with the switches on (the candidate) each switch's optimised path must run at every exercised
batch size, wherever the switch says it has an effect (its ``points``). A candidate whose
optimised path never executed fails, whatever its accuracy would have been.

Proof comes from the in-process target's ``path_report()`` for python targets (the section
``decode_steps_by_<proof.label>`` when the report has one, else ``decode_steps_by_path`` or a flat
``{path: steps}``), or from the server's Prometheus counter ``proof.metric`` by ``proof.label``
for openai targets (``switch.proof``). Each switch is counted at its ``proof.value`` (default: its
name). One instance per deployment exercises both sides once and judges every switch from the
same counts."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fasttrack.errors import TargetError
from fasttrack.evidence import Artifact, CheckOutcome, Status
from fasttrack.kinds.switch.census_proof import SideCensus, census_problems, census_proven, side_census
from fasttrack.kinds.switch.counters import (
    DEFAULT_GROUP,
    Counts,
    counter_group,
    expected_path,
    proof_batches,
    report_groups,
)
from fasttrack.kinds.switch.log_signature import log_signature_problems, signatures_in_logs
from fasttrack.kinds.switch.scrape import MetricsScraper
from fasttrack.process.cpu import pin_single_thread
from fasttrack.targets.sides import Side, TargetDependencyMissing, open_side

if TYPE_CHECKING:
    from fasttrack.kinds.context import RunContext
    from fasttrack.manifest import Manifest
    from fasttrack.manifest.sections import Switch
    from fasttrack.plan.instance import CheckInstance

PROOF_TOKENS = 4


def exercise(target: Any, batches: list[int]) -> tuple[dict[str, float], dict[int, dict[str, float]]]:
    """Run one short greedy batch per size; the decode steps per path, in total and per batch."""
    total, per_batch = exercise_groups(target, batches, lambda: report_groups(target.path_report(), [DEFAULT_GROUP]))
    return total.get(DEFAULT_GROUP, {}), {b: c.get(DEFAULT_GROUP, {}) for b, c in per_batch.items()}


def exercise_groups(
    target: Any, batches: list[int], read: Callable[[], Counts], answers: list[Any] | None = None
) -> tuple[Counts, dict[int, Counts]]:
    """Run one short greedy batch per size; the decode steps per counter group and path, in total
    and per batch (``read`` takes one snapshot of every counter); the greedy answers into ``answers``."""
    total: Counts = {}
    per_batch: dict[int, Counts] = {}
    for b in batches:
        before = read()
        requests = [
            {"prompt": f"proof of path, request {i}:", "max_tokens": PROOF_TOKENS, "temperature": 0.0, "seed": i}
            for i in range(b)
        ]
        results = target.generate(requests)
        if answers is not None:
            answers.extend(answer_of(r) for r in results)
        after = read()
        here: Counts = {}
        for group in sorted(set(after) | set(before)):
            now, then = after.get(group, {}), before.get(group, {})
            delta = {p: now.get(p, 0.0) - then.get(p, 0.0) for p in set(now) | set(then)}
            here[group] = {p: v for p, v in delta.items() if v}
            summed = total.setdefault(group, {})
            for p, v in here[group].items():
                summed[p] = summed.get(p, 0.0) + v
        per_batch[b] = here
    return total, per_batch


def answer_of(result: Any) -> Any:
    """One greedy answer as it can be compared: its token ids where the target gives them, else its text."""
    if isinstance(result, Mapping):
        return result.get("token_ids") or result.get("text")
    outputs = getattr(result, "outputs", None)
    if outputs:
        first = outputs[0]
        ids = getattr(first, "token_ids", None)
        return list(ids) if ids is not None else getattr(first, "text", None)
    return repr(result)


@dataclass(frozen=True)
class SwitchJudgement:
    """What the counts say about one switch at one deployment."""

    name: str
    value: str  # the path value its steps are counted under
    group: str  # the counter
    applies: bool  # the switch has an effect here (its ``points``)
    default_steps: float
    default_on_at: tuple[int, ...]
    candidate_steps: float
    missing_at: tuple[int, ...]  # batches where the candidate never ran it
    seen: str  # the candidate's counts in that counter, for the reason
    inert: bool = False  # negative scope: the switch must not act here (``inert``)
    proven_by: str = "counter"  # or "log" / "census": no counter, judged from the logs or kernel census

    def measurements(self) -> dict[str, Any]:
        return {
            "path": self.value,
            "counter": self.group,
            "applies": self.applies,
            "inert": self.inert,
            "default_steps": self.default_steps,
            "candidate_steps": self.candidate_steps,
            "missing_at_batch": list(self.missing_at),
            "proven_by": self.proven_by,
        }


def judge_switch(
    manifest: Manifest,
    switch: Switch,
    point: Mapping[str, Any] | None,
    default_by_batch: Mapping[int, Counts],
    candidate_by_batch: Mapping[int, Counts],
) -> SwitchJudgement:
    group, value = counter_group(switch, manifest.target.kind), switch.path_value
    # where it acts (by points, threshold, inert), and on in this candidate (a rival arm's
    # candidate runs the other arms off)
    applies = switch.acts_at(point or {}) and manifest.switch_on(switch, "candidate")
    inert = switch.inert_at(point or {})
    if switch.proof is not None and not switch.proof.counted:  # its logs or census judge it, not counts
        source = switch.proof.source
        return SwitchJudgement(switch.name, value, source, applies, 0.0, (), 0.0, (), "not counted", inert, source)

    def steps(counts: Counts) -> float:
        return counts.get(group, {}).get(value, 0.0)

    seen: dict[str, float] = {}
    for counts in candidate_by_batch.values():
        for path, n in counts.get(group, {}).items():
            seen[path] = seen.get(path, 0.0) + n
    return SwitchJudgement(
        name=switch.name,
        value=value,
        group=group,
        applies=applies,
        inert=inert,
        default_steps=sum(steps(c) for c in default_by_batch.values()),
        default_on_at=tuple(b for b, c in default_by_batch.items() if steps(c) > 0),
        candidate_steps=sum(steps(c) for c in candidate_by_batch.values()),
        missing_at=tuple(b for b, c in candidate_by_batch.items() if steps(c) <= 0),
        seen=", ".join(f"{p}: {v:g}" for p, v in sorted(seen.items())) or "none",
    )


def run(instance: CheckInstance, context: RunContext) -> CheckOutcome:
    m = context.manifest
    batches = proof_batches(m)
    point = instance.scope_point.as_dict() if instance.scope_point is not None else None
    measurements: dict[str, Any] = {"expected_path": expected_path(m), "batches": batches, "source": m.target.kind}
    artifacts: list[Artifact] = []
    if not m.target.serves_http:
        pin_single_thread(m, point)
    try:
        # The baseline is the target with default settings: the switches must be off unless set.
        signed: dict[str, dict[str, bool | None]] = {}
        censuses: dict[str, SideCensus] = {}
        answers: dict[str, list[Any]] = {"baseline": [], "candidate": []}
        default_counts, default_by_batch = exercise_side(
            context, "baseline", batches, point, artifacts, signed, answers["baseline"], censuses
        )
        candidate_counts, candidate_by_batch = exercise_side(
            context, "candidate", batches, point, artifacts, signed, answers["candidate"], censuses
        )
    except TargetDependencyMissing as err:
        return context.outcome(
            instance, Status.NOT_RUN, reason_code="dependency", reason=str(err), measurements=measurements
        )
    except TargetError as err:
        return context.outcome(
            instance,
            Status.ERRORED,
            reason_code="target",
            reason=str(err),
            measurements=measurements,
            artifacts=artifacts,
        )
    judged = [judge_switch(m, s, point, default_by_batch, candidate_by_batch) for s in m.switches]
    first = counter_group(m.switch, m.target.kind)
    measurements.update(
        default_path_counts=default_counts.get(first, {}),
        candidate_path_counts=candidate_counts.get(first, {}),
        default_by_batch={str(b): c.get(first, {}) for b, c in default_by_batch.items()},
        candidate_by_batch={str(b): c.get(first, {}) for b, c in candidate_by_batch.items()},
        switches={j.name: j.measurements() for j in judged},
    )
    unsigned = _log_signatures(m, point, signed, measurements)
    if unsigned is not None:
        status, code, reason = unsigned
        return context.outcome(instance, status, reason_code=code, reason=reason, **_kept(measurements, artifacts))
    problem = _problems(judged, default_counts, candidate_counts, answers, measurements) or census_problems(
        m, point, censuses, measurements
    )
    if problem is not None:
        status, code, reason = problem
        return context.outcome(instance, status, reason_code=code, reason=reason, **_kept(measurements, artifacts))
    if not any(j.applies for j in judged):
        measurements["note"] = "no switch has an effect at this deployment (switch points): checked off by default only"
    return context.outcome(instance, Status.PASSED, measurements=measurements, artifacts=artifacts)


def _problems(
    judged: list[SwitchJudgement],
    default_counts: Counts,
    candidate_counts: Counts,
    answers: Mapping[str, list[Any]],
    measurements: dict[str, Any],
) -> tuple[Status, str, str] | None:
    """What keeps the proof from passing, in order: a switch on by default, no decode step counted
    at all, a switch acting where it must not (or answering unlike stock there), a switch whose path
    never ran where it acts. (status, reason code, reason) or None."""
    on_by_default = [j for j in judged if j.default_steps > 0]
    if on_by_default:
        return (
            Status.FAILED,
            "switch_default_on",
            "; ".join(
                f"with default settings the optimised path {j.value!r} ran {j.default_steps:g} decode steps "
                f"(batch {', '.join(map(str, j.default_on_at))}): the {j.name} switch must be off by default"
                for j in on_by_default
            ),
        )
    counted = any(j.proven_by == "counter" for j in judged)
    if counted and not any(default_counts.values()) and not any(candidate_counts.values()):
        return (
            Status.ERRORED,
            "path_not_exercised",
            "the target reported no decode steps with default settings: its path report proves nothing",
        )
    out_of_scope = _inert_problems(judged, answers, measurements)
    if out_of_scope is not None:
        return Status.FAILED, *out_of_scope
    missing = [j for j in judged if j.applies and j.missing_at]
    if missing:
        return (
            Status.FAILED,
            "path_not_exercised",
            "; ".join(
                f"with {j.name} on, the optimised path {j.value!r} never ran at batch "
                f"{', '.join(map(str, j.missing_at))} (decode steps by {j.group}: {j.seen})"
                for j in missing
            ),
        )
    return None


def _inert_problems(
    judged: list[SwitchJudgement], answers: Mapping[str, list[Any]], measurements: dict[str, Any]
) -> tuple[str, str] | None:
    """Negative scope: where a switch is ``inert``, the candidate (switch on) must take the stock path
    (its counter did not move) and give stock's greedy answers. (reason code, reason) or None."""
    inert = [j for j in judged if j.inert]
    if not inert:
        return None
    same = answers["baseline"] == answers["candidate"]
    measurements["inert_outputs_match"] = same
    acting = [j for j in inert if j.candidate_steps > 0]
    if acting:
        return "acts_out_of_scope", "; ".join(
            f"{j.name} must not act here (inert), but with it on the optimised path {j.value!r} ran "
            f"{j.candidate_steps:g} decode steps"
            for j in acting
        )
    if not same:
        differ = sum(a != b for a, b in zip(answers["baseline"], answers["candidate"]))
        return "mismatch", (
            f"{', '.join(j.name for j in inert)} must not act here (inert), but with it on {differ} of "
            f"{len(answers['baseline'])} greedy answers differ from stock's"
        )
    return None


def _log_signatures(
    m: Manifest, point: Mapping[str, Any] | None, signed: dict[str, dict[str, bool | None]], measurements: dict
) -> tuple[Status, str, str] | None:
    if signed.get("candidate"):
        measurements["log_signatures"] = signed
    return log_signature_problems(m, point, signed)


def _kept(measurements: dict[str, Any], artifacts: list[Artifact]) -> dict[str, Any]:
    return {"measurements": measurements, "artifacts": artifacts}


def exercise_side(
    context: RunContext,
    side: Side,
    batches: list[int],
    point: Mapping[str, Any] | None,
    artifacts: list[Artifact],
    signed: dict[str, dict[str, bool | None]] | None = None,
    answers: list[Any] | None = None,
    censuses: dict[str, SideCensus] | None = None,
) -> tuple[Counts, dict[int, Counts]]:
    """Open one side (the baseline at the target's own default switch settings) and count its
    decode steps per counter around each batch: from ``path_report()`` in-process, from the proof
    counters on ``/metrics`` for a server; a server's census per batch into ``censuses`` where a
    switch's proof is its kernel census."""
    m = context.manifest
    counted = [s for s in m.switches if s.proof is None or s.proof.counted]
    if m.target.serves_http:
        for switch in m.switches:
            proof = switch.proof
            if proof is None or proof.source == "inprocess" or (proof.source == "metrics" and not proof.metric):
                raise TargetError(
                    f"switch {switch.name}: a {m.target.kind} target proves its path by a metrics counter "
                    "(source: metrics, metric, label), its log (source: log) or its kernel census (source: census)"
                )
    groups = sorted({DEFAULT_GROUP, *(counter_group(s, m.target.kind) for s in counted)})
    opened = open_side(m, side, point, log_dir=context.artifact_dir, switch_default=True)
    try:
        if opened.kind == "python":
            target: Any = opened.target
            return exercise_groups(target, batches, lambda: report_groups(target.path_report(), groups), answers)
        scraper = MetricsScraper(opened, [s.proof for s in counted if s.proof is not None])
        exercised = exercise_groups(scraper, batches, scraper.snapshot, answers)
        if censuses is not None and census_proven(m):
            censuses[side] = side_census(opened.profiler, batches)
        return exercised
    finally:
        if signed is not None:
            signed[side] = signatures_in_logs(m, opened.logs)
        opened.close()
        for log in opened.logs:
            if log.exists():
                artifacts.append(context.artifact(log, "log", f"{side} server log"))
