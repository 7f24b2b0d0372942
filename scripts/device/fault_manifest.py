"""Write a copy of the example's manifest whose candidate carries one planted fault.

    python3 scripts/device/fault_manifest.py FAULT [KEY=VALUE ...]   # prints the written path

FAULT (mini_k3/faults.py): ``path_fallback`` (stock path above batch 8, the path counter lying),
``slowdown`` (the decode steps at batch 64 1.5x as long), ``bad_token`` (non-finite logits after
token id 200), ``long_context`` (decode attention reads only the first 896 cache slots),
``bf16_mask`` (the decode mask built in the model's dtype: wrong at bf16 past position 256),
``mixed_batch_leak`` (every row of a step sampled with the first row's temperature and top_p),
``late_drafter`` (the n-gram drafter one token late at two of three steps), or ``clean`` (no fault: the example's own target, for a short run of a few benchmarks).
KEY=VALUE overrides a factory option (e.g. ``slowdown=1.3``). The copy has no ablation (a fault is
judged on the whole candidate); FAULT_BENCHMARKS=ID[,ID] keeps only those benchmarks and
FAULT_BATCH=N[,N] narrows their points to those batch sizes (a short device run). The copy is written next to the
example's manifest (examples/mini-k3/fasttrack.fault-FAULT.yaml, same relative paths) with the
target factory ``mini_k3.faults:create``; it is a work file of the run, not part of the repository.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "mini-k3" / "fasttrack.yaml"
FAULTS = {
    "path_fallback": {"path_fallback_above": 8},
    "slowdown": {"slow_at_batch": 64, "slowdown": 1.5},
    "bad_token": {"bad_token_id": 200},
    "long_context": {"long_context_bug_after": 896},
    "bf16_mask": {"mask_in_model_dtype": True},
    "mixed_batch_leak": {"first_row_sampling": True},
    "late_drafter": {"draft_off_by_one": True},
    "clean": {},
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in FAULTS:
        print(f"usage: fault_manifest.py {{{'|'.join(FAULTS)}}} [KEY=VALUE ...]", file=sys.stderr)
        return 2
    name, options = argv[0], dict(FAULTS[argv[0]])
    for item in argv[1:]:
        key, _, value = item.partition("=")
        options[key] = yaml.safe_load(value)
    data = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    if name != "clean":
        data["target"]["python"]["factory"] = "mini_k3.faults:create"
        data["target"]["python"]["options"] = options
    data.pop("ablation", None)
    keep = [b for b in os.environ.get("FAULT_BENCHMARKS", "").split(",") if b]
    if keep:
        data["benchmarks"] = [b for b in data.get("benchmarks") or () if b["id"] in keep]
    batches = [int(b) for b in os.environ.get("FAULT_BATCH", "").split(",") if b]
    if batches:
        for bench in data.get("benchmarks") or ():
            bench.setdefault("points", {})["batch"] = batches
            promises = bench.get("expect")
            if isinstance(promises, list):  # promises about other batch sizes could never be judged
                bench["expect"] = [
                    e for e in promises if set((e.get("points") or {}).get("batch", batches)) & set(batches)
                ]
    out = EXAMPLE.with_name(f"fasttrack.fault-{name}.yaml")
    out.write_text(
        f"# {name}: {options} (written by scripts/device/fault_manifest.py)\n" + yaml.safe_dump(data, sort_keys=False),
        encoding="utf-8",
    )
    print(out.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
