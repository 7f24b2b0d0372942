"""The typed measurements of an outcome: each kind's model is a frozen dataclass read from the
outcome's plain JSON (``measurements``) with `Measurements.read`, which validates as it reads:
a value of the wrong type reads as missing (None, an empty tuple or mapping), never as a crash,
so that a reporter shows less and a rule says what is missing. The JSON stays what the runner
wrote (its keys are the evidence format); the model is how every reader sees it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self

from fasttrack.kinds.reading import mapping


@dataclass(frozen=True)
class Measurements:
    """The base of every kind's model: ``raw`` is the JSON as recorded (for generic displays)."""

    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def read(cls, data: Any) -> Self:
        """The model of ``data`` (an outcome's ``measurements``; anything else reads as empty)."""
        return cls(raw=mapping(data))

    @classmethod
    def of(cls, outcome: Mapping[str, Any]) -> Self:
        """The model of an outcome's measurements (plain evidence JSON)."""
        return cls.read(outcome.get("measurements"))

    def __bool__(self) -> bool:
        """Whether anything was recorded (an outcome that did not run records nothing)."""
        return bool(self.raw)
