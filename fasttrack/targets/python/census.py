"""Kernel census: how many kernels one decode step launches, and how long they take, per layer.

The seed article's headline is "23 kernels in 130 µs per layer, down to 13 in 69 µs". This module
measures the same two numbers with ``torch.profiler``:

- on a GPU it counts device kernels (CUDA events) and sums their device time;
- on a CPU (no kernels) it counts top-level ATen operators (an ``aten::`` op not nested in another
  ``aten::`` op, the CPU analogue of a launched kernel) and sums their CPU time.

Per layer: kernels are attributed to the innermost ``torch.profiler.record_function`` range whose
name contains ``layer<sep><index>`` (e.g. ``mini_k3.layer.3``) and averaged over layers. When the
model has no such ranges, `layer_ranges` adds them with forward hooks on the model's stack of
decoder layers (an ``nn.ModuleList`` called ``layers``). When no layer ran through either (a path
that replaced the layers' forward), the per-step totals are divided by the model's layer count
and ``layers_source`` says the figure is an estimate.

Decode steps are isolated by difference: profile a run of ``1 + steps`` generated tokens and a run
of 1 (prefill and the first token), and divide the difference by ``steps``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

LAYER_RANGE = re.compile(r"layers?[._:/\- ]?(\d+)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Profile:
    """Totals of one profiled call."""

    device: str  # "cuda" or "cpu"
    kernels: int
    us: float
    per_layer: dict[int, tuple[int, float]]  # layer index -> (kernels, µs)
    names: dict[str, int] = field(default_factory=dict)  # kernel (or top-level op) name -> count


@dataclass(frozen=True)
class Census:
    """Per decode step and per layer; ``None`` where it could not be measured."""

    device: str
    counted: str  # "cuda kernels" | "top-level aten ops"
    steps: int
    kernels_per_step: float
    us_per_step: float | None  # None: the full run was not slower than the prefill run (below noise)
    kernels_per_layer: float | None
    us_per_layer: float | None
    layers: int | None
    layers_source: str | None  # "record_function" | "divided_by_n_layers" | None
    # Per decode step, by difference: how often each kernel (GPU) or top-level operator (CPU) ran;
    # the names a manifest's census rule may require (switch.proof.census.kernels_present).
    kernel_names: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def profile_call(fn: Callable[[], Any]) -> Profile:
    """Run ``fn`` once under torch.profiler and count what it launched."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    cuda = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        fn()
        if cuda:
            torch.cuda.synchronize()
    if not cuda:
        raw = _kineto_events(prof)
        if raw is not None:
            return _count_cpu_kineto(raw)
    events = list(prof.events())
    return _count_cuda(events) if cuda and _has_device_events(events) else _count_cpu(events)


def _kineto_events(prof: Any) -> list[Any] | None:
    """The profiler's raw events, where this torch exposes them (None: use ``prof.events()``)."""
    try:
        return list(prof.profiler.kineto_results.events())
    except AttributeError:
        return None


# What torch.profiler leaves out of its event list (torch.autograd.profiler_util._filter_name).
_UNLISTED = frozenset(
    {
        "[memory]",
        "[OutOfMemory]",
        "profiler::_record_function_enter",
        "profiler::_record_function_enter_new",
        "profiler::_record_function_exit",
        "aten::is_leaf",
        "aten::output_nr",
        "aten::_version",
    }
)


def _count_cpu_kineto(raw: list[Any]) -> Profile:
    """`_count_cpu` over the raw events: the same nesting rule as ``prof.events()`` (an interval
    inside another on the same thread is its child; async events have no parent), without building
    torch's event objects, which costs ~2 s per profiled call at batch 8 on the CPU host (the
    census profiles four per benchmark point)."""
    from torch.autograd import DeviceType

    tally = _Tally()
    threads: dict[int, list[tuple[int, int, int, str]]] = defaultdict(list)
    for index, event in enumerate(raw):
        name = event.name()
        if name in _UNLISTED or event.is_hidden_event() or event.device_type() != DeviceType.CPU:
            continue
        start, end = event.start_ns(), event.end_ns()
        if event.is_async() or event.start_thread_id() != event.end_thread_id():
            if name.startswith("aten::"):  # no parent: top level, in no layer
                tally.add(name, (end - start) / 1000.0, None)
            continue
        threads[event.start_thread_id()].append((start, -end, index, name))
    for events in threads.values():
        events.sort()
        stack: list[tuple[int, bool, int | None]] = []  # (end, inside an aten op, innermost layer)
        for start, negative_end, _index, name in events:
            end = -negative_end
            while stack and (start >= stack[-1][0] or end > stack[-1][0]):
                stack.pop()
            inside_aten, layer = (stack[-1][1], stack[-1][2]) if stack else (False, None)
            aten = name.startswith("aten::")
            if aten and not inside_aten:
                tally.add(name, (end - start) / 1000.0, layer)
            match = None if aten else LAYER_RANGE.search(name)
            stack.append((end, inside_aten or aten, int(match.group(1)) if match else layer))
    return tally.profile()


def _has_device_events(events: list[Any]) -> bool:
    return any(_is_device(e) for e in events)


def _is_device(event: Any) -> bool:
    return str(getattr(event, "device_type", "")).upper().endswith("CUDA")


def _layer_of(event: Any) -> int | None:
    """The layer index of the innermost enclosing record_function range that names a layer."""
    node = event
    while node is not None:
        match = LAYER_RANGE.search(node.name) if not node.name.startswith("aten::") else None
        if match:
            return int(match.group(1))
        node = getattr(node, "cpu_parent", None)
    return None


class _Tally:
    """Top-level ops of one profiled call: count, names, time, and per layer."""

    def __init__(self) -> None:
        self.per_layer: dict[int, list[float]] = defaultdict(lambda: [0, 0.0])
        self.names: dict[str, int] = defaultdict(int)
        self.kernels, self.us = 0, 0.0

    def add(self, name: str, us: float, layer: int | None) -> None:
        self.kernels += 1
        self.names[name] += 1
        self.us += us
        if layer is not None:
            self.per_layer[layer][0] += 1
            self.per_layer[layer][1] += us

    def profile(self) -> Profile:
        per_layer = {k: (int(v[0]), float(v[1])) for k, v in self.per_layer.items()}
        return Profile("cpu", self.kernels, self.us, per_layer, dict(self.names))


def _count_cpu(events: list[Any]) -> Profile:
    tally = _Tally()
    for event in events:
        if not event.name.startswith("aten::"):
            continue
        parent = getattr(event, "cpu_parent", None)
        nested = False
        while parent is not None:
            if parent.name.startswith("aten::"):
                nested = True
                break
            parent = getattr(parent, "cpu_parent", None)
        if not nested:
            tally.add(event.name, float(event.cpu_time_total), _layer_of(event))
    return tally.profile()


def _count_cuda(events: list[Any]) -> Profile:
    per_layer: dict[int, list[float]] = defaultdict(lambda: [0, 0.0])
    names: dict[str, int] = defaultdict(int)
    kernels, us = 0, 0.0
    for event in events:
        if _is_device(event):
            if not event.name.startswith(("Memcpy", "Memset")):  # copies are not kernels of the model
                kernels += 1
                names[event.name] += 1
                us += float(event.time_range.elapsed_us())
            continue
        launched = [k for k in getattr(event, "kernels", []) or [] if not str(k.name).startswith(("Memcpy", "Memset"))]
        if not launched:
            continue
        layer = _layer_of(event)
        if layer is not None:
            per_layer[layer][0] += len(launched)
            per_layer[layer][1] += sum(float(getattr(k, "duration", 0.0)) for k in launched)
    return Profile("cuda", kernels, us, {k: (int(v[0]), float(v[1])) for k, v in per_layer.items()}, dict(names))


def find_layers(model: Any) -> Any | None:
    """The model's stack of decoder layers: the largest ``torch.nn.ModuleList`` named like layers."""
    import torch

    best = None
    for name, module in getattr(model, "named_modules", list)():
        named_like_layers = name.split(".")[-1] in ("layers", "h", "blocks", "decoder_layers")
        if isinstance(module, torch.nn.ModuleList) and named_like_layers and (best is None or len(module) > len(best)):
            best = module
    return best


@contextmanager
def layer_ranges(model: Any) -> Iterator[int]:
    """Wrap each decoder layer's forward in a ``fasttrack.layer.<i>`` profiler range (via module
    hooks, so the model's code is untouched). Yields the number of layers found (0: none)."""
    from torch.profiler import record_function

    layers = find_layers(model) if model is not None else None
    if not layers:
        yield 0
        return
    handles: list[Any] = []
    open_ranges: dict[int, Any] = {}

    def enter(index: int) -> Callable[[Any, Any], None]:
        def hook(_module: Any, _inputs: Any) -> None:
            scope = record_function(f"fasttrack.layer.{index}")
            scope.__enter__()
            open_ranges.setdefault(index, []).append(scope)

        return hook

    def leave(index: int) -> Callable[[Any, Any, Any], None]:
        def hook(_module: Any, _inputs: Any, _output: Any) -> None:
            stack = open_ranges.get(index)
            if stack:
                stack.pop().__exit__(None, None, None)

        return hook

    for index, layer in enumerate(layers):
        handles.append(layer.register_forward_pre_hook(enter(index)))
        handles.append(layer.register_forward_hook(leave(index)))
    try:
        yield len(layers)
    finally:
        for handle in handles:
            handle.remove()


def _fastest(profiles: list[Profile]) -> Profile:
    """Counts are deterministic; times are not: the fastest of a few runs is the least disturbed
    by other work on the machine."""
    best = min(profiles, key=lambda p: p.us)
    per_layer = {i: (k, min(p.per_layer.get(i, (k, us))[1] for p in profiles)) for i, (k, us) in best.per_layer.items()}
    return Profile(best.device, best.kernels, best.us, per_layer, best.names)


def census(
    run_steps: Callable[[], Any],
    run_prefill: Callable[[], Any],
    steps: int,
    n_layers: int | None = None,
    model: Any = None,
    repeats: int = 3,
) -> Census:
    """Per-decode-step census from two calls: ``run_steps`` (prefill + ``steps`` extra decode steps)
    and ``run_prefill`` (prefill alone). Both are run once untimed first (warm-up). With ``model``
    its decoder layers get profiler ranges (see `layer_ranges`) when it has none of its own."""
    if steps < 1:
        raise ValueError("steps must be at least 1")
    run_steps()
    run_prefill()
    with layer_ranges(model):
        full = _fastest([profile_call(run_steps) for _ in range(repeats)])
        base = _fastest([profile_call(run_prefill) for _ in range(repeats)])
    k_step = max(0.0, (full.kernels - base.kernels) / steps)
    # Time by difference: when the extra steps cost less than the two runs' noise the difference is
    # zero or negative, which is no measurement (a clamped 0 µs would read as "free").
    us_step = (full.us - base.us) / steps if full.us > base.us else None
    layers = sorted(set(full.per_layer) | set(base.per_layer))
    diffs = [
        (
            (full.per_layer.get(i, (0, 0.0))[0] - base.per_layer.get(i, (0, 0.0))[0]) / steps,
            (full.per_layer.get(i, (0, 0.0))[1] - base.per_layer.get(i, (0, 0.0))[1]) / steps,
        )
        for i in layers
    ]
    # Ranges seen only in prefill (a decode path that bypasses the layer modules) say nothing
    # about a decode step: then fall back to the layer count.
    k_layer: float | None
    us_layer: float | None
    source: str | None
    count: int | None
    if layers and sum(d[0] for d in diffs) > 0:
        k_layer = sum(d[0] for d in diffs) / len(diffs)
        # unclamped per-layer differences: noise cancels in the mean instead of biasing it upwards
        us_total = sum(d[1] for d in diffs)
        us_layer = us_total / len(diffs) if us_total > 0 else None
        source, count = "record_function", len(layers)
    elif n_layers:
        us_layer = us_step / n_layers if us_step is not None else None
        k_layer, source, count = k_step / n_layers, "divided_by_n_layers", n_layers
    else:
        k_layer = us_layer = None
        source, count = None, None
    counted = "cuda kernels" if full.device == "cuda" else "top-level aten ops"
    per_name = {
        name: (full.names.get(name, 0) - base.names.get(name, 0)) / steps for name in set(full.names) | set(base.names)
    }
    kernel_names = dict(sorted(((n, c) for n, c in per_name.items() if c > 0), key=lambda item: (-item[1], item[0])))
    return Census(full.device, counted, steps, k_step, us_step, k_layer, us_layer, count, source, kernel_names)
