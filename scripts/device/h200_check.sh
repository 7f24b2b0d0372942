#!/usr/bin/env bash
# `fasttrack check` of the mini-k3 example's NVIDIA H200 scope points, on one H200 machine.
#
# Prepare here first (wheels the image lacks, and HEAD's identity): scripts/device/prepare_h200.sh.
# Then, through the device tool, on kind nvidia-h200:
#   run(command="bash scripts/device/h200_check.sh", carry=[".whl"], timeout_s=600)
# Environment (optional):
#   RUNS   space-separated --only selections, one fasttrack check each, in order
#          (default "scope,kernels,stress benchmarks"; "all" runs every kind in one check).
#          A CPU run of any selection merges with them (merge joins parts of different kinds):
#            fasttrack check examples/mini-k3/fasttrack.yaml --only scope,kernels,stress --hardware cpu --out out/cpu
#            fasttrack merge out/cpu <fetched>/h200-scope_kernels_stress --out out/merged
#   HARDWARE  the scope points to run (default "NVIDIA H200"); HARDWARE=cpu runs the CPU points on
#          the GPU host (their processes see no GPU: the same outcomes as on a CPU machine)
#   LIMIT  seconds for all the checks together (default 540: the tool stops a command at 600)
#   CHECK_ARGS  more `fasttrack check` options for every run, e.g.
#          CHECK_ARGS="--eval-limit mrcr=all --eval-limit aime25=all" (use the same on the CPU run)
#   FAULT  plant one fault in the candidate (scripts/device/fault_manifest.py: path_fallback,
#          slowdown, bad_token, long_context; FAULT_OPTIONS="slowdown=1.3" overrides its options):
#          the checks run on a copy of the manifest with target mini_k3.faults:create
# What comes back under $OUT: per run, evidence.json (copied every 10 s while it runs, so a
# timeout still returns what was measured) and NAME.tar.gz (the whole run folder: evidence,
# summary, reports, artifacts); and
# device.txt (GPU, torch, what was installed).
set -u
: "${OUT:?OUT is set by the device tool}"
LIMIT=${LIMIT:-540}
HARDWARE=${HARDWARE:-"NVIDIA H200"}
RUNS=${RUNS:-"scope,kernels,stress benchmarks"}
SITE=${SITE:-/tmp/site}  # where the carried wheels are installed
WORK=${WORK:-/tmp}      # where each check writes before the copy to $OUT
started=$(date +%s)
# Never use NVLink multicast on the shared host (KINDS.md); keep these also for child processes.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1

# 1. Wheels the image lacks, and fasttrack's entry points (pytest finds the kernel-test plugin
#    through its pytest11 entry point, as when fasttrack is installed).
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" .whl/*.whl \
    || { echo "installing the carried wheels failed" >&2; exit 1; }
fi
version=$(sed -n 's/^__version__ = "\(.*\)"/\1/p' fasttrack/__init__.py)
mkdir -p "$SITE/fasttrack-${version}.dist-info"
printf 'Metadata-Version: 2.1\nName: fasttrack\nVersion: %s\n' "$version" > "$SITE/fasttrack-${version}.dist-info/METADATA"
printf '[pytest11]\nfasttrack = fasttrack.pytest_plugin\n\n[console_scripts]\nfasttrack = fasttrack.cli:main\n' \
  > "$SITE/fasttrack-${version}.dist-info/entry_points.txt"
export PYTHONPATH=$SITE:$PWD:$PWD/examples/mini-k3
{
  nvidia-smi -L
  python3 -c 'import torch; print("torch", torch.__version__, "cuda devices:", torch.cuda.device_count())'
  for m in jsonschema xgrammar pydantic lm_eval fastapi; do
    python3 -c "import $m" 2>/dev/null && echo "python module $m: yes" || echo "python module $m: NO (checks needing it are not_run(dependency))"
  done
} 2>&1 | tee "$OUT/device.txt"

# 2. The copy has no .git. Rebuild HEAD's commit from what prepare_h200.sh carried (same sha as
#    on the development machine, so `fasttrack merge` accepts both runs); else a snapshot commit.
export GIT_AUTHOR_NAME=fasttrack GIT_AUTHOR_EMAIL=fasttrack@example.invalid GIT_COMMITTER_NAME=fasttrack GIT_COMMITTER_EMAIL=fasttrack@example.invalid
git init -q -b main .
if [[ -f .whl/head.commit && -f .whl/head.ls-tree ]]; then
  git update-index --add --index-info < .whl/head.ls-tree
  tree=$(git write-tree --missing-ok)
  if [[ "tree $tree" == "$(head -n 1 .whl/head.commit)" ]]; then
    head=$(git hash-object -t commit -w --literally .whl/head.commit)
    git update-ref refs/heads/main "$head"
    # Store the work tree's blobs so that status and diff can read them; a file that differs
    # from HEAD shows as a modification (the evidence then says the work tree was dirty).
    git ls-files -z | xargs -0 git hash-object -w -- >/dev/null
    git update-index -q --refresh >/dev/null || true
    echo "head commit $head rebuilt (parents not carried)" | tee -a "$OUT/device.txt"
  else
    echo "the carried file list is not HEAD's tree; falling back to a snapshot commit (merge with a run made elsewhere will refuse it)" | tee -a "$OUT/device.txt"
    rm -f .git/index
  fi
fi
if ! git rev-parse -q --verify HEAD >/dev/null; then
  git add -A >/dev/null && git commit -q -m "device snapshot" && echo "snapshot commit $(git rev-parse HEAD)" | tee -a "$OUT/device.txt"
fi

# 3. One fasttrack check per selection, H200 scope points only; evidence copied as it grows.
MANIFEST=examples/mini-k3/fasttrack.yaml
if [[ -n "${FAULT:-}" ]]; then
  # shellcheck disable=SC2086  # FAULT_OPTIONS is a list of KEY=VALUE
  MANIFEST=$(python3 scripts/device/fault_manifest.py "$FAULT" ${FAULT_OPTIONS:-}) || exit 2
  echo "planted fault $FAULT ${FAULT_OPTIONS:-}: $MANIFEST" | tee -a "$OUT/device.txt"
fi
status=0
for only in $RUNS; do
  left=$(( LIMIT - ($(date +%s) - started) ))
  if (( left < 30 )); then echo "no time left for --only $only" | tee -a "$OUT/device.txt"; status=3; break; fi
  name="h200-${FAULT:+$FAULT-}${only//,/_}"; [[ "$HARDWARE" != "NVIDIA H200" ]] && name="${name}-on-${HARDWARE// /_}"
  selection=(--only "$only"); [[ "$only" == all ]] && selection=()
  mkdir -p "$OUT/$name"
  ( while sleep 10; do cp "$WORK/$name/evidence.json" "$OUT/$name/" 2>/dev/null; done ) &
  copier=$!
  # shellcheck disable=SC2086  # CHECK_ARGS is a list of options
  timeout -s INT "$left" python3 -m fasttrack check "$MANIFEST" --hardware "$HARDWARE" "${selection[@]}" \
    ${CHECK_ARGS:-} --out "$WORK/$name"
  code=$?
  kill "$copier" 2>/dev/null; wait "$copier" 2>/dev/null
  echo "fasttrack check --hardware '$HARDWARE' --only $only: exit code $code" | tee -a "$OUT/device.txt"
  # The device tool returns only a few plain files with plain names (at most 8 per call): the whole
  # run folder travels as one archive (tar xzf NAME.tar.gz, then `fasttrack merge`), and
  # evidence.json stays beside it (the live copy, also what a timeout leaves).
  cp "$WORK/$name/evidence.json" "$OUT/$name/" 2>/dev/null
  tar czf "$OUT/$name.tar.gz" -C "$WORK" "$name"
  (( code > status )) && status=$code
done
exit "$status"
