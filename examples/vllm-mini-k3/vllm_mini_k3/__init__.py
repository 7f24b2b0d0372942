"""mini-k3 served by vLLM: the checkpoint exporter and the opt-in latency plugin.

vLLM calls `register` (the ``vllm.general_plugins`` entry point) in its API server, engine core
and worker processes. With ``VLLM_MINI_K3_LATENCY=1`` it makes vLLM build
`vllm_mini_k3.model.MiniK3LatencyForCausalLM` for ``DeepseekV3ForCausalLM`` checkpoints; without
it, it returns at once and nothing of the plugin is imported or run.

``VLLM_MINI_K3_DISABLE=<technique>[,...]`` turns single techniques off (ablation);
``VLLM_MINI_K3_FAULT=<name>`` plants one of the faults the gate's acceptance tests must catch
(`FAULTS`); both are read only where the plugin runs.
"""

from __future__ import annotations

import os

SWITCH = "VLLM_MINI_K3_LATENCY"
DISABLE = "VLLM_MINI_K3_DISABLE"
FAULT = "VLLM_MINI_K3_FAULT"

TECHNIQUES = ("fused_norms", "fused_router", "small_batch_moe")

# Planted faults, each a realistic bug (README: "planted faults"):
FAULTS = {
    # the small-batch MoE kernel's 3-token specialisation (a speculative verify with two drafts)
    # weights the experts with the unnormalised router probabilities: wrong at 3 tokens only
    "moe_batch3": "small_batch_moe wrong at exactly 3 tokens",
    # register() installs the model class before it reads the switch: the stock side (switch
    # off) runs the latency path too, and its counter appears on stock's /metrics
    "leak": "the switch leaks: the latency path also runs with the switch off",
    # a capability probe 'fails' and the model keeps vLLM's stock modules, but the step counter
    # still counts every technique
    "fallback": "silent fallback to stock while the counter says optimised",
    # a path that is slower only where batches are large: every decode step of 4 or more sequences
    # waits as long again as its forward took (the benchmark at concurrency 8, not at 1)
    "slow_at_8": "decode steps of 4+ sequences twice as slow in the model's forward",
}


def enabled() -> bool:
    return os.environ.get(SWITCH, "") == "1"


def fault() -> str | None:
    name = os.environ.get(FAULT, "").strip()
    if name and name not in FAULTS:
        raise ValueError(f"{FAULT}={name!r}: unknown fault; known: {', '.join(FAULTS)}")
    return name or None


def register() -> None:
    """vLLM's general-plugin hook: with the switch off, nothing of the plugin runs."""
    if not enabled() and os.environ.get(FAULT, "").strip() != "leak":
        return
    from vllm import ModelRegistry

    ModelRegistry.register_model("DeepseekV3ForCausalLM", "vllm_mini_k3.model:MiniK3LatencyForCausalLM")
