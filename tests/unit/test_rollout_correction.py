"""Truncated / masked importance sampling for the rollout-trainer mismatch: the weights worked by hand, the
loss they weigh, and the trainer's update with and without the recompute pass."""

import math

import pytest
import torch

from codefu.algo import LossSettings, policy_loss, rl_loss
from codefu.algo.choices import ROLLOUT_CORRECTIONS
from codefu.algo.rollout_correction import rollout_correction_weights
from codefu.models.tiny import save_tiny_model
from codefu.trainer import TrainerConfig, TrainerWorker
from codefu.trainer.testing import random_batch

LN = math.log


def test_weights_by_hand():
    # per-token ratios 1, 3, 0.25 | 1.5 (and a masked NaN)
    trainer = torch.tensor([[0.0, LN(3), LN(0.25)], [LN(1.5), float("nan"), 0.0]])
    rollout = torch.zeros(2, 3)
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    w, m = rollout_correction_weights(trainer, rollout, mask, "token_truncate", 2.0)
    torch.testing.assert_close(w, torch.tensor([[1.0, 2.0, 0.25], [1.5, 1.0, 1.0]]))
    assert m["truncated_frac"] == pytest.approx(1 / 4) and m["masked_frac"] == 0
    assert m["weight_mean"] == pytest.approx((1 + 2 + 0.25 + 1.5) / 4)
    assert m["log_ratio_mean"] == pytest.approx((LN(3) + LN(0.25) + LN(1.5)) / 4)
    hist = {k: v for k, v in m.items() if k.startswith("ratio_frac")}
    assert hist == pytest.approx(
        {"ratio_frac_0_0.5": 0.25, "ratio_frac_0.5_0.8": 0, "ratio_frac_0.8_1.25": 0.25,
         "ratio_frac_1.25_2": 0.25, "ratio_frac_2_inf": 0.25}
    )  # fmt: skip
    w, m = rollout_correction_weights(trainer, rollout, mask, "token_mask", 2.0)
    torch.testing.assert_close(w, torch.tensor([[1.0, 0.0, 0.0], [1.5, 1.0, 1.0]]))  # 3 > 2, 0.25 < 1/2
    assert m["masked_frac"] == pytest.approx(2 / 4) and m["truncated_frac"] == 0
    # sequences: row 0's ratio is 1 * 3 * 0.25 = 0.75, row 1's 1.5
    w, _ = rollout_correction_weights(trainer, rollout, mask, "sequence_truncate", 1.2)
    torch.testing.assert_close(w, torch.tensor([[0.75] * 3, [1.2, 1.0, 1.0]]))
    w, m = rollout_correction_weights(trainer, rollout, mask, "sequence_mask", 1.2)
    torch.testing.assert_close(w, torch.tensor([[0.0] * 3, [0.0, 1.0, 1.0]]))  # 0.75 < 1/1.2, 1.5 > 1.2
    assert m["masked_frac"] == 1.0
    w, _ = rollout_correction_weights(trainer, rollout, mask, "none", 2.0)
    assert (w == 1).all()


def test_weights_are_bounded_for_long_sequences_and_reject_bad_arguments():
    trainer, rollout = torch.full((1, 5000), 0.1), torch.zeros(1, 5000)  # log rho_seq = 500
    w, _ = rollout_correction_weights(trainer, rollout, torch.ones(1, 5000), "sequence_truncate", 2.0)
    assert torch.isfinite(w).all() and (w == 2.0).all()
    with pytest.raises(ValueError, match="unknown rollout correction"):
        rollout_correction_weights(trainer, rollout, torch.ones(1, 5000), "tis", 2.0)
    for bad in (1.0, 0.5, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="threshold"):
            rollout_correction_weights(trainer, rollout, torch.ones(1, 5000), "token_mask", bad)
    assert set(ROLLOUT_CORRECTIONS) == {
        "none",
        "token_truncate",
        "token_mask",
        "sequence_truncate",
        "sequence_mask",
    }


def test_rl_loss_weighs_only_the_policy_term():
    g = torch.Generator().manual_seed(0)
    lp = torch.randn(4, 6, generator=g).requires_grad_()
    old = lp.detach() + 0.1 * torch.randn(4, 6, generator=g)
    rollout = old + 0.8 * torch.randn(4, 6, generator=g)  # a large mismatch: some weights truncated
    ref = old - 0.1
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5])
    mask = torch.ones(4, 6)
    settings = LossSettings(
        kl_coef=0.1, rollout_correction="token_truncate", rollout_correction_threshold=1.5
    )
    loss, parts = rl_loss(lp, old, adv, mask, mask.sum(-1), 24.0, settings, ref_logprobs=ref,
                          rollout_logprobs=rollout)  # fmt: skip
    w = (old - rollout).exp().clamp(max=1.5)
    pg, _ = policy_loss(lp, old, adv, mask * w, normalizer=24.0)
    plain, plain_parts = rl_loss(
        lp, old, adv, mask, mask.sum(-1), 24.0, LossSettings(kl_coef=0.1), ref_logprobs=ref
    )
    torch.testing.assert_close(parts["pg"], pg.detach())
    torch.testing.assert_close(parts["kl"], plain_parts["kl"])  # the KL term is not weighted
    assert 0 < parts["rollout_is/truncated_frac"] < 1
    with pytest.raises(ValueError, match="needs the rollout's log-probs"):
        rl_loss(lp, old, adv, mask, mask.sum(-1), 24.0, settings, ref_logprobs=ref)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return save_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0)


def _updated(model_dir, batch, **overrides):
    cfg = TrainerConfig(model=str(model_dir), lr=1e-3, adam_eps=1e-5, micro_batch_tokens=40, **overrides)
    w = TrainerWorker(cfg)
    metrics = w.update(batch)
    return w.state_dict_for_sync(dtype=torch.float32), metrics


def test_the_update_without_a_recompute_pass_equals_it_when_the_policies_agree(tiny_dir):
    """The engine's log-probs equal the trainer's (an exact engine): the recompute run, the corrected
    recompute run and the corrected run without the pass (pi_old from the update's own forward) take the
    same step."""
    batch = random_batch(6, 16, 128, prompt_len=4, min_len=6, seed=3)
    batch.advantages = torch.tensor([1.0, -1.0, 0.5, -0.5, 2.0, -2.0])
    batch.rollout_logprobs = TrainerWorker(TrainerConfig(model=str(tiny_dir))).compute_logprobs(batch)
    batch.old_logprobs = batch.rollout_logprobs.clone()
    recompute, _ = _updated(tiny_dir, batch)
    corrected, m = _updated(tiny_dir, batch, rollout_correction="token_truncate")
    assert m["rollout_is/weight_mean"] == pytest.approx(1.0) and m["rollout_is/truncated_frac"] == 0
    batch.old_logprobs = None
    no_pass, m = _updated(tiny_dir, batch, rollout_correction="token_mask")
    assert m["rollout_is/masked_frac"] == 0 and m["policy/clip_frac"] == 0  # ratio 1: pi_old is this forward
    for k in recompute:
        torch.testing.assert_close(corrected[k], recompute[k], atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(no_pass[k], recompute[k], atol=1e-6, rtol=1e-5)
    # and when they disagree, the masked tokens change the step
    batch.rollout_logprobs = batch.rollout_logprobs + 2.0 * (torch.arange(16) % 2) * batch.response_mask
    masked, m = _updated(tiny_dir, batch, rollout_correction="token_mask")
    assert 0.3 < m["rollout_is/masked_frac"] < 0.7
    assert any(not torch.allclose(masked[k], recompute[k], atol=1e-6) for k in recompute)
    with pytest.raises(ValueError, match="needs batch.old_logprobs"):
        _updated(tiny_dir, batch, rollout_correction="token_mask", ppo_epochs=2)
