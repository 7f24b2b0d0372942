"""``fasttrack check --policy-from REF``: the outcome that records the pull request's manifest
against the base's (``fasttrack.manifest.policy``, which also gives the manifest the run uses).

The outcome is ``scope_diff/code_paths#policy`` (kind ``scope_diff``, required whatever the
selection): failed while a loosening change is not accepted, passed otherwise; its measurements
are the base ref, the base manifest's sha256 and every change. `verify` re-derives its status
from them (``fasttrack.kinds.scope_diff.rule``) and `merge` keeps the worst of the parts'."""

from __future__ import annotations

from fasttrack.evidence import CheckOutcome, Status
from fasttrack.manifest.policy import Policy, headline

POLICY_ID = "scope_diff/code_paths#policy"


def policy_outcome(policy: Policy) -> CheckOutcome:
    measurements = {
        "policy_from": policy.ref,
        "base_manifest_sha256": policy.base_sha256,
        "changes": [c.to_dict() for c in policy.changes],
        "accepted": policy.accepted,
    }
    reason, code, status = None, None, Status.PASSED
    if policy.refused:
        reason = (
            f"{headline(list(policy.changes))}; the base's ({policy.ref}) rules were applied instead; a reviewer "
            "who accepts the change runs again with --accept-policy-change"
        )
        status, code = Status.FAILED, "policy_changed"
    name = f"gate policy against {policy.ref}"
    return CheckOutcome(
        POLICY_ID, "scope_diff", name, status, None, None, True, code, reason, measurements=measurements
    )
