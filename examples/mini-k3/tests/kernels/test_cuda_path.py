"""GPU-only pieces of the latency path (skipped without CUDA): the Triton small-batch GEMV
against cuBLAS, and the CUDA-graph replay against the eager step, over batch 1-64."""

from __future__ import annotations

import pytest
import torch
from conftest import BATCHES, DTYPE_NAMES, grid
from kernel_tolerances import KERNEL, assert_close, step_tolerance

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.mark.fasttrack_scope("batch", "dtype", default=grid(batch=BATCHES, dtype=DTYPE_NAMES))
def test_triton_gemv_matches_cublas(scope_point):
    from mini_k3.latency.kernel_choice import GEMV_MAX_ROWS, linear, triton_available

    if not triton_available():
        pytest.skip("Triton is not installed")
    batch, dtype = scope_point["batch"], {"fp32": torch.float32, "bf16": torch.bfloat16}[scope_point["dtype"]]
    g = torch.Generator(device="cuda").manual_seed(batch)
    for n_out, n_in in ((256, 256), (3840, 256), (264, 256), (77, 129)):  # awkward sizes included
        x = torch.randn(batch, n_in, device="cuda", dtype=dtype, generator=g)
        w = torch.randn(n_out, n_in, device="cuda", dtype=dtype, generator=g) / n_in ** 0.5
        got = linear(x, w, small=True)
        ref = torch.nn.functional.linear(x.double(), w.double()).to(dtype)
        atol, rtol = KERNEL[scope_point["dtype"]]
        if dtype == torch.float32:
            atol, rtol = 1e-5, 1e-5  # both accumulate ~n_in fp32 products in different orders (TF32 off)
        assert_close(got, ref, atol, rtol, f"GEMV {batch}x{n_in} -> {n_out}, {dtype}, rows<= {GEMV_MAX_ROWS} use Triton")


@pytest.mark.fasttrack_scope("batch", "dtype", default=grid(batch=BATCHES, dtype=DTYPE_NAMES))
def test_cuda_graph_replay_matches_eager(scope_point):
    from mini_k3.latency import LatencyDecoder, LatencyOptions
    from mini_k3.latency.graphs import GraphedDecoder
    from mini_k3.parallel import single_rank
    from tp_jobs import _clone, _prefilled_cache, build_model

    batch, dtype = scope_point["batch"], scope_point["dtype"]
    ctx = single_rank("cuda")
    model = build_model(ctx, dtype)
    decoder = LatencyDecoder(model, ctx, LatencyOptions())
    graphed = GraphedDecoder(decoder)
    cache, lengths = _prefilled_cache(model, batch, 32, seed=batch)
    rows = torch.arange(batch, device="cuda")
    eager_cache, graph_cache = _clone(cache), _clone(cache)
    with torch.no_grad():
        for step in range(3):  # several replays: inputs change, the graph must follow
            ids = torch.randint(0, 200, (batch, 1), device="cuda")
            pos = (lengths[:, None] + step).to("cuda")
            eager = decoder.forward(ids, pos, eager_cache, rows)
            stock = model(ids, pos, _clone(eager_cache), rows)  # stock on the same context
            replay = graphed(ids, pos, graph_cache, rows)
            atol, rtol = step_tolerance(dtype, eager.float())
            assert_close(replay.float(), eager.float(), atol, rtol, f"graph vs eager, step {step}")
            atol, rtol = step_tolerance(dtype, stock.float())
            assert_close(replay.float(), stock.float(), atol, rtol, f"graph vs stock, step {step}")
    assert graphed.captures == 1


def test_cuda_graphs_are_captured_once_across_generate_calls_that_alternate_shapes():
    # A benchmark times a full request and a prefill-only one, alternately: recapturing the graphs
    # in every call (a new cache each time) cost the speculative benchmark its promised speed-up
    # (issue #22: 285, 238, 162 tokens/s at draft 1, 4, 7).
    from mini_k3.config import MiniK3Config
    from mini_k3.engine import Engine, GenerationRequest
    from mini_k3.latency.hook import decoder_for
    from mini_k3.model import MiniK3
    from mini_k3.tokenizer import ByteTokenizer

    torch.manual_seed(0)
    model = MiniK3(MiniK3Config.tiny()).eval()
    engine = Engine(model=model, tokenizer=ByteTokenizer(), device="cuda", latency_specialized=True,
                    speculative_draft_tokens=4)
    requests = [GenerationRequest("abcabcabcabc", max_tokens=16, temperature=0.0, ignore_eos=True)]
    prefill_only = [GenerationRequest("abcabcabcabc", max_tokens=1, temperature=0.0, ignore_eos=True)]
    first = engine.generate(requests)[0].outputs[0].token_ids
    graphed = decoder_for(engine.model)
    captured = graphed.captures
    assert captured > 0
    for _ in range(3):
        engine.generate(prefill_only)
        assert engine.generate(requests)[0].outputs[0].token_ids == first
    assert graphed.captures == captured, "generate calls of known shapes must replay, not recapture"
