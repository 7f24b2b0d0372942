"""Progress display: the live line and its ETA."""

from __future__ import annotations

import io
from dataclasses import dataclass
from types import SimpleNamespace

from fasttrack.engine.progress import Estimator, Progress, format_duration
from fasttrack.evidence import CheckOutcome, Status
from fasttrack.manifest import ScopePoint


def instance(name, est=1.0, **dims):
    point = ScopePoint.of(dims) if dims else None
    return SimpleNamespace(
        id=f"kernels/{name}" + (f"@{point.id}" if point else ""),
        kind="kernels",
        name=name,
        scope_point=point,
        est_seconds=est,
    )


def outcome(inst, status=Status.PASSED, code=None, reason=None):
    point = inst.scope_point
    return CheckOutcome(
        inst.id,
        inst.kind,
        inst.name,
        status,
        point.as_dict() if point else None,
        point.id if point else None,
        True,
        code,
        reason,
        None,
        0.5,
    )


def last_line(stream: io.StringIO) -> str:
    return stream.getvalue().rsplit("\r\x1b[2K", 1)[-1]


def test_live_line_shows_check_point_counts_elapsed_and_eta():
    stream = io.StringIO()
    progress = Progress(total=3, est_total_s=30.0, stream=stream, live=True)
    first = instance("k", est=10.0, batch=1)
    progress.start(first)
    assert "[1/3] kernels/k @ batch=1" in stream.getvalue() and "ETA ?" in stream.getvalue()
    progress.done(first, [outcome(first)])
    progress.start(instance("k", est=10.0, batch=17))
    line = last_line(stream)
    assert line.startswith("[2/3] kernels/k @ batch=17") and line.endswith("  0s ETA 0s")


def test_live_line_with_checks_side_by_side_names_the_others_and_survives_a_finish():
    stream = io.StringIO()
    progress = Progress(total=3, est_total_s=3.0, stream=stream, live=True)
    a, b = instance("a", batch=1), instance("b", batch=8)
    progress.start(a)
    progress.start(b)
    assert last_line(stream).startswith("[1/3 +1] kernels/b @ batch=8")
    progress.done(a, [outcome(a)])
    assert "[1/3] passed  kernels/a@batch=1" in stream.getvalue()
    assert last_line(stream).startswith("[2/3] kernels/b @ batch=8  ")  # still running: the live line stays
    progress.done(b, [outcome(b)])
    assert progress.running == [] and progress.current is None


def test_live_line_fits_eighty_columns_and_keeps_the_eta_whole():
    progress = Progress(total=278, est_total_s=300.0, stream=io.StringIO(), live=True)
    long = instance("mini-k3-kernels", batch=64, device_count=1, draft_length=7, dtype="bf16", tensor_parallel=4)
    progress.start(long)
    for width in (79, 60, 40):
        text = progress.status_text(long, width)
        assert len(text) <= width and text.endswith("ETA ?") and text.startswith("[1/278] ")
    assert "…" in progress.status_text(long, 79)
    short = instance("k", batch=1)
    assert "…" not in progress.status_text(short, 79)


def test_eta_calibrates_each_kind_by_what_it_measured_and_counts_a_shared_session_once():
    """Two kinds: kernels estimated at 1 s each (four points of one pytest session), evals at 10 s.
    The session took 40 s (10x the estimate), the first eval 5 s (half): what is left is the other
    eval at its own kind's rate, not the plan's guess and not the kernels' rate."""
    kernels = [
        SimpleNamespace(id=f"kernels/k@batch={b}", kind="kernels", est_seconds=1.0, scope_point=None) for b in range(4)
    ]
    evals = [SimpleNamespace(id=f"evals/e{n}", kind="evals", est_seconds=10.0, scope_point=None) for n in range(2)]
    group = lambda i: "kernels/k" if i.kind == "kernels" else i.id  # noqa: E731
    est = Estimator([*kernels, *evals], group)
    assert est.remaining(now=0.0) is None  # nothing measured yet: no guess
    est.start(kernels[0], now=0.0)
    est.done(kernels[0], wall_s=40.0)
    for k in kernels[1:]:  # the rest of the session: already paid for
        est.start(k, now=40.0)
        est.done(k, wall_s=0.0)
    assert est.ratio("kernels") == 10.0
    assert est.remaining(now=40.0) == 200.0  # evals not measured yet: the rate of everything so far
    est.start(evals[0], now=40.0)
    est.done(evals[0], wall_s=5.0)
    assert est.ratio("evals") == 0.5 and est.remaining(now=45.0) == 5.0
    est.start(evals[1], now=45.0)
    assert est.remaining(now=48.0) == 2.0  # running: what it has spent is subtracted


def test_eta_divides_checks_that_share_the_machine_by_the_jobs():
    checks = [SimpleNamespace(id=f"f/{n}", kind="features", est_seconds=10.0, scope_point=None) for n in range(5)]
    est = Estimator(checks, parallel_of=lambda i: 2)
    est.start(checks[0], now=0.0)
    est.done(checks[0], wall_s=20.0)
    assert est.remaining(now=20.0) == 4 * 20.0 / 2


def test_plain_lines_when_not_a_terminal():
    stream = io.StringIO()
    progress = Progress(total=2, est_total_s=2.0, stream=stream, live=False)
    inst = instance("k", batch=17)
    progress.start(inst)
    progress.done(inst, [outcome(inst, Status.FAILED, "test_failed", "boom at 17")])
    text = stream.getvalue()
    assert "\r" not in text and "\x1b" not in text
    assert text == "[1/2] failed  kernels/k@batch=17  (0.5s)\n    failed: boom at 17\n"


def test_format_duration():
    assert [format_duration(s) for s in (5, 75, 3725)] == ["5s", "1m15s", "1h02m"]


@dataclass(frozen=True)
class Planned:
    id: str
    kind: str
    est_seconds: float


def test_an_eta_seeded_from_a_recorded_run_is_within_30_percent_of_its_wall_time_from_the_start():
    """``check --costs-from``: the example's recorded CPU run (12 min 58 s, 405 outcomes) as the
    seed; the plan's own guesses (here a flat 60 s per instance) give no ETA before a check ends."""
    import gzip
    import json

    from fasttrack.plan.costs import MeasuredCosts
    from support.paths import ROOT

    path = ROOT / "benchmarks" / "results" / "mini-k3-full-scope" / "parts" / "cpu-all-kinds.evidence.json.gz"
    with gzip.open(path) as fh:
        evidence = json.loads(fh.read())
    ran = {c["id"].split("#", 1)[0]: c["kind"] for c in evidence["checks"] if c["status"] in ("passed", "failed")}
    planned = [Planned(i, k, 60.0) for i, k in ran.items()]
    measured = MeasuredCosts.from_evidence(evidence)
    wall = 12 * 60 + 58
    assert Estimator(planned).remaining(0.0) is None
    seeded = Estimator(measured.calibrate(planned), seed_factor=measured.wall_factor)
    eta = seeded.remaining(0.0)
    assert eta is not None and abs(eta - wall) <= 0.3 * wall, (eta, wall)
    # halfway, with the first half measured as recorded, the ETA still tracks what is left
    half = planned[: len(planned) // 2]
    for inst in half:
        seeded.start(inst, 0.0)
        seeded.done(inst, measured.per_instance[inst.id])
    left = seeded.remaining(0.0)
    expected = sum(measured.per_instance[i.id] for i in planned[len(half) :]) * measured.wall_factor
    assert left is not None and abs(left - expected) <= 0.3 * expected
