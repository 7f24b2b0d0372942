#!/usr/bin/env bash
# Real clean runs of the example's probes (benchmarks/false_alarms.py --only real) on the device
# machine's CPU cores, CUDA hidden: the runs are CPU work (~140 CPU-s each), 16 at a time.
#
# Prepare here first: scripts/device/prepare_h200.sh (the wheels the image lacks, in .whl/). Then:
#   run(command="bash scripts/device/false_alarms.sh", carry=[".whl"], timeout_s=600)
# Environment (optional): RUNS (default 24), SEED_BASE (default 1), WORKERS (default: the cores).
# What comes back under $OUT: runs.jsonl (one line per finished run, written as runs finish, so a
# timeout keeps what ran) and false_alarms.txt; summarise several machines' files here with
#   python benchmarks/false_alarms.py --only real --real-runs 0 --from runs.jsonl ...
set -u
: "${OUT:?OUT is set by the device tool}"
SITE=${SITE:-/tmp/site}
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl \
    || { echo "installing the carried wheels failed" >&2; exit 1; }
fi
export PYTHONPATH=$SITE:$PWD:$PWD/examples/mini-k3 CUDA_VISIBLE_DEVICES="" OMP_NUM_THREADS=1 PYTHONUNBUFFERED=1
timeout -s INT 570 python3 benchmarks/false_alarms.py --only real --real-runs "${RUNS:-24}" --seed-base "${SEED_BASE:-1}" \
  --workers "${WORKERS:-$(nproc)}" --results "$OUT/runs.jsonl" 2>&1 | tee "$OUT/false_alarms.txt"
exit "${PIPESTATUS[0]}"
