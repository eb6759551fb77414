"""The advantage estimator the loop uses, chosen by `algo.estimator`: one advantage per sample from its
outcome reward (the judge scores whole programs, so rewards sit on the last response token).

    advantages = sequence_advantages("rloo", rewards, group_index, valid, response_lengths)   # (N,)

- grpo: the group-normalised reward (`group_advantages`; `norm_by_std=False` is Dr. GRPO);
- rloo: the reward minus the mean of the other valid samples of its group (`rloo_advantages`);
- reinforce_pp: REINFORCE++, the reward whitened over every valid response token of the batch
  (`reinforce_pp_advantages` with gamma = 1: with an outcome reward every token of a sample has the same
  return, so the per-token advantage is one number per sample, and the whitening is token-weighted).

A sample whose reward is not the model's doing (`valid` False: the judge's own error) gets 0 and is left
out of every mean and variance.
"""

from __future__ import annotations

import torch
from torch import Tensor

from codefu.algo.advantages import group_advantages, reinforce_pp_advantages, rloo_advantages

ESTIMATORS = ("grpo", "rloo", "reinforce_pp")


def sequence_advantages(
    estimator: str,
    rewards: Tensor,
    group_index: Tensor,
    valid: Tensor,
    response_lengths: Tensor,
    norm_by_std: bool = True,
    eps: float = 1e-6,
) -> Tensor:
    """(N,) advantages of N samples: `rewards`, `group_index` (the prompt each sample answers), `valid`
    (bool) and `response_lengths` (tokens) are all (N,). `norm_by_std` and `eps` are GRPO's."""
    n = rewards.shape[0]
    if not (rewards.dim() == 1 and group_index.shape == valid.shape == response_lengths.shape == (n,)):
        raise ValueError("rewards, group_index, valid and response_lengths must all be (N,)")
    valid = valid.bool()
    if estimator == "grpo":
        return group_advantages(rewards, group_index, norm_by_std, eps, valid)
    out = torch.zeros_like(rewards, dtype=rewards.dtype if rewards.is_floating_point() else torch.float32)
    if not valid.any():
        return out
    if estimator == "rloo":
        out[valid] = rloo_advantages(rewards[valid], group_index[valid]).to(out.dtype)
        return out
    if estimator == "reinforce_pp":
        lengths = torch.where(valid, response_lengths, 0).long()
        width = max(int(lengths.max()), 1)
        mask = torch.arange(width).unsqueeze(0) < lengths.unsqueeze(1)  # (N, width)
        last = (lengths - 1).clamp(min=0)
        token_rewards = torch.zeros(n, width, dtype=torch.float64)
        token_rewards[torch.arange(n), last] = rewards.double()
        per_token = reinforce_pp_advantages(token_rewards, mask, gamma=1.0)
        return torch.where(lengths > 0, per_token[:, 0], 0.0).to(out.dtype)  # every token holds the same
    raise ValueError(f"unknown advantage estimator {estimator!r}; choose one of {', '.join(ESTIMATORS)}")
