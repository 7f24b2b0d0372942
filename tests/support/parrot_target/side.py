"""Opening a parrot side: no process, no server, a `Target` that answers at once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import numpy as np

from fasttrack.targets.protocol import OpenedSide, Side

if TYPE_CHECKING:
    from fasttrack.manifest import Manifest

VOCAB = 16


class ParrotTarget:
    """Generates its prompt back (one output per request); uniform next-token distributions; it
    counts decode steps by path, the candidate's on the optimised one."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.steps = 0
        self.closed = False

    def generate(self, requests: Sequence[Mapping[str, Any]]) -> list[Any]:
        results = []
        for request in requests:
            text = str(request["prompt"])[: int(request.get("max_tokens", 16))]
            self.steps += len(text)
            output = SimpleNamespace(text=text, token_ids=tuple(ord(ch) % VOCAB for ch in text), finish_reason="length")
            results.append(SimpleNamespace(outputs=[output]))
        return results

    def next_token_logprobs(self, tokens: Any, through_decode: bool = True) -> np.ndarray:
        return np.full((len(tokens), VOCAB), -np.log(VOCAB))

    def path_report(self) -> dict[str, Any]:
        return {"decode_steps_by_path": {self.path: self.steps}}

    def close(self) -> None:
        self.closed = True


def open_parrot(
    manifest: Manifest,
    side: Side,
    point: Mapping[str, Any] | None,
    draft_length: int | None,
    log_dir: Path | None,
    switch_default: bool,
) -> OpenedSide:
    path = manifest.switch.path_value if side == "candidate" else "stock"
    return OpenedSide(side, "parrot", ParrotTarget(path), releases_target=True)
