"""Shared-prefix packing (trainer.packing: shared_prefix): the layout's pure parts, and the trainer's
log-probs, values and updates against the padded computation (tiny Llama, fp32, CPU's dense mask).

The CUDA path (FlexAttention's block mask, compiled) is checked against the same padded numbers in
tests/gpu/test_packing_gpu.py."""

import pytest
import torch

from codefu.models.tiny import save_tiny_model
from codefu.trainer import TrainerConfig, TrainerWorker
from codefu.trainer.batch import Batch
from codefu.trainer.critic import CriticWorker
from codefu.trainer.packing import (
    BLOCK,
    FLEX_TILES,
    PrefixGroup,
    dense_mask,
    fit_to_budget,
    flex_kernel_options,
    pack_groups,
    packed_attention,
    packed_attention_mask,
    packed_layout,
    plan_micro_batches,
    prefix_groups,
    rows_of,
)
from codefu.trainer.testing import grouped_batch

VOCAB = 128


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)


def lengths_of(batch: Batch) -> list[int]:
    return batch.lengths().tolist()


def test_prefix_groups_share_each_prompt_but_its_last_token():
    batch = grouped_batch(3, 4, VOCAB, prompt_len=9, seed=1)
    # the first response token of rows 0 and 1 made equal: rows agree beyond the prompt, but the share
    # still stops before the position predicting their first trained token
    batch.input_ids[1, 9] = batch.input_ids[0, 9]
    groups = prefix_groups(batch.input_ids, lengths_of(batch), batch.response_mask, list(range(12)))
    assert [g.rows for g in groups] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    assert [g.shared for g in groups] == [8, 9, 10]  # prompts of 9, 10, 11 tokens


def test_prefix_groups_with_untrained_rows_and_masked_turns():
    batch = grouped_batch(1, 3, VOCAB, prompt_len=6, max_response=10, seed=2)
    lengths = lengths_of(batch)
    batch.response_mask[1] = 0  # nothing trained (a sample the judge could not score): shares the prompt
    batch.response_mask[2, :8] = 0  # trained only from column 8 on (an episode's later turn)
    groups = prefix_groups(batch.input_ids, lengths, batch.response_mask, [0, 1, 2])
    assert [(g.shared, g.rows) for g in groups] == [(5, [0, 1, 2])]
    # a row that differs within the prompt is a group of its own, sharing all it may
    batch.input_ids[2, 3] = (batch.input_ids[2, 3] + 1) % VOCAB
    groups = prefix_groups(batch.input_ids, lengths, batch.response_mask, [0, 1, 2])
    assert [(g.shared, g.rows) for g in groups] == [(5, [0, 1]), (7, [2])]


def test_fit_to_budget_and_pack_groups_keep_the_budget():
    lengths = [30, 28, 25, 12, 11, 10, 50]
    groups = [PrefixGroup(10, [0, 1, 2]), PrefixGroup(9, [3, 4, 5]), PrefixGroup(40, [6])]
    parts = fit_to_budget(groups, lengths, budget=40)
    # group 0 costs 10 + 20 + 18 + 15 = 63: cut, each part repeating the prefix (10 + 20 + 18 > 40);
    # group 2's one row alone is over the budget: a part of its own
    assert [(p.shared, p.rows) for p in parts] == [(10, [0]), (10, [1]), (10, [2]), (9, [3, 4, 5]), (40, [6])]
    assert [p.cost(lengths) for p in parts] == [30, 28, 25, 15, 50]
    parts = fit_to_budget(groups, lengths, budget=45)
    assert [p.rows for p in parts][:2] == [[0], [1, 2]]  # 10 + 18 + 15 = 43
    costs = [p.cost(lengths) for p in parts]
    bins = pack_groups(costs, 45)
    assert sorted(i for b in bins for i in b) == list(range(len(parts)))
    for b in bins:
        assert len(b) == 1 or sum(costs[i] for i in b) <= 45


def test_plan_keeps_each_group_on_one_rank():
    batch = grouped_batch(5, 4, VOCAB, seed=3)
    rows = list(range(len(batch)))
    plan = plan_micro_batches(batch.input_ids, lengths_of(batch), batch.response_mask, rows, 60, ranks=2)
    assert sorted(r for rank in plan for mb in rank for r in rows_of(mb)) == rows
    for g in range(5):
        ranks = {i for i, rank in enumerate(plan) for mb in rank for r in rows_of(mb) if r // 4 == g}
        assert len(ranks) == 1


def test_layout_rebuilds_every_row_and_its_targets():
    batch = grouped_batch(2, 3, VOCAB, prompt_len=7, seed=4)
    lengths = lengths_of(batch)
    batch.response_mask[4, 9] = 0  # an untrained token in the middle: no output for it
    groups = prefix_groups(batch.input_ids, lengths, batch.response_mask, list(range(6)))
    layout = packed_layout(batch.input_ids, lengths, batch.response_mask, groups, multiple=16)
    assert layout.tokens % 16 == 0 and layout.tokens >= sum(g.cost(lengths) for g in groups)
    ids, pos, seg, br = layout.input_ids[0], layout.position_ids[0], layout.segment, layout.branch
    for local, row in enumerate(rows_of(groups)):
        g = next(i for i, g in enumerate(groups) if row in g.rows)
        k = groups[g].rows.index(row) + 1
        seen = (seg == g) & ((br == 0) | (br == k))  # what this row's branch may attend to
        assert torch.equal(ids[seen], batch.input_ids[row, : lengths[row]])
        assert torch.equal(pos[seen], torch.arange(lengths[row]))
        mine = layout.dst_row == local
        cols = layout.dst_col[mine] + 1  # the batch columns predicted
        assert torch.equal(cols, batch.response_mask[row].nonzero().flatten())
        assert torch.equal(layout.targets[mine], batch.input_ids[row, cols])
        # the predicting position holds the token before the target, at its position
        assert torch.equal(pos[layout.src[mine]], cols - 1)
        assert (br[layout.src[mine]] == k).all()
    assert (seg[sum(g.cost(lengths) for g in groups) :] == -1).all()


def test_mask_sees_the_prefix_and_its_own_branch_only():
    batch = grouped_batch(2, 2, VOCAB, prompt_len=4, max_response=5, seed=5)
    lengths = lengths_of(batch)
    groups = prefix_groups(batch.input_ids, lengths, batch.response_mask, [0, 1, 2, 3])
    layout = packed_layout(batch.input_ids, lengths, batch.response_mask, groups, multiple=8)
    mask = dense_mask(layout)
    seg, br = layout.segment, layout.branch
    for q in range(layout.tokens):
        for kv in range(layout.tokens):
            expected = kv <= q and seg[q] == seg[kv] and (br[kv] == 0 or br[kv] == br[q])
            assert bool(mask[q, kv]) == bool(expected), (q, kv)
    assert mask.diagonal().all()  # every query, padding included, sees at least itself


def test_attention_by_pieces_equals_the_masked_attention():
    """The CPU path (SDPA piece by piece) against one SDPA call under the whole (L, L) mask: outputs and
    gradients, with GQA, a group sharing nothing and padding."""
    batch = grouped_batch(3, 3, VOCAB, prompt_len=6, max_response=9, seed=6)
    lengths = lengths_of(batch)
    groups = prefix_groups(batch.input_ids, lengths, batch.response_mask, list(range(9)))
    groups.append(PrefixGroup(0, [8]))  # a row as its own group, nothing shared
    groups[2].rows.remove(8)
    layout = packed_layout(batch.input_ids, lengths, batch.response_mask, groups, multiple=16)
    p = layout.pieces
    assert p[0, 0] == 0 and p[-1, 1] == layout.tokens and bool((p[1:, 0] == p[:-1, 1]).all())
    g = torch.Generator().manual_seed(0)
    L = layout.tokens
    q, k, v = (torch.randn(1, h, L, 8, generator=g, requires_grad=True) for h in (4, 2, 2))
    got = packed_attention(torch.nn.Module(), q, k, v, packed_attention_mask(layout), scaling=0.3)[0]
    grads = torch.autograd.grad(got.square().sum(), (q, k, v))
    want = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=dense_mask(layout), scale=0.3, enable_gqa=True
    ).transpose(1, 2)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    for a, b in zip(grads, torch.autograd.grad(want.square().sum(), (q, k, v)), strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)


def test_flex_kernel_options():
    """Bounds checks are dropped only for a row of whole blocks; the measured tiles only for their GPU and
    head dim."""
    assert flex_kernel_options((8, 0), 64, 4 * BLOCK) == {"IS_DIVISIBLE": True}
    assert flex_kernel_options((8, 0), 64, 4 * BLOCK + 5) == {}
    for (major, minor, head_dim), tiles in FLEX_TILES.items():
        got = flex_kernel_options((major, minor), head_dim, BLOCK)
        assert got == {"IS_DIVISIBLE": True, **tiles}
        assert flex_kernel_options((major, minor), head_dim + 1, BLOCK).keys().isdisjoint(tiles)
        # FlexAttention's tiles must divide its 128-wide sparse blocks
        assert all(BLOCK % v == 0 for k, v in tiles.items() if "BLOCK" in k), tiles


def make_worker(model_dir, cls=TrainerWorker, **overrides):
    base = dict(model=str(model_dir), lr=1e-3, adam_eps=1e-5, weight_decay=0.01, grad_clip=1.0)
    return cls(TrainerConfig(**(base | overrides)))


@pytest.mark.parametrize("budget", [40, 4096])  # groups cut over many micro-batches; all in one
def test_logprobs_equal_the_padded_ones(tiny_dir, budget):
    batch = grouped_batch(3, 4, VOCAB, prompt_len=9, seed=6)
    batch.response_mask[5] = 0
    padded = make_worker(tiny_dir, micro_batch_tokens=budget, logprob_chunk_tokens=7)
    packed = make_worker(tiny_dir, micro_batch_tokens=budget, logprob_chunk_tokens=7, packing="shared_prefix")
    want = padded.compute_logprobs(batch)
    got = packed.compute_logprobs(batch)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert (got[batch.response_mask == 0] == 0).all() and (want != 0).sum() > 50


def test_update_equals_the_padded_one(tiny_dir):
    """Two epochs of two mini-batches (of two whole groups: the rows' order is the same both ways without
    shuffling), KL and entropy terms, a cut group: the same weights."""
    batch = grouped_batch(4, 4, VOCAB, prompt_len=9, seed=7)
    g = torch.Generator().manual_seed(0)
    knobs = dict(
        micro_batch_tokens=48, mini_batch_size=8, ppo_epochs=2, kl_coef=0.05, entropy_coef=0.01, shuffle=False
    )
    padded = make_worker(tiny_dir, **knobs)
    packed = make_worker(tiny_dir, packing="shared_prefix", **knobs)
    lp = padded.compute_logprobs(batch)
    batch.old_logprobs = lp + 0.05 * torch.randn(lp.shape, generator=g) * batch.response_mask
    batch.ref_logprobs = lp - 0.05 * torch.randn(lp.shape, generator=g) * batch.response_mask
    m_padded = padded.update(batch)
    m_packed = packed.update(batch)
    a = padded.state_dict_for_sync(dtype=torch.float32)
    b = packed.state_dict_for_sync(dtype=torch.float32)
    for k in a:
        torch.testing.assert_close(b[k], a[k], atol=1e-5, rtol=1e-4)
    assert max((a[k] - make_worker(tiny_dir).state_dict_for_sync()[k]).abs().max() for k in a) > 1e-3
    for k in ("loss/total", "loss/kl", "policy/entropy", "perf/tokens"):
        assert m_packed[k] == pytest.approx(m_padded[k], rel=1e-4, abs=1e-6), k
    # each mini-batch: 4 prompts of 9-10 tokens computed once instead of 4 times each
    assert m_packed["perf/computed_tokens"] < m_padded["perf/computed_tokens"]
    assert m_packed["perf/computed_tokens"] < m_packed["perf/tokens"]


def test_shuffled_mini_batches_hold_whole_groups(tiny_dir):
    batch = grouped_batch(4, 4, VOCAB, seed=8)
    w = make_worker(tiny_dir, packing="shared_prefix")
    lengths = lengths_of(batch)
    order = w._order(batch, lengths, epoch=0)
    assert sorted(order) == list(range(16)) and order != list(range(16))
    assert [order[i] // 4 for i in range(0, 16, 4)] == [order[i + 3] // 4 for i in range(0, 16, 4)]
    assert all(len({r // 4 for r in order[i : i + 4]}) == 1 for i in range(0, 16, 4))
    assert w._order(batch, lengths, epoch=0) == order and w._order(batch, lengths, epoch=1) != order


def test_critic_values_equal_the_padded_ones(tiny_dir):
    batch = grouped_batch(2, 3, VOCAB, prompt_len=8, seed=9)
    padded = make_worker(tiny_dir, CriticWorker, micro_batch_tokens=40)
    packed = make_worker(tiny_dir, CriticWorker, micro_batch_tokens=40, packing="shared_prefix")
    for w in (padded, packed):  # a nonzero head, the same on both
        torch.nn.init.normal_(w.model.head.weight.to_local(), generator=torch.Generator().manual_seed(0))
    want, got = padded.compute_values(batch), packed.compute_values(batch)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    assert (want != 0).sum() > 20


@pytest.mark.parametrize(
    "overrides,message",
    [
        (dict(packing="tight"), "packing must be one of"),
        (dict(packing="shared_prefix", sp_degree=2), "packing='shared_prefix' needs sp_degree 1"),
    ],
)
def test_packing_config_errors(overrides, message):
    with pytest.raises(ValueError, match=message):
        TrainerConfig(**overrides)
