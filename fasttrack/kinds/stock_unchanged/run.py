"""The stock path is unchanged: with every switch unset, the target at head must generate what the
target at the base commit generates, on the same prompts: identical greedy tokens and logprobs
within the kernel tolerance of the point's dtype.

Many fast-track PRs promise "with the flags unset the code path is unchanged from base", and some
must edit files shared with other models (``model.gated_paths``) to make the optimisation
possible. This check is what makes that promise evidence instead of an assertion.

How, per deployment (narrowed by ``stock_unchanged.points``):

1. The base commit is checked out in a git worktree of its own (``git worktree add --detach``,
   removed afterwards); head is the repository as it is (uncommitted changes included).
2. Each side runs the stock path with the target's own defaults: no switch keyword is passed and
   every environment switch is removed, exactly "the flags unset". In-process targets run in a
   fresh Python process each (``python -P -m fasttrack.kinds.stock_unchanged.run JOB OUT``), whose
   target code is imported from that side's tree; a server target starts the baseline command
   in that side's tree (``cwd`` under the worktree, the worktree first on ``PYTHONPATH``), or uses
   ``stock_unchanged.base_url``: a server of the base build (an engine with compiled parts).
3. Both answer the same greedy requests (every prompt alone and all of them as one batch, by
   default), with top-k logprobs. Any differing token fails the check (the first difference is
   named); so does a logprob further apart than the tolerance.

When no file of the model's code or gated paths differs between the base and the work tree
(committed, uncommitted or untracked), there is nothing to compare and the check passes saying
so: code confinement (the scope_diff check) fails any change outside code, allowed and gated
paths, and allowed paths are tests and docs, which the stock path does not run.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fasttrack.errors import TargetError
from fasttrack.evidence import CheckOutcome, Status
from fasttrack.kinds.context import target_failure
from fasttrack.kinds.stock_unchanged.rule import beyond_tolerance
from fasttrack.targets.protocol import TargetDependencyMissing

if TYPE_CHECKING:
    from fasttrack.kinds.context import RunContext
    from fasttrack.manifest import Manifest
    from fasttrack.plan.instance import CheckInstance

# Varied prompts (chat-like, code-like, numbers, a long line): the stock path at several lengths.
DEFAULT_PROMPTS: tuple[str, ...] = (
    "The weather today is",
    "def fibonacci(n):\n    ",
    "Question: what is 17 + 25?\nAnswer:",
    "Once upon a time, in a city by the sea, there lived a clockmaker who",
    '{"name": "Ada", "role":',
    "1, 1, 2, 3, 5, 8, 13,",
    "Translate to French: good morning ->",
    "The three primary colours are",
)
DEFAULT_MAX_TOKENS = 16
DEFAULT_TOP_LOGPROBS = 5
# Logprob tolerance per dtype, absolute: torch.testing.assert_close's rtol per dtype applied to
# log-probabilities of order 1 (fp32 1.3e-6 -> 1e-5 with the atol; bf16 1.6e-2; fp16 1e-3).
LOGPROB_ATOL: dict[str, float] = {"fp32": 1e-5, "fp16": 1e-3, "bf16": 1.6e-2}
DEFAULT_LOGPROB_ATOL = 1.6e-2  # 8-bit and 4-bit formats: as bf16


@dataclass(frozen=True)
class StockRun:
    """One side's answers: per request key ("b<batch>:<prompt index>"), tokens and logprobs."""

    answers: Mapping[str, Mapping[str, Any]]
    duration_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"answers": {k: dict(v) for k, v in self.answers.items()}, "duration_s": self.duration_s}


def prompts_of(config: Mapping[str, Any]) -> list[str]:
    given = config.get("prompts", 4)
    if isinstance(given, int):
        return list(DEFAULT_PROMPTS[: max(1, min(given, len(DEFAULT_PROMPTS)))])
    return [str(p) for p in given]


def batches_of(config: Mapping[str, Any], prompts: Sequence[str]) -> list[int]:
    return sorted({int(b) for b in config.get("batches") or (1, len(prompts))})


def tolerance(config: Mapping[str, Any], point: Mapping[str, Any] | None) -> float:
    if config.get("logprob_atol") is not None:
        return float(config["logprob_atol"])
    dtype = (point or {}).get("dtype")
    return LOGPROB_ATOL.get(str(dtype), DEFAULT_LOGPROB_ATOL) if dtype else LOGPROB_ATOL["fp32"]


# ------------------------------------------------------------------------------ comparing


@dataclass(frozen=True)
class Comparison:
    status: Status
    reason: str | None
    measurements: dict[str, Any]


def compare_runs(base: StockRun, head: StockRun, atol: float, sides: tuple[str, str] = ("base", "head")) -> Comparison:
    """Identical tokens everywhere, then logprobs (of the generated tokens and the top-k both list)
    within ``atol``. Missing answers on either side are a mismatch too. ``sides`` names the two
    runs in the reasons; at ``atol`` 0 (the exactness promise) top-k lists of other tokens differ too."""
    keys = sorted(set(base.answers) | set(head.answers))
    what = "the stock path changed: " if sides == ("base", "head") else ""
    worst, where, tokens = 0.0, "", 0
    for key in keys:
        b, h = base.answers.get(key), head.answers.get(key)
        if b is None or h is None:
            side = sides[0] if b is None else sides[1]
            return _mismatch(what + f"request {key} has no answer at {side}", keys, tokens, worst, atol)
        bt, ht = list(b["token_ids"]), list(h["token_ids"])
        for pos, (x, y) in enumerate(zip(bt, ht)):
            if x != y:
                return _mismatch(
                    what + f"request {key} (prompt {h.get('prompt', '?')!r}): greedy token {pos} is {y} at "
                    f"{sides[1]}, {x} at {sides[0]} (first {pos} tokens equal)",
                    keys,
                    tokens,
                    worst,
                    atol,
                )
        if len(bt) != len(ht):
            return _mismatch(
                what
                + f"request {key}: {len(ht)} tokens at {sides[1]}, {len(bt)} at {sides[0]} (equal as far as both go)",
                keys,
                tokens,
                worst,
                atol,
            )
        tokens += len(bt)
        for pos, (bl, hl) in enumerate(zip(b["logprobs"], h["logprobs"])):
            diffs = [abs(float(bl["logprob"]) - float(hl["logprob"]))]
            common = set(bl.get("top", {})) & set(hl.get("top", {}))
            diffs += [abs(float(bl["top"][t]) - float(hl["top"][t])) for t in common]
            here = max(d if math.isfinite(d) else math.inf for d in diffs)
            if atol == 0 and (here > 0 or set(bl.get("top", {})) != set(hl.get("top", {}))):
                # the exactness promise: the first difference is the finding (top-k tokens included)
                why = f"request {key} (prompt {h.get('prompt', '?')!r}), token {pos}: " + _logprob_difference(
                    bl, hl, sides
                )
                return _mismatch(why, keys, tokens, here if math.isfinite(here) else worst, atol)
            if here > worst:
                worst, where = here, f"request {key}, token {pos}"
    measurements = {"requests": len(keys), "tokens": tokens, "max_logprob_diff": worst, "logprob_atol": atol}
    if beyond_tolerance(worst, atol):
        return Comparison(
            Status.FAILED,
            f"identical greedy tokens, but logprobs differ by up to {worst:.3g} ({where}), beyond the "
            f"tolerance {atol:g}: the stock path computes something else at head",
            {**measurements, "worst_at": where},
        )
    return Comparison(Status.PASSED, None, measurements)


def _logprob_difference(bl: Mapping[str, Any], hl: Mapping[str, Any], sides: tuple[str, str]) -> str:
    """Where two positions with the same greedy token first differ: its logprob, or the top-k."""
    if float(bl["logprob"]) != float(hl["logprob"]):
        return f"the token's logprob is {float(hl['logprob'])!r} at {sides[1]}, {float(bl['logprob'])!r} at {sides[0]}"
    bt, ht = bl.get("top", {}), hl.get("top", {})
    if set(bt) != set(ht):
        return f"the top-{len(ht)} tokens differ ({sorted(set(ht) ^ set(bt))[:4]} are in one list only)"
    t = next(t for t in sorted(bt) if float(bt[t]) != float(ht[t]))
    return f"the logprob of top-k token {t} is {float(ht[t])!r} at {sides[1]}, {float(bt[t])!r} at {sides[0]}"


def _mismatch(why: str, keys: Sequence[str], tokens: int, worst: float, atol: float) -> Comparison:
    return Comparison(
        Status.FAILED,
        why,
        {
            "requests": len(keys),
            "tokens": tokens,
            "max_logprob_diff": worst,
            "logprob_atol": atol,
            "first_mismatch": why,
        },
    )


# ------------------------------------------------------------------------------ the two trees


def changed_since(root: Path, base: str) -> list[str]:
    """Files of the work tree that differ from ``base``: tracked (committed or not) and untracked."""

    def names(*args: str) -> list[str]:
        out = subprocess.run(["git", *args], cwd=root, capture_output=True, check=False).stdout
        return [n for n in out.decode("utf-8", "surrogateescape").split("\0") if n]

    return sorted(
        {
            *names("diff", "--name-only", "-z", "--no-renames", base, "--"),
            *names("ls-files", "--others", "--exclude-standard", "-z"),
        }
    )


def stock_files_changed(manifest: Manifest, root: Path, base: str) -> list[str]:
    """The changed files the stock path may run: inside model.code_paths or model.gated_paths."""
    from fasttrack.kinds.scope_diff.confine import matches

    paths = [*manifest.model.code_paths, *manifest.model.gated_paths]
    return [f for f in changed_since(root, base) if matches(f, paths)]


@contextmanager
def base_worktree(root: Path, base: str) -> Iterator[Path]:
    """A detached git worktree of ``base``, removed (and pruned) afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="fasttrack-base-"))
    tree = folder / "tree"
    done = subprocess.run(
        ["git", "worktree", "add", "--detach", "--quiet", str(tree), base],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise TargetError(f"cannot check out the base commit {base[:12]} in a worktree: {done.stderr.strip()}")
    try:
        yield tree
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=root, capture_output=True, check=False)
        subprocess.run(["git", "worktree", "prune"], cwd=root, capture_output=True, check=False)
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


# ------------------------------------------------------------------------------ one side's run


def requests_for(prompts: Sequence[str], batches: Sequence[int]) -> list[tuple[str, list[int]]]:
    """(batch label, prompt indices) per batch: batch 1 asks each prompt alone; batch n the first n
    prompts together (cycled when n exceeds them)."""
    groups: list[tuple[str, list[int]]] = []
    for batch in batches:
        if batch == 1:
            groups += [("b1", [i]) for i in range(len(prompts))]
        else:
            groups.append((f"b{batch}", [i % len(prompts) for i in range(batch)]))
    return groups


def answer(target: Any, prompts: Sequence[str], batches: Sequence[int], max_tokens: int, top: int) -> dict[str, Any]:
    """Greedy answers of one ProbeTarget, keyed ``b<batch>:<row>``."""
    from fasttrack.probes.base import CompletionRequest

    answers: dict[str, Any] = {}
    for label, indices in requests_for(prompts, batches):
        requests = [
            CompletionRequest(prompts[i], max_tokens=max_tokens, temperature=0.0, logprobs=top) for i in indices
        ]
        results = target.complete_batch(requests)
        for row, (i, outs) in enumerate(zip(indices, results)):
            out = outs[0]
            key = f"{label}:{i}" if label == "b1" else f"{label}:{row}"
            answers[key] = {
                "prompt": prompts[i],
                "token_ids": list(out.token_ids),
                "logprobs": [
                    {"logprob": float(lp.logprob), "top": {str(t): float(v) for t, v in lp.top.items()}}
                    for lp in out.logprobs or ()
                ],
            }
            if out.logprobs is None or len(out.logprobs) != len(out.token_ids):
                raise TargetError(f"the target returned no logprobs for request {key}: it cannot be compared")
    return answers


def in_tree(manifest: Manifest, root: Path) -> Manifest:
    """The manifest with its paths resolved in another tree (the base worktree)."""
    return replace(manifest, root=root)


def run_in_process_side(
    context: RunContext, instance: CheckInstance, root: Path, name: str, job: Mapping[str, Any]
) -> StockRun:
    """One side's answers from a fresh Python process whose target code comes from ``root``."""
    import fasttrack

    # Absolute: the child runs in ``root`` (the base worktree), where a relative --out means nothing.
    job_path = context.artifact_path(f"stock-{name}-job.json").resolve()
    out_path = context.artifact_path(f"stock-{name}.json").resolve()
    job_path.write_text(json.dumps({**job, "root": str(root)}), encoding="utf-8")
    out_path.unlink(missing_ok=True)
    # This gate's fasttrack first (the trees may hold another); -P: not the working directory.
    gate = str(Path(fasttrack.__file__).resolve().parents[1])
    import os

    pythonpath = os.pathsep.join(p for p in (gate, os.environ.get("PYTHONPATH", "")) if p)
    result = context.run_process(
        [sys.executable, "-P", "-m", "fasttrack.kinds.stock_unchanged.run", str(job_path), str(out_path)],
        log_name=f"stock-{name}.log",
        cwd=root,
        env={"PYTHONPATH": pythonpath},
        timeout_s=context.remaining_s() / 2 if name == "base" else None,
        description=f"stock path at {name}",
    )
    if result.timed_out:
        raise TargetError(f"the stock run at {name} ran past its time")
    if not out_path.exists():
        raise TargetError(
            f"the stock run at {name} ended without answers (exit {result.returncode}): {result.tail(600)}"
        )
    data = json.loads(out_path.read_text(encoding="utf-8"))
    if data.get("missing_module"):  # the target's code at that side needs a module this machine lacks
        raise TargetDependencyMissing(str(data["missing_module"]), f"at {name}")
    if "error" in data:
        raise TargetError(f"at {name}: {data['error']}")
    return StockRun(data["answers"], result.duration_s)


def run_server_side(
    context: RunContext,
    manifest: Manifest,
    root: Path,
    name: str,
    point: Mapping[str, Any] | None,
    job: Mapping[str, Any],
) -> StockRun:
    """One side's answers from the baseline server started in ``root`` (or ``base_url`` for base)."""
    import os
    import time

    from fasttrack.probes.adapters import OpenAIProbeTarget
    from fasttrack.targets.openai.server import ManagedServer, ServerSpec
    from fasttrack.targets.openai.side import server_spec

    config = job["config"]
    started = time.monotonic()
    if name == "base" and config.get("base_url"):
        health = manifest.target.openai.health_path if manifest.target.openai else "/health"
        spec = ServerSpec("baseline", url=str(config["base_url"]), health_path=health)
    else:
        spec = server_spec(in_tree(manifest, root), "baseline", point)
        if name == "base":
            path = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)
            spec = replace(spec, env={**spec.env, "PYTHONPATH": path})
    spec = replace(spec, name=f"stock-{name}")
    server = ManagedServer(spec, context.artifact_dir.resolve())  # its cwd is the tree: absolute paths
    url = server.start()
    try:
        model = manifest.target.openai.model_name if manifest.target.openai else None
        target = OpenAIProbeTarget(url, name=name, model=model)
        answers = answer(target, job["prompts"], job["batches"], job["max_tokens"], job["top_logprobs"])
    finally:
        server.stop()
    return StockRun(answers, time.monotonic() - started)


def run(instance: CheckInstance, context: RunContext) -> CheckOutcome:
    m = context.manifest
    config = dict(instance.config or {})
    point = instance.scope_point.as_dict() if instance.scope_point is not None else None
    prompts = prompts_of(config)
    job = {
        "manifest": str(Path(m.path).resolve()),
        "point": point,
        "prompts": prompts,
        "batches": batches_of(config, prompts),
        "max_tokens": int(config.get("max_tokens", DEFAULT_MAX_TOKENS)),
        "top_logprobs": int(config.get("top_logprobs", DEFAULT_TOP_LOGPROBS)),
        "config": config,
    }
    measurements: dict[str, Any] = {
        "base": context.base,
        "head": context.head,
        "prompts": len(prompts),
        "batches": job["batches"],
        "max_tokens": job["max_tokens"],
        "gated_paths": list(m.model.gated_paths),
    }
    if config.get("exact"):  # a switch's exactness promise: candidate against stock, both at head
        from fasttrack.kinds.stock_unchanged.exact import run_exact

        return run_exact(instance, context, job, measurements)
    if not context.base:
        return context.outcome(
            instance,
            Status.NOT_RUN,
            reason_code="no_base",
            measurements=measurements,
            reason="no base commit to compare the stock path with: pass --base REF (e.g. --base origin/main)",
        )
    root = context.repo_root.resolve()
    changed = stock_files_changed(m, root, context.base)
    measurements["stock_files_changed"] = changed[:50]
    if not changed:
        measurements["identical_stock_files"] = True
        return context.outcome(instance, Status.PASSED, measurements=measurements)
    logs: list[Path] = []
    try:
        with base_worktree(root, context.base) as base_root:
            if m.target.kind == "python":
                base = run_in_process_side(context, instance, base_root, "base", job)
                head = run_in_process_side(context, instance, root, "head", job)
            else:
                base = run_server_side(context, m, base_root, "base", point, job)
                head = run_server_side(context, m, root, "head", point, job)
    except TargetError as err:
        logs = sorted(context.artifact_dir.glob("*.log"))
        status, code = target_failure(err)
        return context.outcome(
            instance,
            status,
            reason_code=code,
            reason=str(err),
            measurements=measurements,
            artifacts=[context.artifact(p, "log", p.stem) for p in logs],
        )
    logs = sorted(context.artifact_dir.glob("*.log"))
    result = compare_runs(base, head, tolerance(config, point))
    for name, side in (("base", base), ("head", head)):
        path = context.artifact_path(f"stock-{name}.json")
        path.write_text(json.dumps(side.to_dict(), indent=1), encoding="utf-8")
        logs.append(path)
    measurements.update(result.measurements, base_s=round(base.duration_s, 2), head_s=round(head.duration_s, 2))
    return context.outcome(
        instance,
        result.status,
        reason_code=None if result.status is Status.PASSED else "mismatch",
        reason=result.reason,
        measurements=measurements,
        artifacts=[context.artifact(p, "json" if p.suffix == ".json" else "log", p.stem) for p in logs],
    )


# ------------------------------------------------------------------------------ the child process


def main(argv: Sequence[str]) -> int:
    """``python -P -m fasttrack.kinds.stock_unchanged.run JOB OUT``: one in-process side's answers."""
    job_path, out_path = Path(argv[0]), Path(argv[1])
    job = json.loads(job_path.read_text(encoding="utf-8"))
    from fasttrack.manifest import load_manifest
    from fasttrack.probes.sides import as_probe_target
    from fasttrack.process.cpu import pin_single_thread
    from fasttrack.targets.sides import open_side

    try:
        manifest = in_tree(load_manifest(job["manifest"]), Path(job["root"]))
        pin_single_thread(manifest, job["point"])
        opened = open_side(manifest, "baseline", job["point"], switch_default=True)
        try:
            target = as_probe_target(manifest, opened)
            answers = answer(target, job["prompts"], job["batches"], job["max_tokens"], job["top_logprobs"])
        finally:
            opened.close()
        out: dict[str, Any] = {"answers": answers}
    except TargetDependencyMissing as err:
        out = {"error": str(err), "missing_module": err.module}
    except TargetError as err:
        out = {"error": str(err)}
    out_path.write_text(json.dumps(out), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
