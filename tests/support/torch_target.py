"""A tiny in-process torch target with a stock and a "fused" decode path, for census tests.

The stock layer runs two linear maps, a relu and an add per decode step; the candidate's fused
layer one linear map and a relu, so the kernel census (top-level aten ops on a CPU) of the two
paths differs. Planted faults (candidate side only): ``fallback_above=B`` runs the stock layer at
batch sizes above B while the path counter still says ``latency_specialized`` (a lying counter);
``silent_counter`` counts every candidate step as ``stock`` although the fused path ran.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import SimpleNamespace
from typing import Any

import torch

D_MODEL, VOCAB = 16, 64


class Layer(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(D_MODEL, D_MODEL)
        self.b = torch.nn.Linear(D_MODEL, D_MODEL)

    def forward(self, x: torch.Tensor, fused: bool = False) -> torch.Tensor:
        if fused:
            return torch.relu(self.a(x))
        return torch.relu(self.a(x)) + self.b(x)


class Toy(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.embed = torch.nn.Embedding(VOCAB, D_MODEL)
        self.layers = torch.nn.ModuleList(Layer() for _ in range(2))
        self.head = torch.nn.Linear(D_MODEL, VOCAB)

    def forward(self, ids: torch.Tensor, fused: bool = False) -> torch.Tensor:
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x, fused)
        return self.head(x)


class Tokenizer:
    def encode(self, text: str) -> list[int]:
        return [b % VOCAB for b in text.encode("utf-8")]


class ToyTorchTarget:
    def __init__(self, latency_specialized: bool, fallback_above: int | None, silent_counter: bool) -> None:
        self.model = Toy().eval()
        self.latency_specialized = latency_specialized
        self.fallback_above = fallback_above if latency_specialized else None
        self.silent_counter = silent_counter and latency_specialized
        self.n_layers = 2  # fasttrack.targets.protocol.Layered: the census times self.model's layers
        self.tokenizer = Tokenizer()
        self.steps: dict[str, int] = {}

    def path_report(self) -> dict[str, Any]:
        return {"decode_steps_by_path": dict(self.steps)}

    def generate(self, requests: Sequence[Mapping[str, Any]]) -> list[Any]:
        prompts = [
            list(r["prompt"]) if not isinstance(r["prompt"], str) else self.tokenizer.encode(r["prompt"])
            for r in requests
        ]
        batch = len(prompts)
        with torch.no_grad():
            last = torch.tensor([p[-1] for p in prompts])
            tokens = [self.model(last).argmax(-1)]  # "prefill": the stock path, one step
            for _ in range(max(int(r["max_tokens"]) for r in requests) - 1):
                fused = self.latency_specialized and (self.fallback_above is None or batch <= self.fallback_above)
                path = "latency_specialized" if self.latency_specialized and not self.silent_counter else "stock"
                self.steps[path] = self.steps.get(path, 0) + 1
                tokens.append(self.model(tokens[-1], fused).argmax(-1))
        out = torch.stack(tokens, dim=1).tolist()
        return [
            SimpleNamespace(
                outputs=[
                    SimpleNamespace(
                        text="x" * int(r["max_tokens"]),
                        token_ids=row[: int(r["max_tokens"])],
                        finish_reason="length",
                        logprobs=None,
                    )
                ]
            )
            for r, row in zip(requests, out)
        ]


def create(
    latency_specialized: bool = False, fallback_above: int | None = None, silent_counter: bool = False, **_: Any
) -> ToyTorchTarget:
    return ToyTorchTarget(bool(latency_specialized), fallback_above, silent_counter)
