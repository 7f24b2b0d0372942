"""The target kinds this fasttrack can drive (``target.kind`` in the manifest): a plain mapping.
Adding one is one package under ``fasttrack/targets/`` whose ``KIND`` satisfies
`fasttrack.targets.protocol.TargetKind`, and one line here (CONTRIBUTING.md)."""

from __future__ import annotations

from fasttrack.targets import openai, python, sglang, vllm
from fasttrack.targets.protocol import TargetKind

TARGET_KINDS: dict[str, TargetKind] = {
    "python": python.KIND,
    "openai": openai.KIND,
    "vllm": vllm.KIND,
    "sglang": sglang.KIND,
}
