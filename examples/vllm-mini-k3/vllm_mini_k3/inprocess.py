"""vLLM's DeepSeek-V3 model built in this process, outside a server (kernel tests, micro-benchmarks).

vLLM's layers read the current `VllmConfig` when they are built, the MoE layer looks itself up in
the forward context when it runs, and the parallel layers ask the model-parallel groups for their
rank: `vllm_session` sets up all three once per process (a one-rank gloo group, no server), the
way vLLM's own unit tests do with their ``default_vllm_config`` and ``dist_init`` fixtures.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch

_STATE: dict[str, Any] = {}


def engine_config(checkpoint: Path, dtype: str) -> Any:
    """The `VllmConfig` a server with ``--dtype DTYPE --enforce-eager`` would build."""
    os.environ.setdefault("VLLM_MLA_DISABLE", "1")  # mini-k3's sizes: decompressed attention
    from vllm.engine.arg_utils import EngineArgs

    args = EngineArgs(model=str(checkpoint), dtype=dtype, enforce_eager=True, max_model_len=4096)
    return args.create_engine_config()


def _init_distributed() -> None:
    if _STATE.get("dist"):
        return
    from vllm.distributed import ensure_model_parallel_initialized, init_distributed_environment

    init_distributed_environment(1, 0, f"file://{tempfile.mkdtemp()}/dist", 0, "gloo")
    ensure_model_parallel_initialized(1, 1)
    _STATE["dist"] = True


@contextmanager
def vllm_session(checkpoint: Path, dtype: str = "float32") -> Iterator[Any]:
    """Current vLLM config, forward context and a one-rank group for building and running layers."""
    from vllm.config import set_current_vllm_config
    from vllm.forward_context import set_forward_context

    config = engine_config(checkpoint, dtype)
    with set_current_vllm_config(config):
        _init_distributed()
        with set_forward_context(None, config):
            yield config


def build_model(config: Any, model_cls: type | None = None, name: str = "stock") -> torch.nn.Module:
    """The checkpoint's model (vLLM's stock DeepseekV3ForCausalLM unless ``model_cls``), loaded.

    ``name`` prefixes its layer names: the MoE and attention layers find themselves at run time
    by name in the forward context, so two models in one process need different names (with the
    same name, the stock model's MoE layers would silently run the other model's).
    """
    from safetensors.torch import load_file
    from vllm.forward_context import get_forward_context
    from vllm.model_executor.model_loader.utils import process_weights_after_loading
    from vllm.model_executor.models.deepseek_v2 import DeepseekV3ForCausalLM

    cls = model_cls or DeepseekV3ForCausalLM
    dtype = config.model_config.dtype
    with torch.device("cpu"):
        model = cls(vllm_config=config, prefix=name).to(dtype)
    state = load_file(str(Path(config.model_config.model) / "model.safetensors"))
    model.load_weights((name, t.to(dtype)) for name, t in state.items())
    process_weights_after_loading(model, config.model_config, torch.device("cpu"))
    get_forward_context().no_compile_layers.update(config.compilation_config.static_forward_context)
    return model.eval()


class ModelPair:
    """vLLM's stock model and the plugin's, built side by side for one dtype.

    `active` enters this dtype's vLLM config and forward context; tests call both models' layers
    inside it. The plugin's techniques are those of the environment at build time.
    """

    def __init__(self, checkpoint: Path, dtype: str) -> None:
        from vllm.config import set_current_vllm_config

        from .model import MiniK3LatencyForCausalLM

        self.config = engine_config(checkpoint, dtype)
        with set_current_vllm_config(self.config):
            _init_distributed()
            with self.active():
                self.stock = build_model(self.config, name="stock")
                self.candidate = build_model(self.config, MiniK3LatencyForCausalLM, name="candidate")

    @contextmanager
    def active(self) -> Iterator[None]:
        from vllm.config import set_current_vllm_config
        from vllm.forward_context import set_forward_context

        with set_current_vllm_config(self.config), set_forward_context(None, self.config), torch.no_grad():
            yield
