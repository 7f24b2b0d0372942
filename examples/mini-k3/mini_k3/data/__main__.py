"""Write the shipped evaluation sets: ``python -m mini_k3.data [OUT_DIR]``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from . import SEEDS, aime, json_output, mrcr

EVAL_SIZES = {"mrcr_per_bin": 80, "aime25": 200, "json": 100}


def write_jsonl(path: Path, rows) -> None:
    with path.open("w") as fh:
        for row in rows:
            fh.write(json.dumps(row.to_json(), sort_keys=True) + "\n")


def write_eval_sets(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    seed = SEEDS["eval"]
    write_jsonl(out / "mrcr.jsonl", mrcr.generate(seed, EVAL_SIZES["mrcr_per_bin"]))
    write_jsonl(out / "aime25.jsonl", aime.generate(seed + 1, EVAL_SIZES["aime25"]))
    write_jsonl(out / "json.jsonl", json_output.generate(seed + 2, EVAL_SIZES["json"]))


if __name__ == "__main__":
    default = Path(__file__).resolve().parents[2] / "data" / "eval"
    write_eval_sets(Path(sys.argv[1]) if len(sys.argv) > 1 else default)
