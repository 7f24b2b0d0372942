"""Which server sides run their engine's torch profiler, from the manifest alone (`fasttrack.manifest.profiling`)."""

from __future__ import annotations

from fasttrack.manifest.profiling import census_refusal, profiler_config_dir, sglang_unprofiled, unprofiled_sides

PROFILER = '{"profiler": "torch", "torch_profiler_dir": "{server_dir}/traces"}'


def test_the_profiler_dir_of_a_command():
    assert profiler_config_dir(["vllm", "serve", "m", "--profiler-config", PROFILER]) == "{server_dir}/traces"
    assert profiler_config_dir(["vllm", "serve", f"--profiler-config={PROFILER}"]) == "{server_dir}/traces"
    assert profiler_config_dir(["vllm", "serve", "--profiler-config", '{"profiler": "cuda"}']) is None
    assert profiler_config_dir(["vllm", "serve", "--profiler-config", "not json"]) is None
    assert profiler_config_dir(["vllm", "serve"]) is None


def openai(baseline: dict, candidate: dict) -> dict:
    return {"target": {"kind": "openai", "openai": {"baseline": baseline, "candidate": candidate}}}


def test_census_metrics_need_the_profiler_on_both_server_sides():
    bench = {"id": "k", "metric": "kernels_per_step"}
    profiled = {"command": ["vllm", "serve", "m", "--profiler-config", PROFILER]}
    plain = {"command": ["vllm", "serve", "m"]}
    assert unprofiled_sides(openai(profiled, profiled), bench) == []
    assert unprofiled_sides(openai(profiled, plain), bench) == ["candidate"]
    assert unprofiled_sides(openai({"url": "http://h:8000"}, profiled), bench) == ["baseline"]  # a running server
    # the benchmark's own server arguments reach its servers
    own = {
        **bench,
        "setups": {side: {"engine_args": ["--profiler-config", PROFILER]} for side in ("baseline", "candidate")},
    }
    assert unprofiled_sides(openai(plain, plain), own) == []
    # rate metrics, vllm_bench workloads and in-process targets read no census of a server
    assert unprofiled_sides(openai(plain, plain), {"metric": "tpot_ms"}) == []
    assert unprofiled_sides(openai(plain, plain), {**bench, "workload": {"kind": "vllm_bench"}}) == []
    assert unprofiled_sides({"target": {"kind": "python"}}, bench) == []
    vllm = {
        "target": {"kind": "vllm", "vllm": {"model": "m", "candidate": {"serve_args": ["--profiler-config", PROFILER]}}}
    }
    reason = census_refusal(vllm, bench)
    assert reason is not None and "the baseline server has none" in reason and "serve_args" in reason


def sglang(common: dict, baseline: dict | None = None, candidate: dict | None = None) -> dict:
    own = {"baseline": {"env": baseline or {}}, "candidate": {"env": candidate or {}}}
    return {"target": {"kind": "sglang", "sglang": {"model_path": "m", "env": common, **own}}}


def test_an_sglang_side_is_profiled_where_its_environment_names_sglangs_profiler_dir():
    bench = {"id": "k", "metric": "kernels_per_step"}
    traces = {"SGLANG_TORCH_PROFILER_DIR": "{server_dir}/traces"}
    assert unprofiled_sides(sglang(traces), bench) == []
    assert unprofiled_sides(sglang({}, candidate=traces), bench) == ["baseline"]
    assert unprofiled_sides(sglang({"SGLANG_TORCH_PROFILER_DIR": ""}), bench) == ["baseline", "candidate"]
    # vLLM's flag in an SGLang command is no SGLang profiler
    flagged = sglang({})
    flagged["target"]["sglang"]["server_args"] = ["--profiler-config", PROFILER]
    assert unprofiled_sides(flagged, bench) == ["baseline", "candidate"]
    reason = census_refusal(sglang({}, baseline=traces), bench)
    assert reason is not None and "the candidate server names no SGLANG_TORCH_PROFILER_DIR" in reason
    assert sglang_unprofiled(sglang({}, baseline=traces)) == ["candidate"]
