"""The kernel census of both sides at a benchmark point (in-process torch targets: their layers
through `fasttrack.targets.protocol.Layered`; servers started with a profiler: through
`fasttrack.targets.protocol.Profiling`), and the
census as the switch's proof of path there (`census_proof`): a path counter is the target's own
word; the kernels a decode step launches are an independent witness of which path ran."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fasttrack.evidence import Status
from fasttrack.manifest.sections import CensusRule, in_region
from fasttrack.probes.adapters import InProcessProbeTarget
from fasttrack.probes.base import CompletionRequest, ProbeTarget
from fasttrack.targets.profiler import differing_operators
from fasttrack.targets.protocol import Layered, Profiling

if TYPE_CHECKING:
    from fasttrack.manifest import Manifest

CENSUS_STEPS = 8
SERVER_CENSUS_STEPS = 4  # a server census: operator counts per step are deterministic; each step costs trace size
# Profiled calls per census side: the fastest of 3 when the census IS the benchmark's metric; one
# when it is only recorded beside a timed rate (its kernel count is deterministic, and on CPU each
# profiled call costs seconds of trace processing: 47 s of a 60 s batch-8 instance with 3).
CENSUS_REPEATS = {"metric": 3, "record": 1}


def kernel_census(
    target: ProbeTarget,
    prompts: Sequence[tuple[int, ...]],
    steps: int = CENSUS_STEPS,
    repeats: int = CENSUS_REPEATS["metric"],
) -> dict[str, Any] | None:
    """Census of one side: an in-process torch target's, or a server's from its own profiler
    (`Profiling`: one profiled window of ``steps`` decode steps at ``len(prompts)`` sequences;
    its operator counts are deterministic, so one window); None for a side with neither."""
    profiler = getattr(target, "profiler", None)
    if isinstance(profiler, Profiling):
        return {**profiler.decode_census(len(prompts), steps), "profiled_calls": 1}
    if not isinstance(target, InProcessProbeTarget):
        return None
    from fasttrack.targets.python.census import census

    def run(tokens: int) -> Callable[[], Any]:
        return lambda: target.complete_batch(
            [CompletionRequest(p, max_tokens=tokens, temperature=0.0, ignore_eos=True) for p in prompts]
        )

    layered = target.target if isinstance(target.target, Layered) else None  # the target's own word
    return {
        **census(
            run(1 + steps),
            run(1),
            steps,
            n_layers=layered.n_layers if layered is not None else None,
            model=layered.model if layered is not None else None,
            repeats=repeats,
        ).to_dict(),
        "profiled_calls": repeats,
    }


def harmonise_census(census: dict[str, dict[str, Any] | None]) -> dict[str, dict[str, Any] | None]:
    """Both sides' per-layer figures by the same method: when one side's decode path bypasses the
    model's layer modules (its figure is per step / layers), the other's is computed that way too."""
    sides = [c for c in census.values() if c is not None]
    if len(sides) < 2 or len({c["layers_source"] for c in sides}) == 1:
        return census
    out: dict[str, dict[str, Any] | None] = {}
    for side, c in census.items():
        if c is None or c["layers_source"] == "divided_by_n_layers" or not c.get("layers"):
            out[side] = c
            continue
        us_step = c["us_per_step"]
        out[side] = {
            **c,
            "kernels_per_layer": c["kernels_per_step"] / c["layers"],
            "us_per_layer": us_step / c["layers"] if us_step is not None else None,
            "layers_source": "divided_by_n_layers",
            "per_layer_from_ranges": {"kernels": c["kernels_per_layer"], "us": c["us_per_layer"]},
        }
    return out


# ---------------------------------------------------------------------------------------------
# The census as proof of path (switch.proof.census), checked at every benchmarked point
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CensusProof:
    """The switch's proof at one benchmarked point, from the census (and the path counter)."""

    status: Status
    reason_code: str | None
    reason: str | None
    measurements: dict[str, Any]


def rule_at(rules: Sequence[CensusRule], point: Mapping[str, Any]) -> CensusRule | None:
    return next((r for r in rules if in_region(point, r.points)), None)


def _same(base: Mapping[str, Any], cand: Mapping[str, Any]) -> bool:
    """Equal kernel counts per step, per name and (GPU) streams: the same decode path."""
    if abs(float(base.get("kernels_per_step") or 0) - float(cand.get("kernels_per_step") or 0)) > 1e-9:
        return False
    if base.get("streams_per_step") != cand.get("streams_per_step"):  # the same kernels, moved to another stream
        return False
    names_b, names_c = base.get("kernel_names") or {}, cand.get("kernel_names") or {}
    return set(names_b) == set(names_c) and all(abs(names_b[k] - names_c[k]) <= 1e-9 for k in names_b)


def _summary(c: Mapping[str, Any], top: int = 8) -> str:
    names = list((c.get("kernel_names") or {}).items())[:top]
    shown = ", ".join(f"{n} x{v:g}" for n, v in names)
    per_layer = c.get("kernels_per_layer")  # None: a server checkpoint whose layer count is unknown here
    layer = f"{per_layer:.1f} per layer" if per_layer is not None else "per layer unmeasured"
    return f"{layer}, {c.get('kernels_per_step', 0):g} per step" + (
        f" ({shown}{', ...' if len(c.get('kernel_names') or {}) > top else ''})" if shown else ""
    )


def census_problems(base: Mapping[str, Any], cand: Mapping[str, Any], rule: CensusRule | None) -> list[str]:
    """What the candidate's census breaks: its rule's ratio and names, or (no rule) equality with stock."""
    problems = []
    if _same(base, cand):
        problems.append("the candidate's census equals stock's")
    if rule is not None and rule.max_kernels_per_layer_ratio is not None:
        b, c = base.get("kernels_per_layer"), cand.get("kernels_per_layer")
        ratio = (c / b) if b else None
        if ratio is None or ratio > rule.max_kernels_per_layer_ratio:
            shown = f"{ratio:.3f}" if ratio is not None else "unmeasured"
            problems.append(f"kernels per layer candidate/stock {shown} > {rule.max_kernels_per_layer_ratio:g}")
    if rule is not None and rule.min_streams_per_step is not None:
        problems += _stream_problems(base, cand, rule.min_streams_per_step)
    for pattern in rule.kernels_present if rule is not None else ():
        if not any(re.search(pattern, name) for name in cand.get("kernel_names") or {}):
            problems.append(f"no kernel matching {pattern!r} in the candidate's decode step")
    for pattern in rule.kernels_absent if rule is not None else ():
        in_candidate = [name for name in cand.get("kernel_names") or {} if re.search(pattern, name)]
        if in_candidate:
            problems.append(
                f"{', '.join(in_candidate[:3])} (matching {pattern!r}) still in the candidate's decode step"
            )
        elif not any(re.search(pattern, name) for name in base.get("kernel_names") or {}):
            # absent on both sides proves nothing about the candidate: the rule names no kernel stock runs
            problems.append(
                f"no kernel matching {pattern!r} in stock's decode step either, so its absence proves nothing"
            )
    return problems


def _stream_problems(base: Mapping[str, Any], cand: Mapping[str, Any], at_least: int) -> list[str]:
    """A second stream shows only in a GPU trace's kernels: the candidate's step must run on
    ``at_least`` streams and stock's on fewer (else the streams prove nothing about the switch)."""
    b, c = base.get("streams_per_step"), cand.get("streams_per_step")
    if c is None or b is None:
        return [
            f"min_streams_per_step {at_least} needs a GPU census (kernels and their CUDA streams); this one has none"
        ]
    if c < at_least:
        return [f"the candidate's decode step ran its kernels on {c:g} CUDA stream(s), fewer than {at_least}"]
    if b >= at_least:
        return [f"stock's decode step already runs on {b:g} CUDA streams, so {c:g} on the candidate proves nothing"]
    return []


def census_proof(
    census: Mapping[str, Mapping[str, Any] | None],
    rules: Sequence[CensusRule],
    point: Mapping[str, Any],
    counted: Mapping[str, float] | None,
) -> CensusProof | None:
    """Judge the census at one point; None when there is nothing to judge (no census and no rule).

    ``counted``: the candidate's own counter during its census runs, decode steps on the optimised
    path of each switch on here (keyed by that path's name); None when the target has no counter."""
    base, cand = census.get("baseline"), census.get("candidate")
    rule = rule_at(rules, point)
    if base is None or cand is None:
        if not rules:
            return None
        return CensusProof(
            Status.NOT_RUN,
            "dependency",
            "switch.proof.census needs a kernel census, which an in-process torch target gives, or a server "
            "started with vLLM's torch profiler (--profiler-config with a torch_profiler_dir) or SGLang's "
            "(SGLANG_TORCH_PROFILER_DIR in the side's environment)",
            {"census_rule": _rule_dict(rule)},
        )
    problems = census_problems(base, cand, rule)
    expected = sorted(counted) if counted is not None else []
    silent = [path for path in expected if float((counted or {})[path]) <= 0]  # switches whose counter saw no step
    on_path = None if counted is None or not expected else min(float(v) for v in counted.values())
    measurements: dict[str, Any] = {
        "census_rule": _rule_dict(rule) if rule is not None else "the candidate's census differs from stock's",
        "baseline_census": _summary(base),
        "candidate_census": _summary(cand),
        "kernels_per_layer": {"baseline": base.get("kernels_per_layer"), "candidate": cand.get("kernels_per_layer")},
        "path_counter": dict(counted) if counted is not None else None,
        "expected_path": expected[0] if len(expected) == 1 else expected,
        "census_problems": problems,
        # the operators whose per-step counts differ most: what the optimisation changed in a step
        "census_differences": [
            {"name": n, "baseline": b, "candidate": c}
            for n, b, c in differing_operators(base.get("kernel_names") or {}, cand.get("kernel_names") or {})
        ],
    }
    both = f"stock: {_summary(base)}; candidate: {_summary(cand)}"
    if problems:
        said = (
            f"; yet the target's path counter reports {on_path:g} or more decode steps on {', '.join(map(repr, expected))}: "
            "the counter disagrees with the census"
            if on_path
            else ""
        )
        return CensusProof(
            Status.FAILED,
            "path_not_exercised",
            f"the kernel census does not show the optimised path at this point: {'; '.join(problems)} ({both}){said}",
            measurements,
        )
    if silent:
        return CensusProof(
            Status.FAILED,
            "path_not_exercised",
            f"the census differs from stock's, but the target's path counter counted no decode step on {', '.join(map(repr, silent))} "
            f"(counted: {dict(counted or {}) or 'none'}): the counter disagrees with the census ({both})",
            measurements,
        )
    return CensusProof(Status.PASSED, None, None, measurements)


def _rule_dict(rule: CensusRule | None) -> dict[str, Any] | None:
    if rule is None:
        return None
    return {
        "points": {k: list(v) for k, v in rule.points.items()},
        "max_kernels_per_layer_ratio": rule.max_kernels_per_layer_ratio,
        "kernels_present": list(rule.kernels_present),
        "kernels_absent": list(rule.kernels_absent),
        "min_streams_per_step": rule.min_streams_per_step,
    }


def judge_census(
    manifest: Manifest,
    census: Mapping[str, Mapping[str, Any] | None],
    point: Mapping[str, Any],
    counted: Mapping[str, float] | None,
) -> CensusProof | None:
    """The switches' census rules together (the first containing the point) on the census at a
    benchmarked point; None for an ablation arm (the census judges every switch on) or where
    nothing is judged. A rival arm's candidate is judged by the rules of the switches it runs."""
    if manifest.candidate_switches is not None and not manifest.rival_arms:
        return None
    on = [s for s in manifest.switches if manifest.switch_on(s, "candidate")]
    rules = tuple(rule for s in on if s.proof is not None for rule in s.proof.census)
    return census_proof(census, rules, point, counted)


def proof_fields(manifest: Manifest, proof: CensusProof, point: Mapping[str, Any]) -> dict[str, Any]:
    """The census proof as an outcome of the switch check (`RunContext.outcome` fields)."""
    return {
        "kind": "switch",
        "name": manifest.switch_check_name,  # the switch check's name (a rival arm's: with its arm)
        "required": True,
        "reason_code": proof.reason_code,
        "reason": proof.reason,
        "measurements": {"proof": "kernel census at a benchmarked point", "point": dict(point), **proof.measurements},
    }
