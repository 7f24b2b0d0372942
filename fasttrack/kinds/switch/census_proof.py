"""A server's proof of path from its kernel census (``proof.source: census``): at each proof batch
both servers profile a few decode steps (their engine's torch profiler: vLLM's or SGLang's,
`fasttrack.targets.protocol.Profiling`) and the census rules of the census-proven switches judge
the candidate's step against stock's. No counter is read: the kernels a step launches are the
witness. A side whose profiler gave no census (`CensusUnavailable`) leaves the proof not run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fasttrack.evidence import Status
from fasttrack.kinds.benchmarks.census import census_proof, harmonise_census
from fasttrack.targets.protocol import CensusUnavailable, Profiling

if TYPE_CHECKING:
    from fasttrack.manifest import Manifest
    from fasttrack.manifest.sections import Switch

# One side's census per proof batch; None when the side cannot profile (no profiler configured);
# a text: why its profiler gave no census (no trace, an unreadable one, no decode-step marks).
SideCensus = dict[int, Mapping[str, Any]] | str | None
# How each engine's server is given its torch profiler, for the reason a census is missing.
PROFILER_HINT = {
    "sglang": "SGLang's torch profiler (SGLANG_TORCH_PROFILER_DIR in target.sglang.env or each side's env)",
}
VLLM_HINT = "vLLM's torch profiler (--profiler-config with a torch_profiler_dir)"


def side_census(profiler: Profiling | None, batches: list[int]) -> SideCensus:
    """One side's census at every proof batch, None without a profiler, or why it has none."""
    if profiler is None:
        return None
    try:
        return {b: profiler.decode_census(b) for b in batches}
    except CensusUnavailable as err:
        return str(err)


def census_proven(manifest: Manifest) -> list[Switch]:
    return [s for s in manifest.switches if s.proof is not None and s.proof.source == "census"]


def census_problems(
    manifest: Manifest,
    point: Mapping[str, Any] | None,
    censuses: Mapping[str, SideCensus],
    measurements: dict[str, Any],
) -> tuple[Status, str, str] | None:
    """What the census says against the census-proven switches acting here: (status, reason code,
    reason), or None when it shows their path at every proof batch (or none acts here)."""
    acting = [s for s in census_proven(manifest) if s.acts_at(point or {}) and manifest.switch_on(s, "candidate")]
    if not acting:
        return None
    rules = tuple(rule for s in acting for rule in s.proof.census)  # type: ignore[union-attr]
    base, cand = censuses.get("baseline"), censuses.get("candidate")
    names = ", ".join(s.name for s in acting)
    unavailable = [f"{side}: {c}" for side, c in (("baseline", base), ("candidate", cand)) if isinstance(c, str)]
    if unavailable:
        return Status.NOT_RUN, "dependency", f"switch {names}: no kernel census to judge; " + "; ".join(unavailable)
    if base is None or cand is None:
        return (
            Status.NOT_RUN,
            "dependency",
            f"switch {names}: its proof is the kernel census, and a server gives one only when started with "
            f"{PROFILER_HINT.get(manifest.target.kind, VLLM_HINT)} on both sides",
        )
    assert not isinstance(base, str) and not isinstance(cand, str)
    by_batch: dict[str, Any] = {}
    failed: list[str] = []
    for batch in sorted(set(base) & set(cand)):
        at = {**(point or {}), "batch": batch}
        both = harmonise_census({"baseline": dict(base[batch]), "candidate": dict(cand[batch])})
        proof = census_proof(both, rules, at, None)
        if proof is None:
            continue
        by_batch[str(batch)] = proof.measurements
        if proof.status is not Status.PASSED:
            failed.append(f"at batch {batch}: {proof.reason}")
    measurements["census_by_batch"] = by_batch
    if not by_batch:
        return Status.NOT_RUN, "dependency", f"switch {names}: no census was taken at any proof batch"
    if failed:
        return Status.FAILED, "path_not_exercised", f"switch {names}: " + "; ".join(failed)
    return None
