"""The shape of a mini-K3 model: one frozen dataclass, saved and loaded as JSON."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class MiniK3Config:
    """Sizes of the decoder. Defaults are the shipped model's; `tiny()` is for tests."""

    vocab_size: int = 264  # 256 bytes + special tokens (see tokenizer.py), rounded up
    d_model: int = 256
    n_layers: int = 5
    n_heads: int = 4
    # multi-head latent attention
    q_lora_rank: int = 128
    kv_lora_rank: int = 96
    qk_nope_head_dim: int = 32
    qk_rope_head_dim: int = 32
    v_head_dim: int = 32
    # mixture of experts
    n_routed_experts: int = 4
    n_shared_experts: int = 1
    top_k: int = 2
    expert_hidden: int = 384
    n_dense_layers: int = 1  # the first layers use one dense SwiGLU FFN instead of experts
    dense_hidden: int = 1024
    # positions and norms
    max_position: int = 4096
    rope_theta: float = 10000.0
    rms_eps: float = 1e-6

    def __post_init__(self) -> None:
        if self.top_k > self.n_routed_experts:
            raise ValueError(f"top_k {self.top_k} exceeds n_routed_experts {self.n_routed_experts}")
        if self.qk_rope_head_dim % 2:
            raise ValueError("qk_rope_head_dim must be even (rotary pairs)")
        if self.n_dense_layers > self.n_layers:
            raise ValueError("n_dense_layers exceeds n_layers")

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    @classmethod
    def tiny(cls, **overrides: object) -> "MiniK3Config":
        """A few-thousand-parameter config for fast tests."""
        base = dict(
            d_model=32, n_layers=2, n_heads=2, q_lora_rank=16, kv_lora_rank=12,
            qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8, n_routed_experts=4,
            n_shared_experts=1, top_k=2, expert_hidden=24, n_dense_layers=1, dense_hidden=48,
            max_position=256,
        )
        base.update(overrides)
        return cls(**base)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n")

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> "MiniK3Config":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown MiniK3Config fields: {', '.join(unknown)}")
        return cls(**data)  # type: ignore[arg-type]

    @classmethod
    def load(cls, path: str | Path) -> "MiniK3Config":
        return cls.from_dict(json.loads(Path(path).read_text()))
