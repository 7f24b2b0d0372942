"""Helpers for kernel tests: compare tensors with dtype-aware tolerances and record, for the
evidence, the tolerance used and the worst error seen.

    from fasttrack.kernel_testing import assert_close_recorded

    def test_fused_matches_unfused(scope_point):
        assert_close_recorded(fused(x), unfused(x), dtype=scope_point.get("dtype"))

Outside pytest (or without the fasttrack plugin) the comparison still works; nothing is recorded.
"""

from __future__ import annotations

import hashlib
from typing import Any

# (atol, rtol) per dtype: torch.testing's defaults, the usual yardstick for kernel tests.
DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "fp64": (1e-7, 1e-7),
    "fp32": (1e-5, 1.3e-6),
    "tf32": (1e-5, 1e-3),
    "fp16": (1e-5, 1e-3),
    "bf16": (1e-5, 1.6e-2),
    "fp8": (1e-3, 1.25e-1),
}
_DTYPE_NAMES = {
    "float64": "fp64",
    "double": "fp64",
    "float32": "fp32",
    "float": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
}


def dtype_name(dtype: Any) -> str:
    """'bf16' for torch.bfloat16, numpy float32, 'bfloat16', 'bf16' ..."""
    text = str(dtype).lower().replace("torch.", "").replace("numpy.", "")
    return _DTYPE_NAMES.get(text, text)


def default_tolerance(dtype: Any) -> tuple[float, float]:
    name = dtype_name(dtype)
    if name not in DEFAULT_TOLERANCES:
        raise ValueError(f"no default tolerance for dtype {dtype!r}; pass atol= and rtol=")
    return DEFAULT_TOLERANCES[name]


def _as_numpy(value: Any) -> Any:
    import numpy as np

    if hasattr(value, "detach"):  # torch tensor: compare in float64 on the CPU
        return value.detach().to("cpu").double().numpy()
    return np.asarray(value, dtype=np.float64)


def worst_errors(actual: Any, expected: Any) -> tuple[float, float]:
    """(max absolute error, max relative error) over all elements."""
    import numpy as np

    a, e = _as_numpy(actual), _as_numpy(expected)
    diff = np.abs(a - e)
    if diff.size == 0:
        return 0.0, 0.0
    rel = diff / np.maximum(np.abs(e), np.finfo(np.float64).tiny)
    return float(np.nanmax(diff)) if not np.isnan(diff).all() else float("nan"), float(np.nanmax(rel)) if not np.isnan(
        rel
    ).all() else float("nan")


def assert_close_recorded(
    actual: Any,
    expected: Any,
    *,
    dtype: Any = None,
    atol: float | None = None,
    rtol: float | None = None,
    msg: str = "",
) -> tuple[float, float]:
    """Assert |actual - expected| <= atol + rtol * |expected| element-wise (NaN never matches),
    record the tolerance and worst errors on the running test, return (worst_abs, worst_rel)."""
    import numpy as np

    a, e = _as_numpy(actual), _as_numpy(expected)
    if a.shape != e.shape:
        raise AssertionError(f"{msg + ': ' if msg else ''}shape mismatch: {a.shape} vs {e.shape}")
    if atol is None or rtol is None:
        d_atol, d_rtol = default_tolerance(dtype if dtype is not None else getattr(actual, "dtype", "fp32"))
        atol = d_atol if atol is None else atol
        rtol = d_rtol if rtol is None else rtol
    worst_abs, worst_rel = worst_errors(a, e)
    _record(atol=atol, rtol=rtol, worst_abs=worst_abs, worst_rel=worst_rel)
    ok = np.abs(a - e) <= atol + rtol * np.abs(e)
    if not bool(np.all(ok)):
        bad = int(np.size(ok) - np.count_nonzero(ok))
        index = tuple(int(i) for i in np.argwhere(~ok)[0]) if a.ndim else ()
        raise AssertionError(
            f"{msg + ': ' if msg else ''}{bad} of {ok.size} elements differ beyond atol={atol:g}, rtol={rtol:g} "
            f"(worst abs {worst_abs:.3g}, worst rel {worst_rel:.3g}; first at index {index})"
        )
    return worst_abs, worst_rel


def result_digest(*values: Any) -> str:
    """sha256 of the exact bytes of tensors/arrays/objects: identical results, identical digest."""
    h = hashlib.sha256()
    for value in values:
        if hasattr(value, "detach"):
            t = value.detach().to("cpu").contiguous()
            h.update(str(t.dtype).encode() + str(tuple(t.shape)).encode())
            h.update(t.view(-1).view(__import__("torch").uint8).numpy().tobytes() if t.numel() else b"")
        elif hasattr(value, "tobytes"):
            h.update(str(getattr(value, "dtype", "")).encode() + value.tobytes())
        else:
            h.update(repr(value).encode())
    return h.hexdigest()


def record_result(*values: Any) -> str:
    """Record the digest of this test's result (the stress audit compares it across repeats)."""
    digest = result_digest(*values)
    recorder = _current_or_none()
    if recorder is not None:
        recorder.record_result_digest(digest)
    return digest


def _current_or_none() -> Any:
    return _current


def _record(**fields: Any) -> None:
    recorder = _current_or_none()
    if recorder is not None:
        recorder.record_tolerance(**fields)


# ---------------------------------------------------------------------------------------------
# Per-test records (the pytest plugin creates one recorder per running test)


class Recorder:
    """What one test records: tolerance, worst errors, result digests, micro-benchmarks
    (`fasttrack.kernel_bench`)."""

    def __init__(self) -> None:
        self.tolerance: dict[str, float | None] | None = None
        self.worst_error: dict[str, float | None] | None = None
        self.result_digests: list[str] = []
        self.micro_benchmarks: list[dict[str, Any]] = []

    def record_tolerance(
        self,
        atol: float | None = None,
        rtol: float | None = None,
        worst_abs: float | None = None,
        worst_rel: float | None = None,
    ) -> None:
        if atol is not None or rtol is not None:
            old = self.tolerance or {}
            # The loosest tolerance used is the one a reviewer must judge.
            self.tolerance = {"atol": _max(old.get("atol"), atol), "rtol": _max(old.get("rtol"), rtol)}
        if worst_abs is not None or worst_rel is not None:
            old = self.worst_error or {}
            self.worst_error = {"abs": _max(old.get("abs"), worst_abs), "rel": _max(old.get("rel"), worst_rel)}

    def record_result_digest(self, digest: str) -> None:
        self.result_digests.append(digest)

    def record_micro_benchmark(self, timed: dict[str, Any]) -> None:
        self.micro_benchmarks.append(timed)

    def record_result(self, *values: Any) -> str:
        digest = result_digest(*values)
        self.record_result_digest(digest)
        return digest


def _max(a: float | None, b: float | None) -> float | None:
    values = [v for v in (a, b) if v is not None and v == v]
    return max(values) if values else (a if a is not None else b)


_current: Recorder | None = None


def current_recorder() -> Recorder | None:
    """The recorder of the test running now (None outside a test or without the plugin)."""
    return _current


def set_current_recorder(recorder: Recorder | None) -> None:
    global _current
    _current = recorder
