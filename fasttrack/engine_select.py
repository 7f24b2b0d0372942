"""Which plan instances this run executes (--only/--skip/--hardware/--shard), and the digest of
each instance's inputs (for --resume).

``--hardware`` selects scope points by accelerator (as the manifest names it, case and an
``NVIDIA`` prefix ignored; ``here`` means cpu plus the declared accelerators this machine has).
Instances without an accelerator (code confinement, claims lint) belong to every selection."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from fasttrack.errors import UsageError
from fasttrack.runners import RUNNERS, canonical_kind

HARDWARE_KEYS = ("accelerator", "device_count", "tensor_parallel")


def parse_kinds(values: Iterable[str], option: str) -> tuple[str, ...]:
    """'scope,kernels' (repeatable, comma separated, aliases allowed) -> canonical kinds."""
    kinds: list[str] = []
    for value in values:
        for name in value.split(","):
            if not name.strip():
                continue
            kind = canonical_kind(name)
            if kind not in RUNNERS:
                raise UsageError(f"{option}: unknown check kind {name.strip()!r}; known: {', '.join(RUNNERS)} "
                                 "(aliases: scope = scope_diff, kernel, eval, feature, benchmark)")
            if kind not in kinds:
                kinds.append(kind)
    return tuple(kinds)


def parse_shard(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    try:
        index, count = (int(p) for p in text.split("/"))
    except ValueError:
        raise UsageError(f"--shard: expected K/N (e.g. 1/2), got {text!r}") from None
    if count < 1 or not 1 <= index <= count:
        raise UsageError(f"--shard: K/N needs 1 <= K <= N, got {text!r}")
    return index, count


HERE = "here"


def parse_hardware(values: Iterable[str]) -> tuple[str, ...]:
    """'--hardware cpu --hardware "NVIDIA H200"' (comma separated allowed) -> the names given."""
    names: list[str] = []
    for value in values:
        for name in value.split(","):
            name = " ".join(name.split())
            if name and name not in names:
                names.append(name)
    return tuple(names)


def parse_jobs(text: str) -> int:
    """``--jobs N`` (N >= 1) or ``auto`` (one per core)."""
    from fasttrack.engine_jobs import default_jobs

    value = str(text).strip().lower()
    if value == "auto":
        return default_jobs()
    if value.isdigit() and int(value) >= 1:
        return int(value)
    raise UsageError(f"--jobs {text!r}: expected a whole number >= 1 or 'auto'")


def parse_eval_limits(values: Iterable[str]) -> tuple[tuple[str, int | None], ...]:
    """``--eval-limit ID=N`` (N items at most) or ``ID=all`` (the whole data set), repeatable."""
    limits: dict[str, int | None] = {}
    for value in values:
        eval_id, sep, text = value.partition("=")
        eval_id, text = eval_id.strip(), text.strip().lower()
        if not sep or not eval_id or not text:
            raise UsageError(f"--eval-limit {value!r}: expected ID=N or ID=all (e.g. --eval-limit mrcr=all)")
        if text in ("all", "none"):
            limits[eval_id] = None
        elif text.isdigit() and int(text) >= 1:
            limits[eval_id] = int(text)
        else:
            raise UsageError(f"--eval-limit {value!r}: the limit must be a whole number of items >= 1 or 'all'")
    return tuple(limits.items())


def describe_eval_limits(limits: Mapping[str, int | None], declared: Mapping[str, Any] | None = None) -> str:
    """``mrcr=all, aime25=72``; with the manifest's limits: ``mrcr=all (manifest: 16)``."""
    def size(n: Any) -> str:
        return "all" if n is None else str(n)

    return ", ".join(f"{eval_id}={size(n)}" + (f" (manifest: {size(declared.get(eval_id))})" if declared is not None else "")
                     for eval_id, n in limits.items())


def accelerator_key(name: Any) -> str:
    """'NVIDIA-H200', 'nvidia h200' and 'H200' compare equal; so do 'CPU' and 'cpu'."""
    text = " ".join(str(name).lower().replace("-", " ").replace("_", " ").split())
    return text[len("nvidia "):] if text.startswith("nvidia ") else text


def resolve_hardware(requested: Sequence[str], declared: Sequence[str], count_here: Any) -> tuple[str, ...]:
    """The declared accelerator names a --hardware request selects, in the manifest's spelling.
    ``count_here(name)``: how many of that accelerator this machine has (for ``here``).
    Unknown names are a usage error naming what the manifest declares."""
    selected: list[str] = []
    by_key = {accelerator_key(d): d for d in declared}
    for name in requested:
        if name.lower() == HERE:
            matches = [d for d in declared if accelerator_key(d) == "cpu" or count_here(d) > 0]
        elif accelerator_key(name) in by_key:
            matches = [by_key[accelerator_key(name)]]
        else:
            raise UsageError(f"--hardware: {name!r} is not an accelerator the manifest's scope declares; declared: "
                             f"{', '.join(repr(d) for d in declared) or '(none)'} (or 'here': the ones this machine has)")
        selected.extend(m for m in matches if m not in selected)
    if requested and not selected:
        raise UsageError(f"--hardware here: this machine has none of the declared accelerators ({', '.join(declared)})")
    return tuple(selected)


@dataclass(frozen=True)
class Selection:
    only: tuple[str, ...] = ()
    skip: tuple[str, ...] = ()
    shard: tuple[int, int] | None = None
    hardware: tuple[str, ...] = ()  # selected accelerators (empty: all); resolved against the manifest before a run

    def kind_selected(self, kind: str) -> bool:
        return (not self.only or kind in self.only) and kind not in self.skip

    def hardware_selected(self, point: Any) -> bool:
        """Whether a scope point (a ScopePoint, a dims mapping or None) is on selected hardware."""
        if not self.hardware or point is None:
            return True
        accelerator = point.get("accelerator")
        return accelerator is None or accelerator_key(accelerator) in {accelerator_key(h) for h in self.hardware}

    def excluded_kinds(self, kinds: Iterable[str]) -> list[str]:
        return [k for k in dict.fromkeys(kinds) if not self.kind_selected(k)]

    def describe_exclusion(self) -> str:
        parts = []
        if self.only:
            parts.append("--only " + ",".join(self.only))
        if self.skip:
            parts.append("--skip " + ",".join(self.skip))
        return " ".join(parts)

    def describe_hardware(self) -> str:
        return " ".join(f"--hardware {h!r}" if " " in h else f"--hardware {h}" for h in self.hardware)


def group_key(instance: Any) -> str:
    """Instances that share one expensive run (e.g. one pytest session per kernel suite and
    hardware setup) share a key, so a shard never splits them."""
    point = instance.scope_point
    hardware = "" if point is None else ",".join(f"{k}={point.get(k)}" for k in HARDWARE_KEYS if point.get(k) is not None)
    if instance.kind in ("kernels",):
        hardware = "" if point is None else ",".join(f"{k}={point.get(k)}" for k in ("accelerator", "device_count"))
        return f"{instance.kind}/{instance.name}@{hardware}"
    return instance.id


def shard_assignment(instances: Sequence[Any], count: int) -> dict[str, int]:
    """instance id -> shard (1-based): groups are dealt, largest estimated cost first, to the
    least loaded shard. Deterministic: every shard computes the same assignment."""
    groups: dict[str, list[Any]] = {}
    for inst in instances:
        groups.setdefault(group_key(inst), []).append(inst)
    cost = {key: sum(max(float(i.est_seconds), 0.01) for i in members if i.runnable) for key, members in groups.items()}
    load = [0.0] * count
    assignment: dict[str, int] = {}
    for key in sorted(groups, key=lambda k: (-cost[k], k)):
        shard = min(range(count), key=lambda s: (load[s], s))
        load[shard] += cost[key]
        for inst in groups[key]:
            assignment[inst.id] = shard + 1
    return assignment


def inputs_digest(manifest_sha256: str, code_identity: str, instance: Any, tool_version: str) -> str:
    """What a completed outcome depends on: the manifest, the code, the instance's scope point
    and configuration. Equal digests: the outcome may be reused by --resume."""
    point = None if instance.scope_point is None else instance.scope_point.as_dict()
    payload = {
        "manifest": manifest_sha256,
        "code": code_identity,
        "id": instance.id,
        "kind": instance.kind,
        "scope_point": point,
        "config": instance.config,
        "timeout_s": instance.timeout_s,
        "tool": tool_version,
    }
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def hardware_exclusions(run: Mapping[str, Any], checks: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """What ``--hardware`` left out of a run (from plain evidence: ``run`` and ``checks`` dicts):
    accelerator -> {"kind/name": outcomes} of the selected kinds. Empty when the run covered every
    accelerator."""
    selection = Selection(tuple(run.get("only") or ()), tuple(run.get("skip") or ()), hardware=tuple(run.get("hardware") or ()))
    if not selection.hardware:
        return {}
    out: dict[str, dict[str, int]] = {}
    for c in checks:
        point = c.get("scope_point")
        if (c.get("reason_code") != "out_of_scope" or c.get("required", True) or selection.hardware_selected(point)
                or not selection.kind_selected(c["kind"])):  # kinds left out by --only/--skip are listed as such
            continue
        names = out.setdefault(str(point.get("accelerator")), {})
        key = f"{c['kind']}/{c['name']}"
        names[key] = names.get(key, 0) + 1
    return out


def describe_hardware_exclusions(exclusions: Mapping[str, Mapping[str, int]], limit: int = 12) -> list[str]:
    """One line per excluded accelerator, naming its checks: 'NVIDIA H200: 34 outcomes: kernels/k x12, ...'."""
    lines = []
    for accelerator, names in exclusions.items():
        parts = [f"{name} x{n}" if n > 1 else name for name, n in names.items()]
        shown = ", ".join(parts[:limit]) + (f" and {len(parts) - limit} more" if len(parts) > limit else "")
        total = sum(names.values())
        lines.append(f"{accelerator}: {total} outcome{'s' if total != 1 else ''}: {shown}")
    return lines
