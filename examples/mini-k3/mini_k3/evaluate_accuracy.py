"""Accuracy of the stock path on the shipped evaluation sets (greedy, no constraints).

    python -m mini_k3.evaluate_accuracy --out results.json [--weights DIR] [--limit N] [--device cpu]

Grading: MRCR by the official rule (0 unless the response starts with the random string, else
difflib SequenceMatcher ratio after removing it), reported per length bin; AIME format by exact
match of the last ``\\boxed{}``; JSON prompts by the fraction of outputs that parse and validate
against the row's schema. Generation is plain greedy decoding through the model's cache
(`MiniK3.prefill` + `MiniK3.decode_step`), rows batched by prompt length.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

from .data import aime, json_output, mrcr
from .model import MiniK3, load_pretrained
from .tokenizer import ByteTokenizer

EVAL_DIR = Path(__file__).resolve().parents[1] / "data" / "eval"
MAX_NEW_TOKENS = {"mrcr": 96, "aime25": 640, "json": 192}


@torch.no_grad()
def greedy_generate(model: MiniK3, prompts: list[list[int]], max_new_tokens: int, stop_ids: tuple[int, ...],
                    batch_tokens: int = 32768, device="cpu") -> list[list[int]]:
    """Greedy continuations (stop token excluded) of each prompt, batched by similar length."""
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    results: list[list[int]] = [[] for _ in prompts]
    i = 0
    while i < len(order):
        longest = len(prompts[order[min(len(order) - 1, i)]])
        n = max(1, batch_tokens // (longest + max_new_tokens))
        chunk = order[i: i + n]
        longest = max(len(prompts[j]) for j in chunk)
        i += len(chunk)
        max_len = min(model.config.max_position, longest + max_new_tokens)
        cache = model.new_cache(len(chunk), max_len, device=device)
        logits = model.prefill([prompts[j] for j in chunk], cache)
        positions = torch.tensor([len(prompts[j]) for j in chunk], device=device)
        done = torch.zeros(len(chunk), dtype=torch.bool, device=device)
        stops = torch.tensor(stop_ids, device=device)
        outs: list[list[int]] = [[] for _ in chunk]
        for _ in range(max_new_tokens):
            nxt = logits.argmax(-1)
            done |= torch.isin(nxt, stops) | (positions >= max_len)
            if bool(done.all()):
                break
            for b, token in enumerate(nxt.tolist()):
                if not done[b]:
                    outs[b].append(token)
            logits = model.decode_step(nxt, positions.clamp(max=max_len - 1), cache)
            positions = positions + 1
        for b, j in enumerate(chunk):
            results[j] = outs[b]
    return results


def read_jsonl(path: Path, limit: int | None) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows[:limit] if limit else rows


SETS = ("mrcr", "aime25", "json")


def evaluate(model: MiniK3, tokenizer: ByteTokenizer, data_dir: Path, limit: int | None = None,
             device="cpu", responses_out: Path | None = None, sets: tuple[str, ...] = SETS,
             batch_tokens: int = 32768) -> dict:
    report: dict = {}
    dumped: dict[str, list] = {}

    def run(name: str, rows: list[dict], messages_of) -> list[str]:
        prompts = [tokenizer.apply_chat_template(messages_of(r), tokenize=True) for r in rows]
        outs = greedy_generate(model, prompts, MAX_NEW_TOKENS[name], tokenizer.stop_ids, batch_tokens, device)
        texts = [tokenizer.decode(o, skip_special=True) for o in outs]
        dumped[name] = texts
        return texts

    t0 = time.time()
    if "mrcr" in sets:
        report["mrcr"] = _mrcr(run, data_dir, limit, t0)
    if "aime25" in sets:
        report["aime25"] = _aime(run, data_dir, limit)
    if "json" in sets:
        report["json"] = _json(run, data_dir, limit)
    if responses_out:
        responses_out.write_text(json.dumps(dumped, indent=1) + "\n")
    return report


def _mrcr(run, data_dir: Path, limit: int | None, t0: float) -> dict:
    rows = read_jsonl(data_dir / "mrcr.jsonl", None)
    if limit:  # keep every bin represented
        by_bin: dict[str, list] = {}
        for r in rows:
            by_bin.setdefault(mrcr.length_bin(r["n_chars"]), []).append(r)
        rows = [r for group in by_bin.values() for r in group[:limit]]
    texts = run("mrcr", rows, mrcr.messages_of)
    bins: dict[str, list[float]] = {}
    for r, text in zip(rows, texts):
        bins.setdefault(mrcr.length_bin(r["n_chars"]), []).append(
            mrcr.grade(text, r["answer"], r["random_string_to_prepend"]))
    return {
        "by_bin": {b: {"n": len(v), "mean_grade": round(sum(v) / len(v), 4)} for b, v in bins.items()},
        "mean_grade": round(sum(sum(v) for v in bins.values()) / sum(len(v) for v in bins.values()), 4),
        "seconds": round(time.time() - t0, 1),
    }


def _aime(run, data_dir: Path, limit: int | None) -> dict:
    t0 = time.time()
    rows = read_jsonl(data_dir / "aime25.jsonl", limit)
    texts = run("aime25", rows, lambda r: [{"role": "user", "content": r["problem"]}])
    scores = [aime.grade(t, r["answer"]) for r, t in zip(rows, texts)]
    return {"n": len(scores), "exact_match": round(sum(scores) / len(scores), 4),
            "seconds": round(time.time() - t0, 1)}


def _json(run, data_dir: Path, limit: int | None) -> dict:
    t0 = time.time()
    rows = read_jsonl(data_dir / "json.jsonl", limit)
    texts = run("json", rows, lambda r: [{"role": "user", "content": r["prompt"]}])
    scores = [json_output.grade(t, r["schema"]) for r, t in zip(rows, texts)]
    return {"n": len(scores), "schema_valid": round(sum(scores) / len(scores), 4),
            "seconds": round(time.time() - t0, 1)}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description="Greedy accuracy of mini-K3's stock path on the eval sets.")
    ap.add_argument("--weights", type=Path, help="weights folder (default: the shipped weights)")
    ap.add_argument("--data-dir", type=Path, default=EVAL_DIR)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--limit", type=int, help="first N rows of each set (of each MRCR bin)")
    ap.add_argument("--out", type=Path, help="write the results JSON here")
    ap.add_argument("--responses", type=Path, help="also write the generated texts here")
    ap.add_argument("--batch-tokens", type=int, default=32768, help="prompt+generation tokens per batch")
    ap.add_argument("--sets", default=",".join(SETS), help="comma-separated subset of " + ",".join(SETS))
    args = ap.parse_args(argv)
    torch.manual_seed(0)
    model, config, tokenizer = load_pretrained(args.weights, device=args.device)
    sets = tuple(x for x in args.sets.split(",") if x)
    unknown = set(sets) - set(SETS)
    if unknown:
        ap.error(f"unknown sets: {', '.join(sorted(unknown))}")
    report = evaluate(model, tokenizer, args.data_dir, args.limit, args.device, args.responses, sets,
                      args.batch_tokens)
    report["model"] = {"params": sum(p.numel() for p in model.parameters()), "config": config.to_dict(),
                       "device": args.device, "dtype": "float32", "decoding": "greedy, stock path"}
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
