"""How the reports show evidence values: numbers and measurement values for people, scope points,
and outcomes that did not run here. Shared by the reporters and the kinds' report sections; they
read plain evidence JSON, where any value may be missing or of an unexpected type."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping
from typing import Any


def short_point(dims: Mapping[str, Any] | None) -> str:
    """'GB300 ×8 tp8 batch=17' for a scope point's dimensions; 'global' for none."""
    if not dims:
        return "global"
    parts = []
    acc = dims.get("accelerator")
    if acc is not None:
        parts.append(str(acc).replace("NVIDIA ", ""))
    if "device_count" in dims:
        parts.append(f"×{dims['device_count']}")
    if "tensor_parallel" in dims:
        parts.append(f"tp{dims['tensor_parallel']}")
    parts += [
        f"{k}={v}" for k, v in sorted(dims.items()) if k not in ("accelerator", "device_count", "tensor_parallel")
    ]
    return " ".join(parts)


def hardware_label(dims: Mapping[str, Any] | None) -> str:
    """The hardware setup of a scope point: 'cpu ×1 tp2'; 'global' for none."""
    if not dims:
        return "global"
    return (
        short_point({k: dims[k] for k in ("accelerator", "device_count", "tensor_parallel") if k in dims})
        or "any hardware"
    )


# Scope dimensions that vary within one deployment; every other dimension (hardware and engine
# dimensions such as kv_cache_dtype or decode_context_parallel) names the deployment.
WORKLOAD_DIMENSIONS = ("batch", "dtype", "draft_length", "context")
STATUS_ORDER = {"failed": 0, "errored": 1, "not_run": 2, "passed": 3}
# Why an outcome did not run on this machine (hardware, excluded, missing software, interrupted).
ELSEWHERE = ("hardware", "out_of_scope", "dependency", "interrupted", "pending")


def deployment_of(dims: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in dims.items() if k not in WORKLOAD_DIMENSIONS}


def num(value: Any, digits: int = 3, signed: bool = False) -> str:
    """Format a measurement for a table: 'n/a' for missing or non-finite numbers."""
    if isinstance(value, bool) or value is None:
        return "n/a" if value is None else str(value).lower()
    if isinstance(value, int):
        return f"{value:+d}" if signed else str(value)
    if isinstance(value, (dict, list)):
        return "n/a"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "n/a"
        return (
            f"{value:+.{digits}f}"
            if signed
            else f"{value:.{digits}g}"
            if abs(value) < 1e-3 and value
            else f"{value:.{digits}f}"
        )
    return str(value)


def human(value: Any, digits: int = 4) -> str:
    """A value for people: 0.9601063829787234 -> '0.9601', 12345 -> '12,345', 9.5e-07 -> '9.5e-07',
    True -> 'yes', a short list joined, a long one counted; never raw JSON."""
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "n/a"
        if value == 0:
            return "0"
        if abs(value) < 1e-3 or abs(value) >= 1e9:
            return f"{value:.2e}"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.{digits}g}"
    if isinstance(value, Mapping):
        return "; ".join(f"{k} {human(v, digits)}" for k, v in list(value.items())[:8]) + (
            f"; +{len(value) - 8} more" if len(value) > 8 else ""
        )
    if isinstance(value, (list, tuple)):
        if any(isinstance(v, (Mapping, list, tuple)) for v in value):
            return f"{len(value)} entr{'y' if len(value) == 1 else 'ies'}"
        shown = ", ".join(human(v, digits) for v in value[:8])
        return shown + (f", … (+{len(value) - 8})" if len(value) > 8 else "")
    text = str(value)
    return text if len(text) <= 200 else text[:199] + "…"


def key_text(name: Any) -> str:
    """A measurement key for people: 'max_mean_kl' -> 'max mean kl'; other keys (paths, test ids) as they are."""
    text = str(name)
    return text.replace("_", " ") if text.replace("_", "").isalnum() else text


def details_list(value: Any, *, skip: Iterable[str] = ("reason", "status"), limit: int = 24) -> list[tuple[str, str]]:
    """A measurement mapping as (key, value) pairs for a key/value list: mappings one level deep
    flattened to 'outer.inner' keys (deeper ones summarised on one line), numbers formatted for
    people, long lists counted, at most ``limit`` pairs. ``reason``/``status`` repeat the row's own."""
    pairs: list[tuple[str, str]] = []
    skipped = set(skip)
    for key, item in value.items() if isinstance(value, Mapping) else ():
        if key in skipped or item in (None, "", [], {}):
            continue
        if isinstance(item, Mapping) and len(item) <= 12:
            pairs.extend(
                (f"{key_text(key)}.{key_text(k)}", human(v)) for k, v in item.items() if v not in (None, "", [], {})
            )
        else:
            pairs.append((key_text(key), human(item)))
    if len(pairs) > limit:
        pairs = [*pairs[:limit], ("…", f"{len(pairs) - limit} more values in evidence.json")]
    return pairs


def elsewhere_lines(checks: Iterable[Mapping[str, Any]], audit_kinds: Collection[str] = ()) -> list[dict[str, Any]]:
    """Outcomes that did not run on this machine (hardware, excluded, missing software, interrupted)
    as one line per accelerator and reason: they carry no measurement, only why (named
    ``kind/name`` for the kinds in ``audit_kinds``)."""
    lines: dict[tuple[str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for c in checks:
        acc = str(as_map(c.get("scope_point")).get("accelerator", "any hardware"))
        lines[(acc, str(c.get("reason_code")))].append(c)
    return [
        {
            "accelerator": acc,
            "count": len(members),
            "code": code,
            "status": members[0]["status"],
            "names": ", ".join(
                f"{n} ×{k}" if k > 1 else n
                for n, k in _counted(
                    f"{m['kind']}/{m['name']}" if m["kind"] in audit_kinds else str(m["name"]) for m in members
                )
            ),
            "reason": why(members[0]),
        }
        for (acc, code), members in lines.items()
    ]


def _counted(names: Iterable[str]) -> list[tuple[str, int]]:
    counts: dict[str, int] = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    return list(counts.items())


def ran_here(checks: Iterable[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """(outcomes with something to show, outcomes that did not run here)."""
    shown: list[Mapping[str, Any]] = []
    elsewhere: list[Mapping[str, Any]] = []
    for c in checks:
        (elsewhere if c["status"] == "not_run" and c.get("reason_code") in ELSEWHERE else shown).append(c)
    return shown, elsewhere


def as_map(value: Any) -> Mapping[str, Any]:
    """Runners own their measurement shapes; a value of an unexpected type reads as empty."""
    return value if isinstance(value, Mapping) else {}


def maps(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, (list, tuple)) else []


def strings(value: Any) -> list[str]:
    return [str(v) for v in value if not isinstance(v, (dict, list))] if isinstance(value, (list, tuple)) else []


def number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def clip(text: Any, limit: int) -> tuple[str, bool]:
    text = "" if text is None else str(text)
    return (text, False) if len(text) <= limit else (text[:limit], True)


def why(check: Mapping[str, Any]) -> str:
    """Why an outcome did not pass, without the scope point its row already names."""
    if check.get("status") == "passed":
        return ""
    reason = str(check.get("reason") or check.get("reason_code") or "")
    point = check.get("scope_point_id")
    return reason.replace(f" at {point}", "") if point else reason
