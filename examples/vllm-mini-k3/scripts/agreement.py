"""Greedy agreement between two sources on mini-k3's evaluation prompts.

    python examples/vllm-mini-k3/scripts/agreement.py --a minik3 --b http://127.0.0.1:8101 --n 60

A source is ``minik3`` (mini-k3's own model in this process, fp32, its stock cached decode) or the
base URL of an OpenAI-compatible server (vLLM), asked through ``/v1/completions`` with the prompt
as token ids, temperature 0, ``logprobs: 1`` and the same ``max_tokens`` as
examples/mini-k3/fasttrack.yaml (MRCR 96, AIME 512). Prompts are built as mini-k3 and the gate's
tasks build them: the row's messages through mini-k3's chat template (MRCR: the conversation;
AIME: the problem as one user message). MRCR takes the first n/3 rows of each length bin.

Printed per set: exact agreement (same tokens and the same end: a stop token or the length
limit), the first-divergence positions, the top-1/top-2 logit gap of source A where they diverge
(a near-tie there is rounding, not a bug), and the largest |logprob difference| of the chosen
token over the tokens both sources generated identically.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.request import Request, urlopen

EVAL_DIR = Path(__file__).resolve().parents[2] / "mini-k3" / "data" / "eval"
MAX_TOKENS = {"mrcr": 96, "aime25": 512}  # examples/mini-k3/fasttrack.yaml


@dataclass
class Gen:
    """One greedy continuation: tokens (stop token excluded), whether it stopped, logprobs."""

    tokens: list[int]
    stopped: bool
    logprobs: list[float]  # of each generated token, and of the stop token last when stopped
    gaps: list[float] | None = None  # top-1 minus top-2 logit per step (in-process source only)


def prompts_of(set_name: str, n: int) -> list[list[int]]:
    from mini_k3.data import mrcr
    from mini_k3.tokenizer import ByteTokenizer

    tok = ByteTokenizer()
    rows = [json.loads(line) for line in (EVAL_DIR / f"{set_name}.jsonl").read_text().splitlines() if line.strip()]
    if set_name == "mrcr":
        by_bin: dict[str, list[dict]] = {}
        for r in rows:
            by_bin.setdefault(mrcr.length_bin(r["n_chars"]), []).append(r)
        per_bin = -(-n // len(by_bin))
        rows = [r for group in by_bin.values() for r in group[:per_bin]]
        return [tok.apply_chat_template(mrcr.messages_of(r), tokenize=True) for r in rows]  # type: ignore[misc]
    return [tok.apply_chat_template([{"role": "user", "content": r["problem"]}], tokenize=True)  # type: ignore[misc]
            for r in rows[:n]]


def generate_minik3(prompts: list[list[int]], max_tokens: int) -> list[Gen]:
    """mini-k3's own greedy decoding (its stock prefill + cached decode), one prompt at a time."""
    import torch

    from mini_k3.model import load_pretrained

    model, _, tok = load_pretrained()
    stops = set(tok.stop_ids)
    out: list[Gen] = []
    with torch.no_grad():
        for prompt in prompts:
            cache = model.new_cache(1, len(prompt) + max_tokens)
            logits = model.prefill([prompt], cache)[0]
            gen = Gen([], False, [], [])
            for step in range(max_tokens):
                lp = torch.log_softmax(logits.float(), -1)
                top2 = logits.float().topk(2).values
                token = int(lp.argmax())
                gen.logprobs.append(float(lp[token]))
                gen.gaps.append(float(top2[0] - top2[1]))  # type: ignore[union-attr]
                if token in stops:
                    gen.stopped = True
                    break
                gen.tokens.append(token)
                if step + 1 < max_tokens:
                    logits = model.decode_step(torch.tensor([token]), torch.tensor([len(prompt) + step]), cache)[0]
            out.append(gen)
    return out


def generate_server(base_url: str, prompts: list[list[int]], max_tokens: int, concurrency: int) -> list[Gen]:
    model = json.loads(urlopen(f"{base_url}/v1/models", timeout=30).read())["data"][0]["id"]

    def one(prompt: list[int]) -> Gen:
        body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0, "logprobs": 1,
                "return_token_ids": True, "skip_special_tokens": False}
        req = Request(f"{base_url}/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
        choice = json.loads(urlopen(req, timeout=600).read())["choices"][0]
        ids, lps = list(choice["token_ids"]), list(choice["logprobs"]["token_logprobs"])
        stopped = choice["finish_reason"] == "stop"
        if stopped and ids and ids[-1] >= 256:  # vLLM keeps the stop token in token_ids
            ids = ids[:-1]
        return Gen(ids, stopped, lps)

    with ThreadPoolExecutor(concurrency) as pool:
        return list(pool.map(one, prompts))


def generate(source: str, prompts: list[list[int]], max_tokens: int, concurrency: int) -> list[Gen]:
    if source == "minik3":
        return generate_minik3(prompts, max_tokens)
    if source.startswith("http"):
        return generate_server(source.rstrip("/"), prompts, max_tokens, concurrency)
    return [Gen(**g) for g in json.loads(Path(source).read_text())]  # a --save file


def compare(a: list[Gen], b: list[Gen]) -> dict[str, object]:
    agree, first_div, gaps, max_dlp = 0, [], [], 0.0
    for x, y in zip(a, b):
        n = 0
        while n < min(len(x.tokens), len(y.tokens)) and x.tokens[n] == y.tokens[n]:
            n += 1
        same = x.tokens == y.tokens and x.stopped == y.stopped
        agree += same
        matched = n + (1 if same and x.stopped else 0)  # the stop token's logprob too
        for i in range(min(matched, len(x.logprobs), len(y.logprobs))):
            max_dlp = max(max_dlp, abs(x.logprobs[i] - y.logprobs[i]))
        if not same:
            first_div.append(n)
            if x.gaps and n < len(x.gaps):
                gaps.append(round(x.gaps[n], 5))
    return {"n": len(a), "agree": agree, "rate": round(agree / len(a), 4), "first_divergence": first_div,
            "gap_at_divergence": gaps, "max_abs_logprob_diff": max_dlp,
            "tokens_a": sum(len(g.tokens) for g in a), "tokens_b": sum(len(g.tokens) for g in b)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", default="minik3", help="minik3, a server URL, or a --save file")
    ap.add_argument("--b", required=True, help="minik3, a server URL, or a --save file")
    ap.add_argument("--n", type=int, default=60, help="prompts per set (MRCR: n/3 per length bin)")
    ap.add_argument("--sets", default="mrcr,aime25")
    ap.add_argument("--concurrency", type=int, default=16, help="requests in flight per server")
    ap.add_argument("--save", type=Path, help="write each source's generations to SAVE.{a,b}.{set}.json")
    args = ap.parse_args(argv)
    report: dict[str, object] = {}
    for set_name in args.sets.split(","):
        prompts = prompts_of(set_name, args.n)
        gens = {}
        for side in ("a", "b"):
            src = getattr(args, side)
            if Path(src).suffix == ".json":
                src = src.replace("{set}", set_name)
            t0 = time.perf_counter()
            gens[side] = generate(src, prompts, MAX_TOKENS[set_name], args.concurrency)
            if len(gens[side]) != len(prompts):
                raise SystemExit(f"{src}: {len(gens[side])} generations for {len(prompts)} prompts (a --save file of another --n?)")
            print(f"{set_name}: {side} = {src}: {len(prompts)} prompts in {time.perf_counter() - t0:.1f} s",
                  file=sys.stderr)
            if args.save:
                path = Path(f"{args.save}.{side}.{set_name}.json")
                path.write_text(json.dumps([asdict(g) for g in gens[side]]))
        report[set_name] = compare(gens["a"], gens["b"])
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
