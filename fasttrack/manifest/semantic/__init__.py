"""Rules the JSON Schema cannot express, checked on schema-valid data, one module per topic
(switches, scope, target, checks, benchmarks; common helpers in `common`).

Each rule returns Problems with the path of the offending value, so they print in the same
``file:line: $.path: message`` format as schema errors. Warnings never fail validation.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fasttrack.manifest.problems import Problem
from fasttrack.manifest.semantic.benchmarks import benchmarks
from fasttrack.manifest.semantic.checks import (
    audits,
    compared_positions,
    divergence,
    evals,
    features,
    kernel_tests,
)
from fasttrack.manifest.semantic.common import engine_scope
from fasttrack.manifest.semantic.options import option_switches
from fasttrack.manifest.semantic.paths import repository_paths
from fasttrack.manifest.semantic.scope import narrowed_checks, scope
from fasttrack.manifest.semantic.switches import ablation, census_rules, gated_paths, switch, switch_points
from fasttrack.manifest.semantic.target import dependencies, synthetic_acceptance, target


def semantic_problems(data: Mapping[str, Any], broken: set[str] | frozenset[str] = frozenset()) -> list[Problem]:
    """Problems from every rule whose sections are present and schema-valid.

    ``broken`` names top-level sections that have schema errors: rules reading them are skipped
    (their data may have any shape), the others still run so that all errors show at once.
    """
    problems: list[Problem] = []
    for rule, needs, reads in _RULES:
        if any(not isinstance(data.get(name), dict) for name in needs):
            continue
        if broken & {*needs, *reads}:
            continue
        problems.extend(rule(data))
    return problems


# rule, the sections it needs present, the optional sections it also reads
_RULES = (
    (switch, ("target",), ("switch", "switches")),
    (switch_points, ("scope",), ("switch", "switches", "ablation", "target")),
    (option_switches, ("target",), ("switch", "switches", "ablation", "benchmarks")),
    (ablation, (), ("ablation", "switch", "switches", "benchmarks", "evals")),
    (gated_paths, ("model",), ("stock_unchanged",)),
    (synthetic_acceptance, ("target",), ("scope", "benchmarks")),
    (scope, ("scope",), ()),
    (engine_scope, ("scope",), ()),
    (target, ("target",), ("switch", "switches", "scope")),
    (dependencies, ("target",), ()),
    (kernel_tests, ("scope",), ("kernel_tests", "benchmarks")),
    (evals, (), ("evals", "eval_families")),
    (divergence, (), ("divergence", "evals", "scope")),
    (compared_positions, ("scope",), ("divergence", "preserve", "features")),
    (narrowed_checks, ("scope",), ("evals", "divergence", "features", "stock_unchanged")),
    (features, ("preserve",), ("features",)),
    (benchmarks, ("scope",), ("benchmarks", "target", "switch", "switches")),
    (census_rules, ("scope",), ("switch", "switches")),
    (audits, ("scope",), ("audits",)),
    (repository_paths, (), ("model", "kernel_tests", "audits")),
)
