"""The check kinds this fasttrack knows, in plan order: a plain mapping, as pre-commit keeps its
languages. Adding a kind is one package under ``fasttrack/kinds/`` and one line here
(CONTRIBUTING.md); every table of kinds (aliases, grid letters, the zygote's preload list, the
evidence schema's kind enum, the report's audit kinds, the planner's order) derives from it.

Nothing imports this module but the composition roots (the CLI, scripts, tests): the engine,
the planner, verification, the schema generator and the reporters receive the mapping.
"""

from __future__ import annotations

from fasttrack.kinds import (
    benchmarks,
    claims,
    divergence,
    evals,
    features,
    kernels,
    refused,
    sanitizer,
    scope_diff,
    speculative,
    stock_unchanged,
    stress,
    switch,
)
from fasttrack.kinds.base import Kind

KINDS: dict[str, Kind] = {
    "scope_diff": scope_diff.KIND,
    "switch": switch.KIND,
    "refused": refused.KIND,
    "kernels": kernels.KIND,
    "stress": stress.KIND,
    "sanitizer": sanitizer.KIND,
    "evals": evals.KIND,
    "divergence": divergence.KIND,
    "features": features.KIND,
    "speculative": speculative.KIND,
    "stock_unchanged": stock_unchanged.KIND,
    "benchmarks": benchmarks.KIND,
    "claims": claims.KIND,
}
