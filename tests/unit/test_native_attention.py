"""Paged attention pieces of the native engine against dense references: store_kv, the torch decode
path (GQA, shuffled and padded block tables), and prefill of several sequences at once."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from codefu.rollout.native.attention import (
    AttentionMetadata,
    attention,
    paged_decode_attention,
    paged_decode_attention_torch,
    prefill_attention,
    store_kv,
)


def dense_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float, causal: bool):
    """q [L, Hq, D], k, v [S, Hkv, D] -> [L, Hq, D]; plain softmax attention with repeated K/V heads."""
    groups = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    scores = torch.einsum("lhd,shd->hls", q.double(), k.double()) * scale
    if causal:
        mask = torch.ones(q.shape[0], k.shape[0], dtype=torch.bool).tril(k.shape[0] - q.shape[0])
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.einsum("hls,shd->lhd", scores.softmax(-1), v.double()).to(q.dtype)


def test_store_kv_writes_each_token_at_its_slot():
    k_cache = torch.zeros(4, 8, 2, 3)
    v_cache = torch.zeros(4, 8, 2, 3)
    k, v = torch.randn(3, 2, 3), torch.randn(3, 2, 3)
    slots = torch.tensor([2 * 8 + 5, 0, 3 * 8 + 7])  # block 2 offset 5, block 0 offset 0, block 3 offset 7
    store_kv(k, v, k_cache, v_cache, slots)
    assert torch.equal(k_cache[2, 5], k[0]) and torch.equal(k_cache[0, 0], k[1])
    assert torch.equal(v_cache[3, 7], v[2])
    assert int((k_cache != 0).any(-1).any(-1).sum()) == 3  # nothing else written


def test_paged_decode_equals_dense_attention_with_gqa_and_shuffled_blocks():
    torch.manual_seed(0)
    blocks, block_size, hkv, hq, dim = 12, 4, 2, 6, 8
    k_cache, v_cache = torch.randn(blocks, block_size, hkv, dim), torch.randn(blocks, block_size, hkv, dim)
    lengths = [1, 4, 5, 11]  # one token, exactly one block, one past a block, three blocks
    order = torch.randperm(blocks).tolist()
    tables, used = [], 0
    for n in lengths:
        count = math.ceil(n / block_size)
        tables.append(order[used : used + count])
        used += count
    width = max(len(t) for t in tables) + 1  # padding past each sequence's blocks
    block_tables = torch.tensor([t + [-1] * (width - len(t)) for t in tables], dtype=torch.int32)
    context_lens = torch.tensor(lengths, dtype=torch.int32)
    q = torch.randn(len(lengths), hq, dim)
    scale = dim**-0.5
    out = paged_decode_attention_torch(q, k_cache, v_cache, block_tables, context_lens, scale)
    assert out.shape == q.shape and out.dtype == q.dtype
    for b, (n, table) in enumerate(zip(lengths, tables, strict=True)):
        keys = k_cache[table].reshape(-1, hkv, dim)[:n]
        values = v_cache[table].reshape(-1, hkv, dim)[:n]
        ref = dense_attention(q[b : b + 1], keys, values, scale, causal=False)[0]
        torch.testing.assert_close(out[b], ref, atol=1e-5, rtol=0)
    # on CPU the dispatcher is the torch path
    same = paged_decode_attention(q, k_cache, v_cache, block_tables, context_lens, scale)
    assert torch.equal(same, out)


def test_prefill_of_several_sequences_equals_each_alone():
    torch.manual_seed(1)
    hq, hkv, dim = 4, 2, 8
    lengths = [5, 1, 9]
    total, width = sum(lengths), max(lengths)
    q, k, v = torch.randn(total, hq, dim), torch.randn(total, hkv, dim), torch.randn(total, hkv, dim)
    pad_index = torch.cat([torch.arange(n) + row * width for row, n in enumerate(lengths)])
    meta = AttentionMetadata(
        is_prefill=True, slot_mapping=torch.arange(total), pad_index=pad_index, batch=3, max_len=width
    )
    out = prefill_attention(q, k, v, meta, scale=0.3)
    start = 0
    for n in lengths:
        s = slice(start, start + n)
        torch.testing.assert_close(
            out[s], dense_attention(q[s], k[s], v[s], 0.3, causal=True), atol=1e-5, rtol=0
        )
        start += n
    # one sequence: no padding at all, same numbers as SDPA on it directly
    alone = prefill_attention(q[:5], k[:5], v[:5], AttentionMetadata(True, torch.arange(5)), scale=0.3)
    ref = F.scaled_dot_product_attention(
        q[:5].transpose(0, 1),
        k[:5].repeat_interleave(2, 1).transpose(0, 1),
        v[:5].repeat_interleave(2, 1).transpose(0, 1),
        is_causal=True,
        scale=0.3,
    ).transpose(0, 1)
    torch.testing.assert_close(alone, ref, atol=1e-6, rtol=0)


def test_attention_reads_the_new_tokens_kv_from_the_cache():
    """`attention` works on K/V already stored (the model stores them fused with RoPE): prefill reads
    them back from their slots, decode through the block tables."""
    torch.manual_seed(2)
    hq, hkv, dim, block_size = 4, 2, 8, 4
    k_cache, v_cache = torch.zeros(6, block_size, hkv, dim), torch.zeros(6, block_size, hkv, dim)
    lengths, tables = [5, 2], torch.tensor([[3, 0], [5, 1]], dtype=torch.int32)
    slots = torch.tensor(
        [
            int(tables[b, p // block_size]) * block_size + p % block_size
            for b, n in enumerate(lengths)
            for p in range(n)
        ]
    )
    q, k, v = torch.randn(7, hq, dim), torch.randn(7, hkv, dim), torch.randn(7, hkv, dim)
    store_kv(k, v, k_cache, v_cache, slots)
    meta = AttentionMetadata(True, slots, pad_index=torch.tensor([0, 1, 2, 3, 4, 5, 6]), batch=2, max_len=5)
    assert torch.equal(attention(q, k_cache, v_cache, meta, 0.3), prefill_attention(q, k, v, meta, 0.3))
    # decode: the last token of each sequence (its K/V stored above) against its whole context
    lens = torch.tensor(lengths, dtype=torch.int32)
    meta = AttentionMetadata(False, slots[[4, 6]], block_tables=tables, context_lens=lens)
    expected = paged_decode_attention_torch(q[[4, 6]], k_cache, v_cache, tables, lens, 0.3)
    assert torch.equal(attention(q[[4, 6]], k_cache, v_cache, meta, 0.3), expected)
