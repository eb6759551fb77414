"""CriticWorker (the PPO value model) on one rank, against a plain transformers reference.

One rank still goes through FSDP2 (a single-rank gloo group in this process); the multi-rank split is the
policy trainer's (tests/e2e/test_trainer_dist.py) and checked for the critic there too.
"""

import pytest
import torch
from transformers import AutoModelForCausalLM

from codefu.algo.value import value_loss
from codefu.models.tiny import save_tiny_model
from codefu.trainer import TrainerConfig
from codefu.trainer.critic import CriticWorker
from codefu.trainer.testing import random_batch

VOCAB = 128


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)


def make_critic(model_dir, value_clip=0.5, **overrides) -> CriticWorker:
    base = dict(model=str(model_dir), lr=1e-2, adam_eps=1e-5, grad_clip=0.0, micro_batch_tokens=4096)
    return CriticWorker(TrainerConfig(**(base | overrides)), value_clip=value_clip)


def set_head(w: CriticWorker, seed: int = 3) -> None:
    """A nonzero head (it starts at zero), so values depend on the hidden states."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in w.model.head.parameters():
            full = torch.randn(p.shape, generator=g) * 0.5
            p.to_local().copy_(full)  # one rank: its shard is the whole tensor


def test_values_start_at_zero_and_match_the_decoder_with_the_head(tiny_dir):
    batch = random_batch(5, 18, VOCAB, prompt_len=4, min_len=7, seed=1)
    w = make_critic(tiny_dir, micro_batch_tokens=30)  # several micro-batches
    assert (w.compute_values(batch) == 0).all()  # the zero head: GAE starts from the reward-to-go
    set_head(w)
    got = w.compute_values(batch)
    lm = AutoModelForCausalLM.from_pretrained(tiny_dir, dtype=torch.float32)
    g = torch.Generator().manual_seed(3)
    weight, bias = torch.randn(1, lm.config.hidden_size, generator=g) * 0.5, torch.randn(1, generator=g) * 0.5
    with torch.no_grad():
        hidden = lm.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).last_hidden_state
    v = (hidden @ weight.T + bias).squeeze(-1)  # value of the state at position p ...
    expected = torch.nn.functional.pad(v[:, :-1], (1, 0))  # ... sits in column p + 1, as log-probs do
    torch.testing.assert_close(got, expected * batch.response_mask, atol=1e-5, rtol=1e-5)
    assert (got[batch.response_mask == 0] == 0).all()


def test_update_fits_the_returns_and_its_loss_is_value_loss(tiny_dir):
    batch = random_batch(6, 16, VOCAB, prompt_len=4, min_len=6, seed=2)
    w = make_critic(tiny_dir, value_clip=None)
    g = torch.Generator().manual_seed(0)
    batch.old_values = w.compute_values(batch)
    batch.returns = torch.randn(batch.input_ids.shape, generator=g) * batch.response_mask
    before, _ = value_loss(batch.old_values, batch.old_values, batch.returns, batch.response_mask, None)
    m = w.update(batch)
    assert m["critic/vf_loss"] == pytest.approx(float(before), rel=1e-5)  # the loss before the step
    assert m["critic/steps"] == 1 and m["critic/grad_norm"] > 0
    for _ in range(30):
        m = w.update(batch)
    after, _ = value_loss(w.compute_values(batch), batch.old_values, batch.returns, batch.response_mask, None)
    assert float(after) < 0.5 * float(before)  # it learns the (random) targets


def test_value_clip_stops_the_gradient_of_tokens_far_from_their_old_value(tiny_dir):
    batch = random_batch(4, 12, VOCAB, prompt_len=3, min_len=5, seed=3)
    w = make_critic(tiny_dir, value_clip=0.0)  # every prediction pinned to its old value
    batch.old_values = w.compute_values(batch) - 1.0  # the current values are 1 above their old ones
    batch.returns = batch.old_values + 5.0 * batch.response_mask  # targets above: the clipped error wins
    m = w.update(batch)
    assert m["critic/vf_clip_frac"] == pytest.approx(1.0)
    assert m["critic/grad_norm"] == 0.0


def test_update_needs_values_and_returns(tiny_dir):
    w = make_critic(tiny_dir)
    batch = random_batch(2, 8, VOCAB, prompt_len=2, min_len=4, seed=4)
    with pytest.raises(ValueError, match="old_values and batch.returns"):
        w.update(batch)
    with pytest.raises(TypeError, match="compute_values"):
        w.compute_logprobs(batch)


def test_checkpoint_round_trip_keeps_the_head_and_the_optimizer(tiny_dir, tmp_path):
    batch = random_batch(4, 12, VOCAB, prompt_len=3, min_len=5, seed=5)
    w = make_critic(tiny_dir)
    batch.old_values = w.compute_values(batch)
    batch.returns = torch.ones_like(batch.old_values) * batch.response_mask
    w.update(batch)
    w.save(tmp_path / "critic")
    w.update(batch)
    after_two = w.compute_values(batch)
    fresh = make_critic(tiny_dir)
    fresh.load(tmp_path / "critic")
    assert fresh.step == 1
    assert (fresh.compute_values(batch) != 0).any()  # the trained head came back
    fresh.update(batch)  # the same second step, from the restored AdamW state
    torch.testing.assert_close(fresh.compute_values(batch), after_two, atol=1e-6, rtol=1e-5)
