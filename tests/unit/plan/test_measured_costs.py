"""Plan estimates from measured costs (fasttrack.plan.costs), tested on the recorded CPU run of
the example's whole-scope evidence: the built-in guesses are far off, the measured ones within
30 % of what the run took."""

from __future__ import annotations

import gzip
import json
from dataclasses import replace
from datetime import datetime

from fasttrack.environment import detect_environment
from fasttrack.kinds.registry import KINDS
from fasttrack.manifest import load_manifest
from fasttrack.plan import build_plan
from fasttrack.plan.costs import MeasuredCosts
from support.paths import ROOT

CPU_RUN = ROOT / "benchmarks" / "results" / "mini-k3-full-scope" / "parts" / "cpu-all-kinds.evidence.json.gz"
MANIFEST = ROOT / "examples" / "mini-k3" / "fasttrack.yaml"


def _wall(evidence) -> float:
    run = evidence["run"]
    return (datetime.fromisoformat(run["finished_at"]) - datetime.fromisoformat(run["started_at"])).total_seconds()


def test_measured_costs_estimate_the_recorded_run_within_30_percent():
    evidence = json.loads(gzip.decompress(CPU_RUN.read_bytes()))
    costs = MeasuredCosts.from_evidence(evidence)
    loaded = load_manifest(MANIFEST)
    plan = build_plan(loaded, detect_environment(accelerators=False, root=loaded.root), KINDS)
    ran = {c["id"] for c in evidence["checks"] if c["status"] in ("passed", "failed")}
    same = [replace(i, runnable=True) for i in plan.instances if i.id in ran]  # as that machine ran them
    assert len(same) >= 0.9 * len(ran)  # the plan's ids are the evidence's
    real = _wall(evidence)
    guessed = sum(i.est_seconds for i in same)
    estimate = costs.wall_seconds(same)
    assert abs(estimate - real) <= 0.3 * real, (estimate, real)
    assert abs(estimate - real) < abs(guessed - real)  # measurement beats the built-in guesses
    # an instance that did not run then takes its kind's mean measured cost
    unseen = replace(same[0], id=same[0].id + ",unseen=1", est_seconds=12345.0)
    assert costs.calibrate([unseen])[0].est_seconds == costs.per_kind[unseen.kind]
