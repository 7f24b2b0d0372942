"""Train mini-K3 on the synthetic MRCR-, AIME- and JSON-format tasks.

    python -m mini_k3.train --device cuda --steps 3000 --work-dir runs/a --out mini_k3/weights

Seeded and resumable: the batch of step ``s`` is a pure function of ``(seed, s)``, and a
checkpoint (model, optimiser, step, schedule) is written to ``--work-dir`` every
``--checkpoint-every`` steps; ``--resume`` continues from it. ``--time-budget-s`` instead of
``--steps`` measures the speed over the first steps and fixes the step count from it (the count
is stored in the checkpoint, so a resumed run keeps the same schedule). Each example is one chat
rendered with the chat template; the loss is on the answer tokens (and the closing ``<|end|>``)
only. The weights are exported as bf16 safetensors with config.json and losses.json.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from .config import MiniK3Config
from .data import SEEDS, aime, json_output, mrcr
from .model import MiniK3
from .tokenizer import ByteTokenizer

TOKENIZER = ByteTokenizer()
# The mixes of the shipped stages (mini_k3/weights/losses.json lists them in order):
# "default" all tasks with a length curriculum; "retrieval" adds very short MRCR chats (3-6 pairs)
# and keeps a little AIME/JSON; "repeat" is plain repetition only ("repeat after me: <made-up
# words>"), where every answer byte is predictable only by copying. Copying formed there within a
# few hundred steps, and in no mix where repetition was a minority share (30-45 %, ~1,800 steps).
# Then "copy" (repetition first, then every task), "finish" (longest contexts and the tasks the
# repetition stage made the model forget) and "arithmetic" (the long AIME solutions, which need
# the most steps) bring the other tasks back while MRCR keeps copying.
EARLY = 0.15  # the first 15 % of a stage's steps may use a mix of their own
# Per mix: {kind: weight} for the early steps (None: as the rest) and for the rest. The order of the kinds is the
# order batches draw them in (rng.choices), so it stays fixed: it reproduces the shipped stages.
MIX_WEIGHTS: dict[str, tuple[dict[str, float] | None, dict[str, float]]] = {
    "default": ({"mrcr0": 0.45, "mrcr1": 0.2, "mrcr2": 0.1, "aime": 0.15, "json": 0.10},  # short contexts first
                {"mrcr0": 0.22, "mrcr1": 0.25, "mrcr2": 0.28, "aime": 0.15, "json": 0.10}),
    "retrieval": (None, {"mrcr_short": 0.3, "mrcr0": 0.2, "mrcr1": 0.2, "mrcr2": 0.2, "aime": 0.05, "json": 0.05}),
    "repeat": (None, {"repeat": 1.0}),
    "copy": ({"repeat": 0.45, "mrcr_short": 0.25, "mrcr0": 0.05, "mrcr1": 0.0, "mrcr2": 0.0, "aime": 0.125, "json": 0.125},
             {"repeat": 0.1, "mrcr_short": 0.2, "mrcr0": 0.15, "mrcr1": 0.15, "mrcr2": 0.15, "aime": 0.125, "json": 0.125}),
    "finish": (None, {"repeat": 0.05, "mrcr_short": 0.1, "mrcr0": 0.1, "mrcr1": 0.15, "mrcr2": 0.2, "aime": 0.2, "json": 0.2}),
    "arithmetic": (None, {"repeat": 0.05, "mrcr_short": 0.05, "mrcr0": 0.05, "mrcr1": 0.1, "mrcr2": 0.15, "aime": 0.45,
                           "json": 0.15}),
}  # fmt: skip
MIXES = {name: tuple(later) for name, (_, later) in MIX_WEIGHTS.items()}
ALL_KINDS = tuple(dict.fromkeys(kind for kinds in MIXES.values() for kind in kinds))


def kind_weights(progress: float, mix: str = "default") -> list[float]:
    """The mix's weights, in MIXES[mix] order, at this point of training."""
    early, later = MIX_WEIGHTS[mix]
    weights = early if early is not None and progress < EARLY else later
    return [weights[kind] for kind in MIXES[mix]]


def example(kind: str, rng: random.Random) -> tuple[list[int], int, int]:
    """Token ids of one training chat, the index where the answer starts, and where the part
    of the answer that must be copied from far back starts (the needle's words; else the end)."""
    copy_from = None  # character offset in the answer
    if kind == "repeat":
        words = " ".join(rng.sample(mrcr.WORDS, rng.randint(4, 40)))
        messages, answer, copy_from = [{"role": "user", "content": f"repeat after me: {words}"}], words, 0
    elif kind.startswith("mrcr"):
        n_needles = rng.randint(2, 8)  # drawn for every MRCR kind: the default mix's batches stay as they were
        row = (mrcr.make_row(rng, rng.randint(2, 4), rng.randint(150, 400)) if kind == "mrcr_short"
               else mrcr.make_row_in_bin(rng, n_needles, int(kind[-1])))
        messages, answer = json.loads(row.prompt), row.answer
        copy_from = answer.index(": ") + 2  # after "<random string><form> k about <topic>: "
    elif kind == "aime":
        row = aime.make_row(rng)
        messages, answer = [{"role": "user", "content": row.problem}], row.solution
    else:
        row = json_output.make_row(rng)
        messages, answer = [{"role": "user", "content": row.prompt}], row.answer
    prompt = TOKENIZER.apply_chat_template(messages, tokenize=True)
    ids = prompt + TOKENIZER.encode(answer, allow_special=False) + [TOKENIZER.end_id]
    if copy_from is None:
        return ids, len(prompt), len(ids)
    return ids, len(prompt), len(prompt) + len(TOKENIZER.encode(answer[:copy_from], allow_special=False))


@dataclass(frozen=True)
class Batch:
    kind: str
    ids: torch.Tensor  # [B, T] right-padded
    loss_weight: torch.Tensor  # [B, T] float: weight of each answer token to predict (0 elsewhere)

    @property
    def loss_mask(self) -> torch.Tensor:
        """[B, T]: True where ids[:, t] is an answer token to predict."""
        return self.loss_weight > 0


def make_batch(seed: int, step: int, total_steps: int, tokens_per_step: int,
               mix: str = "default", copy_weight: float = 1.0) -> Batch:
    if copy_weight <= 0:
        raise ValueError(f"copy_weight must be positive (a zero weight would drop tokens from the answer), got {copy_weight}")
    rng = random.Random(seed * 1_000_003 + step)
    kind = rng.choices(MIXES[mix], weights=kind_weights(step / max(1, total_steps), mix))[0]
    rows: list[tuple[list[int], int, int]] = []
    while sum(len(r[0]) for r in rows) < tokens_per_step:
        rows.append(example(kind, rng))
    T = max(len(r[0]) for r in rows)
    ids = torch.full((len(rows), T), TOKENIZER.pad_id, dtype=torch.long)
    weight = torch.zeros(len(rows), T)
    for b, (r, start, copy_start) in enumerate(rows):
        ids[b, : len(r)] = torch.tensor(r)
        weight[b, start: len(r)] = 1.0
        weight[b, copy_start: len(r) - 1] = copy_weight  # the needle's words, not the closing <|end|>
    return Batch(kind, ids, weight)


class StepBatches(torch.utils.data.Dataset):
    """Map-style: item ``s`` is the batch of step ``s`` (lets DataLoader workers build them)."""

    def __init__(self, seed: int, total_steps: int, tokens_per_step: int,
                 mix: str = "default", copy_weight: float = 1.0) -> None:
        self.seed, self.total_steps, self.tokens_per_step = seed, total_steps, tokens_per_step
        self.mix, self.copy_weight = mix, copy_weight

    def __len__(self) -> int:
        return self.total_steps

    def __getitem__(self, step: int) -> Batch:
        return make_batch(self.seed, step, self.total_steps, self.tokens_per_step, self.mix, self.copy_weight)


def lr_at(step: int, total: int, peak: float, warmup: int) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def loss_of(model: MiniK3, batch: Batch, device: torch.device,
            use_bf16: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The weighted answer cross-entropy (for the optimiser), the plain one (for the log) and the
    experts' balance loss."""
    ids = batch.ids.to(device, non_blocking=True)
    weight = batch.loss_weight.to(device, non_blocking=True)
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_bf16):
        logits = model(ids[:, :-1])
    targets = ids[:, 1:]
    w_all = weight[:, 1:]
    tmask = w_all > 0
    ce_tokens = F.cross_entropy(logits.float()[tmask], targets[tmask], reduction="none")
    w = w_all[tmask]
    weighted = (ce_tokens * w).sum() / w.sum()
    balance = model.balance_loss()
    return weighted, ce_tokens.mean(), (balance if balance is not None else torch.zeros((), device=device))


def export(model: MiniK3, losses: list[dict], out: Path, meta: dict) -> None:
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to("cpu", torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    model.config.save(out / "config.json")
    (out / "losses.json").write_text(json.dumps({**meta, "log": losses}, indent=1) + "\n")


def summarise(losses: list[dict], last: int = 200) -> dict[str, float]:
    """Mean loss per task kind over the last ``last`` logged steps of that kind."""
    out: dict[str, float] = {}
    for kind in ALL_KINDS:
        vals = [x["loss"] for x in losses if x["kind"] == kind][-last:]
        if vals:
            out[kind] = round(sum(vals) / len(vals), 4)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--steps", type=int, default=0, help="total steps (0: use --time-budget-s)")
    ap.add_argument("--time-budget-s", type=float, default=0.0)
    ap.add_argument("--tokens-per-step", type=int, default=65536)
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--warmup", type=int, default=150)
    ap.add_argument("--seed", type=int, default=SEEDS["train"])
    ap.add_argument("--config", type=Path, help="config JSON (default: MiniK3Config())")
    ap.add_argument("--tiny", action="store_true", help="use MiniK3Config.tiny() (smoke tests)")
    ap.add_argument("--work-dir", type=Path, default=Path("runs/train"))
    ap.add_argument("--out", type=Path, help="export weights here at every checkpoint and at the end")
    ap.add_argument("--checkpoint-every", type=int, default=500)
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--init-from", type=Path, help="start from exported weights (fresh optimiser)")
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--stop-at-step", type=int, default=0,
                    help="checkpoint and exit after this step, as if interrupted (resume later)")
    ap.add_argument("--mix", choices=sorted(MIXES), default="default",
                    help="task mix (see MIX_WEIGHTS): default (all tasks, length curriculum), retrieval (adds very short "
                         "MRCR chats), repeat (repetition only: teaches copying), copy, finish and arithmetic "
                         "(all tasks plus repetition; more of it early, of the longest contexts, of AIME)")
    ap.add_argument("--copy-weight", type=float, default=1.0,
                    help="loss weight of the MRCR needle's words (and repeated words) relative to other answer tokens")
    args = ap.parse_args(argv)
    if args.copy_weight <= 0:
        ap.error("--copy-weight must be positive")

    device = torch.device(args.device)
    torch.manual_seed(args.seed)
    use_bf16 = device.type == "cuda"
    if use_bf16:
        torch.backends.cuda.matmul.allow_tf32 = True
    config = (MiniK3Config.tiny(max_position=4096) if args.tiny
              else MiniK3Config.load(args.config) if args.config else MiniK3Config())
    model = MiniK3(config).to(device)
    if args.init_from:
        from safetensors.torch import load_file
        state = load_file(str(args.init_from / "model.safetensors"))
        model.load_state_dict({k: v.float() for k, v in state.items()})
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.1, fused=use_bf16)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"params {n_params:,}  device {device}  bf16 {use_bf16}", flush=True)

    ckpt_path = args.work_dir / "checkpoint.pt"
    start, total, losses, elapsed_before = 0, args.steps, [], 0.0
    if args.resume and ckpt_path.exists():
        ckpt = torch.load(ckpt_path, map_location=device)
        model.load_state_dict(ckpt["model"])
        opt.load_state_dict(ckpt["opt"])
        start, total, losses, elapsed_before = ckpt["step"], ckpt["total_steps"], ckpt["losses"], ckpt["elapsed_s"]
        print(f"resumed at step {start}/{total}", flush=True)
    measuring = total == 0
    if measuring:
        if args.time_budget_s <= 0:
            ap.error("give --steps or --time-budget-s")
        total = 10**9  # provisional: fixed after the first probe_steps

    def save(step: int, elapsed: float) -> None:
        args.work_dir.mkdir(parents=True, exist_ok=True)
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step, "total_steps": total,
                    "losses": losses, "elapsed_s": elapsed}, ckpt_path)
        if args.out:
            export(model, losses, args.out, meta(step, elapsed))

    def meta(step: int, elapsed: float) -> dict:
        return {"steps": step, "total_steps": total, "tokens_per_step": args.tokens_per_step, "seed": args.seed,
                "params": n_params, "train_seconds": round(elapsed, 1), "device": str(device),
                "mix": args.mix, "copy_weight": args.copy_weight,
                "final_loss_by_task": summarise(losses)}

    def batches(first: int, last: int):
        data = StepBatches(args.seed, total if not measuring else 10**9, args.tokens_per_step, args.mix, args.copy_weight)
        sampler = range(first, last)
        loader = torch.utils.data.DataLoader(data, batch_size=None, sampler=sampler, num_workers=args.workers,
                                             pin_memory=use_bf16, prefetch_factor=4 if args.workers else None,
                                             persistent_workers=False)
        return zip(sampler, loader)

    model.train()
    t0 = time.time()
    step = start
    window: dict[str, list[float]] = {}
    probe_steps, warm_steps, t_warm = 40, 10, t0
    end = start + probe_steps if measuring else total
    while True:
        for step, batch in batches(step, end):
            for group in opt.param_groups:
                group["lr"] = lr_at(step, total if not measuring else 10**6, args.lr, args.warmup)
            weighted, ce, balance = loss_of(model, batch, device, use_bf16)
            opt.zero_grad(set_to_none=True)
            (weighted + 0.01 * balance).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            window.setdefault(batch.kind, []).append(ce.item())
            if measuring and step == start + warm_steps - 1:
                t_warm = time.time()  # rate is measured after start-up (CUDA init, workers)
            if (step + 1) % args.log_every == 0:
                for kind, vals in sorted(window.items()):
                    losses.append({"step": step + 1, "kind": kind, "loss": round(sum(vals) / len(vals), 4)})
                window = {}
                elapsed = elapsed_before + time.time() - t0
                recent = {x["kind"]: x["loss"] for x in losses if x["step"] == step + 1}
                print(f"step {step + 1}/{total if not measuring else '?'}  {elapsed:6.0f}s  lr {opt.param_groups[0]['lr']:.2e}  "
                      + "  ".join(f"{k} {v:.3f}" for k, v in sorted(recent.items())), flush=True)
            if (step + 1) % args.checkpoint_every == 0 and step + 1 < total:
                save(step + 1, elapsed_before + time.time() - t0)
            if args.stop_at_step and step + 1 == args.stop_at_step and step + 1 < total:
                save(step + 1, elapsed_before + time.time() - t0)
                print(f"stopped at step {step + 1} (checkpoint saved; --resume continues)", flush=True)
                return
            if args.time_budget_s and time.time() - t0 > args.time_budget_s:
                print(f"time budget spent at step {step + 1}: stopping early", flush=True)
                total = end = step + 1
                measuring = False
                break
        step = end
        if measuring:
            rate = (probe_steps - warm_steps) / (time.time() - t_warm)
            total = start + max(probe_steps + 1, int((args.time_budget_s - (time.time() - t0)) * rate * 0.97) + probe_steps)
            print(f"measured {rate:.2f} steps/s -> total_steps {total}", flush=True)
            measuring, end = False, total
            continue
        break
    save(total, elapsed_before + time.time() - t0)
    print(json.dumps(meta(total, elapsed_before + time.time() - t0)["final_loss_by_task"]), flush=True)


if __name__ == "__main__":
    main()
