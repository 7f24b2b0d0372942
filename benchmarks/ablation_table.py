"""The ablation of a run as a Markdown table: each switch alone against stock, and all on, per
benchmark and scope point (the speed-up over stock; the arms are the ``<benchmark>~<switch>``
outcomes of a manifest with ``ablation:``).

    python benchmarks/ablation_table.py EVIDENCE_OR_FOLDER
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from fasttrack.evidence import read_evidence_dict
from fasttrack.kinds.benchmarks.report import ablation


def main(argv: list[str]) -> int:
    evidence = read_evidence_dict(Path(argv[0]))
    table = ablation([c for c in evidence["checks"] if c["kind"] == "benchmarks"])
    if table is None:
        print("no ablation arms in this evidence")
        return 1
    header = ["benchmark", "scope point", *(f"{s} alone" for s in table["switches"]), "all on"]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for row in table["rows"]:
        print("| " + " | ".join([row["benchmark"], row["point"], *row["cells"], row["all_on"]]) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
