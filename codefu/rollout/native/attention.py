"""Attention over a paged KV cache: store new K/V, causal prefill, and one-token decode.

The model stores the new tokens' K/V itself, fused with RoPE (model.rope_and_store_kv); `attention` then
works on what is in the cache.

Layouts (per layer):
    k_cache, v_cache   [num_blocks, block_size, Hkv, D]
    slot_mapping       [T] int64, slot = block * block_size + offset: where token t's K/V go
    block_tables       [B, max_blocks] int32, padded; entries past a sequence's blocks are ignored
    context_lens       [B] int32, tokens to attend to INCLUDING the current one (its K/V already stored)

Nothing here reads a device tensor on the host, so the decode path can be captured in a CUDA graph.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor


@dataclass
class AttentionMetadata:
    """What every layer's attention needs for one forward step (built once per step by the engine).

    Prefill runs the T new tokens of B sequences laid out one after another; attention works on a
    right-padded (B, max_len) view of them: `pad_index[t]` = row * max_len + column of token t. Under the
    causal mask no real token attends to a padded one, so no padding mask is needed.

    A prefill whose sequences start after tokens already in the cache (the prefix cache's blocks) also
    reads those: `key_slots` are the slots of every key (cached and new) of each row, laid out as
    (B, key_len) by `key_pad_index`, and `key_mask` (B, 1, max_len, key_len) lets the query of position p
    see keys 0..p.
    """

    is_prefill: bool
    slot_mapping: Tensor  # [T] int64
    # prefill
    pad_index: Tensor | None = None  # [T] int64, None when B == 1 (no padding at all)
    batch: int = 1
    max_len: int = 0
    # decode (T == B: one token per sequence)
    block_tables: Tensor | None = None  # [B, max_blocks] int32
    context_lens: Tensor | None = None  # [B] int32
    # decode, shared prefixes (host_tables.shared_prefix_groups); None: each sequence reads all it attends to
    shared_lens: Tensor | None = None  # [B] int32
    group_sizes: Tensor | None = None  # [B] int32
    # prefill after cached tokens
    key_slots: Tensor | None = None  # [Tk] int64
    key_pad_index: Tensor | None = None  # [Tk] int64
    key_len: int = 0
    key_mask: Tensor | None = None  # [B, 1, max_len, key_len] bool


def store_kv(k: Tensor, v: Tensor, k_cache: Tensor, v_cache: Tensor, slot_mapping: Tensor) -> None:
    """Write k, v [T, Hkv, D] into the caches at `slot_mapping` [T] (int64), in place."""
    heads, dim = k_cache.shape[-2:]
    k_cache.view(-1, heads, dim).index_copy_(0, slot_mapping, k.to(k_cache.dtype))
    v_cache.view(-1, heads, dim).index_copy_(0, slot_mapping, v.to(v_cache.dtype))


def _expand_kv(x: Tensor, groups: int) -> Tensor:
    """[..., Hkv, L, D] -> [..., Hkv * groups, L, D]: each K/V head serves `groups` query heads (GQA)."""
    if groups == 1:
        return x
    *lead, hkv, length, dim = x.shape
    return (
        x[..., None, :, :].expand(*lead, hkv, groups, length, dim).reshape(*lead, hkv * groups, length, dim)
    )


def prefill_attention(q: Tensor, k: Tensor, v: Tensor, meta: AttentionMetadata, scale: float) -> Tensor:
    """Causal attention of each sequence over its own tokens. q [T, Hq, D], k, v [T, Hkv, D] -> [T, Hq, D].

    A recomputed prefix (readmission after preemption) is simply part of the tokens: its cached blocks
    are overwritten with the same values. K/V heads are expanded rather than passed with `enable_gqa`,
    so SDPA can pick its fused kernels on every backend."""
    total, hq, dim = q.shape
    groups = hq // k.shape[1]
    mask = None
    if meta.key_mask is not None:  # after cached tokens: k, v are every key of each row
        assert meta.pad_index is not None and meta.key_pad_index is not None
        qp = _padded(q, meta.pad_index, meta.batch, meta.max_len)
        kp, vp = (_padded(x, meta.key_pad_index, meta.batch, meta.key_len) for x in (k, v))
        mask = meta.key_mask
    elif meta.pad_index is None:  # one sequence: (1, H, T, D)
        qp, kp, vp = (x.transpose(0, 1)[None] for x in (q, k, v))
    else:
        qp, kp, vp = (_padded(x, meta.pad_index, meta.batch, meta.max_len) for x in (q, k, v))
    kp, vp = _expand_kv(kp, groups), _expand_kv(vp, groups)
    out = F.scaled_dot_product_attention(
        qp, kp, vp, attn_mask=mask, is_causal=mask is None, scale=scale
    )  # (B, Hq, L, D)
    out = out.transpose(1, 2).reshape(-1, hq, dim)
    return out if meta.pad_index is None else out.index_select(0, meta.pad_index)


def _padded(x: Tensor, index: Tensor, batch: int, length: int) -> Tensor:
    """x [T, H, D] laid out as (batch, H, length, D) with token t at row * length + column = index[t]."""
    out = x.new_zeros(batch * length, *x.shape[1:]).index_copy_(0, index, x)
    return out.view(batch, length, *x.shape[1:]).transpose(1, 2)


def paged_decode_attention_torch(
    q: Tensor, k_cache: Tensor, v_cache: Tensor, block_tables: Tensor, context_lens: Tensor, scale: float
) -> Tensor:
    """The reference decode path (CPU, and the check for the Triton kernel): gather each sequence's blocks,
    mask positions >= its context length, softmax in fp32. q [B, Hq, D] -> [B, Hq, D] in q's dtype."""
    batch, hq, dim = q.shape
    _, block_size, hkv, _ = k_cache.shape
    groups = hq // hkv
    tables = block_tables.long().clamp(min=0, max=k_cache.shape[0] - 1)  # padding may be anything
    span = tables.shape[1] * block_size
    keys = k_cache[tables].view(batch, span, hkv, dim).permute(0, 2, 3, 1)  # (B, Hkv, D, S)
    values = v_cache[tables].view(batch, span, hkv, dim).transpose(1, 2)  # (B, Hkv, S, D)
    qg = q.view(batch, hkv, groups, dim).float()
    scores = torch.matmul(qg, keys.float()) * scale  # (B, Hkv, G, S)
    valid = torch.arange(span, device=q.device)[None, :] < context_lens[:, None].long()  # (B, S)
    scores = scores.masked_fill(~valid[:, None, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    out = torch.matmul(probs, values.float())  # (B, Hkv, G, D)
    return out.reshape(batch, hq, dim).to(q.dtype)


@functools.cache
def _triton_decode() -> Callable[..., Tensor] | None:
    """The Triton kernel (codefu.rollout.native.triton_decode) when it imports, else None."""
    try:
        from codefu.rollout.native import triton_decode
    except Exception:  # no triton, no such module yet, or no GPU compiler: the torch path still works
        return None
    return getattr(triton_decode, "paged_decode_attention_triton", None)


#: Tests only: a decode kernel (the Triton one, loaded with TRITON_INTERPRET=1) to run on CPU tensors
#: instead of the torch reference, so the engine's Triton path can be checked without a GPU.
CPU_DECODE_KERNEL: Callable[..., Tensor] | None = None


def paged_decode_attention(
    q: Tensor,
    k_cache: Tensor,
    v_cache: Tensor,
    block_tables: Tensor,
    context_lens: Tensor,
    scale: float,
    shared_lens: Tensor | None = None,
    group_sizes: Tensor | None = None,
) -> Tensor:
    """One new token per sequence against its paged context: the Triton kernel on CUDA when available, the
    torch reference otherwise. Same contract for both (see the module docstring). shared_lens and
    group_sizes (groups sharing a prefix's pages) only change how the Triton kernel reads the cache, not
    the result: the torch path ignores them."""
    kernel = _triton_decode() if q.is_cuda else CPU_DECODE_KERNEL
    if kernel is not None:
        return kernel(
            q, k_cache, v_cache, block_tables, context_lens, scale,
            shared_lens=shared_lens, group_sizes=group_sizes,
        )  # fmt: skip
    return paged_decode_attention_torch(q, k_cache, v_cache, block_tables, context_lens, scale)


def attention(q: Tensor, k_cache: Tensor, v_cache: Tensor, meta: AttentionMetadata, scale: float) -> Tensor:
    """One layer's attention, prefill or decode, of new tokens whose K/V are ALREADY in the cache at
    meta.slot_mapping. q [T, Hq, D] -> [T, Hq, D]. Prefill reads its K/V back from their slots (a gather,
    small next to prefill's matmuls), so the slots of one step must be distinct."""
    if meta.is_prefill:
        heads, dim = k_cache.shape[-2:]
        keys = meta.key_slots if meta.key_slots is not None else meta.slot_mapping
        k = k_cache.view(-1, heads, dim).index_select(0, keys)
        v = v_cache.view(-1, heads, dim).index_select(0, keys)
        return prefill_attention(q, k, v, meta, scale)
    assert meta.block_tables is not None and meta.context_lens is not None
    return paged_decode_attention(
        q, k_cache, v_cache, meta.block_tables, meta.context_lens, scale, meta.shared_lens, meta.group_sizes
    )


__all__ = [
    "AttentionMetadata",
    "attention",
    "paged_decode_attention",
    "paged_decode_attention_torch",
    "prefill_attention",
    "store_kv",
]
