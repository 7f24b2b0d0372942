"""fasttrack's pytest plugin: run kernel tests over a manifest's scope points and record, per
test, the scope point, the tolerance used and the worst error seen.

Mark a test with the scope dimensions it covers; it is parametrised with one ``scope_point``
(a dict) per point of the manifest's scope projected on those dimensions::

    @pytest.mark.fasttrack_scope("batch", "tensor_parallel")
    def test_fused_allreduce(scope_point, fasttrack_record):
        out = run(batch=scope_point["batch"], tp=scope_point["tensor_parallel"])
        assert_close_recorded(out, reference)           # records tolerance + worst error

A test may also take a dimension directly as an argument (``def test_x(batch): ...``), and
``switch_acts`` (``{switch: bool}``): whether each switch acts at its point, False past a switch's
``threshold`` or inside its ``inert`` region, where the test expects the stock path.
``fasttrack_bench(candidate_fn, reference_fn, name=, shape=)`` times an op against its reference
in interleaved pairs and records the per-call times (`fasttrack.kernel_bench`).

Between the declared points: with a manifest, a test that covers ``batch`` also runs at the batch
sizes between the listed points (`between_batches`): every size of ``scope.batch`` when the range
is at most `EVERY_SIZE_MAX` wide, else `OFF_GRID_SAMPLES` sizes drawn with
``--fasttrack-offgrid-seed`` (the gate passes the head commit). Each such size runs once, at the
first combination of the test's other dimensions (their first declared values: the cheapest in a
typical manifest, e.g. TP 1 and fp32; the declared points cover every combination), ids
``between:...``, results with ``off_grid: true``. ``--fasttrack-between none`` turns it off.
Options: ``--fasttrack-manifest PATH`` (without it, the marker's ``default=`` points or a small
built-in set are used, so the tests also run in plain pytest), ``--fasttrack-results PATH``
(JSON lines, appended as tests finish, so a crash loses nothing), ``--fasttrack-repeat N`` with
``--fasttrack-delay-env NAME --fasttrack-delays 0,50,500`` for the stress audit.

The plugin is loaded in every pytest session (entry point ``pytest11``); it does nothing unless
a test carries the marker or an option is given, and imports no heavy module.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from fasttrack import kernel_testing
from fasttrack.kernel_testing import Recorder

if TYPE_CHECKING:
    from fasttrack.manifest import Manifest

MARKER = "fasttrack_scope"
DIMENSION_ALIASES = {"tp": "tensor_parallel", "bs": "batch", "draft": "draft_length", "dtypes": "dtype"}
# Used when no manifest is given and the marker has no default= points.
DEFAULT_VALUES: dict[str, list[Any]] = {
    "accelerator": ["cpu"],
    "device_count": [1],
    "tensor_parallel": [1, 2],
    "batch": [1, 17],
    "tokens_per_step": [1, 2048],
    "dtype": ["fp32"],
    "draft_length": [1, 4],
    "context": [1024],
}

EVERY_SIZE_MAX = 256
OFF_GRID_SAMPLES = 16
BETWEEN_PREFIX = "between:"

_STATE = pytest.StashKey["_State"]()


class _State:
    def __init__(self, config: pytest.Config) -> None:
        self.manifest_path = config.getoption("fasttrack_manifest")
        self.results_path = config.getoption("fasttrack_results")
        self.repeat = max(1, int(config.getoption("fasttrack_repeat") or 1))
        self.delay_env = config.getoption("fasttrack_delay_env")
        delays = config.getoption("fasttrack_delays")
        self.delays = [int(d) for d in delays.split(",") if d.strip()] if delays else []
        self.seed = int(config.getoption("fasttrack_seed") or 0)
        self.where = parse_where(config.getoption("fasttrack_where"))
        self.between = config.getoption("fasttrack_between") != "none"
        self.offgrid_seed = str(config.getoption("fasttrack_offgrid_seed") or "0")
        self._manifest: Manifest | None = None
        self.items: dict[str, dict[str, Any]] = {}
        self.reports: dict[str, list[Any]] = {}
        self.recorders: dict[str, Recorder] = {}
        self.delay_used: dict[str, int] = {}

    def manifest(self) -> Any:
        if self._manifest is None and self.manifest_path:
            from fasttrack.errors import FasttrackError
            from fasttrack.manifest import load_manifest

            try:
                self._manifest = load_manifest(self.manifest_path)
            except FasttrackError as err:
                raise pytest.UsageError(f"--fasttrack-manifest: {err.user_message()}") from None
        return self._manifest

    def write(self, record: dict[str, Any]) -> None:
        if not self.results_path:
            return
        with open(self.results_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record, sort_keys=True, default=str) + "\n")
            fh.flush()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fasttrack", "fasttrack kernel tests over a manifest's scope")
    group.addoption(
        "--fasttrack-manifest",
        default=None,
        metavar="PATH",
        help="parametrise @fasttrack_scope tests from this manifest's scope points",
    )
    group.addoption(
        "--fasttrack-results",
        default=None,
        metavar="PATH",
        help="append one JSON line per finished test (scope point, tolerance, worst error)",
    )
    group.addoption("--fasttrack-repeat", default=1, type=int, metavar="N", help="run every test N times")
    group.addoption(
        "--fasttrack-delay-env",
        default=None,
        metavar="NAME",
        help="environment variable through which random delays are injected (stress audit)",
    )
    group.addoption(
        "--fasttrack-delays",
        default=None,
        metavar="US,US,...",
        help="delay values (microseconds) to choose from at random, per repeat",
    )
    group.addoption("--fasttrack-seed", default=0, type=int, help="seed of the delay choice")
    group.addoption(
        "--fasttrack-between",
        default="sizes",
        choices=("sizes", "none"),
        help="with a manifest: also run tests covering batch at the sizes between the listed points (default)",
    )
    group.addoption(
        "--fasttrack-offgrid-seed",
        default=None,
        metavar="TEXT",
        help="seed of the sampled between-point batch sizes of a range wider than 256 (the gate: the head commit)",
    )
    group.addoption(
        "--fasttrack-where",
        default=None,
        metavar="DIM=V,...",
        help="only scope points with these values (e.g. accelerator=cpu,tensor_parallel=2)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(*dims, default=None): parametrise with the manifest's scope points projected on dims "
        "(fixture scope_point); default= lists points used without --fasttrack-manifest",
    )
    state = _State(config)
    config.stash[_STATE] = state
    state.manifest()  # a bad manifest is a usage error before collection, not a collection error
    state.write({"event": "session", "pid": os.getpid(), "repeat": state.repeat, "seed": state.seed})


def canonical_dims(names: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(DIMENSION_ALIASES.get(n, n) for n in names)


def parse_where(text: str | None) -> dict[str, Any]:
    where: dict[str, Any] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        if "=" not in part:
            raise pytest.UsageError(f"--fasttrack-where: expected DIM=VALUE, got {part!r}")
        key, value = (s.strip() for s in part.split("=", 1))
        where[DIMENSION_ALIASES.get(key, key)] = int(value) if value.lstrip("-").isdigit() else value
    return where


def points_for(
    dims: tuple[str, ...], manifest: Manifest, where: dict[str, Any] | None = None, default: Any = None
) -> list[dict[str, Any]]:
    """The scope points on ``dims``: the manifest's (filtered by ``where``), else the marker's
    ``default=`` points, else the built-in default values."""
    where = where or {}
    if manifest is not None:
        wide = manifest.scope_points(tuple(dict.fromkeys([*dims, *where])))
        kept = [p for p in wide if all(p.get(k, v) == v for k, v in where.items())]
        projected = dict.fromkeys(tuple((k, v) for k, v in p.dims if k in dims) for p in kept)
        return [dict(t) for t in projected]
    if default is not None:
        aliased = [{DIMENSION_ALIASES.get(k, k): v for k, v in dict(p).items()} for p in default]
        return [{k: v for k, v in p.items() if k in dims} for p in aliased]
    unknown = [d for d in dims if d not in DEFAULT_VALUES]
    if unknown:
        raise pytest.UsageError(f"@{MARKER}: unknown dimension(s) {unknown}; known: {sorted(DEFAULT_VALUES)}")
    points = [dict(zip(dims, combo)) for combo in itertools.product(*(DEFAULT_VALUES[d] for d in dims))]
    return [p for p in points if all(p.get(k, v) == v for k, v in where.items())]


def between_batches(low: int, high: int, listed: Sequence[int], seed: str) -> tuple[list[int], str]:
    """The batch sizes of [low, high] that are not listed points: all of them when the range is at
    most EVERY_SIZE_MAX wide, else OFF_GRID_SAMPLES drawn with ``seed``; and which policy it was."""
    others = [b for b in range(low, high + 1) if b not in set(listed)]
    if high - low + 1 <= EVERY_SIZE_MAX:
        return others, "every size"
    drawn = random.Random(f"fasttrack-offgrid:{seed}").sample(others, min(OFF_GRID_SAMPLES, len(others)))
    return sorted(drawn), f"{len(drawn)} sizes drawn with seed {seed}"


def between_points(points: list[dict[str, Any]], manifest: Manifest, seed: str) -> list[dict[str, Any]]:
    """One point per between-point batch size, the other dimensions at the first combination."""
    batch = manifest.scope.batch
    if batch is None or not points or "batch" not in points[0]:
        return []
    sizes, _policy = between_batches(batch.min, batch.max, batch.representative(), seed)
    combos = list(dict.fromkeys(tuple((k, v) for k, v in p.items() if k != "batch") for p in points))
    return [{**dict(combos[0]), "batch": b} for b in sizes]


def own_parametrized(definition: Any) -> set[str]:
    """Argument names the test parametrises itself (@pytest.mark.parametrize)."""
    names: set[str] = set()
    for mark in definition.iter_markers("parametrize"):
        argnames = mark.args[0] if mark.args else mark.kwargs.get("argnames", ())
        if isinstance(argnames, str):
            argnames = [a.strip() for a in argnames.split(",")]
        names.update(argnames)
    return names


def point_id(point: dict[str, Any]) -> str:
    return ",".join(f"{k}={point[k]}" for k in sorted(point)) or "all"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    state: _State = metafunc.config.stash[_STATE]
    marker = metafunc.definition.get_closest_marker(MARKER)
    if marker is not None:
        dims = canonical_dims(tuple(marker.args))
        # A dimension the test parametrises itself keeps the test's values (and is recorded
        # as such, so coverage is judged on what really ran); the others come from the scope.
        own = own_parametrized(metafunc.definition)
        wanted = tuple(d for d in dims if d not in own)
        if "scope_point" not in metafunc.fixturenames:
            metafunc.fixturenames.append("scope_point")
        if wanted:
            points = points_for(wanted, state.manifest(), state.where, marker.kwargs.get("default"))
            if not points:
                raise pytest.UsageError(f"{metafunc.definition.nodeid}: the scope has no points for {marker.args}")
            ids = [point_id(p) for p in points]
            if state.between and state.manifest() is not None and "batch" in wanted and "batch" not in state.where:
                extra = between_points(points, state.manifest(), state.offgrid_seed)
                points, ids = [*points, *extra], [*ids, *(BETWEEN_PREFIX + point_id(p) for p in extra)]
            direct = [d for d in wanted if d in metafunc.fixturenames]
            names = ["scope_point", *direct]
            values = [tuple([p, *(p[d] for d in direct)]) for p in points]
            # indirect: the scope_point fixture adds the test's own dimensions to the point
            metafunc.parametrize(names, values, ids=ids, indirect=["scope_point"])
    if state.repeat > 1:
        metafunc.fixturenames.append("_fasttrack_repeat")
        metafunc.parametrize("_fasttrack_repeat", range(state.repeat), ids=[f"r{i}" for i in range(state.repeat)])


def item_scope_point(item: Any) -> dict[str, Any] | None:
    """The full scope point of a marked test: the scope's values plus the test's own ones."""
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        return None
    params = getattr(getattr(item, "callspec", None), "params", {})
    point = dict(params.get("scope_point") or {})
    for dim in canonical_dims(tuple(marker.args)):
        if dim not in point and dim in params:
            point[dim] = params[dim]
    return point


@pytest.fixture
def scope_point(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The scope point this test instance runs at ({} when the test is not marked)."""
    return item_scope_point(request.node) or {}


@pytest.fixture
def switch_acts(request: pytest.FixtureRequest) -> dict[str, bool]:
    """Whether each switch of the manifest acts at this test's scope point (``switch.points``,
    ``threshold``, ``inert``): where one is False the point is its negative scope, and a kernel test
    there expects the stock path (the router kernel past 1,024 tokens per step falls back). Every
    switch acts when no manifest is given."""
    state: _State = request.config.stash[_STATE]
    manifest = state.manifest()
    if manifest is None:
        return {}
    point = item_scope_point(request.node) or {}
    return {switch.name: switch.acts_at(point) for switch in manifest.switches}


@pytest.fixture
def _fasttrack_repeat(request: pytest.FixtureRequest) -> int:
    return int(getattr(request, "param", 0))


@pytest.fixture
def fasttrack_record(request: pytest.FixtureRequest) -> Recorder:
    """This test's recorder: ``record_tolerance(atol=, rtol=, worst_abs=, worst_rel=)``,
    ``record_result(*tensors)``."""
    state: _State = request.config.stash[_STATE]
    return state.recorders.setdefault(request.node.nodeid, Recorder())


@pytest.fixture
def fasttrack_bench(request: pytest.FixtureRequest) -> Any:
    """Time a candidate op against its reference op at one shape, recorded on this test:
    ``fasttrack_bench(candidate_fn, reference_fn, name=..., shape=..., pairs=21, warmup=3)``
    (`fasttrack.kernel_bench.bench`)."""
    from fasttrack.kernel_bench import bench

    return bench


@pytest.fixture(autouse=True)
def _fasttrack_injected_delay(request: pytest.FixtureRequest) -> Any:
    """With --fasttrack-delay-env: set the variable to a random delay for this test run."""
    state: _State = request.config.stash[_STATE]
    if not state.delay_env or not state.delays:
        yield None
        return
    # A random order of the delays per test, walked by repeat index: every delay is used at
    # least once when repeats >= len(delays), and the choice is reproducible from the seed.
    info = state.items.get(request.node.nodeid, {})
    order = list(state.delays)
    random.Random(f"{state.seed}:{info.get('test', request.node.nodeid)}").shuffle(order)
    delay = order[int(info.get("repeat") or 0) % len(order)]
    state.delay_used[request.node.nodeid] = delay
    old = os.environ.get(state.delay_env)
    os.environ[state.delay_env] = str(delay)
    try:
        yield delay
    finally:
        if old is None:
            os.environ.pop(state.delay_env, None)
        else:
            os.environ[state.delay_env] = old


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    state: _State = config.stash[_STATE]
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        marker = item.get_closest_marker(MARKER)
        point = item_scope_point(item)
        repeat = params.get("_fasttrack_repeat")
        base = item.nodeid.split("[", 1)[0]
        callspec_id = getattr(getattr(item, "callspec", None), "id", "") or ""
        state.items[item.nodeid] = {
            "scope_point": point,
            "dims": list(canonical_dims(tuple(marker.args))) if marker is not None else None,
            "repeat": repeat,
            "test": f"{base}[{point_id(point)}]" if point is not None else base,
            "off_grid": BETWEEN_PREFIX in callspec_id,
        }
    state.write({"event": "collected", "count": len(items)})


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    state: _State = item.config.stash[_STATE]
    state.write({"event": "start", "nodeid": item.nodeid, "time": time.time()})
    kernel_testing.set_current_recorder(state.recorders.setdefault(item.nodeid, Recorder()))
    try:
        yield
    finally:
        kernel_testing.set_current_recorder(None)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # The session's config is not on the report; the state is found through the active plugin.
    state = _active_state
    if state is None:
        return
    state.reports.setdefault(report.nodeid, []).append(report)
    if report.when == "teardown":
        _write_result(state, report.nodeid)


_active_state: _State | None = None


_outer_states: list[_State | None] = []  # sessions nest under pytester


@pytest.hookimpl(tryfirst=True)
def pytest_sessionstart(session: pytest.Session) -> None:
    global _active_state
    _outer_states.append(_active_state)
    _active_state = session.config.stash[_STATE]


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    global _active_state
    state = session.config.stash[_STATE]
    state.write({"event": "finish", "exitstatus": int(exitstatus)})
    _active_state = _outer_states.pop() if _outer_states else None


def _write_result(state: _State, nodeid: str) -> None:
    reports = state.reports.pop(nodeid, [])
    by_when = {r.when: r for r in reports}
    setup, call, teardown = by_when.get("setup"), by_when.get("call"), by_when.get("teardown")
    if setup is not None and setup.failed:
        outcome, culprit = "error", setup
    elif setup is not None and setup.skipped:
        outcome, culprit = "skipped", setup
    elif call is not None and hasattr(call, "wasxfail"):
        outcome, culprit = ("xfailed" if call.skipped else "xpassed"), call
    elif call is not None and call.failed:
        outcome, culprit = "failed", call
    elif call is not None and call.skipped:
        outcome, culprit = "skipped", call
    elif teardown is not None and teardown.failed:
        outcome, culprit = "error", teardown
    else:
        outcome, culprit = "passed", None
    message = ""
    if culprit is not None:
        if culprit.skipped and isinstance(culprit.longrepr, tuple):
            message = str(culprit.longrepr[2])
        else:
            message = _short_message(getattr(culprit, "longreprtext", "") or str(culprit.longrepr or ""))
    info = state.items.get(nodeid, {})
    recorder = state.recorders.pop(nodeid, None) or Recorder()
    state.write(
        {
            "event": "result",
            "nodeid": nodeid,
            "test": info.get("test", nodeid.split("[", 1)[0]),
            "outcome": outcome,
            "duration_s": round(sum(r.duration for r in reports), 6),
            "scope_point": info.get("scope_point"),
            "off_grid": bool(info.get("off_grid")),
            "dims": info.get("dims"),
            "repeat": info.get("repeat"),
            "delay_us": state.delay_used.pop(nodeid, None),
            "tolerance": recorder.tolerance,
            "worst_error": recorder.worst_error,
            "result_digests": recorder.result_digests,
            **({"micro_benchmarks": recorder.micro_benchmarks} if recorder.micro_benchmarks else {}),
            "message": message,
        }
    )


def _short_message(text: str, limit: int = 500) -> str:
    """The most telling line of a failure: the last 'E   ' line, else the last line."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    errors = [ln[1:].strip() for ln in lines if ln.startswith("E ")]
    chosen = errors[0] if errors else (lines[-1].strip() if lines else "")
    return chosen[:limit]


def load_results(path: Path) -> list[dict[str, Any]]:
    """Read a --fasttrack-results file (ignoring a torn last line left by a crash)."""
    records = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    for line in lines:
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records
