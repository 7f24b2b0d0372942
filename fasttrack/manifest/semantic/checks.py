"""Rules of the checks' own sections: kernel tests, evals, divergence, feature probes, audits."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from fasttrack.manifest.problems import Problem
from fasttrack.manifest.sections import PRESERVED_FEATURES
from fasttrack.manifest.semantic.common import (
    dimension_values,
    duplicates,
    error,
    increasing,
    present_dimensions,
    region_problems,
    warning,
)


def kernel_tests(data: Mapping[str, Any]) -> Iterator[Problem]:
    tests = data.get("kernel_tests") or []
    yield from duplicates(tests, ("kernel_tests",), "kernel test")
    present = present_dimensions(data["scope"])
    for index, test in enumerate(tests):
        for j, dim in enumerate(test.get("covers") or ()):
            if dim not in present:
                yield error(
                    ("kernel_tests", index, "covers", j),
                    f"covers dimension {dim!r}, which the scope does not declare (declared: {', '.join(sorted(present))})",
                )
        yield from _kernel_claims(data, test, ("kernel_tests", index))
        yield from _own_hardware(data, test, ("kernel_tests", index, "device_count"))


def _own_hardware(data: Mapping[str, Any], test: Mapping[str, Any], path: tuple) -> Iterator[Problem]:
    """A suite's own hardware is smaller than every GPU deployment it stands for: more devices
    than a deployment has would test a machine the optimisation does not target."""
    wanted = test.get("device_count")
    if wanted is None:
        return
    for i, entry in enumerate(data["scope"].get("hardware") or ()):
        counts = [c for c in entry.get("device_counts") or () if isinstance(c, int)]
        if str(entry.get("accelerator", "")).lower() != "cpu" and counts and wanted > min(counts):
            yield error(
                path,
                f"the suite's own hardware ({wanted} devices) is larger than scope hardware entry {i + 1} "
                f"({entry.get('accelerator')} x{min(counts)}): a suite's device_count is at most each GPU entry's smallest",
            )


def _kernel_claims(data: Mapping[str, Any], test: Mapping[str, Any], path: tuple) -> Iterator[Problem]:
    """Claims about a suite's micro-benchmarks: a speedup or a difference, judged at the suite's
    points (a region naming a dimension the suite's outcomes do not carry would never be judged),
    ids unique across the manifest's claims."""
    taken = {c.get("id") for b in data.get("benchmarks") or () for c in b.get("claims") or ()}
    for t in data.get("kernel_tests") or ():
        if t is not test:
            taken |= {c.get("id") for c in t.get("claims") or ()}
    dims = {"accelerator", "device_count", *(test.get("covers") or ())}
    values, present = dimension_values(data["scope"]), present_dimensions(data["scope"])
    seen: set[str] = set()
    for j, claim in enumerate(test.get("claims") or ()):
        cpath = (*path, "claims", j)
        if claim["id"] in taken or claim["id"] in seen:
            yield error((*cpath, "id"), f"duplicate claim id {claim['id']!r}")
        seen.add(claim["id"])
        if claim.get("speedup") is None and claim.get("difference") is None:
            yield error(cpath, f"claim {claim['id']!r} states neither a speedup nor a difference")
        region = claim.get("points") or {}
        yield from region_problems(data["scope"], values, present, region, cpath)
        for dim in region:
            if dim in present and dim not in dims:
                yield error(
                    (*cpath, "points", dim),
                    f"the suite's outcomes do not carry {dim!r} (it covers {', '.join(sorted(dims))}): "
                    "the claim would never be judged",
                )


def evals(data: Mapping[str, Any]) -> Iterator[Problem]:
    evals = data.get("evals") or []
    yield from duplicates(evals, ("evals",), "eval")
    for index, ev in enumerate(evals):
        path = ("evals", index)
        bins = ev.get("bins")
        if bins:
            yield from increasing(bins["edges"], (*path, "bins", "edges"), "bin edges")
            if bins.get("margin") is not None and float(bins["margin"]) < float(ev["margin"]):
                yield error(
                    (*path, "bins", "margin"),
                    f"bins.margin {bins['margin']:g} is narrower than the eval's margin {ev['margin']:g}: a bin "
                    "is a share of the items and cannot be judged more strictly than all of them",
                )
        if ev.get("min_score") is not None and ev.get("higher_is_better") is False:
            yield error((*path, "min_score"), "min_score is a floor for a metric where higher is better")
        yield from _reference(ev, path)
        yield from _family(data, ev, path)
        if ev.get("fewshot_as_multiturn") and not ev.get("apply_chat_template"):
            yield error(
                (*path, "fewshot_as_multiturn"), "fewshot_as_multiturn needs apply_chat_template: true (as lm-eval's)"
            )
        for key in ("max_length", "tokenized_requests", "tokenizer_backend"):
            if key in (ev.get("model_args") or {}) and not ev.get("lm_eval_model"):
                yield warning(
                    (*path, "model_args", key),
                    f"model_args.{key} configures lm-eval's own client and has no effect here: fasttrack sends each "
                    "side's requests to the target itself",
                )
        seq = ev.get("sequential") or {}
        if seq.get("enabled") and ev.get("limit") and seq.get("min_samples", 0) > ev["limit"]:
            yield error(
                (*path, "sequential", "min_samples"), f"min_samples {seq['min_samples']} exceeds limit {ev['limit']}"
            )


def _family(data: Mapping[str, Any], ev: Mapping[str, Any], path: tuple[Any, ...]) -> Iterator[Problem]:
    """An eval's family is declared, and the eval states the family's alpha (it runs at a share of it)."""
    name = ev.get("family")
    if name is None:
        return
    families = data.get("eval_families") or {}
    if name not in families:
        known = ", ".join(sorted(families)) or "none"
        yield error((*path, "family"), f"family {name!r} is not declared under eval_families (declared: {known})")
    elif float(ev["alpha"]) != float(families[name]["alpha"]):
        yield error(
            (*path, "alpha"),
            f"alpha {ev['alpha']:g} differs from its family {name!r}'s {families[name]['alpha']:g}: an eval in a "
            "family states the family's alpha and runs at its share of it",
        )


def _reference(ev: Mapping[str, Any], path: tuple[Any, ...]) -> Iterator[Problem]:
    """``reference`` gives ``value`` or vLLM's ``metrics`` (an entry named as the eval's metric), not both."""
    ref = ev.get("reference")
    if not ref:
        return
    named = [m for m in ref.get("metrics") or () if str(m.get("name")).split(",")[0] == ev.get("metric")]
    if ref.get("value") is not None and ref.get("metrics"):
        yield error((*path, "reference"), "give the reference's value or its metrics list, not both")
    elif ref.get("value") is None and not named:
        yield error(
            (*path, "reference"),
            f"the reference gives no value for the eval's metric {ev.get('metric')!r} (value, or a metrics entry "
            "named as it, e.g. 'exact_match,strict-match' for exact_match)",
        )


def divergence(data: Mapping[str, Any]) -> Iterator[Problem]:
    div = data.get("divergence")
    if not div:
        return
    ids = [e["id"] for e in data.get("evals") or ()]
    source = div.get("prompts_from")
    if source is not None and source not in ids:
        yield error(
            ("divergence", "prompts_from"), f"prompts_from {source!r} names no eval (evals: {', '.join(ids) or 'none'})"
        )
    if div.get("buckets"):
        yield from increasing(div["buckets"], ("divergence", "buckets"), "divergence buckets")
    scope = data.get("scope")
    declared = list(scope.get("dtypes") or ()) if isinstance(scope, Mapping) else []
    for dtype in div.get("dtypes") or {}:
        if dtype not in declared:
            yield error(
                ("divergence", "dtypes", dtype),
                f"thresholds for dtype {dtype!r}, which the scope does not declare (scope.dtypes: "
                f"{', '.join(declared) or 'none'}): nothing runs at it",
            )


def compared_positions(data: Mapping[str, Any]) -> Iterator[Problem]:
    """*Warning*: the declared context goes further than any end-to-end comparison of positions:
    divergence's buckets end before ``scope.context.max_tokens`` and the full-context probe, which
    teacher-forces every position up to it, does not run. A bug that starts far out (a mask or a
    position computed in a narrow dtype) would pass."""
    context, div = data["scope"].get("context"), data.get("divergence")
    if not isinstance(context, Mapping) or not isinstance(div, Mapping) or not div.get("buckets"):
        return
    probe = (data.get("features") or {}).get("full_context") or {}
    if (data.get("preserve") or {}).get("full_context") and probe.get("enabled", True):
        return
    last, limit = int(div["buckets"][-1]), int(context["max_tokens"])
    if last < limit:
        yield warning(
            ("divergence", "buckets"),
            f"divergence compares positions up to {last} and no full-context probe runs: positions {last}-{limit} "
            "of the declared context are compared end to end by no check (extend the buckets or preserve full_context)",
        )


def features(data: Mapping[str, Any]) -> Iterator[Problem]:
    preserve = data["preserve"]
    for name, conf in (data.get("features") or {}).items():
        if name in PRESERVED_FEATURES and conf and conf.get("enabled", True) and not preserve.get(name, False):
            yield error(("features", name), f"a probe for {name!r} is configured but preserve.{name} is not true")


def audits(data: Mapping[str, Any]) -> Iterator[Problem]:
    audits = data.get("audits") or []
    yield from duplicates(audits, ("audits",), "audit")
    has_gpu = any(h["accelerator"].strip().lower() != "cpu" for h in data["scope"]["hardware"])
    for index, audit in enumerate(audits):
        path = ("audits", index)
        if audit["kind"] == "compute_sanitizer":
            if not audit.get("tools"):
                yield error(path, "a compute_sanitizer audit needs 'tools' (memcheck, racecheck, synccheck, initcheck)")
            for key in ("delay_env", "delays_us"):
                if key in audit:
                    yield error((*path, key), f"{key!r} applies to stress audits, not compute_sanitizer")
            if not has_gpu:
                yield warning(
                    path, "compute-sanitizer needs an NVIDIA GPU, and the scope declares none: this audit can never run"
                )
        else:
            if "tools" in audit:
                yield error((*path, "tools"), "'tools' applies to compute_sanitizer audits, not stress")
            if audit.get("delays_us") and not audit.get("delay_env"):
                yield error((*path, "delays_us"), "delays_us needs delay_env (the variable the test reads)")
