"""The typed sections of a manifest: one small frozen dataclass per section with the keys other
modules use, defaults filled in (``raw`` keeps the section as written, read-only, for anything
else); and the helpers their values share (frozen mappings, regions of scope points, metrics
where lower is better)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from fasttrack.manifest.ablation import LEFT_OUT, Ablation  # noqa: F401  (re-exported)
from fasttrack.manifest.divergence import (  # noqa: F401  (re-exported with the other sections)
    DIVERGENCE_DEFAULTS,
    DIVERGENCE_THRESHOLDS,
    DTYPE_DIVERGENCE_DEFAULTS,
    Divergence,
)
from fasttrack.manifest.scope import (
    HARDWARE_DIMENSIONS,
    MODEL_DIMENSION,
    PARALLEL_DIMENSIONS,
    representative_batches,
)
from fasttrack.manifest.switch_sections import (  # noqa: F401  (re-exported with the other sections)
    ENV_OFF_VALUES,
    CensusRule,
    Refused,
    Switch,
    SwitchProof,
)

PRESERVED_FEATURES: tuple[str, ...] = (
    "full_context",
    "temperature_sampling",
    "structured_output",
    "stop_strings",
    "n_samples",
    "logprobs",
    "token_coverage",
    "mixed_batches",
)
LOWER_IS_BETTER_METRICS = frozenset(
    {
        "tpot_ms",
        "ttft_ms",
        "itl_ms",
        "request_latency_ms",
        "per_layer_latency_us",
        "kernels_per_layer",
        "kernels_per_step",
        "per_step_latency_us",
    }
)


def lower_is_better(metric: str) -> bool:
    """Latencies and counts: the named ones, and vLLM's result fields in milliseconds
    (``median_tpot_ms``, ``p99_ttft_ms`` ...)."""
    return metric in LOWER_IS_BETTER_METRICS or metric.endswith("_ms")


def metric_unit(metric: str) -> str | None:
    """The unit a benchmark metric is measured in, which a claim's ``difference`` states."""
    if metric.startswith("kernels_per_"):
        return "kernels"
    if metric.endswith("_us"):
        return "us"
    if metric.endswith("_ms"):
        return "ms"
    if metric in ("request_throughput", "request_goodput"):
        return "requests/s"
    if metric.endswith("_per_user"):
        return "tokens/s/user"
    if "tokens_per_s" in metric or metric.endswith("_throughput"):
        return "tokens/s"
    return None


def in_region(point: Mapping[str, Any], region: Mapping[str, Any]) -> bool:
    """Whether a scope point has one of the listed values in every dimension ``region`` names."""
    return all(point.get(dim) in tuple(values) for dim, values in region.items())


def freeze(value: Any) -> Any:
    """A read-only deep view: dicts become mappingproxies, lists tuples."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """The plain (JSON-ready) copy of a frozen value."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(v) for v in value]
    return value


_EMPTY: Mapping[str, Any] = MappingProxyType({})


def _empty() -> Mapping[str, Any]:
    return _EMPTY


@dataclass(frozen=True)
class Optimisation:
    id: str
    title: str
    summary: str = ""
    owners: tuple[str, ...] = ()
    links: tuple[Mapping[str, str], ...] = ()


@dataclass(frozen=True)
class ModelSpec:
    id: str
    code_paths: tuple[str, ...]
    allowed_paths: tuple[str, ...] = ()
    revision: str | None = None
    architecture: str | None = None
    gated_paths: tuple[str, ...] = ()  # shared files it may edit only behind its switches


@dataclass(frozen=True)
class HardwareEntry:
    index: int  # position in scope.hardware, for messages
    accelerator: str
    device_counts: tuple[int, ...]
    tensor_parallel: tuple[int, ...]
    interconnect: str | None = None
    nvlink_domain: str | None = None
    compute_capability: str | None = None  # "10.3" (sm_103): the GPUs must have exactly this
    min_compute_capability: str | None = None  # "10.0": the GPUs must have at least this
    gfx_arch: str | None = None  # AMD: "gfx942" (MI300X), "gfx950" (MI355X): the GPUs must have exactly this

    @property
    def is_cpu(self) -> bool:
        return self.accelerator.strip().lower() == "cpu"

    def describe(self) -> str:
        counts = "/".join(str(c) for c in self.device_counts)
        text = self.accelerator if self.is_cpu else f"{self.accelerator} x{counts}"
        if self.interconnect and self.interconnect not in ("none", "loopback"):
            text += f" over {self.interconnect}"
            if self.nvlink_domain == "single":
                text += " (one NVLink domain)"
        return text


@dataclass(frozen=True)
class BatchRange:
    min: int
    max: int
    points: tuple[int, ...] | None = None

    def representative(self) -> tuple[int, ...]:
        """The batch sizes scope points use: ``points`` if listed, else representative sizes."""
        if self.points:
            return tuple(sorted(self.points))
        return representative_batches(self.min, self.max)


@dataclass(frozen=True)
class ContextSpec:
    max_tokens: int
    buckets: tuple[int, ...] = ()

    def points(self) -> tuple[int, ...]:
        return self.buckets or (self.max_tokens,)


@dataclass(frozen=True)
class SpeculativeSpec:
    method: str
    draft_lengths: tuple[int, ...]
    acceptance: str = "measured"
    min_acceptance_length: float | None = None
    points: Mapping[str, tuple[Any, ...]] = field(
        default_factory=_empty
    )  # hardware setups the check runs at; empty: all
    acceptance_margin: float = 0.10  # the candidate's acceptance length may be at most this far below stock's


@dataclass(frozen=True)
class Parallelism:
    tensor: tuple[int, ...] = ()
    expert: tuple[int, ...] = ()
    decode_context: tuple[int, ...] = ()
    data: tuple[int, ...] = ()


@dataclass(frozen=True)
class Scope:
    hardware: tuple[HardwareEntry, ...]
    batch: BatchRange | None = None
    context: ContextSpec | None = None
    speculative: SpeculativeSpec | None = None
    parallelism: Parallelism = field(default_factory=Parallelism)
    dtypes: tuple[str, ...] = ()
    engine: Mapping[str, tuple[Any, ...]] = field(default_factory=_empty)  # scope.engine: name -> values
    models: tuple[str, ...] = ()  # scope.models: the checkpoints, the dimension ``model``
    tokens_per_step: tuple[int, ...] = ()  # scope.tokens_per_step: tokens in one forward step

    def engine_values(self) -> dict[str, tuple[Any, ...]]:
        """The engine dimensions: the checkpoints (``model``), scope.engine, plus decode-context,
        expert and data parallelism when ``scope.parallelism`` declares a degree above 1 (a list of
        only 1 is no such parallelism)."""
        values = {MODEL_DIMENSION: self.models} if self.models else {}
        values.update({name: tuple(v) for name, v in self.engine.items()})
        for key, name in PARALLEL_DIMENSIONS.items():
            degrees = getattr(self.parallelism, key)
            if any(d > 1 for d in degrees):
                values[name] = tuple(sorted(degrees))
        return values

    def dimension_values(self) -> dict[str, tuple[Any, ...]]:
        """Values of the non-hardware dimensions present in this scope (engine dimensions first)."""
        values: dict[str, tuple[Any, ...]] = self.engine_values()
        if self.batch is not None:
            values["batch"] = self.batch.representative()
        if self.tokens_per_step:
            values["tokens_per_step"] = tuple(sorted(self.tokens_per_step))
        if self.dtypes:
            values["dtype"] = self.dtypes
        if self.speculative is not None:
            values["draft_length"] = tuple(sorted(self.speculative.draft_lengths))
        if self.context is not None:
            values["context"] = self.context.points()
        return values

    def present_dimensions(self) -> tuple[str, ...]:
        return (*HARDWARE_DIMENSIONS, *self.dimension_values())

    def deployment_dimensions(self) -> tuple[str, ...]:
        """The dimensions of one deployment (one server configuration): hardware and engine."""
        return (*HARDWARE_DIMENSIONS, *self.engine_values())


@dataclass(frozen=True)
class PythonTarget:
    factory: str
    path: str | None = None
    options: Mapping[str, Any] = field(default_factory=_empty)


@dataclass(frozen=True)
class OpenAISide:
    command: tuple[str, ...] | None = None
    url: str | None = None
    env: Mapping[str, str] = field(default_factory=_empty)
    cwd: str | None = None
    cpus: tuple[int, ...] = ()  # the CPU affinity the server is started with (none: the OS's choice)


@dataclass(frozen=True)
class OpenAITarget:
    baseline: OpenAISide
    candidate: OpenAISide
    model_name: str | None = None
    health_path: str = "/health"
    startup_timeout_s: float = 120.0
    request_timeout_s: float = 300.0  # the gate's HTTP client, per request (then retried: fasttrack.targets.http)
    concurrency: int = 64  # requests in flight per side from evals and probes
    speculative_args: tuple[str, ...] = ()  # appended to a side's command at a draft length
    speculative_env: Mapping[str, str] = field(default_factory=_empty)  # added to both sides' env at a draft length


@dataclass(frozen=True)
class VllmSide:
    """A side's own additions to the common vLLM serving config."""

    serve_args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=_empty)
    cpus: tuple[int, ...] = ()  # the CPU affinity this side's server is started with


@dataclass(frozen=True)
class VllmTarget:
    """``target.vllm``: a vLLM server per side, written as a vLLM serving config (docs/manifest.md).
    fasttrack turns it into the two server commands (`fasttrack.targets.vllm.command`)."""

    model: str
    served_model_name: str | None = None
    serve_args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=_empty)
    baseline: VllmSide = field(default_factory=VllmSide)
    candidate: VllmSide = field(default_factory=VllmSide)
    speculative_args: tuple[str, ...] = ()  # or speculative_config, rendered as --speculative-config JSON
    speculative_env: Mapping[str, str] = field(default_factory=_empty)  # the drafting servers' own env
    launcher: str = "auto"  # "auto" | "module" | "console": how the server is started
    startup_timeout_s: float = 300.0
    request_timeout_s: float = 300.0
    concurrency: int = 64


@dataclass(frozen=True)
class SglangSide:
    """A side's own additions to the common SGLang launch (``target.sglang.<side>``)."""

    server_args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=_empty)
    cpus: tuple[int, ...] = ()


@dataclass(frozen=True)
class SglangTarget:
    """``target.sglang``: an SGLang server per side, written as SGLang's launch command
    (``python -m sglang.launch_server --model-path M ...``; `fasttrack.manifest.sglang_launch`)."""

    model_path: str
    served_model_name: str | None = None
    server_args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=_empty)
    baseline: SglangSide = field(default_factory=SglangSide)
    candidate: SglangSide = field(default_factory=SglangSide)
    python: str | None = None  # the interpreter SGLang is installed in (default: fasttrack's own)
    startup_timeout_s: float = 600.0
    request_timeout_s: float = 300.0
    concurrency: int = 64


SERVER_KINDS = frozenset({"openai", "vllm", "sglang"})  # target kinds whose sides are OpenAI-compatible servers


@dataclass(frozen=True)
class Dependency:
    """A build besides the engine's (target.dependencies): recorded, and required where it says."""

    name: str  # the distribution (importlib.metadata), or any name with ``command``
    version: str | None = None  # a PEP 440 specifier, e.g. ">=0.3"
    commit: str | None = None  # a prefix of the build's commit
    module: str | None = None  # the import package read for a commit it exposes
    command: tuple[str, ...] | None = None  # reads the build instead (as target.engine_build.command)


@dataclass(frozen=True)
class Target:
    kind: str  # "python" | "openai" | "vllm" | "sglang"
    python: PythonTarget | None = None
    # For kinds vllm and sglang: the servers their section describes, as openai targets declare them.
    openai: OpenAITarget | None = None
    vllm: VllmTarget | None = None
    sglang: SglangTarget | None = None
    dependencies: tuple[Dependency, ...] = ()

    @property
    def serves_http(self) -> bool:
        """Whether the sides are OpenAI-compatible servers (openai, vllm, sglang) rather than in-process."""
        return self.kind in SERVER_KINDS


@dataclass(frozen=True)
class KernelTest:
    id: str
    paths: tuple[str, ...]
    covers: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=_empty)
    required: bool = True
    timeout_s: float | None = None
    raw: Mapping[str, Any] = field(default_factory=_empty)
    required_tests: tuple[str, ...] = ()  # node-id patterns that must pass wherever the suite is judged
    device_count: int | None = None  # the suite's own, smaller hardware: devices per accelerator (None: the scope's)


@dataclass(frozen=True)
class EvalSpec:
    id: str
    task: str
    metric: str
    margin: float
    alpha: float
    task_dir: str | None = None
    data_files: tuple[str, ...] = ()
    higher_is_better: bool = True
    power: float = 0.8
    repeats: int = 1
    limit: int | None = None
    sequential: Mapping[str, Any] = field(default_factory=_empty)
    generation: Mapping[str, Any] = field(default_factory=_empty)
    bins: Mapping[str, Any] | None = None
    required: bool = True
    timeout_s: float | None = None
    raw: Mapping[str, Any] = field(default_factory=_empty)
    points: Mapping[str, tuple[Any, ...]] = field(default_factory=_empty)  # hardware setups to run at; empty: all
    regression: str = "warn"  # --previous: a drop beyond both runs' intervals fails (fail) or is reported (warn)
    family: Mapping[str, Any] | None = None  # eval_families: name, alpha, correction, members, adjusted_alpha


@dataclass(frozen=True)
class StockUnchanged:
    """The stock_unchanged check's settings (defaults in fasttrack.kinds.stock_unchanged.run)."""

    required: bool = True
    timeout_s: float | None = None
    points: Mapping[str, tuple[Any, ...]] = field(default_factory=_empty)
    raw: Mapping[str, Any] = field(default_factory=_empty)


@dataclass(frozen=True)
class FeatureProbe:
    """One preserved feature and the settings of its probe."""

    name: str
    enabled: bool
    required: bool = True
    timeout_s: float | None = None
    settings: Mapping[str, Any] = field(default_factory=_empty)
    points: Mapping[str, tuple[Any, ...]] = field(default_factory=_empty)  # hardware setups to probe at; empty: all


@dataclass(frozen=True)
class ClaimSide:
    value: float | None
    setup: Mapping[str, Any]  # the benchmark's setup for this side, overridden by the claim's


@dataclass(frozen=True)
class Claim:
    id: str
    statement: str
    baseline: ClaimSide
    candidate: ClaimSide
    speedup: float | Mapping[str, float] | None = None
    tolerance: float | None = None
    conditions: Mapping[str, Any] = field(default_factory=_empty)
    source: str | None = None
    comparable: bool | None = None

    def setup_differences(self) -> tuple[str, ...]:
        """Setup keys (other than the switch) whose values differ between the two sides."""
        keys = sorted((set(self.baseline.setup) | set(self.candidate.setup)) - {"switch"})
        return tuple(k for k in keys if self.baseline.setup.get(k) != self.candidate.setup.get(k))

    @property
    def is_comparable(self) -> bool:
        return self.comparable is not False and not self.setup_differences()

    @property
    def is_synthetic(self) -> bool:
        return self.conditions.get("acceptance") == "synthetic"


@dataclass(frozen=True)
class SpeedPromise:
    """A speed-up the optimisation promises in a region of its scope (``expect``)."""

    min_speedup: float
    points: Mapping[str, tuple[Any, ...]] = field(default_factory=_empty)  # empty: every point


DEFAULT_SPEED_ALPHA = 0.025  # one-sided: the old 95 % two-sided interval's error per side
DEFAULT_MAX_PAIRS = 30
# "Not slower than stock" means not slower by more than this share (the rule of a point no
# promise covers: a promise of 1 - margin, `fasttrack.kinds.benchmarks.decide`).
DEFAULT_SLOWDOWN_MARGIN = 0.05


@dataclass(frozen=True)
class Benchmark:
    id: str
    metric: str
    higher_is_better: bool
    points: Mapping[str, tuple[Any, ...]] = field(default_factory=_empty)
    workload: Mapping[str, Any] = field(default_factory=_empty)
    setups: Mapping[str, Mapping[str, Any]] = field(default_factory=_empty)
    claims: tuple[Claim, ...] = ()
    repeats: int = 1
    required: bool = True
    timeout_s: float | None = None
    raw: Mapping[str, Any] = field(default_factory=_empty)
    alpha: float = DEFAULT_SPEED_ALPHA
    expect: tuple[SpeedPromise, ...] = ()  # first promise containing a point applies there
    max_pairs: int = DEFAULT_MAX_PAIRS
    margin: float = DEFAULT_SLOWDOWN_MARGIN  # "not slower than stock" by more than this share
    regression: str = "warn"  # --previous: a drop beyond both runs' intervals fails (fail) or is reported (warn)


@dataclass(frozen=True)
class Audit:
    id: str
    kind: str  # "stress" | "compute_sanitizer"
    test: str
    repeats: int = 1
    delay_env: str | None = None
    delays_us: tuple[int, ...] = ()
    tools: tuple[str, ...] = ()
    required: bool = True
    timeout_s: float | None = None
    raw: Mapping[str, Any] = field(default_factory=_empty)
