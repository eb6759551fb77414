"""The Triton paged decode-attention kernel, run by Triton's interpreter on CPU, against a naive loop.

The kernel module is loaded as a private copy with TRITON_INTERPRET=1 set while it is executed: that is
when `@triton.jit` decides between a compiled and an interpreted kernel. A copy keeps this working even
if another test imported the module (compiled) first. Triton also reads the variable at launch, so each
test here sets it again (monkeypatch); restoring it keeps it from reaching other tests.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from codefu.rollout.native.host_tables import shared_prefix_groups
from codefu.rollout.native.testing import load_interpreted

td = load_interpreted("codefu.rollout.native.triton_decode")


@pytest.fixture(autouse=True)
def _interpret(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def reference(q, k_cache, v_cache, block_tables, context_lens, scale) -> torch.Tensor:
    """Token by token through the block table, in float64: the definition the kernel must meet."""
    batch, q_heads, dim = q.shape
    _, page, kv_heads, _ = k_cache.shape
    group = q_heads // kv_heads
    out = torch.zeros(batch, q_heads, dim, dtype=torch.float64)
    for b in range(batch):
        n = int(context_lens[b])
        for h in range(q_heads):
            if n == 0:
                continue
            keys = torch.stack([k_cache[block_tables[b, t // page], t % page, h // group] for t in range(n)])
            values = torch.stack(
                [v_cache[block_tables[b, t // page], t % page, h // group] for t in range(n)]
            )
            scores = keys.double() @ q[b, h].double() * scale
            out[b, h] = torch.softmax(scores, 0) @ values.double()
    return out


def make_case(context_lens, q_heads, kv_heads, dim, page, dtype, max_blocks=None, seed=0):
    """A cache where everything a sequence must not read is NaN: unused pages, the slots past each
    context in its last page, and the page the tables' padding points to. Each sequence owns distinct
    pages in random order (not contiguous, not sorted)."""
    g = torch.Generator().manual_seed(seed)
    need = [math.ceil(n / page) for n in context_lens]
    max_blocks = max_blocks or max(max(need), 1) + 2
    num_blocks = sum(need) + 3
    k_cache = torch.full((num_blocks, page, kv_heads, dim), float("nan"))
    v_cache = torch.full_like(k_cache, float("nan"))
    # page 0 stays NaN: the tables' padding points at it, and so does a masked-off page-id load (other=0),
    # so a K/V load that forgets the token mask shows up as NaN
    tables = torch.zeros((len(context_lens), max_blocks), dtype=torch.int32)
    free = (1 + torch.randperm(num_blocks - 1, generator=g)).tolist()
    for b, n in enumerate(context_lens):
        pages = [free.pop() for _ in range(need[b])]
        tables[b, : len(pages)] = torch.tensor(pages, dtype=torch.int32)
        for t in range(n):
            k_cache[pages[t // page], t % page] = torch.randn(kv_heads, dim, generator=g)
            v_cache[pages[t // page], t % page] = torch.randn(kv_heads, dim, generator=g)
    q = torch.randn(len(context_lens), q_heads, dim, generator=g)
    lens = torch.tensor(context_lens, dtype=torch.int32)
    return q.to(dtype), k_cache.to(dtype), v_cache.to(dtype), tables, lens


TOLERANCE = {torch.float32: 1e-5, torch.bfloat16: 1e-2}  # bf16: output rounding + bf16 probabilities


def check(context_lens, q_heads, kv_heads, dim, page, dtype, partition_size, max_blocks=None, **options):
    q, k_cache, v_cache, tables, lens = make_case(
        context_lens, q_heads, kv_heads, dim, page, dtype, max_blocks
    )
    scale = dim**-0.5
    out = td.paged_decode_attention_triton(
        q, k_cache, v_cache, tables, lens, scale, partition_size=partition_size, **options
    )
    assert out.shape == q.shape and out.dtype == dtype
    expected = reference(q, k_cache, v_cache, tables, lens, scale)
    assert torch.isfinite(out).all()
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(out.double(), expected, atol=tol, rtol=tol)


def test_interpreted_copy():
    assert type(td._partition_kernel).__name__ == "InterpretedFunction"


# context lengths: 1, a block boundary (16), one past it, several blocks and partitions (150)
RAGGED = [1, 16, 17, 150]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("partition_size", [0, 64, 128], ids=["no-split", "split64", "split128"])
def test_ragged_contexts_gqa3(dtype, partition_size):
    check(RAGGED, q_heads=6, kv_heads=2, dim=64, page=16, dtype=dtype, partition_size=partition_size)


@pytest.mark.parametrize(
    "q_heads,kv_heads", [(2, 2), (4, 1), (8, 2), (7, 1)], ids=["gqa1", "gqa4", "gqa4x2", "gqa7"]
)
def test_gqa_ratios_split(q_heads, kv_heads):
    check([3, 70, 129], q_heads, kv_heads, dim=64, page=16, dtype=torch.float32, partition_size=64)


def test_gqa7_bf16_no_split_head_dim_128():
    """Qwen2.5-7B's ratio and head size."""
    check([33, 100], q_heads=7, kv_heads=1, dim=128, page=16, dtype=torch.bfloat16, partition_size=0)


@pytest.mark.parametrize("page", [32, 128])
def test_other_block_sizes(page):
    """Pages smaller and larger than the 64-token tile."""
    check([5, 130, 257], q_heads=3, kv_heads=1, dim=64, page=page, dtype=torch.float32, partition_size=128)


@pytest.mark.parametrize("block_n,partition_size", [(16, 32), (128, 128)])
def test_other_tile_sizes(block_n, partition_size):
    """Tiles of fewer tokens than a page (16 < 32) and of several pages (128)."""
    check(
        [9, 140],
        q_heads=4,
        kv_heads=2,
        dim=64,
        page=32,
        dtype=torch.float32,
        partition_size=partition_size,
        block_n=block_n,
    )


def test_head_dim_not_a_power_of_two():
    check([20, 90], q_heads=4, kv_heads=2, dim=80, page=16, dtype=torch.float32, partition_size=64)


def test_zero_context_gives_zeros_split_and_not():
    """A padding slot of a captured batch (context 0) gets a zero row, not NaN, and nothing is read."""
    for partition_size in (0, 64):
        check(
            [0, 40, 0],
            q_heads=2,
            kv_heads=1,
            dim=64,
            page=16,
            dtype=torch.float32,
            partition_size=partition_size,
        )


def test_automatic_partition_with_long_table():
    """partition_size=None picks from shapes; a long padded table (64 blocks) beyond short contexts."""
    check(
        [2, 45],
        q_heads=2,
        kv_heads=1,
        dim=64,
        page=16,
        dtype=torch.float32,
        partition_size=None,
        max_blocks=64,
    )


def test_choose_partition_size():
    choose = td.choose_partition_size
    assert choose(1, 2, 24576, num_sms=132) == td.MIN_PARTITION  # one long sequence: many small parts
    assert choose(64, 2, 5120, num_sms=132) == td.MAX_PARTITION
    assert choose(4, 2, 128, num_sms=132) == 0  # fits one partition: no split
    # a big batch over a table padded to 32k: partitions grow to cap the grid
    size = choose(256, 2, 32768, num_sms=132)
    assert size > td.MAX_PARTITION and math.ceil(32768 / size) * 256 * 2 <= td.MAX_PROGRAMS_PER_SM * 132
    for args in [(1, 1, 200), (3, 4, 9000), (128, 8, 70000)]:
        size = choose(*args, num_sms=132)
        assert size == 0 or (size % td.BLOCK_N == 0 and size < args[2])


def test_bad_inputs_raise():
    q, k_cache, v_cache, tables, lens = make_case([5], 4, 2, 64, 16, torch.float32)
    with pytest.raises(ValueError, match="int32"):
        td.paged_decode_attention_triton(q, k_cache, v_cache, tables.long(), lens, 1.0)
    with pytest.raises(ValueError, match="multiple"):
        td.paged_decode_attention_triton(q[:, :3], k_cache, v_cache, tables, lens, 1.0)
    with pytest.raises(ValueError, match="partition_size"):
        td.paged_decode_attention_triton(q, k_cache, v_cache, tables, lens, 1.0, partition_size=100)
    with pytest.raises(ValueError, match="block_n"):
        td.paged_decode_attention_triton(q, k_cache, v_cache, tables, lens, 1.0, block_n=48)
    with pytest.raises(ValueError, match="block_size"):
        td.paged_decode_attention_triton(q, k_cache[:, :12], v_cache[:, :12], tables, lens, 1.0)


# ---- shared prefixes (cascade) ----------------------------------------------------------------------


def make_shared_case(cohorts, q_heads, kv_heads, dim, page, dtype, seed=0):
    """Cohorts of sequences as the scheduler lays out a prompt's samples: (prompt length, [context length
    of each sample]); the samples of a cohort share the pages of the prompt's whole blocks and own the
    rest. Everything no sequence may read is NaN (as in make_case)."""
    g = torch.Generator().manual_seed(seed)
    need = []
    for prompt, lens in cohorts:
        need.append(prompt // page + sum(math.ceil(n / page) - prompt // page for n in lens))
    num_blocks = sum(need) + 3
    width = max(math.ceil(n / page) for _, lens in cohorts for n in lens) + 2
    k_cache = torch.full((num_blocks, page, kv_heads, dim), float("nan"))
    v_cache = torch.full_like(k_cache, float("nan"))
    free = (1 + torch.randperm(num_blocks - 1, generator=g)).tolist()
    rows, context_lens = [], []
    for prompt, lens in cohorts:
        shared = [free.pop() for _ in range(prompt // page)]
        for n in lens:
            own = [free.pop() for _ in range(math.ceil(n / page) - len(shared))]
            pages = shared + own
            for t in range(n):
                if t < len(shared) * page and not torch.isnan(k_cache[pages[t // page], t % page]).all():
                    continue  # a shared token, written by the cohort's first sample
                k_cache[pages[t // page], t % page] = torch.randn(kv_heads, dim, generator=g)
                v_cache[pages[t // page], t % page] = torch.randn(kv_heads, dim, generator=g)
            rows.append(pages + [0] * (width - len(pages)))
            context_lens.append(n)
    tables = torch.tensor(rows, dtype=torch.int32)
    q = torch.randn(len(rows), q_heads, dim, generator=g)
    lens = torch.tensor(context_lens, dtype=torch.int32)
    return q.to(dtype), k_cache.to(dtype), v_cache.to(dtype), tables, lens


def check_shared(cohorts, q_heads, kv_heads, dim, page, dtype, partition_size, max_group=td.SHARED_GROUP_MAX):
    q, k_cache, v_cache, tables, lens = make_shared_case(cohorts, q_heads, kv_heads, dim, page, dtype)
    shared, sizes = shared_prefix_groups(tables.numpy().astype(np.int64), lens.numpy(), page, max_group)
    scale = dim**-0.5
    out = td.paged_decode_attention_triton(
        q,
        k_cache,
        v_cache,
        tables,
        lens,
        scale,
        shared_lens=torch.from_numpy(shared),
        group_sizes=torch.from_numpy(sizes),
        partition_size=partition_size,
    )
    expected = reference(q, k_cache, v_cache, tables, lens, scale)
    assert torch.isfinite(out).all()
    tol = TOLERANCE[dtype]
    torch.testing.assert_close(out.double(), expected, atol=tol, rtol=tol)
    return shared, sizes


@pytest.mark.parametrize("partition_size", [0, 64], ids=["one-partition", "split64"])
def test_shared_prefix_groups_match_attention_per_sequence(partition_size):
    """Three prompts: 5 samples of a 70-token prompt (4 whole blocks shared), one sample alone, and 3
    samples of a 140-token prompt whose prefix spans partitions; the samples' own tokens cross the
    prefix's partition boundary or not."""
    cohorts = [(70, [71, 90, 150, 64 + 5, 200]), (33, [40]), (140, [141, 145, 260])]
    shared, sizes = check_shared(cohorts, 6, 2, 64, 16, torch.float32, partition_size)
    assert sizes.tolist() == [5, 0, 0, 0, 0, 0, 3, 0, 0]
    assert shared.tolist() == [64] * 5 + [0] + [128] * 3


def test_shared_prefix_groups_bf16_qwen7b_ratio():
    """Qwen2.5-7B's 7 query heads per KV head and head size: 8 x 7 query rows in one tile."""
    check_shared([(50, [60, 61, 62, 70, 80, 51, 99, 120])], 7, 1, 128, 16, torch.bfloat16, 64)


def test_shared_prefix_group_longer_than_the_limit_is_cut():
    """10 samples of one prompt: a group of SHARED_GROUP_MAX (8) and one of 2."""
    _, sizes = check_shared([(40, [50 + i for i in range(10)])], 4, 2, 64, 16, torch.float32, 64)
    assert sizes.tolist() == [8] + [0] * 7 + [2, 0]


def test_shared_prefix_bad_inputs_raise():
    q, k_cache, v_cache, tables, lens = make_shared_case([(40, [50, 51])], 4, 2, 64, 16, torch.float32)
    bad = torch.zeros(3, dtype=torch.int32)
    with pytest.raises(ValueError, match="shared_lens must be int32 of shape"):
        td.paged_decode_attention_triton(
            q, k_cache, v_cache, tables, lens, 1.0, shared_lens=bad, group_sizes=bad
        )
    with pytest.raises(ValueError, match="go together"):
        td.paged_decode_attention_triton(q, k_cache, v_cache, tables, lens, 1.0, shared_lens=lens)
