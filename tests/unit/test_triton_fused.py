"""The fused Triton kernels (add_rms_norm, rope_and_store_kv, silu_mul), run by Triton's interpreter on CPU,
against the torch references in model.py; and a tiny model's prefill + decode with the kernels forced on.

As in test_triton_decode.py, the kernel module is a private copy loaded with TRITON_INTERPRET=1 set (when
`@triton.jit` decides between a compiled and an interpreted kernel), and each test sets the variable again
for the launches. fp32 is held to ~1 ulp; fp16 to one fp16 rounding (the interpreter rounds to nearest as
the GPU does). bf16 is a loose plumbing check only: the interpreter TRUNCATES fp32 -> bf16 (the GPU rounds
to nearest even), so every rounding step can be an ulp off; tests/gpu checks bf16 numerics.
"""

from __future__ import annotations

import collections
from types import SimpleNamespace

import pytest
import torch
from transformers import AutoModelForCausalLM, Qwen2Config

from codefu.rollout.native import model as native_model
from codefu.rollout.native.attention import AttentionMetadata
from codefu.rollout.native.kv_cache import KVCache
from codefu.rollout.native.model import (
    NativeCausalLM,
    add_rms_norm_torch,
    rope_and_store_kv_torch,
    silu_mul_torch,
)
from codefu.rollout.native.testing import load_interpreted

tf = load_interpreted("codefu.rollout.native.triton_fused")


@pytest.fixture(autouse=True)
def _interpret(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")


TOL = {
    torch.float32: dict(atol=1e-6, rtol=1e-6),
    torch.float16: dict(atol=1e-5, rtol=2**-10),  # one rounding of fp16 (11-bit significand)
    torch.bfloat16: dict(atol=2e-2, rtol=3e-2),  # interpreter truncation, see the module docstring
}
DTYPES = pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["fp32", "fp16", "bf16"]
)


def test_interpreted_copy():
    assert type(tf._add_rms_norm_kernel).__name__ == "InterpretedFunction"


# ---- add_rms_norm -----------------------------------------------------------------------------------
@DTYPES
@pytest.mark.parametrize("rows,hidden", [(1, 96), (7, 100)])
@pytest.mark.parametrize("with_residual", [True, False], ids=["residual", "first-layer"])
def test_add_rms_norm(dtype, rows, hidden, with_residual):
    g = torch.Generator().manual_seed(rows + hidden)
    # x is a view with a row stride wider than the row (as a slice of a wider activation would be)
    x = (3 * torch.randn(rows, hidden + 5, generator=g))[:, :hidden].to(dtype)
    residual = (3 * torch.randn(rows, hidden, generator=g)).to(dtype) if with_residual else None
    weight = (1 + torch.randn(hidden, generator=g)).to(dtype)
    normed, summed = tf.add_rms_norm(x, residual, weight, 1e-6)
    ref_normed, ref_summed = add_rms_norm_torch(x, residual, weight, 1e-6)
    assert normed.dtype == summed.dtype == dtype and normed.shape == summed.shape == (rows, hidden)
    if residual is None:
        assert summed is x
    elif dtype != torch.bfloat16:
        assert torch.equal(summed, ref_summed)  # one add, rounded once: exact
    torch.testing.assert_close(summed, ref_summed, **TOL[dtype])
    torch.testing.assert_close(normed, ref_normed, **TOL[dtype])


# ---- rope_and_store_kv ------------------------------------------------------------------------------
def rope_case(tokens, heads, kv_heads, dim, dtype, seed=0, qkv_pad=0):
    """qkv (rows wider than the q/k/v width when qkv_pad), positions in random order, K/V caches that are
    layer 1 of a 3-layer random cache (every other value must stay as it was), and distinct slots spread
    over the blocks in random order."""
    g = torch.Generator().manual_seed(seed)
    max_len, num_blocks, page = 64, 6, 4
    width = (heads + 2 * kv_heads) * dim
    qkv = torch.randn(tokens, width + qkv_pad, generator=g)[:, :width].to(dtype)
    positions = torch.randint(0, max_len, (tokens,), generator=g)
    rotary = native_model.Rotary(tuple(native_model.default_inv_freq(10000.0, dim).tolist()), 1.0, max_len)
    rotary.init_tables("cpu")
    cache = torch.randn(3, 2, num_blocks, page, kv_heads, dim, generator=g).to(dtype)
    slots = torch.randperm(num_blocks * page, generator=g)[:tokens]
    return qkv, positions, rotary.cos, rotary.sin, cache, slots


@DTYPES
@pytest.mark.parametrize(
    "tokens,heads,kv_heads,dim,qkv_pad",
    [(1, 4, 1, 16, 0), (7, 8, 2, 12, 3), (7, 3, 3, 8, 0)],
    ids=["T1-gqa4", "T7-gqa4-dim12-strided", "T7-mha"],
)
def test_rope_and_store_kv(dtype, tokens, heads, kv_heads, dim, qkv_pad):
    qkv, positions, cos, sin, cache, slots = rope_case(tokens, heads, kv_heads, dim, dtype, qkv_pad=qkv_pad)
    ref_cache = cache.clone()
    before = cache.clone()
    args = (positions, cos, sin)
    heads_args = (heads, kv_heads, dim)
    q = tf.rope_and_store_kv(qkv, *args, cache[1, 0], cache[1, 1], slots, *heads_args)
    ref_q = rope_and_store_kv_torch(qkv, *args, ref_cache[1, 0], ref_cache[1, 1], slots, *heads_args)
    assert q.shape == (tokens, heads, dim) and q.dtype == dtype and q.is_contiguous()
    torch.testing.assert_close(q, ref_q, **TOL[dtype])
    torch.testing.assert_close(cache, ref_cache, **TOL[dtype])
    # v is copied, not computed: exact
    flat = cache[1].view(2, -1, kv_heads, dim)
    assert torch.equal(flat[1, slots], qkv[:, (heads + kv_heads) * dim :].view(tokens, kv_heads, dim))
    # nothing but the slots of this layer was written
    written = torch.zeros(cache.shape[:4], dtype=torch.bool)
    written[1].view(2, -1)[:, slots] = True
    assert torch.equal(cache[~written], before[~written])


def test_rope_positions_zero_is_identity():
    """cos = 1, sin = 0 at position 0: q and k come out as they went in."""
    qkv, _, cos, sin, cache, slots = rope_case(5, 4, 2, 16, torch.float32, seed=3)
    positions = torch.zeros(5, dtype=torch.long)
    q = tf.rope_and_store_kv(qkv, positions, cos, sin, cache[0, 0], cache[0, 1], slots, 4, 2, 16)
    assert torch.equal(q, qkv[:, :64].view(5, 4, 16))
    assert torch.equal(cache[0, 0].view(-1, 2, 16)[slots], qkv[:, 64:96].view(5, 2, 16))


# ---- silu_mul ---------------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")  # numpy's exp(100) in fp32
@DTYPES
@pytest.mark.parametrize("rows,inner", [(1, 70), (7, tf.SILU_BLOCK + 76)], ids=["T1", "T7-two-blocks"])
def test_silu_mul(dtype, rows, inner):
    g = torch.Generator().manual_seed(rows)
    gate_up = (4 * torch.randn(rows, 2 * inner, generator=g)).to(dtype)
    gate_up[0, :4] = torch.tensor([-100.0, -30.0, 30.0, 0.0])  # exp overflow side, saturation, zero
    out = tf.silu_mul(gate_up)
    assert out.shape == (rows, inner) and out.dtype == dtype
    torch.testing.assert_close(out, silu_mul_torch(gate_up), **TOL[dtype])


def test_bad_shapes_raise():
    x = torch.randn(3, 8)
    with pytest.raises(ValueError, match="weight"):
        tf.add_rms_norm(x, None, torch.ones(7), 1e-6)
    with pytest.raises(ValueError, match="residual"):
        tf.add_rms_norm(x, torch.randn(3, 7), torch.ones(8), 1e-6)
    with pytest.raises(ValueError, match="gate_up"):
        tf.silu_mul(torch.randn(3, 7))
    qkv, positions, cos, sin, cache, slots = rope_case(2, 4, 2, 16, torch.float32)
    with pytest.raises(ValueError, match="qkv"):
        tf.rope_and_store_kv(qkv, positions, cos, sin, cache[0, 0], cache[0, 1], slots, 4, 1, 16)
    with pytest.raises(ValueError, match="fp32"):
        tf.rope_and_store_kv(qkv, positions, cos.half(), sin, cache[0, 0], cache[0, 1], slots, 4, 2, 16)


# ---- the model with the kernels forced on -----------------------------------------------------------
def test_model_prefill_and_decode_with_kernels_equal_the_torch_path(monkeypatch):
    """A tiny Qwen2 (q/k/v biases, GQA 4, hidden 48, head dim 12: nothing a power of two): prefill two
    sequences, then decode one token for each; the hidden states and the KV caches with the interpreted
    kernels (model.CPU_KERNELS) equal the torch references'."""
    config = Qwen2Config(
        vocab_size=50,
        hidden_size=48,
        intermediate_size=40,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=1,
        max_position_embeddings=64,
        initializer_range=0.3,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    hf = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    with torch.no_grad():
        for p in hf.parameters():
            p.add_(0.1 * torch.randn_like(p))  # biases and norm weights away from 0 and 1
    model = NativeCausalLM.build(config, torch.float32, "cpu", max_len=64)
    model.load_weights(hf.state_dict())
    block = 4
    lengths, width = [5, 3], 5
    tables = torch.tensor([[4, 1], [2, 0]], dtype=torch.int32)  # blocks out of order
    slots = [int(tables[b, p // block]) * block + p % block for b, n in enumerate(lengths) for p in range(n)]
    prefill = AttentionMetadata(
        is_prefill=True,
        slot_mapping=torch.tensor(slots),
        pad_index=torch.tensor([0, 1, 2, 3, 4, 5, 6, 7]),
        batch=2,
        max_len=width,
    )
    decode = AttentionMetadata(
        is_prefill=False,
        slot_mapping=torch.tensor([int(tables[0, 1]) * block + 1, int(tables[1, 0]) * block + 3]),
        block_tables=tables,
        context_lens=torch.tensor([6, 4], dtype=torch.int32),
    )
    ids = torch.randint(0, 50, (8,), generator=torch.Generator().manual_seed(1))
    prefill_positions = torch.tensor([0, 1, 2, 3, 4, 0, 1, 2])

    calls = collections.Counter()

    def counted(name):
        def call(*args):
            calls[name] += 1
            return getattr(tf, name)(*args)

        return call

    spy = SimpleNamespace(**{name: counted(name) for name in tf.__all__})

    def run(kernels: object) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        monkeypatch.setattr(native_model, "CPU_KERNELS", kernels)
        cache = KVCache(2, 5, block, 1, 12, torch.float32, "cpu")
        for i, layer in enumerate(model.layers):
            layer.self_attn.k_cache, layer.self_attn.v_cache = cache.layer(i)
        first = model(ids, prefill_positions, prefill)
        second = model(torch.tensor([7, 9]), torch.tensor([5, 3]), decode)
        return first, second, cache.data

    fused = run(spy)
    # per forward: 2 norms per layer + the final one, 1 RoPE/store and 1 silu_mul per layer
    assert calls == {"add_rms_norm": 2 * 5, "rope_and_store_kv": 2 * 2, "silu_mul": 2 * 2}
    reference = run(None)
    for ours, ref in zip(fused, reference, strict=True):
        assert torch.isfinite(ours).all()
        torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-5)
