"""`sequence_advantages`: the estimator `algo.estimator` chooses, one advantage per sample from outcome
rewards, each equal to its pure function's result and 0 for samples the judge could not score."""

import pytest
import torch

from codefu.algo import group_advantages, reinforce_pp_advantages, rloo_advantages, sequence_advantages

REWARDS = torch.tensor([1.0, 0.0, 0.5, 1.0, 0.0, 0.0, 7.0])
GROUPS = torch.tensor([0, 0, 0, 1, 1, 1, 1])
VALID = torch.tensor([True, True, True, True, True, True, False])  # the last: a judge error
LENGTHS = torch.tensor([3, 1, 2, 4, 2, 5, 3])


def test_grpo_is_group_advantages():
    got = sequence_advantages("grpo", REWARDS, GROUPS, VALID, LENGTHS, norm_by_std=False)
    assert torch.equal(got, group_advantages(REWARDS, GROUPS, False, 1e-6, VALID))


def test_rloo_by_hand_leaves_invalid_samples_out():
    got = sequence_advantages("rloo", REWARDS, GROUPS, VALID, LENGTHS)
    # group 0: 1 - (0 + 0.5)/2 = 0.75, 0 - 0.75 = -0.75, 0.5 - 0.5 = 0; group 1 without the 7.0:
    # 1 - 0 = 1, 0 - 0.5 = -0.5, -0.5; the judge error gets 0
    assert got.tolist() == pytest.approx([0.75, -0.75, 0.0, 1.0, -0.5, -0.5, 0.0])
    assert torch.allclose(got[:6], rloo_advantages(REWARDS[:6], GROUPS[:6]))


def test_reinforce_pp_whitens_over_tokens():
    got = sequence_advantages("reinforce_pp", REWARDS, GROUPS, VALID, LENGTHS)
    # every token of a sample holds its reward (gamma 1); whitened over the 17 valid tokens
    tokens = torch.cat([REWARDS[i].repeat(int(LENGTHS[i])) for i in range(6)]).double()
    expected = (REWARDS[:6].double() - tokens.mean()) / torch.sqrt(tokens.var() + 1e-8)
    assert got[:6].tolist() == pytest.approx(expected.tolist(), rel=1e-6)
    assert got[6] == 0
    # the same as the per-token function on the rows built by hand
    mask = torch.arange(5).unsqueeze(0) < LENGTHS[:6].unsqueeze(1)
    token_rewards = torch.zeros(6, 5)
    token_rewards[torch.arange(6), LENGTHS[:6] - 1] = REWARDS[:6]
    per_token = reinforce_pp_advantages(token_rewards, mask, 1.0)
    assert torch.allclose(got[:6], per_token[:, 0], atol=1e-6)
    assert torch.allclose(per_token, per_token[:, :1] * mask, atol=1e-6)  # the same on every valid token


def test_no_valid_sample_and_bad_input():
    none = torch.zeros(7, dtype=torch.bool)
    for name in ("rloo", "reinforce_pp"):
        assert sequence_advantages(name, REWARDS, GROUPS, none, LENGTHS).abs().sum() == 0
    with pytest.raises(ValueError, match="unknown advantage estimator 'ppo'"):
        sequence_advantages("ppo", REWARDS, GROUPS, VALID, LENGTHS)
    with pytest.raises(ValueError, match=r"\(N,\)"):
        sequence_advantages("rloo", REWARDS, GROUPS[:3], VALID, LENGTHS)
