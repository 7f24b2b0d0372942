"""``claims``: one global instance per benchmark claim: the claims lint (comparable setups,
labels for special conditions); it reads only the manifest, so it runs on any machine. Whether
a claim is reproduced is judged by the benchmarks check at the points it measures."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from fasttrack.kinds.claims.lint import with_detected

if TYPE_CHECKING:
    from fasttrack.plan import CheckInstance, Planner


def plan(planner: Planner) -> Iterable[CheckInstance]:
    timeout = planner.m.timeout_for("claims")
    for bench in planner.m.section("benchmarks") or ():
        bench = with_detected(planner.m.data, bench)
        for claim in bench.get("claims") or ():
            config = {"benchmark": bench, "claim": claim}
            yield planner.instance("claims", str(claim["id"]), None, True, None, 0.1, timeout, config)
