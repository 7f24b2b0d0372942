"""Tests of the mini-K3 decoder's pieces on tiny random-init configs."""

from __future__ import annotations

import math

import pytest
import torch

from mini_k3.config import MiniK3Config
from mini_k3.model import MoE, MiniK3, apply_rope, load_pretrained, rope_cos_sin


@pytest.fixture()
def tiny_model() -> MiniK3:
    torch.manual_seed(0)
    model = MiniK3(MiniK3Config.tiny())
    # larger weights than the init so attention patterns are far from uniform
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(4.0) if p.dim() > 1 else None
    return model.eval()


def naive_mla(attn, x: torch.Tensor) -> torch.Tensor:
    """Multi-head latent attention written out per head with loops, no cache, causal."""
    c = attn.config
    B, T, _ = x.shape
    pos = torch.arange(T)
    inv = c.rope_theta ** (-torch.arange(0, c.qk_rope_head_dim, 2).float() / c.qk_rope_head_dim)

    def rot(v, t):  # v [..., rope_dim] at position t
        half = v.shape[-1] // 2
        a = t * inv
        return torch.cat([v[..., :half] * a.cos() - v[..., half:] * a.sin(), v[..., :half] * a.sin() + v[..., half:] * a.cos()], -1)

    q = attn.q_b_proj(attn.q_a_norm(attn.q_a_proj(x))).view(B, T, c.n_heads, c.qk_head_dim)
    kv_a = attn.kv_a_proj(x)
    c_kv = attn.kv_a_norm(kv_a[..., : c.kv_lora_rank])
    k_pe = kv_a[..., c.kv_lora_rank:]
    kv = attn.kv_b_proj(c_kv).view(B, T, c.n_heads, c.qk_nope_head_dim + c.v_head_dim)
    out = torch.zeros(B, T, c.n_heads, c.v_head_dim)
    for b in range(B):
        for h in range(c.n_heads):
            for t in range(T):
                qt = torch.cat([q[b, t, h, : c.qk_nope_head_dim], rot(q[b, t, h, c.qk_nope_head_dim:], pos[t])])
                scores = []
                for s in range(t + 1):
                    ks = torch.cat([kv[b, s, h, : c.qk_nope_head_dim], rot(k_pe[b, s], pos[s])])
                    scores.append(torch.dot(qt, ks) / math.sqrt(c.qk_head_dim))
                w = torch.softmax(torch.stack(scores), 0)
                out[b, t, h] = (w[:, None] * kv[b, : t + 1, h, c.qk_nope_head_dim:]).sum(0)
    return attn.o_proj(out.reshape(B, T, -1))


def test_mla_matches_naive_reference(tiny_model):
    attn = tiny_model.layers[0].attn
    x = torch.randn(2, 7, tiny_model.config.d_model)
    positions = torch.arange(7).expand(2, 7)
    cos, sin = rope_cos_sin(positions, tiny_model.config.qk_rope_head_dim, tiny_model.config.rope_theta)
    with torch.no_grad():
        got = attn(x, positions, cos, sin, causal=True)
        want = naive_mla(attn, x)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)


def test_absorbed_decode_matches_decompressed_attention(tiny_model):
    attn = tiny_model.layers[1].attn
    c = tiny_model.config
    x = torch.randn(3, 5, c.d_model)
    positions = torch.arange(5).expand(3, 5)
    cos, sin = rope_cos_sin(positions, c.qk_rope_head_dim, c.rope_theta)
    with torch.no_grad():
        q_nope, q_rope, c_kv, k_rope = attn.project(x, cos, sin)
        mask = positions[:, None, :] <= positions[:, :, None]
        a = attn.attend_decompressed(q_nope, q_rope, c_kv, k_rope, mask, causal=False)
        b = attn.attend_absorbed(q_nope, q_rope, c_kv, k_rope, mask)
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_prefill_then_decode_equals_full_forward(tiny_model):
    torch.manual_seed(1)
    ids = torch.randint(0, 256, (2, 20))
    with torch.no_grad():
        full = tiny_model(ids)
        cache = tiny_model.new_cache(2, 32)
        prefill = tiny_model(ids[:, :12], torch.arange(12).expand(2, 12), cache)
        steps = [tiny_model.decode_step(ids[:, t], torch.full((2,), t), cache) for t in range(12, 20)]
    torch.testing.assert_close(prefill, full[:, :12], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(torch.stack(steps, 1), full[:, 12:], atol=1e-5, rtol=1e-4)


def test_rows_of_different_lengths_decode_like_single_rows(tiny_model):
    prompts = [[5, 6, 7, 8, 9, 10, 11], [40, 41, 42]]
    nxt = torch.tensor([100, 101])
    with torch.no_grad():
        cache = tiny_model.new_cache(2, 16)
        tiny_model.prefill(prompts, cache)
        lengths = torch.tensor([len(p) for p in prompts])
        batched = tiny_model.decode_step(nxt, lengths, cache)
        for b, p in enumerate(prompts):
            single = tiny_model(torch.tensor([p + [int(nxt[b])]]))[0, -1]
            torch.testing.assert_close(batched[b], single, atol=1e-5, rtol=1e-4)


def test_multi_token_verify_step_matches_single_steps(tiny_model):
    ids = torch.randint(0, 256, (1, 15))
    with torch.no_grad():
        cache_a = tiny_model.new_cache(1, 16)
        tiny_model.prefill([ids[0, :10].tolist()], cache_a)
        block = tiny_model(ids[:, 10:15], torch.arange(10, 15)[None], cache_a)
        cache_b = tiny_model.new_cache(1, 16)
        tiny_model.prefill([ids[0, :10].tolist()], cache_b)
        singles = [tiny_model.decode_step(ids[:, t], torch.tensor([t]), cache_b) for t in range(10, 15)]
    torch.testing.assert_close(block[0], torch.cat(singles), atol=1e-5, rtol=1e-4)


def test_cache_rows_select_rows_of_a_larger_cache(tiny_model):
    ids = torch.randint(0, 256, (1, 6))
    with torch.no_grad():
        cache = tiny_model.new_cache(4, 8)
        got = tiny_model(ids, torch.arange(6)[None], cache, cache_rows=torch.tensor([2]))
    assert cache.c_kv[:, 2, :6].abs().sum() > 0
    assert cache.c_kv[:, [0, 1, 3]].abs().sum() == 0
    torch.testing.assert_close(got, tiny_model(ids), atol=1e-5, rtol=1e-4)


def test_position_beyond_max_position_is_rejected(tiny_model):
    with pytest.raises(ValueError, match="max_position"):
        tiny_model(torch.zeros(1, 1, dtype=torch.long), torch.tensor([[tiny_model.config.max_position]]))


def test_moe_routes_each_token_to_top_k_with_normalised_weights():
    torch.manual_seed(0)
    moe = MoE(MiniK3Config.tiny(n_routed_experts=6, top_k=3)).eval()
    x = torch.randn(10, 32)
    routing = moe.route(x)
    assert routing.expert_ids.shape == (10, 3)
    torch.testing.assert_close(routing.weights.sum(-1), torch.ones(10))
    best = routing.probs.argsort(-1, descending=True)[:, :3]
    assert torch.equal(routing.expert_ids.sort(-1).values, best.sort(-1).values)


def test_moe_output_is_shared_expert_plus_weighted_routed_experts():
    torch.manual_seed(0)
    moe = MoE(MiniK3Config.tiny()).eval()
    x = torch.randn(5, 32)
    with torch.no_grad():
        routing = moe.route(x)
        want = moe.shared(x).clone()
        for n in range(5):
            for k in range(moe.top_k):
                e = int(routing.expert_ids[n, k])
                want[n] += routing.weights[n, k] * moe.experts[e](x[n])
        got = moe(x)
        torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)
        # the shared expert is always used: zeroing it changes every token's output
        moe.shared.w2.weight.zero_()
        assert (moe(x) - got).abs().sum(-1).min() > 0


def test_rope_is_a_rotation_that_depends_on_relative_position():
    torch.manual_seed(0)
    q, k = torch.randn(1, 1, 1, 8), torch.randn(1, 1, 1, 8)

    def rot(v, p):
        cos, sin = rope_cos_sin(torch.tensor([[p]]), 8, 10000.0)
        return apply_rope(v, cos, sin)

    assert torch.allclose(rot(q, 9).norm(), q.norm())
    d1 = (rot(q, 7) * rot(k, 3)).sum()
    d2 = (rot(q, 104) * rot(k, 100)).sum()
    torch.testing.assert_close(d1, d2, atol=1e-5, rtol=1e-5)
    assert torch.equal(rot(q, 0), q)


def test_training_forward_produces_gradients_and_balance_loss():
    model = MiniK3(MiniK3Config.tiny()).train()
    ids = torch.randint(0, 256, (2, 9))
    loss = model(ids).logsumexp(-1).mean() + model.balance_loss()
    loss.backward()
    assert model.layers[1].mlp.router.weight.grad is not None


def test_load_pretrained_round_trips_saved_weights(tmp_path):
    from safetensors.torch import save_file

    config = MiniK3Config.tiny()
    model = MiniK3(config)
    config.save(tmp_path / "config.json")
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(tmp_path / "model.safetensors"))
    loaded, loaded_config, tokenizer = load_pretrained(tmp_path)
    assert loaded_config == config
    ids = torch.randint(0, 256, (1, 5))
    torch.testing.assert_close(loaded(ids), model.eval()(ids))
    assert tokenizer.end_id in tokenizer.stop_ids
