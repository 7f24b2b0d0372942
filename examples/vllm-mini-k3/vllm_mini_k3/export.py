"""mini-k3's trained weights as a Hugging Face ``DeepseekV3ForCausalLM`` checkpoint for vLLM.

    python -m vllm_mini_k3.export OUT_DIR [--force]

The checkpoint is generated, never committed: `ensure_checkpoint` (re)creates it when it is
missing or stale, keyed on the digest of mini-k3's weights and config and on `EXPORT_VERSION`.

What the export has to get right (vLLM's ``deepseek_v2.py`` decides the math):
- names: mini-k3's ``attn.*``, ``mlp.w1/w2/w3``, ``mlp.router``, ``mlp.shared`` become DeepSeek's
  ``self_attn.*``, ``gate_proj/down_proj/up_proj``, ``mlp.gate``, ``mlp.shared_experts``;
- rope layout: mini-k3 rotates halves (NeoX: pairs ``(i, i + d/2)``), vLLM's DeepSeek attention
  rotates interleaved pairs ``(2i, 2i + 1)`` with the same frequency ``i``. Permuting the rope rows
  of ``q_b_proj`` (per head) and ``kv_a_proj_with_mqa`` to ``[0, d/2, 1, d/2 + 1, ...]`` makes the
  rotation identical; the q.k dot product does not care about the order of its terms;
- routing: mini-k3 takes the softmax over all experts, keeps the top k and renormalises them:
  ``scoring_func: softmax``, ``norm_topk_prob: true``, ``routed_scaling_factor: 1.0``, one expert
  group (``n_group = topk_group = 1``). mini-k3 has no score-correction bias, so none is written
  and ``topk_method`` is ``greedy``: ``noaux_tc`` would make vLLM expect
  ``mlp.gate.e_score_correction_bias`` (a KeyError without it) and add a zero to every score;
- storage: the weights stay bf16 (what mini-k3 ships, so every value is exact) while
  ``dtype: float32`` makes vLLM serve fp32 unless ``--dtype`` says otherwise;
- tokenizer: a byte-level BPE without merges whose ids 0-255 are the bytes themselves, the seven
  special tokens at mini-k3's ids 256-262 (the model's vocabulary is padded to 264), mini-k3's
  chat template, no BOS added on encode (the template writes ``<|bos|>`` itself).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from mini_k3.config import MiniK3Config
from mini_k3.model import WEIGHTS_DIR
from mini_k3.tokenizer import BYTE_TOKENS, SPECIAL_TOKENS

EXPORT_VERSION = 1  # bump when the exporter's output changes
STAMP = "export_stamp.json"
DEFAULT_DIR = Path(__file__).resolve().parents[1] / "checkpoint"

CHAT_TEMPLATE = (
    "<|bos|>{% for message in messages %}"
    "{% if message['role'] not in ['system', 'user', 'assistant'] %}"
    "{{ raise_exception('role must be one of system, user, assistant') }}{% endif %}"
    "<|{{ message['role'] }}|>{{ message['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def source_digest(weights_dir: Path = WEIGHTS_DIR) -> str:
    """sha256 over mini-k3's config and weights, and the exporter's version."""
    h = hashlib.sha256(f"export-v{EXPORT_VERSION}\n".encode())
    for name in ("config.json", "model.safetensors"):
        h.update(name.encode() + b"\0" + (weights_dir / name).read_bytes())
    return h.hexdigest()


def hf_config(c: MiniK3Config) -> dict[str, object]:
    """config.json: every field vLLM's DeepSeek-V3 model and transformers' config read."""
    if c.n_dense_layers < 1 or c.n_shared_experts < 1:
        raise ValueError("the export assumes at least one dense layer and one shared expert")
    return {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "deepseek_v3",
        "dtype": "float32",
        "vocab_size": c.vocab_size,
        "hidden_size": c.d_model,
        "intermediate_size": c.dense_hidden,
        "moe_intermediate_size": c.expert_hidden,
        "num_hidden_layers": c.n_layers,
        "num_attention_heads": c.n_heads,
        "num_key_value_heads": c.n_heads,
        "q_lora_rank": c.q_lora_rank,
        "kv_lora_rank": c.kv_lora_rank,
        "qk_nope_head_dim": c.qk_nope_head_dim,
        "qk_rope_head_dim": c.qk_rope_head_dim,
        "v_head_dim": c.v_head_dim,
        "head_dim": c.qk_rope_head_dim,
        "n_routed_experts": c.n_routed_experts,
        "n_shared_experts": c.n_shared_experts,
        "num_experts_per_tok": c.top_k,
        "n_group": 1,
        "topk_group": 1,
        "topk_method": "greedy",
        "scoring_func": "softmax",
        "norm_topk_prob": True,
        "routed_scaling_factor": 1.0,
        "first_k_dense_replace": c.n_dense_layers,
        "moe_layer_freq": 1,
        "num_nextn_predict_layers": 0,
        "hidden_act": "silu",
        "rms_norm_eps": c.rms_eps,
        "max_position_embeddings": c.max_position,
        "rope_parameters": {"rope_type": "default", "rope_theta": c.rope_theta},
        "rope_interleave": True,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "tie_word_embeddings": False,
        "bos_token_id": BYTE_TOKENS + SPECIAL_TOKENS.index("<|bos|>"),
        "eos_token_id": BYTE_TOKENS + SPECIAL_TOKENS.index("<|eos|>"),
        "pad_token_id": BYTE_TOKENS + SPECIAL_TOKENS.index("<|pad|>"),
        "use_cache": True,
    }


def rope_permutation(dim: int) -> torch.Tensor:
    """Row order taking halves-layout rope rows to interleaved: ``[0, d/2, 1, d/2 + 1, ...]``."""
    half = dim // 2
    return torch.stack([torch.arange(half), torch.arange(half, dim)], dim=1).flatten()


def convert_state(state: dict[str, torch.Tensor], c: MiniK3Config) -> dict[str, torch.Tensor]:
    """mini-k3's state dict under DeepSeek-V3's names, rope rows interleaved."""
    perm = rope_permutation(c.qk_rope_head_dim)
    out: dict[str, torch.Tensor] = {
        "model.embed_tokens.weight": state["embed.weight"],
        "model.norm.weight": state["norm.weight"],
        "lm_head.weight": state["lm_head.weight"],
    }
    swiglu = {"w1": "gate_proj", "w2": "down_proj", "w3": "up_proj"}
    for i in range(c.n_layers):
        src, dst = f"layers.{i}.", f"model.layers.{i}."
        out[dst + "input_layernorm.weight"] = state[src + "attn_norm.weight"]
        out[dst + "post_attention_layernorm.weight"] = state[src + "ffn_norm.weight"]
        a, sa = src + "attn.", dst + "self_attn."
        out[sa + "q_a_proj.weight"] = state[a + "q_a_proj.weight"]
        out[sa + "q_a_layernorm.weight"] = state[a + "q_a_norm.weight"]
        q_b = state[a + "q_b_proj.weight"].view(c.n_heads, c.qk_head_dim, c.q_lora_rank).clone()
        q_b[:, c.qk_nope_head_dim:] = q_b[:, c.qk_nope_head_dim:][:, perm]
        out[sa + "q_b_proj.weight"] = q_b.reshape(-1, c.q_lora_rank)
        kv_a = state[a + "kv_a_proj.weight"].clone()
        kv_a[c.kv_lora_rank:] = kv_a[c.kv_lora_rank:][perm]
        out[sa + "kv_a_proj_with_mqa.weight"] = kv_a
        out[sa + "kv_a_layernorm.weight"] = state[a + "kv_a_norm.weight"]
        out[sa + "kv_b_proj.weight"] = state[a + "kv_b_proj.weight"]
        out[sa + "o_proj.weight"] = state[a + "o_proj.weight"]
        m, dm = src + "mlp.", dst + "mlp."
        if i < c.n_dense_layers:
            for w, name in swiglu.items():
                out[f"{dm}{name}.weight"] = state[f"{m}{w}.weight"]
            continue
        out[dm + "gate.weight"] = state[m + "router.weight"]
        for w, name in swiglu.items():
            out[f"{dm}shared_experts.{name}.weight"] = state[f"{m}shared.{w}.weight"]
            for e in range(c.n_routed_experts):
                out[f"{dm}experts.{e}.{name}.weight"] = state[f"{m}experts.{e}.{w}.weight"]
    missing = set(state) - _used_sources(c)
    if missing:
        raise ValueError(f"mini-k3 weights the export does not map: {sorted(missing)[:5]}")
    return {k: v.contiguous() for k, v in out.items()}


def _used_sources(c: MiniK3Config) -> set[str]:
    names = {"embed.weight", "norm.weight", "lm_head.weight"}
    for i in range(c.n_layers):
        p = f"layers.{i}."
        names |= {p + n for n in ("attn_norm.weight", "ffn_norm.weight")}
        names |= {f"{p}attn.{n}.weight" for n in
                  ("q_a_proj", "q_a_norm", "q_b_proj", "kv_a_proj", "kv_a_norm", "kv_b_proj", "o_proj")}
        if i < c.n_dense_layers:
            names |= {f"{p}mlp.{w}.weight" for w in ("w1", "w2", "w3")}
        else:
            names.add(f"{p}mlp.router.weight")
            for w in ("w1", "w2", "w3"):
                names.add(f"{p}mlp.shared.{w}.weight")
                names |= {f"{p}mlp.experts.{e}.{w}.weight" for e in range(c.n_routed_experts)}
    return names


def write_tokenizer(out_dir: Path) -> None:
    """tokenizer.json (+ config, special tokens, chat template) with mini-k3's ids exactly."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    # GPT-2's byte-to-unicode table: a byte-level BPE spells byte b as the character table[b].
    table = pre_tokenizers.ByteLevel.alphabet()
    byte_chars = _bytes_to_unicode()
    if sorted(byte_chars.values()) != sorted(table):
        raise RuntimeError("tokenizers' byte-level alphabet is not GPT-2's byte table")
    vocab = {byte_chars[b]: b for b in range(BYTE_TOKENS)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[], fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token="<|bos|>", eos_token="<|eos|>", pad_token="<|pad|>",
        additional_special_tokens=[t for t in SPECIAL_TOKENS if t not in ("<|bos|>", "<|eos|>", "<|pad|>")],
        model_max_length=MiniK3Config().max_position, clean_up_tokenization_spaces=False,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(out_dir))


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character table (what ByteLevel uses)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def export(out_dir: Path, weights_dir: Path = WEIGHTS_DIR) -> Path:
    """Write the checkpoint into ``out_dir`` (replaced as a whole); returns it."""
    config = MiniK3Config.load(weights_dir / "config.json")
    state = load_file(str(weights_dir / "model.safetensors"))
    converted = convert_state(state, config)
    tmp = out_dir.with_name(out_dir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    save_file(converted, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    (tmp / "config.json").write_text(json.dumps(hf_config(config), indent=2, sort_keys=True) + "\n")
    stop_ids = [BYTE_TOKENS + SPECIAL_TOKENS.index(t) for t in ("<|end|>", "<|eos|>")]
    generation = {"bos_token_id": BYTE_TOKENS, "eos_token_id": stop_ids}
    (tmp / "generation_config.json").write_text(json.dumps(generation, indent=2, sort_keys=True) + "\n")
    write_tokenizer(tmp)
    (tmp / STAMP).write_text(json.dumps({"source_digest": source_digest(weights_dir)}, indent=2) + "\n")
    shutil.rmtree(out_dir, ignore_errors=True)
    tmp.rename(out_dir)
    return out_dir


def is_current(out_dir: Path, weights_dir: Path = WEIGHTS_DIR) -> bool:
    try:
        stamp = json.loads((out_dir / STAMP).read_text())
    except (OSError, ValueError):
        return False
    return stamp.get("source_digest") == source_digest(weights_dir)


def ensure_checkpoint(out_dir: Path | None = None) -> Path:
    """The checkpoint folder, exported first if it is missing or stale."""
    out_dir = DEFAULT_DIR if out_dir is None else Path(out_dir)
    if not is_current(out_dir):
        export(out_dir)
    return out_dir


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", nargs="?", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--force", action="store_true", help="export even if the folder is current")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    if args.force or not is_current(args.out_dir):
        export(args.out_dir)
        print(f"exported {args.out_dir} in {time.perf_counter() - t0:.2f} s")
    else:
        print(f"{args.out_dir} is current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
