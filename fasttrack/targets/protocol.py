"""What the gate needs of the system under test, declared.

`TargetKind`: how one kind of target (``target.kind`` in the manifest: in-process ``python``, an
OpenAI-compatible ``openai`` server, ...) opens one side of a comparison at a scope point, whether
this machine can open it at all (for the plan), and roughly how long that takes. Each kind is one
module (`fasttrack.targets.python`, `fasttrack.targets.openai`) listed in one plain mapping,
`fasttrack.targets.registry.TARGET_KINDS`.

`Target`: what an in-process factory (``target.python.factory``) returns, as the example
implements it (``mini_k3.fasttrack_target.MiniK3Target``): ``generate`` and teacher-forced
``next_token_logprobs``. Further capabilities are protocols of their own, used where a target has
them: `PathReporting` (the switch's proof of path), `Layered` (the kernel census: how many decoder
layers, and the torch module whose ``layers`` it times), `Closable`; a server side's
`OpenedSide.profiler` is `Profiling` (its census from the server's own profiler).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from fasttrack.errors import TargetError

if TYPE_CHECKING:
    from fasttrack.manifest import Manifest
    from fasttrack.targets.openai.server import ManagedServer, ServerSpec

Side = Literal["baseline", "candidate"]
SIDES: tuple[Side, Side] = ("baseline", "candidate")


class TargetDependencyMissing(TargetError):
    """The target's code needs a Python module that is not installed here (not_run(dependency))."""

    def __init__(self, module: str, factory: str):
        self.module = module
        super().__init__(f"the target {factory} needs the Python module {module!r}, which is not installed here")


class CensusUnavailable(TargetError):
    """A server's own profiler gave no census that can be judged (no trace written, an unreadable
    one, or one without the engine's decode-step marks): a census proof is not_run(dependency)."""


@dataclass
class OpenedSide:
    """One running side. ``target`` is what the factory returned (in-process) or an
    `OpenAITarget` client (HTTP); ``server`` is set when fasttrack started the server."""

    name: Side
    kind: str  # the target kind that opened it: "python" | "openai" | ...
    target: Any
    server: ManagedServer | None = None
    url: str | None = None
    logs: list[Path] = field(default_factory=list)  # server logs to keep as artifacts
    releases_target: bool = False  # ``close`` calls the target's own (an in-process target)
    profiler: Profiling | None = None  # a server started with a profiler: its kernel census

    def close(self) -> None:
        """Release the target (its own ``close``, e.g. tensor-parallel ranks) and stop the server."""
        try:
            if self.releases_target and isinstance(self.target, Closable):
                self.target.close()
        finally:
            if self.server is not None:
                self.server.stop()


@dataclass(frozen=True)
class Unavailable:
    """Why this machine cannot open a manifest's target (the plan's ``target`` blocker)."""

    reason: str
    needs: str  # short: what is missing


Opener = Callable[["Manifest", Side, "Mapping[str, Any] | None", "int | None", "Path | None", bool], OpenedSide]
# A kind whose sides are servers the run shares (fasttrack.targets.pool): one side's server spec.
SpecMaker = Callable[["Manifest", Side, "Mapping[str, Any] | None", "int | None"], "ServerSpec"]


class TargetKind(Protocol):
    """One kind of target (module docstring)."""

    @property
    def name(self) -> str: ...

    @property
    def startup_s(self) -> float:
        """Rough seconds to open both sides (for the plan's estimates)."""

    def unavailable(self, manifest: Manifest) -> Unavailable | None:
        """What keeps this machine from opening the manifest's target (None: nothing)."""

    @property
    def shared_server(self) -> SpecMaker | None:
        """For a kind whose servers the run shares per scope point (fasttrack.targets.pool): the
        `ServerSpec` of one side; None for a kind that opens its own sides."""

    def unservable(self, manifest: Manifest, point: Mapping[str, Any] | None) -> str | None:
        """Why this kind cannot run ``point``'s settings (a dtype its servers cannot be told,
        `fasttrack.targets.dtypes`), for the plan's ``target`` reason; None: it can."""

    def open(
        self,
        manifest: Manifest,
        side: Side,
        point: Mapping[str, Any] | None,
        draft_length: int | None,
        log_dir: Path | None,
        switch_default: bool,
    ) -> OpenedSide:
        """One running side at ``point`` (a `TargetError` when it cannot be opened)."""


@dataclass(frozen=True)
class TargetSpec:
    """A `TargetKind` made of its parts: what each target package's ``KIND`` is."""

    name: str
    startup_s: float
    open: Opener
    unavailable: Callable[[Manifest], Unavailable | None] = field(default=lambda manifest: None)
    shared_server: SpecMaker | None = None
    unservable: Callable[[Manifest, Mapping[str, Any] | None], str | None] = field(default=lambda manifest, point: None)


@runtime_checkable
class Target(Protocol):
    """One side of the system under test, in-process (module docstring)."""

    def generate(self, requests: Sequence[Mapping[str, Any]]) -> Sequence[Any]:
        """Results with ``.outputs`` (``text``, ``token_ids``, ``finish_reason``, ``logprobs``)."""

    def next_token_logprobs(self, tokens: Any, through_decode: bool = ...) -> Any:
        """``[T, V]`` teacher-forced log-probabilities (through the decode path by default)."""


@runtime_checkable
class PathReporting(Protocol):
    """A target that counts which decode path ran (the switch's proof of path)."""

    def path_report(self) -> Mapping[str, Any]: ...


@runtime_checkable
class Layered(Protocol):
    """A target whose decoder layers the kernel census can time: how many there are, and the torch
    module whose ``layers`` (an ``nn.ModuleList``) holds them."""

    @property
    def n_layers(self) -> int: ...

    @property
    def model(self) -> Any: ...


@runtime_checkable
class Profiling(Protocol):
    """A server side that can profile its own decode steps (vLLM's or SGLang's torch profiler):
    the kernel census of ``steps`` decode steps at ``batch`` sequences, in the shape of the
    in-process `fasttrack.targets.python.census.Census` dict (`fasttrack.targets.profiler.ServerProfiler`,
    `fasttrack.targets.sglang.profiler.SglangProfiler`)."""

    def decode_census(self, batch: int, steps: int = ...) -> Mapping[str, Any]: ...


@runtime_checkable
class Closable(Protocol):
    def close(self) -> None: ...
