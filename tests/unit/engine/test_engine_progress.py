"""Progress display and the text summary."""

from __future__ import annotations

import io
from types import SimpleNamespace

from fasttrack.engine.progress import Progress, format_duration
from fasttrack.evidence import CheckOutcome, Status
from fasttrack.manifest import ScopePoint
from fasttrack.report.summary import group_reasons, missing_capabilities


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


def test_live_line_shows_check_point_counts_elapsed_and_eta():
    stream = io.StringIO()
    progress = Progress(total=3, est_total_s=30.0, stream=stream, live=True)
    first = instance("k", est=10.0, batch=1)
    progress.start(first)
    assert "[1/3] kernels/k @ batch=1" in stream.getvalue() and "ETA ?" in stream.getvalue()
    progress.done(first, [outcome(first)])
    progress.start(instance("k", est=10.0, batch=17))
    line = stream.getvalue().rsplit("\r\x1b[2K", 1)[-1]
    assert line.startswith("[2/3] kernels/k @ batch=17") and "elapsed 0s" in line and "ETA 0s" in line


def test_live_line_with_checks_side_by_side_names_the_others_and_survives_a_finish():
    stream = io.StringIO()
    progress = Progress(total=3, est_total_s=3.0, stream=stream, live=True)
    a, b = instance("a", batch=1), instance("b", batch=8)
    progress.start(a)
    progress.start(b)
    assert stream.getvalue().rsplit("\r\x1b[2K", 1)[-1].startswith("[1/3] kernels/b @ batch=8 (+1 running)")
    progress.done(a, [outcome(a)])
    assert "[1/3] passed  kernels/a@batch=1" in stream.getvalue()
    line = stream.getvalue().rsplit("\r\x1b[2K", 1)[-1]
    assert line.startswith("[2/3] kernels/b @ batch=8  ")  # still running: the live line stays
    progress.done(b, [outcome(b)])
    assert progress.running == [] and progress.current is None


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


def test_reasons_group_by_cause_and_name_points():
    a, b, c = instance("k", batch=1), instance("k", batch=17), instance("k", batch=32)
    lines = group_reasons(
        [
            outcome(a, Status.NOT_RUN, "uncovered", f"no passing kernel test exercised batch at {a.scope_point.id}"),
            outcome(c, Status.NOT_RUN, "uncovered", f"no passing kernel test exercised batch at {c.scope_point.id}"),
            outcome(b, Status.FAILED, "test_failed", "t.py::test[batch=17]: boom"),
        ]
    )
    assert lines == [
        "FAILED kernels/k (test_failed): t.py::test[batch=17]: boom [batch=17]",
        "NOT_RUN kernels/k (uncovered) x2: no passing kernel test exercised batch [batch=1, batch=32]",
    ]


def test_missing_capabilities_one_line_each():
    gpu = "needs NVIDIA GB300 x8 over nvlink; this machine has: cpu"
    outs = [outcome(instance("k", batch=b), Status.NOT_RUN, "hardware", gpu) for b in (1, 2, 3)]
    outs.append(outcome(instance("s"), Status.NOT_RUN, "dependency", "compute-sanitizer is not on PATH"))
    assert missing_capabilities(outs) == [
        f"[hardware] {gpu} (3 outcomes)",
        "[dependency] compute-sanitizer is not on PATH (1 outcome)",
    ]
