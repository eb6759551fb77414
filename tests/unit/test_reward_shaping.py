"""`shaped_rewards`: the step's rewards with the shaping terms the `algo:` keys turn on (DAPO's overlong
penalty, self-repair's turn terms), added only to the samples the judge scored; numbers by hand."""

import pytest
import torch

from codefu.algo.shaping import shaped_rewards
from codefu.orchestrator.config import AlgoConfig

REWARDS = torch.tensor([1.0, 0.0, 1.0, 0.0])
VALID = torch.tensor([True, True, True, False])  # the last: the judge failed (no reward)
LAST = torch.tensor([16, 14, 4, 16])  # the last response's tokens, against max_len 16
TURNS = torch.tensor([1, 2, 3, 1])
PASSED = torch.tensor([True, False, True, False])


def shaped(algo: AlgoConfig) -> tuple[torch.Tensor, dict[str, float]]:
    return shaped_rewards(REWARDS, VALID, LAST, TURNS, PASSED, algo, max_len=16)


def test_no_term_on_leaves_the_rewards_and_reports_none():
    rewards, metrics = shaped(AlgoConfig())
    assert torch.equal(rewards, REWARDS) and metrics == {}


def test_the_overlong_penalty_goes_to_the_scored_samples_only():
    # buffer 4: free up to 12 tokens, then linear to -1 at 16: 16 -> -1, 14 -> -0.5, 4 -> 0
    rewards, metrics = shaped(AlgoConfig(overlong_buffer=4))
    assert torch.allclose(rewards, torch.tensor([0.0, -0.5, 1.0, 0.0]))
    assert metrics == {"reward/overlong_penalty": pytest.approx(-0.5)}  # over the three scored


def test_turn_terms_cost_each_extra_turn_and_reward_a_first_turn_pass():
    rewards, metrics = shaped(AlgoConfig(turn_cost=0.1, first_turn_bonus=0.2))
    assert torch.allclose(rewards, torch.tensor([1.2, -0.1, 0.8, 0.0]))
    assert metrics == {"reward/turn_shaping": pytest.approx((0.2 - 0.1 - 0.2) / 3)}


def test_both_terms_add_up_and_a_step_without_a_scored_sample_reports_zero():
    rewards, metrics = shaped(AlgoConfig(overlong_buffer=4, turn_cost=0.1))
    assert torch.allclose(rewards, torch.tensor([0.0, -0.6, 0.8, 0.0]))
    assert set(metrics) == {"reward/overlong_penalty", "reward/turn_shaping"}
    none = torch.zeros(4, dtype=torch.bool)
    rewards, metrics = shaped_rewards(REWARDS, none, LAST, TURNS, PASSED, AlgoConfig(overlong_buffer=4), 16)
    assert torch.equal(rewards, REWARDS) and metrics == {"reward/overlong_penalty": 0.0}
