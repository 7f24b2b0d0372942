"""Resolve an lm-eval task from a task folder and run one side of a comparison on chosen docs.

lm-eval is imported inside functions: ``import fasttrack`` stays light.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_UPDATE_DOWNLOAD_COUNTS": "0"}


class EvalConfigError(ValueError):
    """The eval declaration cannot be turned into an lm-eval task (missing folder, task or data)."""


def set_offline_env() -> None:
    """Nothing may touch the network during a gate run (datasets, hub, download counters)."""
    os.environ.update(OFFLINE_ENV)


@dataclass(frozen=True)
class ItemRecord:
    """One side's result on one doc (all repeats)."""

    doc_id: int
    doc_hash: str  # lm-eval's hash of the doc
    prompt_hash: str  # lm-eval's hash of the context string
    rendered_hash: str | None  # hash of what the adapter actually sent (after the chat template)
    score: float  # the metric, averaged over repeats (clustered by item)
    outputs: tuple[str, ...]
    non_finite: int = 0  # responses whose logits were non-finite

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "outputs": list(self.outputs)}

    @staticmethod
    def from_json(d: Mapping[str, Any]) -> ItemRecord:
        return ItemRecord(**{**d, "outputs": tuple(d["outputs"])})


@dataclass(frozen=True)
class ResolvedTask:
    name: str
    config: dict[str, Any]  # full lm-eval config (functions resolved), overrides applied
    task_dir: Path
    definition_hash: str  # task folder files + data files + lm-eval version
    docs: tuple[dict[str, Any], ...]


def resolve_task_dir(task_dir: str, root: Path) -> Path:
    """``task_dir`` relative to ``root``, else inside fasttrack's shipped ``checks/``."""
    path = Path(task_dir)
    if not path.is_absolute():
        path = root / path
    if path.is_dir():
        return path
    parts = Path(task_dir).parts
    if "checks" in parts:
        from fasttrack.resources import data_dir

        shipped = data_dir("checks").joinpath(*parts[parts.index("checks") + 1 :])
        if shipped.is_dir():
            return shipped
    raise EvalConfigError(f"eval task_dir {task_dir!r} is not a folder (looked under {root})")


def shipped_task_dir(task: str) -> Path:
    """The folder under fasttrack's shipped ``checks/evals`` whose YAML defines ``task``."""
    from lm_eval.tasks._yaml_loader import load_yaml

    from fasttrack.resources import data_dir

    for yml in sorted((data_dir("checks") / "evals").glob("*/*.yaml")):
        if load_yaml(yml, resolve_func=False).get("task") == task:
            return yml.parent
    hint = (
        " (for AIME 2025 use task aime25_all or aime25_local from checks/evals/aime25: lm-eval's own aime25 "
        "scores only the first of several repeats)"
        if task.startswith("aime")
        else ""
    )
    raise EvalConfigError(f"task {task!r} is not shipped with fasttrack; declare its task_dir{hint}")


def load_task(eval_cfg: Mapping[str, Any], root: Path) -> ResolvedTask:
    """Find ``eval_cfg['task']`` among the YAML files of its task_dir and apply the overrides."""
    from lm_eval.tasks._yaml_loader import load_yaml

    set_offline_env()
    name = str(eval_cfg["task"])
    task_dir = resolve_task_dir(str(eval_cfg["task_dir"]), root) if eval_cfg.get("task_dir") else shipped_task_dir(name)
    found = None
    for yml in sorted(task_dir.glob("*.yaml")):
        if load_yaml(yml, resolve_func=False).get("task") == name:
            found = yml
            break
    if found is None:
        raise EvalConfigError(f"task {name!r} is not defined in {task_dir}")
    cfg = dict(load_yaml(found, resolve_func=True))
    data_hashes = []
    files = eval_cfg.get("data_files") or ()
    files = [files] if isinstance(files, (str, Path)) else list(files)
    if files:
        paths = []
        for f in files:
            data_path = Path(str(f))
            data_path = data_path if data_path.is_absolute() else root / data_path
            if not data_path.is_file():
                raise EvalConfigError(
                    f"eval {eval_cfg.get('id', name)!r}: data_files {str(data_path)!r} does not exist"
                )
            paths.append(str(data_path))
            data_hashes.append(_file_hash(data_path))
        split = cfg.get("test_split") or "test"
        cfg["dataset_kwargs"] = {
            **(cfg.get("dataset_kwargs") or {}),
            "data_files": {split: paths[0] if len(paths) == 1 else paths},
        }
    if eval_cfg.get("repeats"):
        cfg["repeats"] = int(eval_cfg["repeats"])
    if eval_cfg.get("num_fewshot") is not None:  # lm-eval's num_fewshot, as perf-eval's tasks give it
        cfg["num_fewshot"] = int(eval_cfg["num_fewshot"])
    definition = hashlib.sha256()
    for f in sorted(task_dir.iterdir()):
        if f.suffix in (".yaml", ".py") and f.is_file():
            definition.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    definition.update(
        json.dumps([name, cfg.get("repeats", 1), data_hashes, _lm_eval_version(), cfg.get("num_fewshot")]).encode()
    )
    task = _build(cfg, task_dir)
    docs = tuple(task.eval_docs)
    return ResolvedTask(name, cfg, task_dir, definition.hexdigest(), docs)


def task_contexts(task: ResolvedTask) -> list[tuple[str, Any]]:
    """(context string, reference target) of every doc, as the task's doc_to_text renders them."""
    built = _build(task.config, task.task_dir)
    return [(built.doc_to_text(doc), built.doc_to_target(doc)) for doc in built.eval_docs]


def build_task(task: ResolvedTask) -> Any:
    """A fresh lm-eval ``Task`` object of ``task`` (its data loaded)."""
    return _build(task.config, task.task_dir)


def _build(cfg: dict[str, Any], task_dir: Path) -> Any:
    tm = task_manager(task_dir)
    return tm.load([dict(cfg)])["tasks"][cfg["task"]]


def task_manager(task_dir: Path) -> Any:
    from lm_eval.tasks import TaskManager

    # only our folder: indexing lm-eval's ~10k built-in tasks costs seconds and is not needed
    return TaskManager(include_path=str(task_dir), include_defaults=False)


def lm_eval_gen_kwargs(generation: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The manifest's generation settings as lm-eval ``gen_kwargs`` (they override the task's)."""
    if not generation:
        return None
    out: dict[str, Any] = {}
    if "temperature" in generation:
        out["temperature"] = float(generation["temperature"])
        out["do_sample"] = float(generation["temperature"]) > 0
    if "max_tokens" in generation:
        out["max_gen_toks"] = int(generation["max_tokens"])
    for key in ("top_p", "seed"):
        if key in generation:
            out[key] = generation[key]
    return out or None


def lm_eval_options(eval_cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The lm-eval options an eval declares (recorded in the evidence and the baseline cache key)."""
    keys = ("num_fewshot", "apply_chat_template", "fewshot_as_multiturn", "model_args", "lm_eval_model")
    return {k: eval_cfg[k] for k in keys if eval_cfg.get(k) is not None}


def run_side(
    lm: Any,
    task: ResolvedTask,
    doc_ids: Sequence[int],
    metric: str,
    *,
    apply_chat_template: bool = False,
    seed: int = 1234,
    generation: Mapping[str, Any] | None = None,
    fewshot_as_multiturn: bool | None = None,
    built: Any = None,
) -> dict[int, ItemRecord]:
    """Evaluate ``lm`` on the given docs of ``task`` (sorted ids via lm-eval ``samples``).

    ``generation`` (temperature, max_tokens, top_p, seed) goes to every request as lm-eval
    ``gen_kwargs``, so both sides get identical settings whatever ``LM`` they are. ``built``: the
    task already built (`build_task`), for a side evaluated in a thread beside the other: its
    data are loaded once, before, and each side's lm-eval run configures its own task object.
    """
    import lm_eval

    set_offline_env()
    ids = sorted(int(i) for i in doc_ids)
    if not ids:
        return {}
    out = lm_eval.simple_evaluate(
        model=lm,
        tasks=[built if built is not None else dict(task.config)],
        task_manager=task_manager(task.task_dir),
        samples={task.name: ids},
        log_samples=True,
        bootstrap_iters=0,
        apply_chat_template=apply_chat_template,
        random_seed=seed,
        numpy_random_seed=seed,
        torch_random_seed=seed,
        fewshot_random_seed=seed,
        gen_kwargs=lm_eval_gen_kwargs(generation),
        # lm-eval's own default unless the manifest says (it applies with a chat template only)
        **({} if fewshot_as_multiturn is None else {"fewshot_as_multiturn": bool(fewshot_as_multiturn)}),
    )
    samples = (out or {}).get("samples", {}).get(task.name, [])
    records: dict[int, ItemRecord] = {}
    non_finite = getattr(lm, "non_finite", {})
    rendered = getattr(lm, "rendered_prompt_hash", {})
    for s in samples:
        if metric not in s:
            raise EvalConfigError(
                f"task {task.name!r} reports no metric {metric!r} (has: {', '.join(s.get('metrics', []))})"
            )
        outputs = _flatten(s.get("filtered_resps") or s.get("resps") or [])
        records[int(s["doc_id"])] = ItemRecord(
            doc_id=int(s["doc_id"]),
            doc_hash=s["doc_hash"],
            prompt_hash=s["prompt_hash"],
            rendered_hash=rendered.get(s["prompt_hash"]),
            score=float(s[metric]),
            outputs=tuple(outputs),
            non_finite=int(non_finite.get(s["prompt_hash"], 0)),
        )
    missing = set(ids) - set(records)
    if missing:
        raise EvalConfigError(f"lm-eval returned no result for doc ids {sorted(missing)[:10]}")
    return records


def _flatten(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    out: list[str] = []
    for v in value:
        out.extend(_flatten(v))
    return out


def _file_hash(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _lm_eval_version() -> str:
    from importlib.metadata import version

    return version("lm-eval")
