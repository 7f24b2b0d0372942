#!/usr/bin/env bash
# The example's whole H200 scope in three device calls of at most 10 minutes (issue #22), plus the
# soundness runs that fit beside them (issue #17). Prepare here first (commit, then
#   WHEEL_SETS="core structured evals" bash scripts/device/prepare_h200.sh
# ), then, back to back so the machine stays warm:
#   run(command="bash scripts/device/h200_full_scope.sh evals", carry=[".whl"], timeout_s=600)
#   run(command="bash scripts/device/h200_full_scope.sh benchmarks", carry=[".whl"], timeout_s=600)
#   run(command="bash scripts/device/h200_full_scope.sh kernels", carry=[".whl"], timeout_s=600)
# and here, on the same commit, the CPU part with the same eval limits:
#   fasttrack check examples/mini-k3/fasttrack.yaml --hardware cpu --jobs 2 \
#     --eval-limit mrcr=all --eval-limit aime25=all --out out/cpu-full
# then `fasttrack merge out/cpu-full <each h200-* folder> --out benchmarks/results/mini-k3-full`.
#
#   evals       evals (every item), features, divergence, stock_unchanged, switch; beside them, on
#               8 CPU cores with CUDA hidden, the real clean runs of benchmarks/false_alarms.py
#   benchmarks  benchmarks (with the ablation arms) and speculative, alone on the machine;
#               SHARD=K/N runs shard K of N of them
#   kernels     scope, kernels, stress, sanitizer; then the planted path-fallback and slowdown
#               faults (the part `faults` alone), each a benchmark run at batch 64: they must fail
#               the census proof / the promised speed-up there
set -u
: "${OUT:?OUT is set by the device tool}"
here=$(dirname "$0")
limits="--eval-limit mrcr=all --eval-limit aime25=all"
case "${1:-}" in
  evals)
    fa=""
    if [[ ${FA_RUNS:-24} -gt 0 ]]; then  # FA_RUNS=0: the evals part alone
      SITE=/tmp/site-fa RUNS=${FA_RUNS:-24} WORKERS=8 bash "$here/false_alarms.sh" > "$OUT/false_alarms.log" 2>&1 &
      fa=$!
    fi
    RUNS="evals,features,divergence,stock_unchanged,switch" CHECK_ARGS="--jobs 2 $limits" LIMIT=550 \
      bash "$here/h200_check.sh"
    code=$?
    [[ -z "$fa" ]] || wait "$fa"
    exit "$code"
    ;;
  benchmarks)
    # SHARD=1/2, then SHARD=2/2: the benchmarks in two calls (one call ran past 560 s with the
    # ablation arms); merge takes both shards
    RUNS="benchmarks,speculative" CHECK_ARGS="$limits${SHARD:+ --shard $SHARD}" LIMIT=560 bash "$here/h200_check.sh"
    ;;
  kernels)
    RUNS="scope,kernels,stress,sanitizer" CHECK_ARGS="--jobs 2 $limits" LIMIT=330 bash "$here/h200_check.sh"
    code=$?
    [[ ${FAULTS:-1} == 0 ]] || bash "$0" faults  # FAULTS=0: the kernels part alone
    exit "$code"
    ;;
  faults)
    for fault in path_fallback slowdown; do
      FAULT=$fault FAULT_BENCHMARKS=decode-per-user FAULT_BATCH=64 RUNS=benchmarks LIMIT=${FAULT_LIMIT:-110} \
        bash "$here/h200_check.sh"
    done
    ;;
  *)
    echo "usage: h200_full_scope.sh evals|benchmarks|kernels|faults" >&2
    exit 2
    ;;
esac
