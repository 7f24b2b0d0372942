"""Run one check instance in its own process: ``python -m fasttrack.engine.worker IN OUT``.

IN is a pickle of (runner module name, instance, context) written by the engine; OUT receives the outcomes as
JSON. The engine kills this process's group on timeout or Ctrl-C, so a hung or crashing target
never takes the gate down with it. Its stdin is a pipe only the engine holds: should the engine
die (even by SIGKILL), the worker reads end-of-file and ends its own process group, and the
guards of the servers it started then stop them (fasttrack.process.guard).
"""

from __future__ import annotations

import copyreg
import json
import pickle
import sys
import traceback
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fasttrack.kinds.context import RunContext
    from fasttrack.plan.instance import CheckInstance


def _mappingproxy(data: dict) -> MappingProxyType:
    return MappingProxyType(data)


def _reduce_mappingproxy(proxy: MappingProxyType) -> tuple:
    return _mappingproxy, (dict(proxy),)


# Frozen manifests hold read-only mapping proxies, which pickle cannot store by itself.
copyreg.pickle(MappingProxyType, _reduce_mappingproxy)


def dump_job(path: Path, module: str, instance: CheckInstance, context: RunContext) -> None:
    with open(path, "wb") as fh:
        pickle.dump((module, instance, context), fh, protocol=pickle.HIGHEST_PROTOCOL)


def watch_engine() -> None:
    """End this process group when the engine's end of stdin closes (the engine is gone)."""
    import os
    import signal
    import threading

    def watch() -> None:
        try:
            while os.read(0, 4096):
                pass
        except OSError:
            return
        os.killpg(os.getpgrp(), signal.SIGTERM)

    if not os.isatty(0):
        threading.Thread(target=watch, name="fasttrack-engine-watch", daemon=True).start()


def main(argv: list[str]) -> int:
    in_path, out_path = Path(argv[0]), Path(argv[1])
    if len(argv) > 2 and argv[2] == "--lifeline":
        watch_engine()
    with open(in_path, "rb") as fh:
        module, instance, context = pickle.load(fh)
    import importlib
    from dataclasses import replace

    from fasttrack.targets.http import LEDGER

    runner = importlib.import_module(module)
    kind = instance.kind
    LEDGER.reset()
    try:
        result = runner.run(instance, context)
    except Exception as err:  # a runner or target bug: record it as errored, with the traceback in the log
        traceback.print_exc()
        from fasttrack.errors import missing_module, missing_module_reason
        from fasttrack.evidence import Status

        module = missing_module(err)
        if module is not None:  # an optional dependency absent here, met at run time: as at import
            result = context.outcome(
                instance, Status.NOT_RUN, reason_code="dependency", reason=missing_module_reason(kind, module)
            )
        else:
            result = context.outcome(
                instance,
                Status.ERRORED,
                reason_code="error",
                reason=f"the {kind} check raised {type(err).__name__}: {str(err)[:300]}",
            )
    outcomes = [result] if not isinstance(result, (list, tuple)) else list(result)
    retried = LEDGER.snapshot()  # requests to the target retried during this check (targets.http)
    if retried is not None:
        outcomes = [replace(o, retries=retried) for o in outcomes]
    tmp = out_path.with_suffix(".tmp")
    tmp.write_text(json.dumps([o.to_dict() for o in outcomes], default=str), encoding="utf-8")
    tmp.replace(out_path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
