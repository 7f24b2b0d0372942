"""The four counts of a run, defined once and worded the same by the terminal, the report,
summary.md and `verify`:

- declared scope points: the points the manifest's scope expands to (``scope_points``);
- check instances: what the plan runs, one per check and scope point (an outcome id before ``#``);
- outcomes: what the evidence records (an instance may record several, e.g. one per ablation arm);
- required outcomes: the outcomes the verdict counts (the rest are informational or left out by
  --only/--skip/--hardware), by status.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

STATUSES = ("passed", "failed", "errored", "not_run")


@dataclass(frozen=True)
class RunCounts:
    declared_scope_points: int
    check_instances: int
    outcomes: int
    required: Mapping[str, int] = field(default_factory=dict)  # status -> required outcomes

    @property
    def required_outcomes(self) -> int:
        return sum(self.required.values())

    @classmethod
    def of(cls, evidence: Mapping[str, Any]) -> RunCounts:
        checks = [c for c in evidence.get("checks") or () if isinstance(c, Mapping)]
        required = {s: 0 for s in STATUSES}
        for c in checks:
            if c.get("required", True):
                required[str(c.get("status"))] = required.get(str(c.get("status")), 0) + 1
        return cls(
            len(evidence.get("scope_points") or ()),
            len({str(c.get("id")).split("#", 1)[0] for c in checks}),
            len(checks),
            required,
        )

    def headline(self) -> str:
        """'276 of 387 required outcomes passed; 111 did not run'."""
        text = f"{self.required.get('passed', 0)} of {self.required_outcomes} required outcomes passed"
        for status, word in (("failed", "failed"), ("errored", "errored"), ("not_run", "did not run")):
            if self.required.get(status):
                text += f"; {self.required[status]} {word}"
        return text

    def sizes(self) -> str:
        """'405 outcomes (396 required) of 402 check instances at 1,008 declared scope points'."""
        return (
            f"{self.outcomes:,} outcomes ({self.required_outcomes:,} required) of {self.check_instances:,} "
            f"check instances at {self.declared_scope_points:,} declared scope points"
        )
