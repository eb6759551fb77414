"""The native engine on CUDA: CUDA-graph replay equals the eager decode, greedy equals transformers,
log-probs equal a forward pass, preemption with graphs, the memory budget, and release/resume.

    pytest tests/gpu/test_native_engine_gpu.py -v          (on the GPU machine; skipped without CUDA)
"""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, Qwen2Config

from codefu.rollout import EngineConfig, NativeEngine, SamplingParams
from codefu.rollout.native import attention
from helpers.stops import pick_stops

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]

PROMPTS = [list(range(10 + i, 10 + i + n)) for i, n in enumerate([3, 16, 21, 40, 7, 33, 64, 1])]


def random_qwen2(dtype=torch.float32, seed=0, **overrides):
    spec = dict(
        vocab_size=2048,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=3,
        num_attention_heads=8,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        initializer_range=0.3,  # the default 0.02 makes greedy repeat one token
        tie_word_embeddings=False,
        bos_token_id=None,
        pad_token_id=None,
        eos_token_id=None,
    )
    spec.update(overrides)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(Qwen2Config(**spec), dtype=dtype).eval()
    with torch.no_grad():
        for layer in model.model.layers:
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                proj.bias.normal_(0, 0.5)
    return model.cuda()


def fraction_for(extra: float = 0.05) -> float:
    """gpu_memory_fraction counts the TOTAL memory, including what is in use (other engines of this
    module, the models): leave `extra` of the GPU to the new engine."""
    torch.cuda.empty_cache()
    free, total = torch.cuda.mem_get_info()
    return min(1.0, (total - free) / total + extra)


def make_engine(hf, dtype="float32", **knobs) -> NativeEngine:
    knobs.setdefault("gpu_memory_fraction", fraction_for())
    config = EngineConfig(model="(in memory)", engine="native", dtype=dtype, device="cuda", **knobs)
    return NativeEngine.from_hf_model(hf, None, config)


@pytest.fixture(scope="module")
def hf():
    return random_qwen2()


@pytest.fixture(scope="module")
def engine(hf):
    return make_engine(hf)


def hf_greedy(hf, prompt, max_new):
    with torch.no_grad():
        ids = torch.tensor([prompt], device="cuda")
        out = hf.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=max_new)
    return out[0, len(prompt) :].tolist()


def test_the_triton_kernel_is_in_use():
    assert attention._triton_decode() is not None, "codefu.rollout.native.triton_decode did not import"


@pytest.mark.parametrize("prompts", [2, 3, 5, 8], ids=lambda n: f"{n}-prompts")
def test_graph_replay_equals_eager_decode(engine, prompts):
    """Batches of 4, 6, 10 and 16 sequences (padded to buckets 4, 8, 16, 16)."""
    assert engine.graphs is not None
    engine.start(PROMPTS[:prompts], SamplingParams(n=2, temperature=1.0, max_new_tokens=20, seed=0))
    for _ in range(6):  # prefill, then a few decode steps
        engine.step()
    work = engine.scheduler.schedule()
    assert type(work).__name__ == "DecodeStep" and len(work.seqs) == 2 * prompts
    _, _, graph_logits = engine._decode(work)
    graph_logits = graph_logits.clone()
    torch.cuda.synchronize()  # the eager call below refills the same pinned input buffer
    graphs, engine.graphs = engine.graphs, None
    try:
        _, _, eager_logits = engine._decode(work)
    finally:
        engine.graphs = graphs
    # the same kernels but for the block-table width (graphs: the maximum; eager: this batch's), which
    # may change how the Triton kernel splits the context: fp32 summation-order noise only
    torch.testing.assert_close(graph_logits, eager_logits, atol=1e-4, rtol=1e-5)
    while not engine.done:
        engine.step()


def test_greedy_equals_transformers(hf, engine):
    out = engine.generate(PROMPTS, SamplingParams(n=2, temperature=0.0, max_new_tokens=24))
    for c in out:
        assert c.token_ids == hf_greedy(hf, c.prompt_ids, 24), c.prompt_index
    # each prompt once for its n samples: computed now, or found in the prefix cache (the module's engine
    # saw these prompts in earlier tests)
    stats = engine.last_stats
    assert stats["prefill_tokens"] + stats["cached_tokens"] == sum(len(p) for p in PROMPTS)


def test_graphs_on_and_off_give_the_same_greedy_tokens_in_bf16():
    """Greedy, not sampled: eager decode passes narrower block tables, so the Triton kernel may split
    the context differently; bf16 rounding then differs slightly, which can move an inverse-CDF draw."""
    hf = random_qwen2(torch.bfloat16)
    sampling = SamplingParams(n=4, temperature=0.0, max_new_tokens=48)
    on = make_engine(hf, dtype="bfloat16", cuda_graphs=True).generate(PROMPTS, sampling)
    off = make_engine(hf, dtype="bfloat16", cuda_graphs=False).generate(PROMPTS, sampling)
    assert [c.token_ids for c in on] == [c.token_ids for c in off]


def test_graphs_captured_mid_decode_keep_greedy_outputs(hf):
    """A bucket's graph is captured when the thinning batch first needs it, between decode steps of live
    sequences: the warm-up run of each capture must write nothing into their KV cache."""
    full = [hf_greedy(hf, p, 24) for p in PROMPTS]
    stop = pick_stops(full, min_ended=5)  # 8 prompts x 2 samples thin to 6 or fewer: bucket 8 and below
    engine = make_engine(hf, max_num_seqs=16)
    assert engine.graphs is not None and not engine.graphs.graphs  # nothing captured before a decode
    out = engine.generate(
        PROMPTS, SamplingParams(n=2, temperature=0.0, max_new_tokens=24, stop_token_ids=stop)
    )
    for c in out:
        want = full[c.prompt_index]
        end = next((i + 1 for i, t in enumerate(want) if t in stop), len(want))
        assert c.token_ids == want[:end], c.prompt_index
    captured = list(engine.graphs.graphs)
    assert captured[0] == 16 and len(captured) > 1, captured  # the full batch first, smaller ones later
    assert engine.last_stats["graph_capture_s"] > 0


def test_sampled_logprobs_equal_a_forward_pass(hf, engine):
    temperature = 0.8
    sampling = SamplingParams(n=3, temperature=temperature, top_k=100, top_p=0.9, max_new_tokens=32, seed=1)
    out = engine.generate(PROMPTS, sampling)
    worst = 0.0
    for c in out:
        ids = torch.tensor([c.prompt_ids + c.token_ids], device="cuda")
        with torch.no_grad():
            logits = hf(input_ids=ids).logits[0, len(c.prompt_ids) - 1 : -1].float() / temperature
        ref = torch.log_softmax(logits, -1).gather(-1, ids[0, len(c.prompt_ids) :, None]).squeeze(1)
        worst = max(worst, float((torch.tensor(c.logprobs, device="cuda") - ref).abs().max()))
    # fp32 everywhere (the Triton kernel computes exact fp32 dot products for fp32 inputs)
    assert worst < 1e-3, worst


class SmallCacheEngine(NativeEngine):
    """A GPU engine with a 12-block cache, to force preemption (the memory budget would give thousands)."""

    def _plan_cache_blocks(self) -> int:
        return 12


def test_preemption_with_graphs_keeps_greedy_outputs(hf, engine):
    sampling = SamplingParams(n=3, temperature=0.0, max_new_tokens=40)
    config = EngineConfig(model="(in memory)", engine="native", device="cuda", max_num_seqs=32)
    small = SmallCacheEngine.from_hf_model(hf, None, config)
    assert small.graphs is not None
    out = small.generate(PROMPTS[:5], sampling)
    assert small.last_stats["preemptions"] > 0
    assert [c.token_ids for c in out] == [c.token_ids for c in engine.generate(PROMPTS[:5], sampling)]
    assert small.allocator.num_free == 12


def test_memory_budget_release_and_resume(hf):
    _, total = torch.cuda.mem_get_info()
    engine = make_engine(hf, gpu_memory_fraction=fraction_for(0.1))
    assert engine.cache is not None
    cache_bytes = engine.cache.data.numel() * engine.cache.data.element_size()
    assert 0.05 * total < cache_bytes < 0.1 * total  # the budget minus weights and a prefill peak
    sampling = SamplingParams(n=2, temperature=0.0, max_new_tokens=16)
    before = engine.generate(PROMPTS, sampling)
    torch.cuda.synchronize()
    allocated = torch.cuda.memory_allocated()
    engine.release_memory()
    assert engine.cache is None and engine.graphs is None
    assert torch.cuda.memory_allocated() <= allocated - cache_bytes
    after = engine.generate(PROMPTS, sampling)  # resumes: same cache size, graphs captured again
    assert engine.graphs is not None and engine.num_blocks * engine.block_size >= engine.max_model_len
    assert [c.token_ids for c in after] == [c.token_ids for c in before]


def test_released_weights_give_their_memory_back_and_a_load_restores_them(hf):
    # a colocated trainer's turn: the engine's weights go too (the sync after the update brings them)
    engine = make_engine(hf)
    sampling = SamplingParams(n=2, temperature=0.0, max_new_tokens=16)
    before = engine.generate(PROMPTS, sampling)
    weight_bytes = sum(p.numel() * p.element_size() for p in engine.model.parameters())
    torch.cuda.synchronize()
    allocated = torch.cuda.memory_allocated()
    engine.release_memory(weights=True)
    assert engine.cache is None
    assert torch.cuda.memory_allocated() <= allocated - weight_bytes
    engine.load_weights(hf.state_dict())  # CUDA tensors, as a colocated trainer shares them
    after = engine.generate(PROMPTS, sampling)
    assert [c.token_ids for c in after] == [c.token_ids for c in before]


def test_load_weights_from_tensors_on_the_same_gpu(hf):
    engine = make_engine(hf)
    other = random_qwen2(seed=7)
    ptrs = [p.data_ptr() for p in engine.model.parameters()]
    engine.load_weights(other.state_dict())  # CUDA tensors: copied on the device
    assert [p.data_ptr() for p in engine.model.parameters()] == ptrs
    out = engine.generate(PROMPTS[:3], SamplingParams(temperature=0.0, max_new_tokens=16))
    assert [c.token_ids for c in out] == [hf_greedy(other, p, 16) for p in PROMPTS[:3]]


def test_resume_takes_fewer_blocks_when_the_gpu_filled_meanwhile(hf):
    """Colocation: a trainer's optimizer state appears after the engine was built. The next resume takes
    what fits now (fewer blocks, same outputs), and says so clearly when not even one sequence fits."""
    engine = make_engine(hf, gpu_memory_fraction=fraction_for(0.1), max_model_len=1024)
    sampling = SamplingParams(n=2, temperature=0.0, max_new_tokens=16)
    before = engine.generate(PROMPTS, sampling)
    planned = engine.num_blocks
    cache_bytes = engine.cache.data.numel() * engine.cache.data.element_size()
    engine.release_memory()
    hog = torch.empty(cache_bytes // 2, dtype=torch.uint8, device="cuda")  # the trainer's new state
    after = engine.generate(PROMPTS, sampling)
    assert planned * 0.3 < engine.num_blocks < planned * 0.7, (planned, engine.num_blocks)
    assert [c.token_ids for c in after] == [c.token_ids for c in before]
    engine.release_memory()
    del hog
    torch.cuda.empty_cache()
    free, total = torch.cuda.mem_get_info()
    # leave less than one max_model_len sequence of KV under the fraction
    per_block = cache_bytes // (planned + 1)
    room = int(total * engine.config.gpu_memory_fraction) - (total - free) - engine._activation_peak
    hog = torch.empty(max(room - per_block * 4, 1), dtype=torch.uint8, device="cuda")
    with pytest.raises(RuntimeError, match="no longer fits one sequence of max_model_len|no GPU memory left"):
        engine.generate(PROMPTS, sampling)
    assert engine.cache is None  # nothing half-allocated
    del hog
    torch.cuda.empty_cache()
    assert [c.token_ids for c in engine.generate(PROMPTS, sampling)] == [c.token_ids for c in before]


def test_adapter_syncs_reach_the_cuda_graphs(hf):
    """LoRA adapters computed beside the weights (unmerged): after a sync the CUDA graphs replay with them
    (captured again when the adapters first appear), and a later sync of the same shapes, copied into the
    same tensors, reaches the graphs already captured; the sampled log-probs are the merged model's."""
    from copy import deepcopy

    from codefu.models.lora import AdapterWeights, merge_adapters

    engine = make_engine(hf)
    sampling = SamplingParams(n=2, temperature=0.8, max_new_tokens=24, seed=1)
    engine.generate(PROMPTS, sampling)  # graphs captured without adapters
    base = {k: v.detach().clone() for k, v in hf.state_dict().items()}

    def adapters(seed: int) -> AdapterWeights:
        g = torch.Generator().manual_seed(seed)
        tensors = {}
        for i in range(hf.config.num_hidden_layers):
            for name in ("self_attn.q_proj", "self_attn.v_proj", "mlp.down_proj"):
                module = f"model.layers.{i}.{name}"
                out_f, in_f = base[module + ".weight"].shape
                tensors[module + ".lora_A"] = torch.randn(4, in_f, generator=g) * 0.1
                tensors[module + ".lora_B"] = torch.randn(out_f, 4, generator=g) * 0.1
        return AdapterWeights(tensors, 2.0)

    def worst_against_merged(weights: AdapterWeights) -> float:
        merged = deepcopy(hf)
        merged.load_state_dict(merge_adapters({k: v.cpu() for k, v in base.items()} | weights.tensors, 2.0))
        merged.cuda()
        worst = 0.0
        for c in engine.generate(PROMPTS, sampling):
            ids = torch.tensor([c.prompt_ids + c.token_ids], device="cuda")
            with torch.no_grad():
                logits = merged(input_ids=ids).logits[0, len(c.prompt_ids) - 1 : -1].float() / 0.8
            ref = torch.log_softmax(logits, -1).gather(-1, ids[0, len(c.prompt_ids) :, None]).squeeze(1)
            worst = max(worst, float((torch.tensor(c.logprobs, device="cuda") - ref).abs().max()))
        return worst

    first = adapters(0)
    engine.load_weights(first)
    graphs = engine.graphs
    assert worst_against_merged(first) < 2e-3  # fp32: the graphs replay the adapters
    second = adapters(1)
    engine.load_weights(second)
    assert engine.graphs is graphs  # same shapes: copied in place, nothing captured again ...
    assert worst_against_merged(second) < 2e-3  # ... and the captured graphs read the new values
