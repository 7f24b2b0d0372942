"""A server's proof of path from its kernel census (``proof.source: census``): at each proof batch
both servers profile a few decode steps (vLLM's torch profiler, `fasttrack.targets.protocol.Profiling`)
and the census rules of the census-proven switches judge the candidate's step against stock's.
No counter is read: the kernels a step launches are the witness."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from fasttrack.evidence import Status
from fasttrack.kinds.benchmarks.census import census_proof, harmonise_census

if TYPE_CHECKING:
    from fasttrack.manifest import Manifest
    from fasttrack.manifest.sections import Switch

# One side's census per proof batch, or None when the side cannot profile (no --profiler-config).
SideCensus = dict[int, Mapping[str, Any]] | None


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
    if base is None or cand is None:
        return (
            Status.NOT_RUN,
            "dependency",
            f"switch {names}: its proof is the kernel census, and a server gives one only when started with "
            "vLLM's torch profiler (--profiler-config with a torch_profiler_dir) on both sides",
        )
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
