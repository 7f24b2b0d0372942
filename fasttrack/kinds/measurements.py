"""The typed measurements of an outcome: each kind's model is a frozen dataclass read from the
outcome's plain JSON (``measurements``) by `Record.read`, which validates as it reads: a value of
the wrong type reads as missing (None), never as a crash, so that a reporter shows less and a
rule says what is missing. The JSON stays what the runner wrote (its keys are the evidence
format, and its digest is over them); the model is how every reader sees it.

A field's type says how its value is read (`read_value`):

- ``float | None``: a finite number (an int stays an int); ``int | None``: a count (a whole
  number >= 0); ``str | None``, ``bool | None``: that type;
- ``Mapping[str, Any]``: a mapping (else empty); ``... | None``: else None;
- ``tuple[str, ...] | None``: a list of strings only; ``tuple[float | None, ...] | None``: a list,
  each item read as a number; ``tuple[SomeRecord, ...] | None``: a list, its mappings read as
  records; ``tuple[Any, ...] | None``: a list as it is;
- a `Record` type: a mapping read as that record (``| None``: else None);
- ``Any``: as recorded.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Self, Union, get_args, get_origin

from fasttrack.kinds.reading import count, mapping, number


@dataclass(frozen=True)
class Record:
    """A typed view of one JSON object of the evidence (module docstring)."""

    @classmethod
    def read(cls, data: Any) -> Self:
        """``data`` (anything: a non-mapping reads as empty) as this record."""
        source = mapping(data)
        values = {name: read_value(hint, source.get(name)) for name, hint in _hints(cls).items()}
        return cls(**values)


@dataclass(frozen=True)
class Measurements(Record):
    """The base of every kind's model. ``raw`` is the JSON as recorded, for generic displays
    (the report's key/value lists) and for what no field names."""

    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def read(cls, data: Any) -> Self:
        record = super().read(data)
        object.__setattr__(record, "raw", mapping(data))
        return record

    @classmethod
    def of(cls, outcome: Mapping[str, Any]) -> Self:
        """The model of an outcome's measurements (plain evidence JSON)."""
        return cls.read(outcome.get("measurements"))

    def __bool__(self) -> bool:
        """Whether anything was recorded (an outcome that did not run records nothing)."""
        return bool(self.raw)

    def compared(self) -> Comparable | None:
        """The value `fasttrack check --previous` and the dashboard compare across runs (None:
        this kind has none)."""
        return None


@dataclass(frozen=True)
class Comparable:
    """One value a run measured with its one-sided bounds, compared across runs (fasttrack.history)."""

    what: str  # "speed-up" | "candidate mean"
    value: float | None
    bounds: tuple[float | None, ...] | None


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    """A record's fields and their types (resolved once per class)."""
    if cls not in _HINTS:
        hints = typing.get_type_hints(cls)
        _HINTS[cls] = {f.name: hints[f.name] for f in fields(cls) if f.name != "raw" and f.init}
    return _HINTS[cls]


def read_value(hint: Any, value: Any) -> Any:
    """``value`` read as ``hint`` says (module docstring)."""
    if hint is Any:
        return value
    origin, args = get_origin(hint), get_args(hint)
    optional = origin in (Union, types.UnionType) and type(None) in args
    if optional:
        inner = [a for a in args if a is not type(None)]
        hint = inner[0] if len(inner) == 1 else Union[tuple(inner)]  # noqa: UP007
        origin, args = get_origin(hint), get_args(hint)
    if hint is float or (origin in (Union, types.UnionType) and set(args) <= {int, float}):
        return number(value)
    if hint is int:
        return count(value)
    if hint in (str, bool):
        return value if isinstance(value, hint) else None
    if isinstance(hint, type) and issubclass(hint, Record):
        if isinstance(value, Mapping):
            return hint.read(value)
        return None if optional else hint.read({})
    if origin is tuple:
        return _tuple(args[0], value)
    if origin in (Mapping, dict) or hint in (Mapping, dict):
        if isinstance(value, Mapping):
            return value
        return None if optional else {}
    raise TypeError(f"no reader for a measurement of type {hint!r}")


def _tuple(item: Any, value: Any) -> tuple[Any, ...] | None:
    if not isinstance(value, (list, tuple)):
        return None
    if item is str:
        return tuple(value) if all(isinstance(v, str) for v in value) else None
    if isinstance(item, type) and issubclass(item, Record):
        return tuple(item.read(v) for v in value if isinstance(v, Mapping))
    if item is Any:
        return tuple(value)
    return tuple(read_value(item, v) for v in value)
