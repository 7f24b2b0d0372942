"""Build the typed Manifest from data that already passed schema and semantic validation."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from fasttrack.manifest import openai_servers
from fasttrack.manifest import sections as m
from fasttrack.manifest.model import Manifest
from fasttrack.manifest.openai_servers import env_map
from fasttrack.manifest.sections import freeze


def _tuple(value: Any) -> tuple:
    if value is None:
        return ()
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return (value,)


def resolve_setup(benchmark: Mapping[str, Any], claim: Mapping[str, Any], side: str) -> dict[str, Any] | None:
    """The setup of one side of a claim: the benchmark's setup, overridden by the claim's.
    None when neither gives one. Baseline defaults to switch off, candidate to switch on."""
    base = (benchmark.get("setups") or {}).get(side)
    own = (claim.get(side) or {}).get("setup")
    if base is None and own is None:
        return None
    merged: dict[str, Any] = {"switch": side == "candidate"}
    merged.update(base or {})
    merged.update(own or {})
    return merged


# Setup keys that describe a side without changing what it measures: a claim whose setups differ
# only in these is comparable (validate's warning and check's claims lint use this one rule).
# (`arm` names the rival arm a candidate ran: the switch itself, like `switch`.)
NOT_COMPARED_SETUP_KEYS = frozenset({"switch", "arm", "notes"})


def setup_differences(
    baseline: Mapping[str, Any], candidate: Mapping[str, Any], own: Mapping[str, bool] | None = None
) -> list[str]:
    """The setup keys in which two sides of a claim differ (sorted), ignoring NOT_COMPARED_SETUP_KEYS
    and, in ``engine_args``, the switches' own flags and options (``own``: `switch_args`): that the
    candidate passes its switch is the claim, not a difference of setup."""
    keys = sorted((set(baseline) | set(candidate)) - NOT_COMPARED_SETUP_KEYS)

    def value(setup: Mapping[str, Any], key: str) -> Any:
        found = setup.get(key)
        return _without(found, own) if key == "engine_args" and isinstance(found, list) and own else found

    return [k for k in keys if value(baseline, k) != value(candidate, k)]


def long_option(word: str) -> str:
    """The long option a command word sets as vLLM's parser reads it (``--moe_backend=x`` is
    ``--moe-backend``); '' for a word that is none."""
    return "--" + word[2:].split("=", 1)[0].replace("_", "-") if word.startswith("--") else ""


def switch_args(data: Mapping[str, Any]) -> dict[str, bool]:
    """The switches' own server flags (False) and options (True: they take a value), by name."""
    own: dict[str, bool] = {}
    for section in switch_sections(data):
        enable = (section.get("enable") or {}) if isinstance(section, Mapping) else {}
        for key in ("server_flag", "option"):
            if enable.get(key):
                own[long_option(str(enable[key])) or str(enable[key])] = key == "option"
    return own


def _without(args: list[Any], own: Mapping[str, bool]) -> list[str]:
    """``args`` less the switches' own flags and options (an option's separate value with it)."""
    kept: list[str] = []
    skip = False
    for word in (str(a) for a in args):
        name = long_option(word) or word
        if skip:
            skip = False
        elif name in own:
            skip = own[name] and "=" not in word
        else:
            kept.append(word)
    return kept


def build_manifest(
    data: dict[str, Any], path: Path, sha256: str, root: Path, warnings: tuple[str, ...], lines: dict
) -> Manifest:
    scope = data["scope"]
    return Manifest(
        path=path,
        sha256=sha256,
        root=root,
        optimisation=_optimisation(data["optimisation"]),
        model=_model(data["model"]),
        switches=tuple(arm for s in switch_sections(data) for arm in _switch_arms(s)),
        scope=_scope(scope),
        preserve=freeze({name: bool(data["preserve"].get(name, False)) for name in m.PRESERVED_FEATURES}),
        target=_target(data["target"], scope),
        kernel_tests=tuple(_kernel_test(k) for k in data.get("kernel_tests") or ()),
        evals=tuple(_eval(e, _family(data, e)) for e in data.get("evals") or ()),
        divergence=_divergence(data["divergence"]) if data.get("divergence") is not None else None,
        features=_features(data["preserve"], data.get("features") or {}),
        benchmarks=tuple(_benchmark(b) for b in data.get("benchmarks") or ()),
        audits=tuple(_audit(a) for a in data.get("audits") or ()),
        timeouts=freeze(data.get("timeouts") or {}),
        warnings=warnings,
        frozen_data=freeze(data),
        lines=freeze(lines),
        ablation=_ablation(data),
        stock_unchanged=_stock_unchanged(data.get("stock_unchanged")),
    )


def _stock_unchanged(d: Mapping[str, Any] | None) -> m.StockUnchanged | None:
    if d is None:
        return None
    return m.StockUnchanged(d.get("required", True), d.get("timeout_s"), _hardware_points(d), freeze(d))


def switch_sections(data: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The switch sections as written: ``switches`` (a list) or the one ``switch``."""
    if isinstance(data.get("switches"), list):
        return list(data["switches"])
    return [data["switch"]] if isinstance(data.get("switch"), Mapping) else []


def _ablation(data: Mapping[str, Any]) -> m.Ablation | None:
    section = data.get("ablation")
    if section is None:
        return None
    benchmarks = section.get("benchmarks")
    if benchmarks is None:
        benchmarks = [b["id"] for b in data.get("benchmarks") or ()]
    return m.Ablation(
        tuple(benchmarks),
        _tuple(section.get("evals")),
        bool(section.get("required", False)),
        _hardware_points(section),
        _tuple(section.get("forms")) or ("alone",),
    )


def _optimisation(d: Mapping[str, Any]) -> m.Optimisation:
    return m.Optimisation(
        d["id"], d["title"], d.get("summary", ""), _tuple(d.get("owners")), freeze(_tuple(d.get("links")))
    )


def _model(d: Mapping[str, Any]) -> m.ModelSpec:
    return m.ModelSpec(
        d["id"],
        _tuple(d["code_paths"]),
        _tuple(d.get("allowed_paths")),
        d.get("revision"),
        d.get("architecture"),
        _tuple(d.get("gated_paths")),
    )


def _switch(d: Mapping[str, Any]) -> m.Switch:
    enable = d.get("enable") or {}
    proof = d.get("proof")
    return m.Switch(
        name=d["name"],
        default=d["default"],
        engine_arg=enable.get("engine_arg"),
        server_flag=enable.get("server_flag"),
        env=enable.get("env"),
        proof=None
        if proof is None
        else m.SwitchProof(
            proof["source"],
            proof.get("metric"),
            proof.get("label"),
            proof.get("value", d["name"]),
            proof.get("metrics_path", "/metrics"),
            tuple(_census_rule(r) for r in _listed(proof.get("census"))),
            proof.get("log_signature"),
        ),
        points=_hardware_points(d),
        description=d.get("description", ""),
        inert=freeze({dim: tuple(values) for dim, values in (d.get("inert") or {}).items()}),
        threshold=None
        if d.get("threshold") is None
        else (str(d["threshold"]["dimension"]), int(d["threshold"]["max"])),
        refused=tuple(_refused(r) for r in d.get("refused") or ()),
        exact=bool(d.get("exact", False)),
        option=enable.get("option"),
        option_value=enable.get("value"),
        option_stock=enable.get("stock"),
        rival_of=d["name"] if enable.get("arms") else None,
    )


def _refused(d: Mapping[str, Any]) -> m.Refused:
    return m.Refused(
        id=str(d["id"]),
        message=str(d["message"]),
        serve_args=tuple(str(a) for a in d.get("serve_args") or ()),
        env=env_map(d.get("env")),
        points=_hardware_points(d),
        timeout_s=None if d.get("timeout_s") is None else float(d["timeout_s"]),
    )


def _switch_arms(d: Mapping[str, Any]) -> tuple[m.Switch, ...]:
    """A switch with rival ``enable.arms`` as one switch per arm: named by its value, counted under
    it unless the proof names a value, each a candidate of its own; any other switch as it is."""
    switch = _switch(d)
    arms = (d.get("enable") or {}).get("arms") or ()
    if not arms:
        return (switch,)
    explicit = "value" in (d.get("proof") or {})
    return tuple(
        replace(
            switch,
            name=str(value),
            option_value=str(value),
            proof=switch.proof if switch.proof is None or explicit else replace(switch.proof, value=str(value)),
        )
        for value in arms
    )


def _listed(value: Any) -> list[Mapping[str, Any]]:
    """One mapping or a list of them (``expect``, ``census``) as a list."""
    if value is None:
        return []
    return [value] if isinstance(value, Mapping) else list(value)


def _region(d: Mapping[str, Any]) -> Mapping[str, tuple[Any, ...]]:
    return freeze({dim: tuple(values) for dim, values in (d.get("points") or {}).items()})


def _census_rule(d: Mapping[str, Any]) -> m.CensusRule:
    ratio = d.get("max_kernels_per_layer_ratio")
    return m.CensusRule(
        _region(d),
        None if ratio is None else float(ratio),
        _tuple(d.get("kernels_present")),
        _tuple(d.get("kernels_absent")),
        None if d.get("min_streams_per_step") is None else int(d["min_streams_per_step"]),
    )


def _scope(d: Mapping[str, Any]) -> m.Scope:
    hardware = tuple(
        m.HardwareEntry(
            i,
            h["accelerator"],
            _tuple(h["device_counts"]),
            _tuple(h["tensor_parallel"]),
            h.get("interconnect"),
            h.get("nvlink_domain"),
            None if h.get("compute_capability") is None else str(h["compute_capability"]),
            None if h.get("min_compute_capability") is None else str(h["min_compute_capability"]),
            h.get("gfx_arch"),
        )
        for i, h in enumerate(d["hardware"])
    )
    batch = d.get("batch")
    context = d.get("context")
    spec = d.get("speculative")
    par = d.get("parallelism") or {}
    return m.Scope(
        hardware=hardware,
        batch=None if batch is None else m.BatchRange(batch["min"], batch["max"], _tuple(batch.get("points")) or None),
        context=None if context is None else m.ContextSpec(context["max_tokens"], _tuple(context.get("buckets"))),
        speculative=None
        if spec is None
        else m.SpeculativeSpec(
            spec["method"],
            _tuple(spec["draft_lengths"]),
            spec.get("acceptance", "measured"),
            spec.get("min_acceptance_length"),
            _hardware_points(spec),
            float(spec.get("acceptance_margin", 0.10)),
        ),
        parallelism=m.Parallelism(
            _tuple(par.get("tensor")),
            _tuple(par.get("expert")),
            _tuple(par.get("decode_context")),
            _tuple(par.get("data")),
        ),
        dtypes=_tuple(d.get("dtypes")),
        engine=freeze({name: tuple(values) for name, values in (d.get("engine") or {}).items()}),
        models=tuple(str(x) for x in d.get("models") or ()),
        tokens_per_step=_tuple(d.get("tokens_per_step")),
    )


def _target(d: Mapping[str, Any], scope: Mapping[str, Any]) -> m.Target:
    py = d.get("python")
    oa = d.get("openai")
    dependencies = tuple(
        m.Dependency(
            x["name"],
            x.get("version"),
            x.get("commit"),
            x.get("module"),
            None if x.get("command") is None else tuple(x["command"]),
        )
        for x in d.get("dependencies") or ()
    )
    if d["kind"] == "vllm" and d.get("vllm"):
        from fasttrack.manifest import vllm_serve

        vllm = vllm_serve.build(dict(d["vllm"]))
        data_parallel = any(degree > 1 for degree in (scope.get("parallelism") or {}).get("data") or ())
        return m.Target(
            kind="vllm", openai=vllm_serve.as_openai(vllm, data_parallel), vllm=vllm, dependencies=dependencies
        )
    if d["kind"] == "sglang" and d.get("sglang"):
        from fasttrack.manifest import sglang_launch

        sglang = sglang_launch.build(dict(d["sglang"]))
        data_parallel = any(degree > 1 for degree in (scope.get("parallelism") or {}).get("data") or ())
        return m.Target(
            kind="sglang",
            openai=sglang_launch.as_openai(sglang, data_parallel),
            sglang=sglang,
            dependencies=dependencies,
        )
    return m.Target(
        kind=d["kind"],
        python=None if py is None else m.PythonTarget(py["factory"], py.get("path"), freeze(py.get("options") or {})),
        openai=None if oa is None else openai_servers.build(oa),
        dependencies=dependencies,
    )


def _kernel_test(d: Mapping[str, Any]) -> m.KernelTest:
    return m.KernelTest(
        d["id"],
        _tuple(d["paths"]),
        _tuple(d.get("covers")),
        _tuple(d.get("args")),
        env_map(d.get("env")),
        d.get("required", True),
        d.get("timeout_s"),
        freeze(d),
        _tuple(d.get("required_tests")),
        d.get("device_count"),
    )


def _family(data: Mapping[str, Any], ev: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The eval's family (``family`` of ``eval_families``) with its size and the alpha each test
    runs at: the family's alpha / its size (Bonferroni), or None."""
    name = ev.get("family")
    declared = (data.get("eval_families") or {}).get(name) if name is not None else None
    if declared is None:
        return None
    members = sorted(e["id"] for e in data.get("evals") or () if e.get("family") == name)
    alpha = float(declared["alpha"])
    return freeze(
        {
            "name": name,
            "alpha": alpha,
            "correction": declared.get("correction", "bonferroni"),
            "members": members,
            "adjusted_alpha": alpha / len(members),
        }
    )


def _eval(d: Mapping[str, Any], family: Mapping[str, Any] | None = None) -> m.EvalSpec:
    return m.EvalSpec(
        id=d["id"],
        task=d["task"],
        metric=d["metric"],
        margin=float(d["margin"]),
        alpha=float(family["adjusted_alpha"]) if family is not None else float(d["alpha"]),
        family=family,
        task_dir=d.get("task_dir"),
        data_files=_tuple(d.get("data_files")),
        higher_is_better=d.get("higher_is_better", True),
        power=float(d.get("power", 0.8)),
        repeats=d.get("repeats", 1),
        limit=d.get("limit"),
        sequential=freeze(d.get("sequential") or {}),
        generation=freeze(d.get("generation") or {}),
        bins=freeze(d["bins"]) if d.get("bins") else None,
        required=d.get("required", True),
        timeout_s=d.get("timeout_s"),
        raw=freeze(d),
        points=_hardware_points(d),
        regression=d.get("regression", "warn"),
    )


def _hardware_points(d: Mapping[str, Any]) -> Mapping[str, tuple[Any, ...]]:
    return freeze({dim: tuple(values) for dim, values in (d.get("points") or {}).items()})


def _divergence(d: Mapping[str, Any]) -> m.Divergence:
    return m.Divergence(
        d.get("prompts_from"),
        _tuple(d.get("buckets")),
        d.get("max_prompts"),
        d.get("max_mean_kl"),
        d.get("max_p99_kl"),
        d.get("min_top1_agreement"),
        d.get("required", True),
        d.get("timeout_s"),
        freeze(d),
        _hardware_points(d),
        freeze({dtype: dict(values) for dtype, values in (d.get("dtypes") or {}).items()}),
    )


def _features(preserve: Mapping[str, Any], settings: Mapping[str, Any]) -> tuple[m.FeatureProbe, ...]:
    probes = []
    for name in m.PRESERVED_FEATURES:
        conf = dict(settings.get(name) or {})
        enabled = bool(preserve.get(name, False)) and conf.pop("enabled", True)
        required = conf.pop("required", True)
        timeout = conf.pop("timeout_s", None)
        points = _hardware_points(conf)
        conf.pop("points", None)
        probes.append(m.FeatureProbe(name, enabled, required, timeout, freeze(conf), points))
    return tuple(probes)


def _benchmark(d: Mapping[str, Any]) -> m.Benchmark:
    claims = []
    for c in d.get("claims") or ():
        claims.append(
            m.Claim(
                id=c["id"],
                statement=c["statement"],
                baseline=m.ClaimSide(c["baseline"].get("value"), freeze(resolve_setup(d, c, "baseline") or {})),
                candidate=m.ClaimSide(c["candidate"].get("value"), freeze(resolve_setup(d, c, "candidate") or {})),
                speedup=freeze(c.get("speedup")),
                tolerance=c.get("tolerance"),
                conditions=freeze(c.get("conditions") or {}),
                source=c.get("source"),
                comparable=c.get("comparable"),
            )
        )
    return m.Benchmark(
        id=d["id"],
        metric=d["metric"],
        higher_is_better=d.get("higher_is_better", not m.lower_is_better(d["metric"])),
        points=freeze({k: tuple(v) for k, v in (d.get("points") or {}).items()}),
        workload=freeze(d.get("workload") or {}),
        setups=freeze(d.get("setups") or {}),
        claims=tuple(claims),
        repeats=d.get("repeats", 1),
        required=d.get("required", True),
        timeout_s=d.get("timeout_s"),
        raw=freeze(d),
        alpha=float(d.get("alpha", m.DEFAULT_SPEED_ALPHA)),
        expect=tuple(m.SpeedPromise(float(e["min_speedup"]), _region(e)) for e in _listed(d.get("expect"))),
        max_pairs=int(d.get("max_pairs", m.DEFAULT_MAX_PAIRS)),
        margin=float(d.get("margin", m.DEFAULT_SLOWDOWN_MARGIN)),
        regression=d.get("regression", "warn"),
    )


def _audit(d: Mapping[str, Any]) -> m.Audit:
    return m.Audit(
        d["id"],
        d["kind"],
        d["test"],
        d.get("repeats", 1),
        d.get("delay_env"),
        _tuple(d.get("delays_us")),
        _tuple(d.get("tools")),
        d.get("required", True),
        d.get("timeout_s"),
        freeze(d),
    )
