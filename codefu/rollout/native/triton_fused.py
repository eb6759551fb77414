"""Fused Triton kernels for the decoder layer's small ops (vLLM style): one launch where torch needs many.

    normed, summed = add_rms_norm(x, residual, weight, eps)     residual add + RMSNorm   (~8 torch ops)
    q = rope_and_store_kv(qkv, positions, cos, sin, k_cache, v_cache, slot_mapping, Hq, Hkv, D)
                                                                RoPE on q, k + K/V store (~20 torch ops)
    out = silu_mul(gate_up)                                     silu(gate) * up          (3 torch ops)

A decode step of a small model is a long chain of tiny kernels, each a few microseconds even inside a CUDA
graph; fused, a layer is ~10 launches instead of ~45. Every kernel is memory bound and reads and writes
each element once.

Numerics: each kernel computes in fp32 and rounds to the model dtype exactly where the torch reference in
model.py (which mirrors transformers) rounds: after the residual add, after the fp32 normalisation and
after the weight multiply; the RoPE tables to the dtype, then each product and the sum; silu, then the
product. The roundings are free here (memory-bound kernels) and keep bf16 outputs equal to the reference
except where fp32 intermediates differ in their last bits (the sum of squares is added up in another
order, Triton's exp is not torch's) and that flips a rounding: one bf16 ulp on a few elements. One
exception, measured on the H200: the compiler contracts a RoPE product and the add into an FMA (one
rounding fewer than the reference), so ~20% of rotated bf16 elements differ by one rounding (at most an
operand's ulp where the sum cancels; tests/gpu/test_triton_fused_gpu.py). In fp32 the casts are no-ops.

CUDA graphs: the launch grids and the outputs depend only on shapes, and nothing reads device data on the
host, so each call can be captured (after one warm-up call compiles the kernel).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

#: Elements of one row handled per silu_mul program.
SILU_BLOCK = 1024


def _next_pow2(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length())


@triton.jit
def _rounded(x, dtype: tl.constexpr):
    """fp32 x rounded to `dtype` (as a torch op in that dtype rounds its result), back in fp32."""
    return x.to(dtype).to(tl.float32)


# ---- residual add + RMSNorm ------------------------------------------------------------------------
@triton.jit
def _add_rms_norm_kernel(
    x_ptr,
    res_ptr,  # unused without HAS_RESIDUAL
    w_ptr,
    out_ptr,
    sum_ptr,  # unused without HAS_RESIDUAL
    stride_x,
    stride_res,
    stride_out,
    stride_sum,
    n,
    eps,
    HAS_RESIDUAL: tl.constexpr,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n
    dtype = x_ptr.dtype.element_ty
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        res = tl.load(res_ptr + row * stride_res + cols, mask=mask, other=0.0).to(tl.float32)
        x = _rounded(x + res, dtype)  # the residual stream is added in the model dtype
        tl.store(sum_ptr + row * stride_sum + cols, x.to(dtype), mask=mask)
    inv_rms = tl.math.rsqrt(tl.sum(x * x, axis=0) / n + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    out = w * _rounded(x * inv_rms, dtype)
    tl.store(out_ptr + row * stride_out + cols, out.to(out_ptr.dtype.element_ty), mask=mask)


def add_rms_norm(x: Tensor, residual: Tensor | None, weight: Tensor, eps: float) -> tuple[Tensor, Tensor]:
    """x, residual [T, N] -> (normed, summed): summed = x + residual (x itself when residual is None),
    normed = weight * RMSNorm(summed) with fp32 statistics (transformers' Qwen2RMSNorm / LlamaRMSNorm).
    One program per row: N up to ~16k fits one block."""
    if x.dim() != 2 or x.stride(-1) != 1 or weight.shape != (x.shape[1],):
        raise ValueError(
            f"add_rms_norm: x {tuple(x.shape)} (last dim contiguous), weight {tuple(weight.shape)}"
        )
    if residual is not None and (residual.shape != x.shape or residual.stride(-1) != 1):
        raise ValueError(f"add_rms_norm: residual {tuple(residual.shape)} for x {tuple(x.shape)}")
    rows, n = x.shape
    normed = torch.empty_like(x)
    summed = x if residual is None else torch.empty_like(x)
    res = x if residual is None else residual
    block = _next_pow2(n)
    if rows:
        _add_rms_norm_kernel[(rows,)](
            x,
            res,
            weight,
            normed,
            summed,
            x.stride(0),
            res.stride(0),
            normed.stride(0),
            summed.stride(0),
            n,
            eps,
            HAS_RESIDUAL=residual is not None,
            BLOCK=block,
            num_warps=min(max(block // 256, 1), 16),
        )
    return normed, summed


# ---- RoPE on q and k, K/V into the paged cache -----------------------------------------------------
@triton.jit
def _rotate(x_ptr, offsets1, offsets2, mask, cos1, sin1, cos2, sin2, dtype: tl.constexpr):
    """Load the two halves (x1, x2) of some heads and return them rotated, x * cos + cat(-x2, x1) * sin,
    in fp32 values rounded to `dtype` after each op as the torch reference's ops round."""
    x1 = tl.load(x_ptr + offsets1, mask=mask, other=0.0).to(tl.float32)
    x2 = tl.load(x_ptr + offsets2, mask=mask, other=0.0).to(tl.float32)
    out1 = _rounded(_rounded(x1 * cos1, dtype) - _rounded(x2 * sin1, dtype), dtype)
    out2 = _rounded(_rounded(x2 * cos2, dtype) + _rounded(x1 * sin2, dtype), dtype)
    return out1, out2


@triton.jit
def _rope_store_kv_kernel(
    qkv_ptr,  # [T, (Hq + 2 Hkv) * D]
    pos_ptr,  # [T]
    cos_ptr,  # [max_len, D] fp32
    sin_ptr,
    slot_ptr,  # [T] int64
    k_cache_ptr,  # [num_blocks, PAGE, Hkv, D]
    v_cache_ptr,
    q_ptr,  # [T, Hq, D] out
    stride_qkv,
    stride_pos,
    stride_cos,
    stride_sin,
    stride_slot,
    stride_kb,
    stride_kt,
    stride_kh,
    stride_vb,
    stride_vt,
    stride_vh,
    stride_qt,
    stride_qh,
    NUM_HEADS: tl.constexpr,
    NUM_KV_HEADS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    HEADS_PAD: tl.constexpr,  # powers of two >= NUM_HEADS, NUM_KV_HEADS, HEAD_DIM // 2
    KV_HEADS_PAD: tl.constexpr,
    HALF_PAD: tl.constexpr,
    PAGE: tl.constexpr,  # the cache's block size
):
    t = tl.program_id(0).to(tl.int64)
    dtype = qkv_ptr.dtype.element_ty
    half = HEAD_DIM // 2
    dims = tl.arange(0, HALF_PAD)
    dim_ok = dims < half
    # the tables are fp32; the reference rounds them to the model dtype before using them
    pos = tl.load(pos_ptr + t * stride_pos).to(tl.int64)
    cos1 = _rounded(tl.load(cos_ptr + pos * stride_cos + dims, mask=dim_ok, other=0.0), dtype)
    cos2 = _rounded(tl.load(cos_ptr + pos * stride_cos + half + dims, mask=dim_ok, other=0.0), dtype)
    sin1 = _rounded(tl.load(sin_ptr + pos * stride_sin + dims, mask=dim_ok, other=0.0), dtype)
    sin2 = _rounded(tl.load(sin_ptr + pos * stride_sin + half + dims, mask=dim_ok, other=0.0), dtype)
    row = qkv_ptr + t * stride_qkv

    # q: rotated into the new [T, Hq, D] tensor
    heads = tl.arange(0, HEADS_PAD)
    mask = (heads < NUM_HEADS)[:, None] & dim_ok[None, :]
    src = heads[:, None] * HEAD_DIM + dims[None, :]
    q1, q2 = _rotate(row, src, src + half, mask, cos1, sin1, cos2, sin2, dtype)
    dst = q_ptr + t * stride_qt + heads[:, None] * stride_qh + dims[None, :]
    tl.store(dst, q1.to(dtype), mask=mask)
    tl.store(dst + half, q2.to(dtype), mask=mask)

    # k (rotated) and v: into the paged caches at this token's slot
    slot = tl.load(slot_ptr + t * stride_slot).to(tl.int64)
    block = slot // PAGE
    offset = slot % PAGE
    kv_heads = tl.arange(0, KV_HEADS_PAD)
    mask = (kv_heads < NUM_KV_HEADS)[:, None] & dim_ok[None, :]
    src = (NUM_HEADS + kv_heads[:, None]) * HEAD_DIM + dims[None, :]
    k1, k2 = _rotate(row, src, src + half, mask, cos1, sin1, cos2, sin2, dtype)
    k_dst = (
        k_cache_ptr + block * stride_kb + offset * stride_kt + kv_heads[:, None] * stride_kh + dims[None, :]
    )
    k_dtype = k_cache_ptr.dtype.element_ty
    tl.store(k_dst, k1.to(k_dtype), mask=mask)
    tl.store(k_dst + half, k2.to(k_dtype), mask=mask)
    src = src + NUM_KV_HEADS * HEAD_DIM
    v_dst = (
        v_cache_ptr + block * stride_vb + offset * stride_vt + kv_heads[:, None] * stride_vh + dims[None, :]
    )
    v_dtype = v_cache_ptr.dtype.element_ty
    v1 = tl.load(row + src, mask=mask, other=0.0)
    v2 = tl.load(row + src + half, mask=mask, other=0.0)
    tl.store(v_dst, v1.to(v_dtype), mask=mask)
    tl.store(v_dst + half, v2.to(v_dtype), mask=mask)


def rope_and_store_kv(
    qkv: Tensor,
    positions: Tensor,
    cos: Tensor,
    sin: Tensor,
    k_cache: Tensor,
    v_cache: Tensor,
    slot_mapping: Tensor,
    num_heads: int,
    num_kv_heads: int,
    head_dim: int,
) -> Tensor:
    """The fused q/k/v projection's output [T, (Hq + 2 Hkv) * D] -> rotated q [T, Hq, D] (a new tensor);
    rotated k and v go into k_cache / v_cache [num_blocks, block_size, Hkv, D] at slot_mapping [T]
    (slot = block * block_size + offset). RoPE: x * cos + cat(-x2, x1) * sin with fp32 tables [max_len, D]
    indexed by positions [T]. One program per token. Tokens with equal slots (the padded rows of a
    captured decode batch all write the scratch block) race, as index_copy_ does."""
    tokens = qkv.shape[0]
    width = (num_heads + 2 * num_kv_heads) * head_dim
    if qkv.dim() != 2 or qkv.shape[1] != width or qkv.stride(-1) != 1 or head_dim % 2:
        raise ValueError(
            f"rope_and_store_kv: qkv {tuple(qkv.shape)} for {num_heads} + 2 * {num_kv_heads} heads of "
            f"{head_dim} (last dim contiguous, even head dim)"
        )
    if k_cache.shape[2:] != (num_kv_heads, head_dim) or v_cache.shape != k_cache.shape:
        raise ValueError(f"rope_and_store_kv: caches {tuple(k_cache.shape)}, {tuple(v_cache.shape)}")
    if cos.dtype != torch.float32 or cos.shape[-1] != head_dim or sin.shape != cos.shape:
        raise ValueError(
            f"rope_and_store_kv: cos {tuple(cos.shape)} {cos.dtype}, want fp32 [max_len, {head_dim}]"
        )
    if k_cache.stride(-1) != 1 or v_cache.stride(-1) != 1 or cos.stride(-1) != 1 or sin.stride(-1) != 1:
        raise ValueError("rope_and_store_kv: the caches and tables need a contiguous last dimension")
    q = torch.empty(tokens, num_heads, head_dim, dtype=qkv.dtype, device=qkv.device)
    if tokens:
        _rope_store_kv_kernel[(tokens,)](
            qkv,
            positions,
            cos,
            sin,
            slot_mapping,
            k_cache,
            v_cache,
            q,
            qkv.stride(0),
            positions.stride(0),
            cos.stride(0),
            sin.stride(0),
            slot_mapping.stride(0),
            *k_cache.stride()[:3],
            *v_cache.stride()[:3],
            q.stride(0),
            q.stride(1),
            NUM_HEADS=num_heads,
            NUM_KV_HEADS=num_kv_heads,
            HEAD_DIM=head_dim,
            HEADS_PAD=_next_pow2(num_heads),
            KV_HEADS_PAD=_next_pow2(num_kv_heads),
            HALF_PAD=_next_pow2(head_dim // 2),
            PAGE=k_cache.shape[1],
        )
    return q


# ---- silu(gate) * up ---------------------------------------------------------------------------------
@triton.jit
def _silu_mul_kernel(gate_up_ptr, out_ptr, stride_in, stride_out, n, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = cols < n
    dtype = out_ptr.dtype.element_ty
    gate = tl.load(gate_up_ptr + row * stride_in + cols, mask=mask, other=0.0).to(tl.float32)
    up = tl.load(gate_up_ptr + row * stride_in + n + cols, mask=mask, other=0.0).to(tl.float32)
    silu = _rounded(gate / (1.0 + tl.exp(-gate)), dtype)  # torch's formula; F.silu's output is rounded
    tl.store(out_ptr + row * stride_out + cols, (silu * up).to(dtype), mask=mask)


def silu_mul(gate_up: Tensor) -> Tensor:
    """gate_up [T, 2 I] (the fused gate/up projection) -> silu(gate) * up [T, I]."""
    if gate_up.dim() != 2 or gate_up.shape[1] % 2 or gate_up.stride(-1) != 1:
        raise ValueError(f"silu_mul: gate_up {tuple(gate_up.shape)} (even width, last dim contiguous)")
    rows, n = gate_up.shape[0], gate_up.shape[1] // 2
    out = torch.empty(rows, n, dtype=gate_up.dtype, device=gate_up.device)
    if rows:
        _silu_mul_kernel[(rows, triton.cdiv(n, SILU_BLOCK))](
            gate_up, out, gate_up.stride(0), out.stride(0), n, BLOCK=SILU_BLOCK
        )
    return out


__all__ = ["add_rms_norm", "rope_and_store_kv", "silu_mul"]
