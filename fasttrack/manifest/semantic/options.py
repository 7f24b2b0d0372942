"""Rules of option-valued switches (``enable.option``: a value of an existing engine option, e.g.
``--moe-backend``) and their rival ``arms``: a value or arms, a stock value that differs from
every candidate value, a server target whose sides fasttrack starts, no side's own arguments
setting the option (``--opt v`` and ``--opt=v`` alike; vLLM reads ``--opt_name`` as
``--opt-name``), one switch with arms, no ablation beside them, and claims that name their arm."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from fasttrack.manifest.build import long_option
from fasttrack.manifest.problems import Path, Problem, json_path
from fasttrack.manifest.sections import SERVER_KINDS
from fasttrack.manifest.semantic.common import error, switch_entries

OPTION_KEYS = ("value", "arms", "stock")


def option_switches(data: Mapping[str, Any]) -> Iterator[Problem]:
    kind = data["target"]["kind"]
    entries = switch_entries(data)
    owners: dict[str, Path] = {}
    with_arms: list[Path] = []
    for path, switch in entries:
        enable = switch.get("enable") or {}
        option = enable.get("option")
        if not option:
            given = [key for key in OPTION_KEYS if enable.get(key) is not None]
            if given:
                yield error((*path, "enable", given[0]), f"{given[0]} belongs to an option switch: set enable.option")
            continue
        yield from _one_option(path, switch, kind)
        name = long_option(option)
        if name in owners:
            yield error(
                (*path, "enable", "option"),
                f"option {option} is also the switch at {json_path(owners[name])}'s: one switch per option "
                "(rival values of one option are that switch's arms)",
            )
        owners.setdefault(name, path)
        if enable.get("arms"):
            with_arms.append(path)
    for path in with_arms[1:]:
        yield error(
            (*path, "enable", "arms"),
            f"only one switch may have rival arms (the switch at {json_path(with_arms[0])} has them)",
        )
    if with_arms and data.get("ablation") is not None:
        yield error(("ablation",), "ablation beside rival arms: each arm is already a candidate judged alone")
    yield from _arm_names(entries)
    yield from _set_by_sides(data, owners)
    arms = [str(a) for path, s in entries if with_arms and path == with_arms[0] for a in s["enable"]["arms"]]
    yield from _claims_name_arms(data, arms)


def _one_option(path: Path, switch: Mapping[str, Any], kind: str) -> Iterator[Problem]:
    enable = switch.get("enable") or {}
    option, value, arms, stock = (enable.get(k) for k in ("option", "value", "arms", "stock"))
    if value is None and not arms:
        yield error(
            (*path, "enable"), f"option switch {option}: give the candidate's value (value) or rival arms (arms)"
        )
    if value is not None and arms:
        yield error((*path, "enable", "arms"), "give value (one candidate) or arms (rival candidates), not both")
    for key, values in (("value", [value]), ("arms", list(arms or ()))):
        for j, candidate in enumerate(values):
            if candidate is not None and stock is not None and str(candidate) == str(stock):
                where = (*path, "enable", key) if key == "value" else (*path, "enable", key, j)
                yield error(
                    where,
                    f"{option} {candidate} is also the stock value: that candidate would run the stock path",
                )
    others = [k for k in ("engine_arg", "server_flag", "env") if enable.get(k)]
    if others:
        yield error(
            (*path, "enable", others[0]), f"an option switch is turned on by {option} alone: remove {others[0]}"
        )
    if kind not in SERVER_KINDS:
        yield error(
            (*path, "enable", "option"),
            f"option switch {option} needs a server target (openai, vllm, sglang): fasttrack passes the option on each "
            "side's command",
        )


def _arm_names(entries: list[tuple[Path, Mapping[str, Any]]]) -> Iterator[Problem]:
    """An arm is named by its value: it must not be another switch's name."""
    names = {str(s.get("name")): path for path, s in entries}
    for path, switch in entries:
        for j, arm in enumerate((switch.get("enable") or {}).get("arms") or ()):
            if str(arm) in names and names[str(arm)] != path:
                yield error(
                    (*path, "enable", "arms", j),
                    f"arm {arm!r} has the name of the switch at {json_path(names[str(arm)])}: each candidate needs its own",
                )


def _side_args(data: Mapping[str, Any]) -> Iterator[tuple[Path, list[Any]]]:
    """(path, words) of every command, serve_args, server_args or benchmark engine_args list a side starts with."""
    target = data["target"]
    if target["kind"] == "openai" and isinstance(target.get("openai"), Mapping):
        for side in ("baseline", "candidate"):
            conf = target["openai"].get(side) or {}
            yield ("target", "openai", side, "command"), list(conf.get("command") or ())
    for kind, key in (("vllm", "serve_args"), ("sglang", "server_args")):
        if target["kind"] == kind and isinstance(target.get(kind), Mapping):
            conf = target[kind]
            yield ("target", kind, key), list(conf.get(key) or ())
            for side in ("baseline", "candidate"):
                yield ("target", kind, side, key), list((conf.get(side) or {}).get(key) or ())
    for i, bench in enumerate(data.get("benchmarks") or ()):  # a benchmark's own server arguments
        for side in ("baseline", "candidate") if isinstance(bench, Mapping) else ():
            words = ((bench.get("setups") or {}).get(side) or {}).get("engine_args") or ()
            yield ("benchmarks", i, "setups", side, "engine_args"), list(words)


def _set_by_sides(data: Mapping[str, Any], owners: Mapping[str, Path]) -> Iterator[Problem]:
    if not owners:
        return
    for path, words in _side_args(data):
        for index, word in enumerate(words):
            name = long_option(str(word))
            if name in owners:
                yield error(
                    (*path, index),
                    f"{word} sets {name}, the option of the switch at {json_path(owners[name])}: fasttrack sets it on "
                    "each side (the candidate's value, the stock value or nothing on the baseline); remove it here",
                )
    openai = data["target"].get("openai") if data["target"]["kind"] == "openai" else None
    for side in ("baseline", "candidate"):
        if isinstance(openai, Mapping) and (openai.get(side) or {}).get("url"):
            yield error(
                ("target", "openai", side, "url"),
                "an option switch needs fasttrack to start the server (a command): a running server at a url "
                "has the option it was started with",
            )


def _claims_name_arms(data: Mapping[str, Any], arms: list[str]) -> Iterator[Problem]:
    """With rival arms, "the candidate" is one arm: a claim names it (candidate setup ``arm``)."""
    for i, bench in enumerate(data.get("benchmarks") or ()):
        if not isinstance(bench, Mapping):
            continue
        default = ((bench.get("setups") or {}).get("candidate") or {}).get("arm")
        for j, claim in enumerate(bench.get("claims") or ()):
            arm = ((claim.get("candidate") or {}).get("setup") or {}).get("arm", default)
            path = ("benchmarks", i, "claims", j, "candidate")
            if arm is None and arms:
                yield error(
                    path, f"the candidate is one of the arms {', '.join(arms)}: say which (candidate setup arm)"
                )
            elif arm is not None and str(arm) not in arms:
                known = f"the arms are {', '.join(arms)}" if arms else "no switch declares arms"
                yield error(path, f"arm {arm!r} is not an arm of this manifest ({known})")
