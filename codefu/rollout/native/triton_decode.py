"""Paged-attention decode in Triton: one new query token per sequence against a paged KV cache.

    out = paged_decode_attention_triton(q, k_cache, v_cache, block_tables, context_lens, scale)

Shapes (D = head dim, G = Hq // Hkv query heads per KV head):
    q             [B, Hq, D]                          the current token's queries
    k_cache       [num_blocks, block_size, Hkv, D]    pages of keys (values alike), last dim contiguous
    block_tables  int32 [B, max_blocks]               page ids of each sequence; padded, the padding is
                                                      garbage and never read
    context_lens  int32 [B]                           tokens to attend to, the current one included (its
                                                      K/V are already in the cache); 0 gives a zero row
                                                      (a padding slot of a captured batch)
    returns       [B, Hq, D] in q's dtype; scores, softmax and the weighted sum accumulate in fp32

How it runs (flash-decoding): the context of each sequence is cut into partitions of `partition_size`
tokens; one program per (sequence, KV head, partition) loads each K/V tile ONCE for the G query heads of
its group (a [G, D] x [D, BLOCK_N] `tl.dot`, G padded to 16 rows for the tensor cores) and keeps an
online softmax (running max m, sum l, unnormalised output). A second kernel combines the partitions of
each (sequence, query head): out = sum_p 2^(m_p - M) acc_p / sum_p 2^(m_p - M) l_p. With one partition
(short contexts, or `partition_size=0`; not with shared prefixes, below) the first kernel writes the
output itself and there is no second launch.

Shared prefixes (cascade attention): the n samples of a prompt attend to the same prompt pages (the
scheduler shares full blocks), and early in a GRPO rollout those pages are most of what a decode step
reads besides the weights (at 7B, 128 sequences x a 1.4k-token prompt = 10 GB a step). Given groups of
consecutive sequences that share their first pages (`shared_lens`, `group_sizes`), a third kernel runs one
program per (group, KV head, partition) with all n x G query rows of the group in one tile, so each
prefix tile is read once per group; the partition kernel then covers only each sequence's own tokens
after the prefix, and the reduce combines both sets of partials (an exact rewrite of the same softmax).

CUDA graphs: nothing here reads `context_lens` on the host. The grid, the partition size and the scratch
buffers depend only on tensor shapes (max_blocks * block_size bounds the context); programs whose
partition starts past their sequence's length do nothing, and the reduce reads only the partitions that
exist, so a captured call stays right when `context_lens` changes between replays.

Speed: loads are 16-byte vectors and software-pipelined (cp.async) only when Triton knows that strides
and pointers are multiples of 16 elements / bytes, which it checks at launch: a contiguous cache with
D = 64 or 128 qualifies. Compiled offline for sm_90 (triton 3.9, D=128, 64-token tiles, 4 warps) the
partition kernel takes ~91-96 registers and 39 KB of shared memory: about 5 programs per SM.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
from torch import Tensor

from codefu.rollout.native.host_tables import SHARED_GROUP_MAX

#: Tokens per inner-loop tile (gathered through the block table, so any block_size works with it).
BLOCK_N = 64
#: Split-K partitions: a power of two of at least MIN_PARTITION tokens, at most MAX_PARTITION unless the
#: grid cap below needs larger ones (see choose_partition_size).
MIN_PARTITION = 128
MAX_PARTITION = 512
#: Aim for this many (sequence, KV head, partition) programs per SM when contexts are full length ...
PROGRAMS_PER_SM = 4
#: ... and launch at most this many per SM: a block table padded to 32k tokens makes mostly empty
#: partitions, each an early exit that still costs a program slot.
MAX_PROGRAMS_PER_SM = 64
_LOG2E = 1.4426950408889634


@triton.jit
def _attend(
    q,  # [ROWS, HEAD_DIM_PAD] queries of one KV head (padded rows are zeros)
    k_ptr,
    v_ptr,
    bt_row,  # the block table row whose pages hold tokens [first, end)
    kvh,
    first,
    end,
    qk_scale,
    stride_kb,
    stride_kt,
    stride_kh,
    stride_vb,
    stride_vt,
    stride_vh,
    ROWS: tl.constexpr,
    HEAD_DIM: tl.constexpr,
    HEAD_DIM_PAD: tl.constexpr,
    PAGE: tl.constexpr,
    BLOCK: tl.constexpr,
    FP32_DOT: tl.constexpr,
):
    """Online softmax of q over the tokens [first, end) of one page table, tile by tile: (running max m in
    the log2 domain, denominators l, unnormalised output acc), each K/V tile loaded once for all rows."""
    dims = tl.arange(0, HEAD_DIM_PAD)
    dim_ok = dims < HEAD_DIM
    m_i = tl.full([ROWS], float("-inf"), tl.float32)
    l_i = tl.zeros([ROWS], tl.float32)
    acc = tl.zeros([ROWS, HEAD_DIM_PAD], tl.float32)
    for t0 in range(first, end, BLOCK):
        tok = t0 + tl.arange(0, BLOCK)
        tok_ok = tok < end
        # only pages below the sequence's length are looked up: the table's padding is never read
        page = tl.load(bt_row + tok // PAGE, mask=tok_ok, other=0).to(tl.int64)
        slot = (tok % PAGE).to(tl.int64)
        kv_mask = tok_ok[:, None] & dim_ok[None, :]
        k = tl.load(
            k_ptr + (page * stride_kb + slot * stride_kt + kvh * stride_kh)[:, None] + dims[None, :],
            mask=kv_mask,
            other=0.0,
        )
        if FP32_DOT:
            s = tl.dot(q.to(tl.float32), tl.trans(k.to(tl.float32)), input_precision="ieee")
        else:
            s = tl.dot(q, tl.trans(k))
        s = tl.where(tok_ok[None, :], s * qk_scale, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(
            v_ptr + (page * stride_vb + slot * stride_vt + kvh * stride_vh)[:, None] + dims[None, :],
            mask=kv_mask,
            other=0.0,
        )
        # probabilities rounded to the cache's dtype (bf16/fp16) for the tensor cores, as flash attention does
        if FP32_DOT:
            pv = tl.dot(p.to(v.dtype).to(tl.float32), v.to(tl.float32), input_precision="ieee")
        else:
            pv = tl.dot(p.to(v.dtype), v)
        acc = acc * alpha[:, None] + pv
        m_i = m_new
    return m_i, l_i, acc


@triton.jit
def _partition_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    bt_ptr,
    ctx_ptr,
    shared_ptr,  # [B] int32: leading tokens the shared-prefix kernel covers; unused without CASCADE
    out_ptr,  # [B, Hq, D] (one partition) or [B, Hq, P, D] fp32 partial outputs (split; 2P slots with
    # CASCADE, this kernel's at 0..P-1)
    m_ptr,  # [B, Hq, P] fp32 running max (log2 domain); unused without split
    l_ptr,  # [B, Hq, P] fp32 softmax denominators; unused without split
    qk_scale,  # scale * log2(e): scores go straight to exp2
    partition_size,  # tokens per partition (a multiple of BLOCK_N)
    stride_qb,
    stride_qh,
    stride_kb,
    stride_kt,
    stride_kh,
    stride_vb,
    stride_vt,
    stride_vh,
    stride_btb,
    stride_ob,
    stride_oh,
    stride_op,
    stride_mb,
    stride_mh,
    GROUP: tl.constexpr,  # query heads per KV head
    GROUP_PAD: tl.constexpr,  # GROUP rounded up to a power of two >= 16 (tl.dot's minimum)
    HEAD_DIM: tl.constexpr,
    HEAD_DIM_PAD: tl.constexpr,  # power of two >= HEAD_DIM
    PAGE: tl.constexpr,  # block_size of the cache
    BLOCK: tl.constexpr,  # tokens per tile
    SPLIT: tl.constexpr,  # write partials (m, l, unnormalised acc) instead of the output
    CASCADE: tl.constexpr,  # skip each sequence's first shared_ptr[b] tokens (the shared-prefix kernel's)
    # exact fp32 dot products: for fp32 inputs (not tf32), and in the interpreter, whose bf16 tl.dot reads
    # the raw bits (triton 3.9); the operands hold the same values, so only the summation order differs
    FP32_DOT: tl.constexpr,
):
    b = tl.program_id(0)
    kvh = tl.program_id(1)
    part = tl.program_id(2)
    ctx = tl.load(ctx_ptr + b)
    start = part * partition_size
    end = tl.minimum(start + partition_size, ctx)
    if CASCADE:
        # a partition inside the shared prefix runs no tile and writes an empty partial (m -inf, l 0)
        first = tl.maximum(start, tl.load(shared_ptr + b))
    else:
        first = start

    rows = tl.arange(0, GROUP_PAD)
    row_ok = rows < GROUP
    # rows that load and store: none when the partition starts past the sequence's end (a block-wide
    # comparison, not `mask & scalar`, which the interpreter rejects)
    row_live = rows < tl.where(start < ctx, GROUP, 0)
    heads = kvh * GROUP + rows
    dims = tl.arange(0, HEAD_DIM_PAD)
    dim_ok = dims < HEAD_DIM
    q = tl.load(
        q_ptr + b * stride_qb + heads[:, None] * stride_qh + dims[None, :],
        mask=row_live[:, None] & dim_ok[None, :],
        other=0.0,
    )

    bt_row = bt_ptr + b * stride_btb
    m_i, l_i, acc = _attend(
        q, k_ptr, v_ptr, bt_row, kvh, first, end, qk_scale,
        stride_kb, stride_kt, stride_kh, stride_vb, stride_vt, stride_vh,
        GROUP_PAD, HEAD_DIM, HEAD_DIM_PAD, PAGE, BLOCK, FP32_DOT,
    )  # fmt: skip

    if SPLIT:
        o = out_ptr + b * stride_ob + heads[:, None] * stride_oh + part * stride_op + dims[None, :]
        tl.store(o, acc, mask=row_live[:, None] & dim_ok[None, :])
        ml = b * stride_mb + heads * stride_mh + part
        tl.store(m_ptr + ml, m_i, mask=row_live)
        tl.store(l_ptr + ml, l_i, mask=row_live)
    else:
        out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]  # context 0: zeros, not 0/0
        o = out_ptr + b * stride_ob + heads[:, None] * stride_oh + dims[None, :]
        tl.store(o, out.to(out_ptr.dtype.element_ty), mask=row_ok[:, None] & dim_ok[None, :])


@triton.jit
def _shared_prefix_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    bt_ptr,
    shared_ptr,  # [B] int32: the group's shared prefix length, at each of its sequences
    size_ptr,  # [B] int32: at a group's first sequence, its number of sequences (rows b .. b + n - 1); else 0
    out_ptr,  # [B, Hq, P, D] fp32 partial outputs of the shared prefix
    m_ptr,  # [B, Hq, P] fp32
    l_ptr,  # [B, Hq, P] fp32
    qk_scale,
    partition_size,
    stride_qb,
    stride_qh,
    stride_kb,
    stride_kt,
    stride_kh,
    stride_vb,
    stride_vt,
    stride_vh,
    stride_btb,
    stride_ob,
    stride_oh,
    stride_op,
    stride_mb,
    stride_mh,
    GROUP: tl.constexpr,
    ROWS: tl.constexpr,  # a power of two >= 16 and >= (sequences per group, at most) x GROUP
    HEAD_DIM: tl.constexpr,
    HEAD_DIM_PAD: tl.constexpr,
    PAGE: tl.constexpr,
    BLOCK: tl.constexpr,
    FP32_DOT: tl.constexpr,
):
    """One program per (group, KV head, partition of the shared prefix): the queries of every sequence of
    the group (n x GROUP rows) against the prefix's pages, each tile read once for the whole group instead
    of once per sequence. Programs of rows that start no group, or partitions past the prefix, do nothing."""
    b = tl.program_id(0)
    kvh = tl.program_id(1)
    part = tl.program_id(2)
    size = tl.load(size_ptr + b)
    start = part * partition_size
    end = tl.where(size > 0, tl.minimum(start + partition_size, tl.load(shared_ptr + b)), start)

    rows = tl.arange(0, ROWS)
    row_live = rows < tl.where(start < end, size * GROUP, 0)
    seq = b + rows // GROUP
    heads = kvh * GROUP + rows % GROUP
    dims = tl.arange(0, HEAD_DIM_PAD)
    dim_ok = dims < HEAD_DIM
    q = tl.load(
        q_ptr + seq[:, None] * stride_qb + heads[:, None] * stride_qh + dims[None, :],
        mask=row_live[:, None] & dim_ok[None, :],
        other=0.0,
    )
    m_i, l_i, acc = _attend(
        q, k_ptr, v_ptr, bt_ptr + b * stride_btb, kvh, start, end, qk_scale,
        stride_kb, stride_kt, stride_kh, stride_vb, stride_vt, stride_vh,
        ROWS, HEAD_DIM, HEAD_DIM_PAD, PAGE, BLOCK, FP32_DOT,
    )  # fmt: skip
    o = out_ptr + seq[:, None] * stride_ob + heads[:, None] * stride_oh + part * stride_op + dims[None, :]
    tl.store(o, acc, mask=row_live[:, None] & dim_ok[None, :])
    ml = seq * stride_mb + heads * stride_mh + part
    tl.store(m_ptr + ml, m_i, mask=row_live)
    tl.store(l_ptr + ml, l_i, mask=row_live)


@triton.jit
def _reduce_kernel(
    part_ptr,  # [B, Hq, P, D] fp32; with CASCADE [B, Hq, 2P, D]: the shared prefix's partials at P..
    m_ptr,  # [B, Hq, P] fp32 (with CASCADE 2P)
    l_ptr,  # [B, Hq, P] fp32 (with CASCADE 2P)
    ctx_ptr,
    shared_ptr,  # [B] int32 shared prefix lengths; unused without CASCADE
    out_ptr,  # [B, Hq, D]
    partition_size,
    num_parts,  # P
    stride_pb,
    stride_ph,
    stride_pp,
    stride_mb,
    stride_mh,
    stride_ob,
    stride_oh,
    HEAD_DIM: tl.constexpr,
    HEAD_DIM_PAD: tl.constexpr,
    CHUNK: tl.constexpr,  # partitions combined per iteration
    CASCADE: tl.constexpr,
):
    b = tl.program_id(0)
    h = tl.program_id(1)
    ctx = tl.load(ctx_ptr + b)
    n_parts = tl.cdiv(ctx, partition_size)  # only partitions that hold tokens were written
    hi = n_parts  # partitions [0, n_parts) and [num_parts, hi) are read
    if CASCADE:
        shared = tl.load(shared_ptr + b)
        hi = tl.where(shared > 0, num_parts + tl.cdiv(shared, partition_size), n_parts)  # alone: its own
    ml = m_ptr + b * stride_mb + h * stride_mh
    ll = l_ptr + b * stride_mb + h * stride_mh
    dims = tl.arange(0, HEAD_DIM_PAD)
    dim_ok = dims < HEAD_DIM

    # pass 1: the global max over partitions
    m_all = tl.full([CHUNK], float("-inf"), tl.float32)
    for p0 in range(0, hi, CHUNK):
        idx = p0 + tl.arange(0, CHUNK)
        ok = (idx < n_parts) | ((idx >= num_parts) & (idx < hi))
        m_all = tl.maximum(m_all, tl.load(ml + idx, mask=ok, other=float("-inf")))
    m_max = tl.max(m_all, 0)

    # pass 2: rescale each partition's sum and output to the global max and add them up
    total = tl.zeros([CHUNK], tl.float32)
    acc = tl.zeros([HEAD_DIM_PAD], tl.float32)
    base = part_ptr + b * stride_pb + h * stride_ph
    for p0 in range(0, hi, CHUNK):
        idx = p0 + tl.arange(0, CHUNK)
        ok = (idx < n_parts) | ((idx >= num_parts) & (idx < hi))
        w = tl.where(ok, tl.exp2(tl.load(ml + idx, mask=ok, other=0.0) - m_max), 0.0)
        total += w * tl.load(ll + idx, mask=ok, other=0.0)
        part = tl.load(base + idx[:, None] * stride_pp + dims[None, :], mask=ok[:, None] & dim_ok[None, :])
        acc += tl.sum(w[:, None] * tl.where(ok[:, None] & dim_ok[None, :], part, 0.0), 0)
    denom = tl.sum(total, 0)
    out = acc / tl.where(denom == 0.0, 1.0, denom)  # context 0: zeros
    tl.store(out_ptr + b * stride_ob + h * stride_oh + dims, out.to(out_ptr.dtype.element_ty), mask=dim_ok)


@functools.cache
def _num_sms(device: torch.device) -> int:
    if device.type != "cuda":
        return 1  # the interpreter (CPU): no parallelism to fill
    return torch.cuda.get_device_properties(device).multi_processor_count


def choose_partition_size(batch: int, kv_heads: int, max_context: int, num_sms: int) -> int:
    """Split-K partition size in tokens from shapes only (0 = no split).

    One program per (sequence, KV head) already fills the GPU when batch * kv_heads is large, but contexts
    are ragged: a few long sequences would then finish last on a few SMs. Partitions of at most
    MAX_PARTITION tokens spread every long context over many SMs, at the price of writing fp32 partials
    (G*D*4 bytes per partition, ~1.5% of the K/V bytes a 512-token partition reads at D=128, G=7). When
    there are few (sequence, head) pairs, partitions shrink (down to MIN_PARTITION) until a full-length
    context yields about PROGRAMS_PER_SM programs per SM. They grow past MAX_PARTITION only to keep the
    grid under MAX_PROGRAMS_PER_SM programs per SM (large batches with block tables padded far beyond
    the real contexts)."""
    pairs = batch * kv_heads
    want = max_context * pairs // (PROGRAMS_PER_SM * num_sms)  # tokens per program
    size = MIN_PARTITION
    while size * 2 <= min(want, MAX_PARTITION):
        size *= 2
    while size < max_context and -(-max_context // size) * pairs > MAX_PROGRAMS_PER_SM * num_sms:
        size *= 2
    return 0 if size >= max_context else size


def _tile(x: int) -> int:
    """x rounded up to a power of two of at least 16 (tl.dot's smallest tile side)."""
    return max(16, 1 << max(0, (x - 1).bit_length()))


def paged_decode_attention_triton(
    q: Tensor,
    k_cache: Tensor,
    v_cache: Tensor,
    block_tables: Tensor,
    context_lens: Tensor,
    scale: float,
    *,
    shared_lens: Tensor | None = None,
    group_sizes: Tensor | None = None,
    partition_size: int | None = None,
    block_n: int = BLOCK_N,
    num_warps: int = 4,
    num_stages: int = 2,
) -> Tensor:
    """Decode attention over a paged KV cache; see the module docstring for shapes.

    shared_lens, group_sizes (int32 [B], both or neither): groups of consecutive sequences whose contexts
    begin with the same pages (a prompt's samples), as `shared_prefix_groups` finds them. The group's
    first sequence b has group_sizes[b] = n (at most SHARED_GROUP_MAX) and the group is b .. b + n - 1;
    every other entry is 0. shared_lens[i] = the tokens that sequence i's group shares (below its context
    length, the same for every sequence of the group, 0 outside groups). Those tokens are read once per
    group (`_shared_prefix_kernel`) instead of once per sequence; the result is the same attention.

    partition_size: None = `choose_partition_size` from shapes; 0 = no split-K (with shared prefixes: one
    partition, still reduced with the prefix's); otherwise a multiple of
    block_n. block_n (tokens per tile, a power of two >= 16), num_warps, num_stages: tuning knobs for
    benchmarks (bench/rollout.py --kernel); the defaults are what the engine uses."""
    batch, q_heads, head_dim = q.shape
    num_blocks, page, kv_heads, head_dim_k = k_cache.shape
    if head_dim_k != head_dim or v_cache.shape != k_cache.shape:
        raise ValueError(
            f"q {tuple(q.shape)}, k_cache {tuple(k_cache.shape)}, v_cache {tuple(v_cache.shape)}"
        )
    if q_heads % kv_heads:
        raise ValueError(f"query heads ({q_heads}) must be a multiple of KV heads ({kv_heads})")
    if page < 16 or page & (page - 1):
        raise ValueError(f"block_size must be a power of two >= 16, got {page}")
    if block_tables.dtype != torch.int32 or context_lens.dtype != torch.int32:
        raise ValueError(
            f"block_tables / context_lens must be int32: {block_tables.dtype}, {context_lens.dtype}"
        )
    cascade = shared_lens is not None
    if cascade != (group_sizes is not None):
        raise ValueError("shared_lens and group_sizes go together")
    if shared_lens is not None and group_sizes is not None:
        for name, t in (("shared_lens", shared_lens), ("group_sizes", group_sizes)):
            if t.dtype != torch.int32 or t.shape != (batch,):
                raise ValueError(f"{name} must be int32 of shape ({batch},): {t.dtype} {tuple(t.shape)}")
        shared_lens, group_sizes = shared_lens.contiguous(), group_sizes.contiguous()
    if q.stride(-1) != 1 or k_cache.stride(-1) != 1 or v_cache.stride(-1) != 1:
        raise ValueError("q, k_cache and v_cache need a contiguous last dimension")
    block_tables = block_tables.contiguous()
    context_lens = context_lens.contiguous()
    max_context = block_tables.shape[1] * page
    if partition_size is None:
        partition_size = choose_partition_size(batch, kv_heads, max_context, _num_sms(q.device))
        partition_size = max(partition_size, block_n) if partition_size else 0  # both powers of two
    if block_n < 16 or block_n & (block_n - 1):
        raise ValueError(f"block_n must be a power of two >= 16, got {block_n}")
    if partition_size and partition_size % block_n:
        raise ValueError(f"partition_size must be a multiple of block_n ({block_n}), got {partition_size}")
    split = 0 < partition_size < max_context
    if cascade and not split:  # the prefix's and each sequence's own partials meet in the reduce
        partition_size, split = triton.cdiv(max_context, block_n) * block_n, True
    parts = triton.cdiv(max_context, partition_size) if split else 1
    group = q_heads // kv_heads
    head_dim_pad = _tile(head_dim)
    fp32_dot = q.dtype == torch.float32 or q.device.type == "cpu"  # CPU: only the interpreter runs
    tiles = dict(HEAD_DIM=head_dim, HEAD_DIM_PAD=head_dim_pad, PAGE=page, BLOCK=block_n, FP32_DOT=fp32_dot)
    launch = dict(num_warps=num_warps, num_stages=num_stages)
    out = torch.empty_like(q)
    if split:
        # with cascade, each (sequence, head) has 2P partials: its own at 0..P-1, the shared prefix's at P..
        slots = 2 * parts if cascade else parts
        partial = torch.empty(batch, q_heads, slots, head_dim, device=q.device, dtype=torch.float32)
        m = torch.empty(batch, q_heads, slots, device=q.device, dtype=torch.float32)
        l_sum = torch.empty_like(m)
        dst, dst_strides, ml_strides = partial, partial.stride()[:3], m.stride()[:2]
    else:
        # no partials: m/l are never touched; out's P stride is unused
        m = l_sum = out
        dst, dst_strides, ml_strides = out, (out.stride(0), out.stride(1), 0), (0, 0)
        partition_size = max_context
    cache_strides = (*k_cache.stride()[:3], *v_cache.stride()[:3])
    _partition_kernel[(batch, kv_heads, parts)](
        q,
        k_cache,
        v_cache,
        block_tables,
        context_lens,
        shared_lens if cascade else context_lens,
        dst,
        m,
        l_sum,
        scale * _LOG2E,
        partition_size,
        q.stride(0),
        q.stride(1),
        *cache_strides,
        block_tables.stride(0),
        *dst_strides,
        *ml_strides,
        GROUP=group,
        GROUP_PAD=_tile(group),
        SPLIT=split,
        CASCADE=cascade,
        **tiles,
        **launch,
    )
    if cascade:
        _shared_prefix_kernel[(batch, kv_heads, parts)](
            q,
            k_cache,
            v_cache,
            block_tables,
            shared_lens,
            group_sizes,
            partial[:, :, parts:],
            m[:, :, parts:],
            l_sum[:, :, parts:],
            scale * _LOG2E,
            partition_size,
            q.stride(0),
            q.stride(1),
            *cache_strides,
            block_tables.stride(0),
            *dst_strides,
            *ml_strides,
            GROUP=group,
            ROWS=_tile(SHARED_GROUP_MAX * group),
            **tiles,
            **launch,
        )
    if split:
        _reduce_kernel[(batch, q_heads)](
            partial,
            m,
            l_sum,
            context_lens,
            shared_lens if cascade else context_lens,
            out,
            partition_size,
            parts,
            *partial.stride()[:3],
            *m.stride()[:2],
            out.stride(0),
            out.stride(1),
            HEAD_DIM=head_dim,
            HEAD_DIM_PAD=head_dim_pad,
            CHUNK=16,
            CASCADE=cascade,
            num_warps=4,
        )
    return out
