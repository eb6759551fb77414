"""The fused Triton kernels (triton_fused.py) on CUDA at the sizes of the models the engine serves, eager and
inside a CUDA graph, against the torch references in model.py; and a small model with and without them.

    pytest tests/gpu/test_triton_fused_gpu.py -v          (on the GPU machine; skipped without CUDA)

Tolerances. fp32: 1e-5. Triton's exp, division and rsqrt are the fast approximate ones (a few fp32 ulps)
and it may contract a * b + c into one FMA; torch runs one IEEE op per kernel. bf16: the kernels round to
bf16 exactly where the references' ops round (see triton_fused.py), so outputs are mostly bit-identical;
an element differs only when the fp32 intermediate before a rounding differs in its last bits (approximate
exp / rsqrt, another summation order of the squares) and lands on the other side of a bf16 rounding
boundary: then by one bf16 ulp (2^-8 relative, ~0.4%; 2 ulps after the following rounding). So bf16
checks are: within 2 ulps (rtol 2^-6) everywhere, and at most 1% of the elements not bit-identical.
"""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, Qwen2Config

from codefu.rollout.native import model as native_model
from codefu.rollout.native.attention import AttentionMetadata
from codefu.rollout.native.kv_cache import KVCache
from codefu.rollout.native.model import (
    Rotary,
    add_rms_norm_torch,
    default_inv_freq,
    rope_and_store_kv_torch,
    silu_mul_torch,
)

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]

DEVICE = "cuda"
# hidden, intermediate, query heads, KV heads, head dim of the models the engine serves
MODELS = {
    "smollm2-135m": (576, 1536, 9, 3, 64),
    "qwen2.5-1.5b": (1536, 8960, 12, 2, 128),
    "qwen2.5-7b": (3584, 18944, 28, 4, 128),
    "qwen3-8b": (4096, 12288, 32, 8, 128),
}
DTYPES = pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
BLOCK = 16


def assert_matches(out: torch.Tensor, ref: torch.Tensor, cancels: bool = False) -> None:
    """cancels: RoPE's x * cos + rotate(x) * sin. The reference rounds both bf16 products and then the
    sum; the compiled kernel contracts one product and the add into an FMA (one rounding fewer), so on
    the H200 17-22% of the rotated elements differ from the reference by one rounding, and where the sum
    nearly cancels that is one ulp of the OPERANDS (|x| up to ~4 here: 2^-6, measured at most 0.006).
    So bf16 gets an absolute bound of 2^-6 there, and a bound on the share of differing elements that a
    wrong rotation (or a wrong slot) would break by far."""
    assert out.dtype == ref.dtype and out.shape == ref.shape
    assert torch.isfinite(out).all()
    if out.dtype == torch.float32:
        torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    else:
        torch.testing.assert_close(out, ref, atol=2**-6 if cancels else 1e-5, rtol=2**-6)
        differ = (out != ref).float().mean().item()
        limit = 0.3 if cancels else 0.01
        assert differ <= limit, f"{differ:.2%} of the elements differ from the reference"


def rope_inputs(tokens, heads, kv_heads, dim, dtype, max_len=4096, seed=0):
    """qkv, positions, the fp32 tables, a 2-layer cache (layer 1 is used; layer 0 must stay untouched)
    and distinct slots spread over the blocks in random order."""
    g = torch.Generator(device=DEVICE).manual_seed(seed)
    qkv = torch.randn(tokens, (heads + 2 * kv_heads) * dim, device=DEVICE, generator=g).to(dtype)
    positions = torch.randint(0, max_len, (tokens,), device=DEVICE, generator=g)
    rotary = Rotary(tuple(default_inv_freq(1e6, dim).tolist()), 1.0, max_len)
    rotary.init_tables(DEVICE)
    blocks = 2 * tokens // BLOCK + 2
    cache = torch.randn(2, 2, blocks, BLOCK, kv_heads, dim, device=DEVICE, generator=g).to(dtype)
    slots = torch.randperm(blocks * BLOCK, device=DEVICE, generator=g)[:tokens]
    return qkv, positions, rotary.cos, rotary.sin, cache, slots


@DTYPES
@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("tokens", [1, 100, 2048], ids=["T1", "T100", "T2048"])
def test_add_rms_norm(model, dtype, tokens):
    from codefu.rollout.native.triton_fused import add_rms_norm

    hidden = MODELS[model][0]
    g = torch.Generator(device=DEVICE).manual_seed(tokens)
    x = (4 * torch.randn(tokens, hidden, device=DEVICE, generator=g)).to(dtype)
    residual = (4 * torch.randn(tokens, hidden, device=DEVICE, generator=g)).to(dtype)
    weight = (1 + 0.2 * torch.randn(hidden, device=DEVICE, generator=g)).to(dtype)
    for res in (residual, None):
        normed, summed = add_rms_norm(x, res, weight, 1e-6)
        ref_normed, ref_summed = add_rms_norm_torch(x, res, weight, 1e-6)
        assert torch.equal(summed, ref_summed)  # one add, rounded once, in both
        assert_matches(normed, ref_normed)


@DTYPES
@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("tokens", [1, 100, 2048], ids=["T1", "T100", "T2048"])
def test_rope_and_store_kv(model, dtype, tokens):
    from codefu.rollout.native.triton_fused import rope_and_store_kv

    _, _, heads, kv_heads, dim = MODELS[model]
    qkv, positions, cos, sin, cache, slots = rope_inputs(tokens, heads, kv_heads, dim, dtype)
    before, ref_cache = cache.clone(), cache.clone()
    rest = (slots, heads, kv_heads, dim)
    q = rope_and_store_kv(qkv, positions, cos, sin, cache[1, 0], cache[1, 1], *rest)
    ref_q = rope_and_store_kv_torch(qkv, positions, cos, sin, ref_cache[1, 0], ref_cache[1, 1], *rest)
    assert_matches(q, ref_q, cancels=True)
    assert_matches(cache, ref_cache, cancels=True)
    written = torch.zeros(cache.shape[:4], dtype=torch.bool, device=DEVICE)
    written[1].view(2, -1)[:, slots] = True
    assert torch.equal(cache[~written], before[~written])


@DTYPES
@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("tokens", [1, 100, 2048], ids=["T1", "T100", "T2048"])
def test_silu_mul(model, dtype, tokens):
    from codefu.rollout.native.triton_fused import silu_mul

    inter = MODELS[model][1]
    g = torch.Generator(device=DEVICE).manual_seed(tokens)
    gate_up = (4 * torch.randn(tokens, 2 * inter, device=DEVICE, generator=g)).to(dtype)
    assert_matches(silu_mul(gate_up), silu_mul_torch(gate_up))


@DTYPES
def test_cuda_graph_capture_and_replay_with_new_inputs(dtype):
    """norm -> RoPE/store -> silu_mul captured once (as the engine's decode graphs capture them); each
    replay sees new activations, positions and slots written in place, and matches the references."""
    from codefu.rollout.native.triton_fused import add_rms_norm, rope_and_store_kv, silu_mul

    hidden, inter, heads, kv_heads, dim = MODELS["qwen2.5-1.5b"]
    tokens = 96
    qkv, positions, cos, sin, cache, slots = rope_inputs(tokens, heads, kv_heads, dim, dtype)
    x = torch.randn(tokens, hidden, device=DEVICE).to(dtype)
    residual = torch.randn_like(x)
    weight = (1 + 0.2 * torch.randn(hidden, device=DEVICE)).to(dtype)
    gate_up = torch.randn(tokens, 2 * inter, device=DEVICE).to(dtype)

    def step():
        normed, summed = add_rms_norm(x, residual, weight, 1e-6)
        q = rope_and_store_kv(qkv, positions, cos, sin, cache[1, 0], cache[1, 1], slots, heads, kv_heads, dim)
        return normed, summed, q, silu_mul(gate_up)

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        step()  # compile and warm up outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outputs = step()

    g = torch.Generator(device=DEVICE).manual_seed(5)
    for _ in range(3):
        for t in (x, residual, qkv, gate_up):
            t.copy_(torch.randn(t.shape, device=DEVICE, generator=g))
        positions.copy_(torch.randint(0, cos.shape[0], (tokens,), device=DEVICE, generator=g))
        slots.copy_(torch.randperm(cache.shape[2] * BLOCK, device=DEVICE, generator=g)[:tokens])
        ref_cache = cache.clone()
        graph.replay()
        torch.cuda.synchronize()
        normed, summed, q, act = outputs
        ref_normed, ref_summed = add_rms_norm_torch(x, residual, weight, 1e-6)
        ref_q = rope_and_store_kv_torch(
            qkv, positions, cos, sin, ref_cache[1, 0], ref_cache[1, 1], slots, heads, kv_heads, dim
        )
        assert torch.equal(summed, ref_summed)
        assert_matches(normed, ref_normed)
        assert_matches(q, ref_q, cancels=True)
        assert_matches(cache, ref_cache, cancels=True)
        assert_matches(act, silu_mul_torch(gate_up))


@DTYPES
def test_model_with_kernels_equals_model_with_torch_references(dtype, monkeypatch):
    """A small Qwen2 on CUDA: prefill of 3 sequences, then 4 decode steps, with the fused kernels (the
    default on CUDA) and with the torch references forced; final hidden states agree. bf16: the rare
    one-ulp differences above, carried through 3 layers, spread as bf16 noise over everything, so it is
    held to a relative error of the whole tensor (a wiring mistake gives ~1)."""
    config = Qwen2Config(
        vocab_size=512,
        hidden_size=256,
        intermediate_size=704,
        num_hidden_layers=3,
        num_attention_heads=8,
        num_key_value_heads=2,
        max_position_embeddings=512,
        initializer_range=0.1,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    hf = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model = native_model.NativeCausalLM.build(config, dtype, DEVICE, max_len=512)
    model.load_weights(hf.state_dict())
    lengths = [37, 5, 20]
    width, tokens = max(lengths), sum(lengths)
    per_seq = 4  # blocks per sequence: room for the prompt and the decoded tokens
    tables = torch.randperm(len(lengths) * per_seq).view(len(lengths), per_seq).to(torch.int32)
    slots = [int(tables[b, p // BLOCK]) * BLOCK + p % BLOCK for b, n in enumerate(lengths) for p in range(n)]
    pad_index = [row * width + p for row, n in enumerate(lengths) for p in range(n)]
    ids = torch.randint(0, 512, (tokens,), generator=torch.Generator().manual_seed(1))

    def run() -> list[torch.Tensor]:
        cache = KVCache(3, len(lengths) * per_seq, BLOCK, 2, 32, dtype, DEVICE)
        for i, layer in enumerate(model.layers):
            layer.self_attn.k_cache, layer.self_attn.v_cache = cache.layer(i)
        meta = AttentionMetadata(
            True, torch.tensor(slots, device=DEVICE), torch.tensor(pad_index, device=DEVICE), 3, width
        )
        positions = torch.cat([torch.arange(n) for n in lengths]).to(DEVICE)
        hidden = [model(ids.to(DEVICE), positions, meta)]
        for step in range(4):
            pos = torch.tensor([n + step for n in lengths])
            meta = AttentionMetadata(
                is_prefill=False,
                slot_mapping=(tables[torch.arange(3), pos // BLOCK] * BLOCK + pos % BLOCK).long().to(DEVICE),
                block_tables=tables.to(DEVICE),
                context_lens=(pos + 1).to(torch.int32).to(DEVICE),
            )
            hidden.append(model(torch.tensor([3, 1, 4]).to(DEVICE), pos.to(DEVICE), meta))
        return hidden

    with torch.no_grad():
        fused = run()
        monkeypatch.setattr(native_model, "_triton_fused", lambda: None)
        reference = run()
    for ours, ref in zip(fused, reference, strict=True):
        assert torch.isfinite(ours).all()
        if dtype == torch.float32:
            torch.testing.assert_close(ours, ref, atol=1e-4, rtol=1e-4)
        else:
            error = ((ours.float() - ref.float()).norm() / ref.float().norm()).item()
            assert error < 2e-2, error
