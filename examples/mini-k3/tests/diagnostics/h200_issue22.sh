#!/usr/bin/env bash
# Issue #22 on one H200 (device tool, kind nvidia-h200): the diagnostic probe, the kernel tests
# (the new batch-invariance test included), then the new CUDA tests against the pre-fix graph
# keying (they must fail there). No fasttrack plugin: the kernel conftest's default points are
# the manifest's (batch 1,3,8,17,32,64; TP 1,2,4; fp32/bf16).
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PYTHONPATH=$PWD:$PWD/examples/mini-k3:$PWD/examples/mini-k3/tests/diagnostics
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
T0=$(date +%s)
nvidia-smi -L
python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
timeout "${PROBE_S:-150}" python3 examples/mini-k3/tests/diagnostics/batch_invariance_probe.py --device cuda \
  --out "$OUT/probe.json" 2>&1 | tee "$OUT/probe.log"
echo "probe done at $(( $(date +%s) - T0 )) s"
timeout "${TESTS_S:-150}" python3 -m pytest -p no:cacheprovider -p no:randomly -q -rs examples/mini-k3/tests/kernels \
  2>&1 | tee "$OUT/kernels.log" | tail -40
echo "kernel tests done at $(( $(date +%s) - T0 )) s"
timeout "${LEGACY_S:-60}" python3 - <<'PY' 2>&1 | tee "$OUT/legacy.log" | tail -25
import sys

import pytest

import batch_invariance_probe as probe
import mini_k3.latency.graphs as graphs

graphs.GraphedDecoder = probe.LegacyGraphedDecoder  # the graph cache as before the fix
sys.exit(pytest.main(["-p", "no:cacheprovider", "-p", "no:randomly", "-q", "--tb=line",
                      "examples/mini-k3/tests/kernels/test_batch_invariance.py", "-k", "cuda"]))
PY
echo "legacy run done at $(( $(date +%s) - T0 )) s"
