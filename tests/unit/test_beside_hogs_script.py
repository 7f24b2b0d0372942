"""benchmarks/beside_hogs.py: the command runs beside the hogs, its exit code comes back, and no
hog outlives it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "beside_hogs.py"

# The command lists the hogs it sees (its parent's other children) and exits 7.
SEES_HOGS = """
import os, sys
parent = os.getppid()
hogs = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        stat = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        cmdline = open(f"/proc/{pid}/cmdline", "rb").read()
    except OSError:
        continue
    if int(stat[1]) == parent and int(pid) != os.getpid() and b"while True" in cmdline:
        hogs.append(pid)
print("hogs", " ".join(hogs))
sys.exit(7)
"""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_the_command_runs_beside_the_hogs_and_none_outlives_it():
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--hogs", "2", "--", sys.executable, "-c", SEES_HOGS],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 7, done.stderr
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("hogs")]
    hogs = [int(p) for p in line.split()[1:]]
    assert len(hogs) == 2
    assert not any(alive(pid) for pid in hogs)
    assert "2 hogs; exit 7; wall" in done.stdout and "load mean" in done.stdout


def test_without_a_command_it_is_a_usage_error():
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=60, env=os.environ)
    assert done.returncode == 2 and "give the command after --" in done.stderr
