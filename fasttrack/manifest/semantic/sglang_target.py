"""Rules of a ``target.sglang`` section: those of every engine serving config
(`vllm_target.serving_config`), and what an SGLang server cannot give the gate as declared.

- A switch proven by ``metrics`` reads ``/metrics``, which SGLang serves only when started with
  ``--enable-metrics``: without it the proof could never be read (an error, not a check that
  fails later).
- A switch proven by its kernel census (``proof.source: census``) reads SGLang's torch profiler
  trace of both servers, which the gate finds only where each side's environment names
  ``SGLANG_TORCH_PROFILER_DIR`` (`fasttrack.manifest.profiling`): an error without it.
- ``scope.speculative``: the speculative checks read acceptance from vLLM's
  ``spec_decode_num_*`` counters, which SGLang does not serve (it reports an average accept length
  in ``/get_server_info``), and fasttrack has no SGLang drafting flags to set per draft length:
  an error until both exist, never a check that passes without its acceptance.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from fasttrack.manifest.problems import Problem
from fasttrack.manifest.profiling import SGLANG_PROFILER_ENV, sglang_unprofiled
from fasttrack.manifest.semantic.common import error, switch_entries
from fasttrack.manifest.semantic.vllm_target import ServingConfig, serving_config
from fasttrack.manifest.sglang_launch import OWN_FLAGS

SGLANG = ServingConfig("sglang", "server_args", "model_path", OWN_FLAGS)
METRICS_FLAG = "--enable-metrics"


def sglang_target(data: Mapping[str, Any], env_switches: Any) -> Iterator[Problem]:
    sglang = data["target"].get("sglang")
    if data["target"]["kind"] != "sglang" or not isinstance(sglang, Mapping):
        return
    yield from serving_config(data, env_switches, SGLANG)
    for side in ("baseline", "candidate"):
        args = [
            str(a).split("=", 1)[0]
            for a in (*(sglang.get("server_args") or ()), *((sglang.get(side) or {}).get("server_args") or ()))
        ]
        proven = [s for _p, s in switch_entries(data) if (s.get("proof") or {}).get("source") == "metrics"]
        if proven and METRICS_FLAG not in args:
            yield error(
                ("target", "sglang", "server_args"),
                f"the switch {proven[0]['name']!r} is proven by /metrics, which SGLang serves only with "
                f"{METRICS_FLAG}: add it to server_args (the {side} server lacks it)",
            )
            break
    yield from _census_proofs(data)
    spec = (data.get("scope") or {}).get("speculative") if isinstance(data.get("scope"), dict) else None
    if isinstance(spec, Mapping) and spec.get("draft_lengths"):
        yield error(
            ("scope", "speculative"),
            "an sglang target cannot run draft lengths yet: the speculative checks read vLLM's spec_decode "
            "counters, which SGLang does not serve, and fasttrack sets no SGLang drafting flags per draft length",
        )


def _census_proofs(data: Mapping[str, Any]) -> Iterator[Problem]:
    """A census proof needs SGLang's torch profiler on both sides (SGLANG_TORCH_PROFILER_DIR)."""
    missing = sglang_unprofiled(data)
    if not missing:
        return
    for path, switch in switch_entries(data):
        if (switch.get("proof") or {}).get("source") == "census":
            yield error(
                (*path, "proof", "source"),
                f"the switch {switch['name']!r} is proven by the kernel census, read from SGLang's torch profiler "
                f"trace of both servers, and the {' and '.join(missing)} "
                f"{'server names' if len(missing) == 1 else 'servers name'} no {SGLANG_PROFILER_ENV}: add "
                f'{SGLANG_PROFILER_ENV}: "{{server_dir}}/traces" to target.sglang.env',
            )
