"""Fill vLLM's model-info cache for both of the example's paths, once, at install time.

    python -m vllm_mini_k3.warm [CHECKPOINT]

Each vLLM API server resolves the checkpoint's architecture by inspecting the model class, and
when ``$VLLM_CACHE_ROOT/modelinfos`` (``~/.cache/vllm/modelinfos``) holds nothing for that class
file it does so in a fresh subprocess that imports vLLM again: measured 16 s on the critical
path of the first main job after an install on the 2-core host, paid by both servers at once.
This runs the same resolution (vLLM's own ``ModelConfig``) for the stock class and for the
plugin's, and so writes the same cache files the servers would (compared byte for byte). The
inspection runs in this process (9.7 s for both) rather than in vLLM's subprocess (29 s): the
subprocess only keeps CUDA from being initialised, and there is no CUDA here. A class file that
changes later gets a new hash and a fresh inspection from vLLM itself: the cache cannot go stale.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from vllm_mini_k3 import SWITCH, register
from vllm_mini_k3.export import DEFAULT_DIR


def warm(checkpoint: Path) -> float:
    """Resolve the architecture stock and with the plugin registered; returns the seconds."""
    started = time.monotonic()
    from vllm.config import ModelConfig
    from vllm.model_executor.models import registry

    registry._run_in_subprocess = lambda fn: fn()  # in-process: no CUDA to keep uninitialised
    ModelConfig(model=str(checkpoint), dtype="float32", max_model_len=4096)
    os.environ[SWITCH] = "1"  # the plugin registers its class only with the switch on
    register()
    ModelConfig(model=str(checkpoint), dtype="float32", max_model_len=4096)
    return time.monotonic() - started


def main(argv: list[str]) -> int:
    checkpoint = Path(argv[0]) if argv else DEFAULT_DIR
    seconds = warm(checkpoint)
    print(f"vLLM's model-info cache holds both paths' classes ({seconds:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
