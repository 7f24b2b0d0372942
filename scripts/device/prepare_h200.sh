#!/usr/bin/env bash
# Run HERE, on the development machine (it can reach PyPI), before a device call of
# scripts/device/h200_check.sh. It fills the ignored folder .whl/ with:
#   - the wheels the device image lacks (Python 3.12, manylinux x86_64), per set:
#       core        jsonschema and its needs: every run (evidence validation, reports, features)
#       structured  xgrammar and pydantic: the structured_output probe of the in-process target
#       evals       lm-eval and its needs: the evals check (without them: not_run(dependency))
#       server      fastapi, uvicorn: only for target.kind openai (the example's HTTP server)
#   - head.commit and head.ls-tree: HEAD's raw commit object and file list, so that the device
#     run, whose copy of the tree has no .git, records the same head commit as a run here and
#     `fasttrack merge` accepts both (it refuses parts of different commits).
# Commit first: the device copy holds the work tree, and only a clean tree rebuilds HEAD's tree.
#
#   WHEEL_SETS="core structured" bash scripts/device/prepare_h200.sh     # the default
#   WHEEL_SETS="core structured evals" bash scripts/device/prepare_h200.sh
# Then, through the device tool: run(command="bash scripts/device/h200_check.sh", carry=[".whl"]).
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
mkdir -p .whl
git check-ignore -q .whl || { echo ".whl/ must be ignored by git (add it to .gitignore)" >&2; exit 2; }

declare -A SETS=(
  [core]="jsonschema==4.26.0 jsonschema-specifications==2025.9.1 referencing==0.37.0 rpds-py==2026.9.1"
  [structured]="xgrammar==0.2.9 apache-tvm-ffi==0.1.15.post2 pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5"
  [server]="fastapi==0.165.0 starlette==1.10.0 uvicorn==0.55.0 opentelemetry-api==1.45.2 pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5"
  [evals]="lm-eval==0.4.13 datasets==5.2.0 evaluate==0.4.6 dill==0.4.1 multiprocess==0.70.19 more-itertools==11.2.1 pytablewriter==1.2.1 dataproperty==1.1.1 mbstrdecoder==1.1.5 pathvalidate==3.3.1 tabledata==1.3.5 tcolorpy==0.1.7 typepy==1.3.5 chardet==6.0.0.post1 rouge-score==0.1.2 nltk==3.10.4 sqlitedict==2.1.0 word2number==1.1 tenacity==9.2.1 pytz==2026.6 defusedxml==0.7.1"
)
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
           --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform manylinux_2_24_x86_64)
PIP=${PIP:-python3 -m pip}

wanted=()
for set in ${WHEEL_SETS:-core structured}; do
  [[ -n "${SETS[$set]:-}" ]] || { echo "unknown wheel set $set (known: ${!SETS[*]})" >&2; exit 2; }
  for req in ${SETS[$set]}; do [[ " ${wanted[*]:-} " == *" $req "* ]] || wanted+=("$req"); done
done
for req in "${wanted[@]}"; do
  name=${req%%==*}
  pattern=$(echo "$name" | tr '-' '_')
  if ls .whl/ 2>/dev/null | grep -qi "^${pattern}-${req##*==}-"; then continue; fi
  # Binary wheels for the device's Python; a pure-Python sdist (rouge-score, sqlitedict,
  # word2number publish no wheel) is built into a wheel here.
  $PIP download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp "${PLATFORMS[@]}" -d .whl "$req" \
    || $PIP wheel -q --no-deps -w .whl "$req"
done

git cat-file commit HEAD > .whl/head.commit
git ls-tree -r --full-tree HEAD > .whl/head.ls-tree
if [[ -n "$(git status --porcelain --untracked-files=no)" ]]; then
  echo "warning: the work tree has uncommitted changes; the device run will record it as dirty" >&2
fi
du -sh .whl
echo "prepared .whl/ for head $(git rev-parse --short=12 HEAD): ${#wanted[@]} wheel(s) from sets: ${WHEEL_SETS:-core structured}"
