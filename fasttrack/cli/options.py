"""Option parsers shared by the commands: text from the command line -> typed values, or a
UsageError that names the option."""

from __future__ import annotations

from collections.abc import Iterable

from fasttrack.errors import UsageError
from fasttrack.kinds.base import Kinds, canonical_kind


def parse_kinds(values: Iterable[str], option: str, known: Kinds) -> tuple[str, ...]:
    """'scope,kernels' (repeatable, comma separated, aliases allowed) -> canonical kinds of ``known``."""
    kinds: list[str] = []
    for value in values:
        for name in value.split(","):
            if not name.strip():
                continue
            kind = canonical_kind(known, name)
            if kind not in known:
                raise UsageError(
                    f"{option}: unknown check kind {name.strip()!r}; known: {', '.join(known)} "
                    "(aliases: scope = scope_diff, kernel, eval, feature, benchmark)"
                )
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
    from fasttrack.engine.jobs import default_jobs

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
