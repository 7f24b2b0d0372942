"""One check instance of a plan: a check kind at one scope point (or global), runnable here or
not and why. Its own module so that the runner API can name it without importing the planner."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fasttrack.manifest import ScopePoint


@dataclass(frozen=True)
class CheckInstance:
    id: str  # e.g. "evals/mrcr@accelerator=cpu,device_count=1,tensor_parallel=1"
    kind: str
    name: str
    scope_point: ScopePoint | None  # None for global checks
    required: bool
    runnable: bool
    reason_code: str | None  # None when runnable
    reason: str | None
    needs: str | None  # short: what is missing ("NVIDIA GB300 x8", "lm_eval", "vllm")
    est_seconds: float
    timeout_s: float
    config: dict[str, Any] = field(default_factory=dict, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "name": self.name,
            "scope_point": None if self.scope_point is None else self.scope_point.as_dict(),
            "required": self.required,
            "runnable": self.runnable,
            "reason_code": self.reason_code,
            "reason": self.reason,
            "needs": self.needs,
            "est_seconds": round(self.est_seconds, 1),
            "timeout_s": self.timeout_s,
            "config": self.config,
        }
