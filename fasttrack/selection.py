"""Which part of a manifest's scope a run covers: check kinds (``--only``/``--skip``) and
accelerators (``--hardware``), and what that left out. Shared by the planner, the engine, merge
and the reports (which read it back from ``evidence.run``).

``--hardware`` selects scope points by accelerator (as the manifest names it, case and an
``NVIDIA`` prefix ignored; ``here`` means cpu plus the declared accelerators this machine has).
Instances without an accelerator (code confinement, claims lint) belong to every selection."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fasttrack.errors import UsageError

HERE = "here"
HARDWARE_KEYS = ("accelerator", "device_count", "tensor_parallel")


def accelerator_key(name: Any) -> str:
    """'NVIDIA-H200', 'nvidia h200' and 'H200' compare equal; so do 'AMD Instinct MI355X' and
    'mi355x', and 'CPU' and 'cpu'."""
    text = " ".join(str(name).lower().replace("-", " ").replace("_", " ").split())
    for prefix in ("nvidia ", "amd instinct ", "amd "):
        if text.startswith(prefix):
            return text[len(prefix) :]
    return text


def resolve_hardware(
    requested: Sequence[str], declared: Sequence[str], count_here: Callable[[str], int]
) -> tuple[str, ...]:
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
            raise UsageError(
                f"--hardware: {name!r} is not an accelerator the manifest's scope declares; declared: "
                f"{', '.join(repr(d) for d in declared) or '(none)'} (or 'here': the ones this machine has)"
            )
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

    @staticmethod
    def of_run(run: Mapping[str, Any]) -> Selection:
        """The selection a run recorded (``evidence.run`` as plain data)."""
        shard = run.get("shard")
        return Selection(
            tuple(run.get("only") or ()),
            tuple(run.get("skip") or ()),
            (int(shard["index"]), int(shard["count"])) if isinstance(shard, Mapping) else None,
            tuple(run.get("hardware") or ()),
        )

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


def hardware_exclusions(run: Mapping[str, Any], checks: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """What ``--hardware`` left out of a run (from plain evidence: ``run`` and ``checks`` dicts):
    accelerator -> {"kind/name": outcomes} of the selected kinds. Empty when the run covered every
    accelerator."""
    selection = Selection.of_run(run)
    if not selection.hardware:
        return {}
    out: dict[str, dict[str, int]] = {}
    for c in checks:
        point = c.get("scope_point")
        if (
            c.get("reason_code") != "out_of_scope"
            or c.get("required", True)
            or selection.hardware_selected(point)
            or not selection.kind_selected(c["kind"])
        ):  # kinds left out by --only/--skip are listed as such
            continue
        names = out.setdefault(str((point or {}).get("accelerator")), {})
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


def describe_eval_limits(limits: Mapping[str, int | None], declared: Mapping[str, Any] | None = None) -> str:
    """``mrcr=all, aime25=72``; with the manifest's limits: ``mrcr=all (manifest: 16)``."""

    def size(n: Any) -> str:
        return "all" if n is None else str(n)

    return ", ".join(
        f"{eval_id}={size(n)}" + (f" (manifest: {size(declared.get(eval_id))})" if declared is not None else "")
        for eval_id, n in limits.items()
    )
