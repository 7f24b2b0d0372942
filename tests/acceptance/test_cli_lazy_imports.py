"""Command modules import nothing heavy at import time, so `fasttrack --help` stays fast."""

import subprocess
import sys

HEAVY = ("jsonschema", "torch", "yaml", "lm_eval", "numpy", "scipy")


def test_command_modules_import_no_heavy_library():
    code = (
        "import sys\n"
        "import fasttrack.cli.validate, fasttrack.cli.init, fasttrack.cli.plan, fasttrack.cli.schema\n"
        "from fasttrack.cli import cli\n"
        "cli.main(['--help'], standalone_mode=False)\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
