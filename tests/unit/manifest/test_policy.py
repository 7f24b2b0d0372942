"""#35 row 3: which manifest changes loosen the gate's policy, and the rules put back."""

from __future__ import annotations

import copy

from fasttrack.manifest.policy import effective_data, headline, loosening, policy_changes

BASE = {
    "model": {"code_paths": ["m/**"], "allowed_paths": ["tests/**"]},
    "scope": {"batch": {"points": [1, 17, 32]}, "hardware": [{"accelerator": "cpu", "device_counts": [1]}]},
    "evals": [{"id": "mrcr", "margin": 0.02, "alpha": 0.05}],
    "preserve": {"full_context": True},
    "stock_unchanged": {"required": True},
}


def changed(**edits) -> dict:
    pr = copy.deepcopy(BASE)
    for path, value in edits.items():
        node = pr
        *parents, last = path.split("__")
        for key in parents:
            node = node[int(key)] if key.isdigit() else node[key]
        node[last] = value
    return pr


def texts(pr: dict) -> list[str]:
    return [c.text for c in loosening(policy_changes(BASE, pr))]


def test_loosening_changes_are_named():
    assert texts(changed(model__allowed_paths=["tests/**", "**"])) == ["allowed_paths gained `**`"]
    assert texts(changed(scope__batch__points=[1, 32])) == ["scope.batch.points lost 17"]
    assert texts(changed(evals__0__margin=0.2)) == ["evals[mrcr].margin changed 0.02 → 0.2"]
    assert texts(changed(evals__0__alpha=0.2)) == ["evals[mrcr].alpha changed 0.05 → 0.2"]
    assert texts(changed(evals=[])) == ["evals lost `mrcr`"]
    assert texts(changed(preserve__full_context=False)) == ["preserve.full_context changed True → False"]
    assert texts(changed(stock_unchanged__required=False)) == ["stock_unchanged.required changed True → False"]


def test_tightening_is_recorded_but_does_not_loosen():
    pr = changed(evals__0__margin=0.01, scope__batch__points=[1, 2, 17, 32], model__allowed_paths=[])
    changes = policy_changes(BASE, pr)
    assert changes and not loosening(changes)
    assert policy_changes(BASE, copy.deepcopy(BASE)) == []


def test_the_base_rules_are_put_back_and_the_rest_of_the_pr_kept():
    pr = changed(model__allowed_paths=["**"], evals__0__margin=0.5, scope__batch__points=[1])
    pr["evals"][0]["limit"] = 8
    out = effective_data(BASE, pr)
    assert out["model"]["allowed_paths"] == ["tests/**"] and out["scope"] == BASE["scope"]
    assert out["evals"][0] == {"id": "mrcr", "margin": 0.02, "alpha": 0.05, "limit": 8}
    assert headline(policy_changes(BASE, pr)).startswith("this PR changes the gate's policy: allowed_paths gained `**`")
