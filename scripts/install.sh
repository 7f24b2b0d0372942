#!/usr/bin/env bash
# Install fasttrack and the runnable example into ./.venv.
#   bash scripts/install.sh          the gate + the example (for `fasttrack check`)
#   bash scripts/install.sh --test   also the test tools and headless Chromium (for the test suite)
set -euo pipefail
cd "$(dirname "$0")/.."
WITH_TEST=0
[[ "${1:-}" == "--test" ]] && WITH_TEST=1

PY=${PYTHON:-python3}
[[ -x .venv/bin/python ]] || "$PY" -m venv .venv
PIP=(.venv/bin/python -m pip install --disable-pip-version-check -q)

# The CPU build of torch first: a bare `torch` requirement would pull a multi-GB CUDA build.
.venv/bin/python -c "import torch" 2>/dev/null || "${PIP[@]}" "torch==2.13.0"
if [[ $WITH_TEST == 1 ]]; then
  "${PIP[@]}" -e ".[gate,test]" -e examples/mini-k3
else
  "${PIP[@]}" -e ".[gate]" -e examples/mini-k3
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
