"""The parts `fasttrack merge` joins are untrusted (uploaded by shard jobs, or handed over by
anyone): each must verify as `fasttrack verify` would verify it — canonical bytes, the recorded
digest, the signature when signers are given, each status from its own measurements, the plan's
coverage of the part's selection, every artifact's sha256 — before any of its outcomes counts.
Only its verdict and its narrowed selection are not held against it: a part is partial by design."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from fasttrack.errors import EXIT_FAIL, FasttrackError

if TYPE_CHECKING:
    from fasttrack.kinds.base import Kinds

# A part is a piece of one run: its own verdict (INCOMPLETE alone) and its selection are expected.
_PARTIAL_BY_DESIGN = frozenset({"verdict", "whole-scope"})


class PartRejected(FasttrackError):
    """A part of a merge does not verify: the merge refuses it (exit 1, the gate's FAIL)."""

    exit_code = EXIT_FAIL


@dataclass(frozen=True)
class PartChecks:
    kinds: Kinds
    manifest: Path | None = None  # the manifest every part must be for (else each part's own copy)
    allowed_signers: Path | None = None
    policy_from: str | None = None  # hold each part's manifest to the policy at this git ref
    accept_policy_change: bool = False


def require_verified(folder: Path, checks: PartChecks) -> None:
    """PartRejected naming ``folder`` and what does not verify, unless the part verifies."""
    from fasttrack.verification.verify import VerifyOptions, verify

    options = VerifyOptions(
        folder,
        checks.manifest,
        None,
        checks.allowed_signers,
        allow_partial=True,
        policy_from=checks.policy_from,
        accept_policy_change=checks.accept_policy_change,
    )
    failures = [f for f in verify(options, checks.kinds).failures if f.name not in _PARTIAL_BY_DESIGN]
    if failures:
        raise PartRejected(
            f"fasttrack merge: part {folder} does not verify, so nothing of it is merged: "
            + "; ".join(f"{f.name}: {f.message}" for f in failures)
        )
