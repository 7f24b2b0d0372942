"""A server's proof of path from its own log (``proof.log_signature``): a regular expression that
must appear in the candidate server's log and never in the baseline's, e.g. the line a new MoE
backend prints when it is chosen. Besides the metrics counter, or alone (``proof.source: log``)
for a PR that adds no counter."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fasttrack.evidence import Status

if TYPE_CHECKING:
    from fasttrack.manifest import Manifest

LOG_READ_BYTES = 16 * 1024 * 1024  # searched at each end of a bigger log: start-up lines and the latest ones


def signatures_in_logs(manifest: Manifest, logs: Sequence[Path]) -> dict[str, bool | None]:
    """Per switch with a log signature: whether it appears in ``logs`` (None: no log to search,
    e.g. a server reached at a url)."""
    found: dict[str, bool | None] = {}
    texts = [_read(path) for path in logs if path.exists()]
    for switch in manifest.switches:
        pattern = switch.proof.log_signature if switch.proof is not None else None
        if pattern:
            regex = re.compile(pattern, re.MULTILINE)
            found[switch.name] = any(regex.search(text) for text in texts) if texts else None
    return found


def log_signature_problems(
    manifest: Manifest, point: Mapping[str, Any] | None, signed: Mapping[str, Mapping[str, bool | None]]
) -> tuple[Status, str, str] | None:
    """What the logs say against the switches: (status, reason code, reason), or None when fine."""
    stock, candidate = signed.get("baseline") or {}, signed.get("candidate") or {}
    for switch in manifest.switches:
        pattern = switch.proof.log_signature if switch.proof is not None else None
        if not pattern:
            continue
        if stock.get(switch.name) is None or candidate.get(switch.name) is None:
            return (
                Status.ERRORED,
                "target",
                f"switch {switch.name}: no server log to search for its log signature {pattern!r} "
                "(fasttrack must start the servers to read their logs)",
            )
        if stock[switch.name]:
            return (
                Status.FAILED,
                "switch_default_on",
                f"switch {switch.name}: its log signature {pattern!r} appeared in the stock server's log",
            )
        if switch.inert_at(point or {}) and candidate[switch.name]:
            return (
                Status.FAILED,
                "acts_out_of_scope",
                f"switch {switch.name} must not act here (inert), but its log signature {pattern!r} appeared in "
                "the candidate server's log",
            )
        if switch.acts_at(point or {}) and not candidate[switch.name]:
            return (
                Status.FAILED,
                "path_not_exercised",
                f"switch {switch.name}: its log signature {pattern!r} never appeared in the candidate server's log",
            )
    return None


def _read(path: Path) -> str:
    with path.open("rb") as f:
        size = f.seek(0, 2)
        f.seek(0)
        if size <= 2 * LOG_READ_BYTES:
            return f.read().decode("utf-8", errors="replace")
        head = f.read(LOG_READ_BYTES)
        f.seek(size - LOG_READ_BYTES)
        return (head + b"\n" + f.read()).decode("utf-8", errors="replace")
