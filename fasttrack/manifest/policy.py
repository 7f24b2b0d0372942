"""The gate's policy comes from the base branch, not from the pull request it judges.

The rules that protect reviewers — the code, allowed and gated paths, the scope, the margins and
alphas of the statistical checks, which checks are required, the entries of the check sections,
the ``preserve`` promises — are read from the manifest at ``--policy-from REF`` (``git show
REF:path``). ``policy_changes`` lists how the pull request's manifest differs there, each change
marked when it loosens a rule ("allowed_paths gained `**`"). When one does and the change is not
accepted (``--accept-policy-change``), ``effective_data`` puts the base's rules back, so every
check judges the change by the rules the reviewers approved, and the run fails naming the change.
Direction is judged conservatively: a changed alpha, a changed scope value, a lost entry or
scope value, a gained path, a larger margin, a required check made optional all loosen.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fasttrack.manifest.model import Manifest

PATH_RULES = ("code_paths", "allowed_paths", "gated_paths")
# Sections whose entries are checks (matched between the two manifests by id or name).
ENTRY_SECTIONS = ("kernel_tests", "evals", "features", "benchmarks", "audits", "claims")
TUNED_KEYS = ("alpha", "margin", "required")


@dataclass(frozen=True)
class PolicyChange:
    where: str  # a manifest path, e.g. model.allowed_paths
    text: str  # what changed, e.g. "allowed_paths gained `**`"
    loosens: bool

    def to_dict(self) -> dict[str, Any]:
        return {"where": self.where, "text": self.text, "loosens": self.loosens}


def policy_changes(base: Mapping[str, Any], pr: Mapping[str, Any]) -> list[PolicyChange]:
    """How ``pr``'s rules differ from ``base``'s (both plain manifest data)."""
    changes = list(_path_rules(base.get("model") or {}, pr.get("model") or {}))
    changes += _tree("scope", base.get("scope"), pr.get("scope"))
    changes += _tree("preserve", base.get("preserve"), pr.get("preserve"))
    for section in ENTRY_SECTIONS:
        changes += _entries(section, base.get(section), pr.get(section))
    for key in ("divergence", "stock_unchanged"):
        changes += list(_tuned(key, base.get(key), pr.get(key)))
    return changes


def loosening(changes: list[PolicyChange]) -> list[PolicyChange]:
    return [c for c in changes if c.loosens]


def headline(changes: list[PolicyChange]) -> str:
    """The first-screen line: "this PR changes the gate's policy: allowed_paths gained `**`; ..."."""
    shown = loosening(changes) or changes
    more = f"; and {len(shown) - 4} more" if len(shown) > 4 else ""
    return "this PR changes the gate's policy: " + "; ".join(c.text for c in shown[:4]) + more


def effective_data(base: Mapping[str, Any], pr: Mapping[str, Any]) -> dict[str, Any]:
    """``pr`` with the base's rules put back: paths, scope, preserve, and every tuned value of an
    entry both manifests have."""
    out = copy.deepcopy(dict(pr))
    model = dict(out.get("model") or {})
    for key in PATH_RULES:
        if key in (base.get("model") or {}):
            model[key] = copy.deepcopy(base["model"][key])
        else:
            model.pop(key, None)
    out["model"] = model
    for key in ("scope", "preserve", "divergence", "stock_unchanged"):
        if key in base:
            out[key] = copy.deepcopy(base[key])
    for section in ENTRY_SECTIONS:
        theirs = {_key(e, n): e for n, e in enumerate(base.get(section) or ()) if isinstance(e, Mapping)}
        for n, entry in enumerate(out.get(section) or ()):
            old = theirs.get(_key(entry, n)) if isinstance(entry, Mapping) else None
            if old is not None:
                out[section][n] = _with_tuned(entry, old)
    return out


def base_manifest_text(root: Path, rel: str, ref: str) -> str | None:
    """The text of the manifest at ``rel`` (relative to the repository ``root``) at ``ref``
    (None: the manifest does not exist there, a new one); UsageError when ``ref`` is not a
    commit of the repository."""
    import subprocess

    from fasttrack.errors import UsageError

    done = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd=root, capture_output=True
    )
    if done.returncode != 0:
        raise UsageError(f"--policy-from {ref}: not a commit of the repository at {root}")
    shown = subprocess.run(["git", "show", f"{ref}:{rel}"], cwd=root, capture_output=True)
    return shown.stdout.decode("utf-8", "replace") if shown.returncode == 0 else None


@dataclass(frozen=True)
class Policy:
    """The pull request's manifest against the base's: the ref, the base manifest's sha256 (None
    when the manifest is new there), every change, and whether a reviewer accepted them."""

    ref: str
    base_sha256: str | None
    changes: tuple[PolicyChange, ...]
    accepted: bool

    @property
    def refused(self) -> bool:
        return bool(loosening(list(self.changes))) and not self.accepted


def apply_policy(
    manifest: Manifest, rel: str, ref: str, accepted: bool, root: Path | None = None
) -> tuple[Manifest, Policy]:
    """The manifest to judge by (the base's rules put back when a loosening is refused) and the
    policy. ``rel``: the manifest's path in the repository at ``root`` (default: the manifest's)."""
    import hashlib
    from dataclasses import replace

    from fasttrack.errors import ManifestError, UsageError
    from fasttrack.manifest.loader import check_text, load_manifest_data

    root = Path(root or manifest.root)
    text = base_manifest_text(root, rel, ref)
    if text is None:
        return manifest, Policy(ref, None, (), accepted)
    loaded, problems = check_text(text)
    if not isinstance(loaded.data, dict) or any(p.severity == "error" for p in problems):
        raise UsageError(f"--policy-from {ref}: the base's {rel} does not validate, so it cannot give the policy")
    policy = Policy(
        ref, hashlib.sha256(text.encode()).hexdigest(), tuple(policy_changes(loaded.data, manifest.data)), accepted
    )
    if not policy.refused:
        return manifest, policy
    try:
        effective = load_manifest_data(effective_data(loaded.data, manifest.data), rel, manifest.sha256, manifest.root)
    except ManifestError as err:
        raise UsageError(
            f"--policy-from {ref}: the pull request's manifest with the base's rules put back does not validate "
            f"({'; '.join(err.problems[:2])}); the change to the policy needs --accept-policy-change"
        ) from None
    return replace(effective, path=manifest.path), policy


def _path_rules(base: Mapping[str, Any], pr: Mapping[str, Any]) -> Iterator[PolicyChange]:
    for key in PATH_RULES:
        old, new = list(base.get(key) or ()), list(pr.get(key) or ())
        for path in new:
            if path not in old:
                yield PolicyChange(f"model.{key}", f"{key} gained `{path}`", True)
        for path in old:
            if path not in new:
                yield PolicyChange(f"model.{key}", f"{key} lost `{path}`", False)


def _tree(where: str, base: Any, pr: Any) -> list[PolicyChange]:
    """Scope-like trees: a lost value or key, or any changed scalar, loosens; a gained one tightens."""
    if isinstance(base, Mapping) and isinstance(pr, Mapping):
        out = []
        for key in dict.fromkeys([*base, *pr]):
            if key not in pr:
                out.append(PolicyChange(f"{where}.{key}", f"{where}.{key} removed", True))
            elif key not in base:
                out.append(PolicyChange(f"{where}.{key}", f"{where}.{key} added", False))
            else:
                out += _tree(f"{where}.{key}", base[key], pr[key])
        return out
    if isinstance(base, list) and isinstance(pr, list) and base != pr:
        lost = [v for v in base if v not in pr]
        gained = [v for v in pr if v not in base]
        out = [PolicyChange(where, f"{where} lost {_short(v)}", True) for v in lost]
        return out + [PolicyChange(where, f"{where} gained {_short(v)}", False) for v in gained]
    if base != pr:
        return [PolicyChange(where, f"{where} changed {_short(base)} → {_short(pr)}", True)]
    return []


def _entries(section: str, base: Any, pr: Any) -> list[PolicyChange]:
    theirs = {_key(e, n): e for n, e in enumerate(base or ()) if isinstance(e, Mapping)}
    ours = {_key(e, n): e for n, e in enumerate(pr or ()) if isinstance(e, Mapping)}
    out = [PolicyChange(section, f"{section} lost `{k}`", True) for k in theirs if k not in ours]
    for key, entry in ours.items():
        if key in theirs:
            out += list(_tuned(f"{section}[{key}]", theirs[key], entry))
    return out


def _tuned(where: str, base: Any, pr: Any) -> Iterator[PolicyChange]:
    """Margins (larger loosens), alphas (any change), required (true → false) at any depth."""
    if isinstance(base, Mapping) and isinstance(pr, Mapping):
        for key in base:
            if key in TUNED_KEYS and base.get(key) != pr.get(key):
                yield _tuned_change(f"{where}.{key}", key, base.get(key), pr.get(key))
            elif key in pr:
                yield from _tuned(f"{where}.{key}", base[key], pr[key])
    elif isinstance(base, Mapping) and pr is None:
        yield PolicyChange(where, f"{where} removed", True)


def _tuned_change(where: str, key: str, old: Any, new: Any) -> PolicyChange:
    if key == "margin" and isinstance(old, (int, float)) and isinstance(new, (int, float)):
        loosens = new > old
    elif key == "required":
        loosens = old is not False and new is False
    else:
        loosens = True
    return PolicyChange(where, f"{where} changed {_short(old)} → {_short(new)}", loosens)


def _with_tuned(entry: Mapping[str, Any], base: Mapping[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(dict(entry))
    for key, value in base.items():
        if key in TUNED_KEYS:
            out[key] = copy.deepcopy(value)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _with_tuned(out[key], value)
    for key in TUNED_KEYS:
        if key in out and key not in base:
            del out[key]
    return out


def _key(entry: Mapping[str, Any], index: int) -> str:
    return str(entry.get("id") or entry.get("name") or f"#{index}")


def _short(value: Any) -> str:
    text = f"`{value}`" if isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "…"
