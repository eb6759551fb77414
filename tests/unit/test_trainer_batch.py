"""The deterministic split of a batch into ranks and micro-batches, and the Batch contract."""

import pytest
import torch

from codefu.trainer.batch import Batch, pack_micro_batches, split_across_ranks
from codefu.trainer.config import TrainerConfig
from codefu.trainer.testing import random_batch
from codefu.trainer.worker import lr_lambda


def test_pack_first_fit_decreasing_respects_padded_budget():
    lengths = [5, 9, 3, 9, 2, 7]
    bins = pack_micro_batches(lengths, budget=18)
    # longest first: [9, 9] (2 x 9 = 18), [7, 5] (14; adding 3 -> 21 > 18), [3, 2]
    assert bins == [[1, 3], [5, 0], [2, 4]]
    for b in bins:
        assert len(b) * max(lengths[i] for i in b) <= 18
    assert sorted(i for b in bins for i in b) == list(range(len(lengths)))


def test_pack_oversized_sequence_gets_its_own_micro_batch():
    assert pack_micro_batches([50, 4, 4], budget=10) == [[0], [1, 2]]
    assert pack_micro_batches([], budget=10) == []


def test_split_across_ranks_balances_tokens_and_covers_everything():
    lengths = [10, 1, 9, 2, 8, 3]
    parts = split_across_ranks(lengths, 2)
    assert sorted(i for p in parts for i in p) == list(range(6))
    loads = [sum(lengths[i] for i in p) for p in parts]
    assert abs(loads[0] - loads[1]) <= 2
    assert split_across_ranks([4, 4], 3)[2] == []  # more ranks than rows: some get nothing
    assert split_across_ranks(lengths, 1) == [list(range(6))]


def test_batch_select_trims_to_longest_row_and_keeps_per_sequence_advantages():
    b = random_batch(6, 12, vocab_size=50, min_len=5, seed=3)
    sub = b.select([1, 4])
    width = int(b.lengths()[[1, 4]].max())
    assert sub.input_ids.shape == (2, width)
    assert torch.equal(sub.input_ids, b.input_ids[[1, 4], :width])
    assert torch.equal(sub.advantages, b.advantages[[1, 4]])
    zero = sub.zero_weight()
    assert zero.response_mask.sum() == 0 and torch.equal(zero.input_ids, sub.input_ids)


def test_batch_validates_shapes_and_column_zero():
    ids = torch.zeros(2, 5, dtype=torch.long)
    ones = torch.ones(2, 5, dtype=torch.long)
    with pytest.raises(ValueError, match="column 0"):
        Batch(ids, ones, ones)
    with pytest.raises(ValueError, match="old_logprobs"):
        Batch(ids, ones, torch.zeros_like(ones), old_logprobs=torch.zeros(2, 4))
    with pytest.raises(ValueError, match="advantages"):
        Batch(ids, ones, torch.zeros_like(ones), advantages=torch.zeros(3))


def test_lr_schedule_warmup_then_cosine():
    cfg = TrainerConfig(warmup_steps=3, schedule="cosine", total_steps=13, min_lr_ratio=0.1)
    f = lr_lambda(cfg)
    assert [f(s) for s in range(3)] == pytest.approx([0.25, 0.5, 0.75])
    assert f(3) == pytest.approx(1.0)
    assert f(8) == pytest.approx(0.1 + 0.9 * 0.5)  # half way
    assert f(13) == pytest.approx(0.1) and f(100) == pytest.approx(0.1)
    assert lr_lambda(TrainerConfig(warmup_steps=1))(5) == 1.0


def test_config_rejects_unknown_choices():
    with pytest.raises(ValueError, match="loss_agg"):
        TrainerConfig(loss_agg="mean")
    with pytest.raises(ValueError, match="total_steps"):
        TrainerConfig(schedule="cosine")
