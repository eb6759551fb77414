"""The Triton paged decode-attention kernel on CUDA at realistic sizes, eager and inside a CUDA graph,
against a plain torch computation (fp32 softmax over each sequence's gathered pages)."""

from __future__ import annotations

import math

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA"),
]

# (query heads, KV heads, head dim, block size) of the models the engine serves
MODELS = {
    "smollm2-135m": (9, 3, 64, 16),
    "qwen2.5-1.5b": (12, 2, 128, 16),
    "qwen2.5-7b": (28, 4, 128, 16),
}


def torch_reference(q, k_cache, v_cache, block_tables, context_lens, scale):
    """Per sequence: gather its pages, fp32 softmax over its context; returns fp32."""
    batch, q_heads, dim = q.shape
    _, page, kv_heads, _ = k_cache.shape
    out = torch.zeros(batch, q_heads, dim, device=q.device)
    for b in range(batch):
        n = int(context_lens[b])
        if n == 0:
            continue
        pages = block_tables[b, : math.ceil(n / page)].long()
        keys = k_cache[pages].reshape(-1, kv_heads, dim)[:n].float()  # (n, Hkv, D)
        values = v_cache[pages].reshape(-1, kv_heads, dim)[:n].float()
        group = q_heads // kv_heads
        keys = keys.repeat_interleave(group, dim=1).transpose(0, 1)  # (Hq, n, D)
        values = values.repeat_interleave(group, dim=1).transpose(0, 1)
        scores = torch.einsum("hd,hnd->hn", q[b].float(), keys) * scale
        out[b] = torch.einsum("hn,hnd->hd", torch.softmax(scores, -1), values)
    return out


def make_cache(context_lens, q_heads, kv_heads, dim, page, max_blocks, dtype=torch.bfloat16, seed=0):
    """Random pages for each sequence (distinct, shuffled); the tables' padding is garbage page ids that
    would fault or poison the output if they were used (NaN page 0 and out-of-range ids)."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    need = [math.ceil(n / page) for n in context_lens]
    num_blocks = sum(need) + 1
    k_cache = torch.randn(num_blocks, page, kv_heads, dim, device="cuda", generator=g).to(dtype)
    v_cache = torch.randn(num_blocks, page, kv_heads, dim, device="cuda", generator=g).to(dtype)
    k_cache[0] = float("nan")
    v_cache[0] = float("nan")
    tables = torch.randint(
        num_blocks, 2**30, (len(context_lens), max_blocks), device="cuda", generator=g, dtype=torch.int32
    )
    order = (1 + torch.randperm(num_blocks - 1, device="cuda", generator=g)).to(torch.int32)
    start = 0
    for b, k in enumerate(need):
        tables[b, :k] = order[start : start + k]
        start += k
    q = torch.randn(len(context_lens), q_heads, dim, device="cuda", generator=g).to(dtype)
    lens = torch.tensor(context_lens, dtype=torch.int32, device="cuda")
    return q, k_cache, v_cache, tables, lens


def assert_matches(out, expected):
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out.float(), expected, atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("model", sorted(MODELS))
@pytest.mark.parametrize("partition_size", [None, 0, 128], ids=["auto", "no-split", "split128"])
def test_matches_torch_ragged_batch(model, partition_size):
    from codefu.rollout.native.triton_decode import paged_decode_attention_triton

    q_heads, kv_heads, dim, page = MODELS[model]
    g = torch.Generator().manual_seed(1)
    lens = torch.randint(1, 5000, (48,), generator=g).tolist() + [1, 16, 17, 4096, 5120, 0]
    q, k_cache, v_cache, tables, lens_t = make_cache(
        lens, q_heads, kv_heads, dim, page, max_blocks=5120 // 16
    )
    scale = dim**-0.5
    out = paged_decode_attention_triton(
        q, k_cache, v_cache, tables, lens_t, scale, partition_size=partition_size
    )
    assert out.dtype == torch.bfloat16 and out.shape == q.shape
    assert_matches(out, torch_reference(q, k_cache, v_cache, tables, lens_t, scale))


def test_long_context_small_batch_splits():
    """24k tokens, batch 2: the automatic choice splits the context, and matches."""
    from codefu.rollout.native.triton_decode import choose_partition_size, paged_decode_attention_triton

    q_heads, kv_heads, dim, page = MODELS["qwen2.5-7b"]
    q, k_cache, v_cache, tables, lens = make_cache([24576, 9000], q_heads, kv_heads, dim, page, 24576 // 16)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert 0 < choose_partition_size(2, kv_heads, 24576, sms) < 24576
    out = paged_decode_attention_triton(q, k_cache, v_cache, tables, lens, dim**-0.5)
    assert_matches(out, torch_reference(q, k_cache, v_cache, tables, lens, dim**-0.5))


def test_fp32_inputs():
    from codefu.rollout.native.triton_decode import paged_decode_attention_triton

    q, k_cache, v_cache, tables, lens = make_cache([1, 700, 3000], 12, 2, 128, 16, 200, dtype=torch.float32)
    for partition_size in (0, 256):
        out = paged_decode_attention_triton(
            q, k_cache, v_cache, tables, lens, 0.1, partition_size=partition_size
        )
        torch.testing.assert_close(
            out, torch_reference(q, k_cache, v_cache, tables, lens, 0.1), atol=1e-4, rtol=1e-4
        )


@pytest.mark.parametrize("partition_size", [None, 0], ids=["auto", "no-split"])
def test_cuda_graph_replay_with_new_context_lens(partition_size):
    """Captured once; every replay sees new context lengths and tables (written in place), as the engine's
    decode graphs do, and matches the reference each time."""
    from codefu.rollout.native.triton_decode import paged_decode_attention_triton

    q_heads, kv_heads, dim, page = MODELS["qwen2.5-1.5b"]
    batch, max_blocks = 32, 4096 // page
    q, k_cache, v_cache, tables, lens = make_cache([4096] * batch, q_heads, kv_heads, dim, page, max_blocks)
    scale = dim**-0.5

    def call():
        return paged_decode_attention_triton(
            q, k_cache, v_cache, tables, lens, scale, partition_size=partition_size
        )

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        call()  # compile and warm up outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = call()

    g = torch.Generator().manual_seed(2)
    full_tables = tables.clone()
    for replay in range(4):
        new_lens = torch.randint(0, 4097, (batch,), generator=g)
        new_lens[replay] = 1
        lens.copy_(new_lens.to(torch.int32))
        perm = torch.randperm(batch, generator=g).cuda()
        tables.copy_(full_tables[perm])  # other pages for each row
        q.copy_(torch.randn_like(q, dtype=torch.float32).to(q.dtype))
        graph.replay()
        torch.cuda.synchronize()
        assert_matches(out, torch_reference(q, k_cache, v_cache, tables, lens, scale))


def grpo_cache(prompts, samples, prompt_len, own_max, q_heads, kv_heads, dim, page, seed=0):
    """A GRPO batch: each prompt's samples share its whole blocks and own the rest (random lengths), the
    pages in random order; the tables' padding is garbage, as in make_cache."""
    g = torch.Generator().manual_seed(seed)
    shared_blocks = prompt_len // page
    own = torch.randint(1, own_max, (prompts * samples,), generator=g)
    lens = (prompt_len + own).tolist()
    need = [math.ceil(n / page) - shared_blocks for n in lens]
    num_blocks = prompts * shared_blocks + sum(need) + 1
    width = max(math.ceil(n / page) for n in lens) + 3
    ids = (1 + torch.randperm(num_blocks - 1, generator=g)).tolist()
    rows = []
    for p in range(prompts):
        prefix = [ids.pop() for _ in range(shared_blocks)]
        for s in range(samples):
            mine = prefix + [ids.pop() for _ in range(need[p * samples + s])]
            rows.append(mine + [2**30] * (width - len(mine)))
    gc = torch.Generator(device="cuda").manual_seed(seed)
    k_cache = torch.randn(num_blocks, page, kv_heads, dim, device="cuda", generator=gc).to(torch.bfloat16)
    v_cache = torch.randn(num_blocks, page, kv_heads, dim, device="cuda", generator=gc).to(torch.bfloat16)
    k_cache[0] = v_cache[0] = float("nan")
    tables = torch.tensor(rows, dtype=torch.int32, device="cuda")
    q = torch.randn(len(lens), q_heads, dim, device="cuda", generator=gc).to(torch.bfloat16)
    return q, k_cache, v_cache, tables, torch.tensor(lens, dtype=torch.int32, device="cuda")


@pytest.mark.parametrize("model", sorted(MODELS))
def test_shared_prefix_groups_match_torch_in_a_cuda_graph(model):
    """16 prompts x 8 samples of a 1,400-token prompt, 7B's (and the others') head layout: the kernel with
    the groups of host_tables.shared_prefix_groups matches the per-sequence reference, captured once and
    replayed with new contexts, tables and groups (some samples gone, others alone)."""
    from codefu.rollout.native.host_tables import SHARED_GROUP_MAX, shared_prefix_groups
    from codefu.rollout.native.triton_decode import paged_decode_attention_triton

    q_heads, kv_heads, dim, page = MODELS[model]
    q, k_cache, v_cache, tables, lens = grpo_cache(16, 8, 1400, 3000, q_heads, kv_heads, dim, page)
    scale = dim**-0.5
    shared = torch.zeros_like(lens)
    sizes = torch.zeros_like(lens)

    def set_groups():
        s, n = shared_prefix_groups(tables.cpu().numpy(), lens.cpu().numpy(), page, SHARED_GROUP_MAX)
        shared.copy_(torch.from_numpy(s))
        sizes.copy_(torch.from_numpy(n))
        return n

    def call():
        return paged_decode_attention_triton(
            q, k_cache, v_cache, tables, lens, scale, shared_lens=shared, group_sizes=sizes
        )

    assert set_groups().tolist() == ([8] + [0] * 7) * 16
    eager = call()
    assert_matches(eager, torch_reference(q, k_cache, v_cache, tables, lens, scale))

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        call()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = call()
    g = torch.Generator().manual_seed(3)
    full_tables, full_lens = tables.clone(), lens.clone()
    for replay in range(3):
        # drop some rows (their neighbours close ranks, as finished samples leave the running batch)
        keep = torch.rand(len(full_lens), generator=g) > 0.3 * replay
        order = torch.arange(len(full_lens))[keep].cuda()
        tables.fill_(0)
        lens.zero_()
        tables[: len(order)] = full_tables[order]
        lens[: len(order)] = full_lens[order]
        q.copy_(torch.randn_like(q, dtype=torch.float32).to(q.dtype))
        assert set_groups().sum() > 0
        graph.replay()
        torch.cuda.synchronize()
        assert_matches(out, torch_reference(q, k_cache, v_cache, tables, lens, scale))
