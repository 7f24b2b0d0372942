"""mini-k3 served by vLLM: the checkpoint exporter and the opt-in latency plugin."""

from __future__ import annotations

import os

SWITCH = "VLLM_MINI_K3_LATENCY"


def enabled() -> bool:
    return os.environ.get(SWITCH, "") == "1"


def register() -> None:
    """vLLM's general-plugin hook: with the switch off, nothing of the plugin runs."""
    if not enabled():
        return
    from vllm import ModelRegistry

    ModelRegistry.register_model("DeepseekV3ForCausalLM", "vllm_mini_k3.model:MiniK3LatencyForCausalLM")
