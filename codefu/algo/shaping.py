"""Reward shaping: terms to add to a sample's reward, and the per-token rewards a critic learns from.

Formulas and sources are in docs/algo.md, "Overlong penalty" and "PPO with a critic"; `shaped_rewards`
adds the terms the config turns on to a step's rewards.
"""

from __future__ import annotations

import math
import operator
from typing import Protocol

import torch
from torch import Tensor


def _as_int(name: str, x: object) -> int:
    if isinstance(x, bool):
        raise ValueError(f"{name} must be an integer number of tokens, got {x!r}")
    try:
        return operator.index(x)  # int, numpy and 0-dim torch integers; not 20480.0
    except TypeError:
        raise ValueError(f"{name} must be an integer number of tokens, got {x!r}") from None


def overlong_penalty(lengths: Tensor, max_len: int, cache_len: int, factor: float) -> Tensor:
    """DAPO's soft overlong punishment (Yu et al. 2025, arXiv:2503.14476, eq. 13), times `factor`.

    With L a response's length and s = max_len - cache_len (the length that is free):
        0                                  L <= s
        (s - L) / cache_len * factor       s < L <= max_len          (linear from 0 down to -factor)
        -factor                            L > max_len
    With cache_len = 0 the middle case is empty: 0 up to max_len, then -factor (no division).
    verl's DAPO reward manager computes the same on [0, max_len] (it never sees L > max_len, its responses
    being cut there) and divides by zero for cache_len = 0.

    Args:
        lengths: response lengths in tokens, any shape, integer or float, each >= 0 (e.g. a list).
        max_len: the length from which the full penalty applies, >= 1 (DAPO: the generation limit).
        cache_len: the width of the linear ramp below max_len, 0 <= cache_len <= max_len.
        factor: the full penalty, finite and >= 0 (DAPO: 1.0).

    Returns:
        A tensor shaped like `lengths` of values in [-factor, 0], in the lengths' float dtype (float32 for
        integer lengths), computed in float64: a term to ADD to the reward.
    """
    max_len, cache_len = _as_int("max_len", max_len), _as_int("cache_len", cache_len)
    if max_len < 1:
        raise ValueError(f"max_len must be >= 1, got {max_len}")
    if not 0 <= cache_len <= max_len:
        raise ValueError(f"cache_len must be in [0, max_len = {max_len}], got {cache_len}")
    if not (factor >= 0.0 and math.isfinite(factor)):  # also rejects NaN
        raise ValueError(f"factor must be a finite number >= 0, got {factor!r}")
    lengths = torch.as_tensor(lengths)
    if lengths.dtype == torch.bool or lengths.is_complex():
        raise ValueError(f"lengths must be integer or float, got {lengths.dtype}")
    out_dtype = lengths.dtype if lengths.is_floating_point() else torch.float32
    length = lengths.double()
    if not (length >= 0).all():  # also catches NaN
        raise ValueError("lengths must all be >= 0 (and not NaN)")
    free = max_len - cache_len
    ramp = (free - length) / max(cache_len, 1) * factor  # only used where free < L <= max_len: cache_len > 0
    out = torch.where(length <= free, 0.0, torch.where(length <= max_len, ramp, -factor))
    return out.to(out_dtype)


def turn_shaping(turns: Tensor, passed: Tensor, turn_cost: float, first_turn_bonus: float) -> Tensor:
    """Self-repair's reward terms (docs/self-repair.md): an episode of `turns` turns loses `turn_cost` per
    turn after the first, and one solved at its first turn (passed, in one turn) gains `first_turn_bonus`:

        - turn_cost * (turns - 1) + first_turn_bonus * [passed and turns == 1]

    With turn_cost c and K turns a solved episode's reward falls by c per extra turn, so the first correct
    turn earns the most. turns: (N,) integers >= 1; passed: (N,) bool. Returns (N,) float32, to ADD."""
    if turns.shape != passed.shape or turns.dim() != 1:
        raise ValueError(
            f"turns and passed must both be (N,), got {tuple(turns.shape)}, {tuple(passed.shape)}"
        )
    if not (turns >= 1).all():
        raise ValueError("turns must all be >= 1")
    if not (turn_cost >= 0.0 and first_turn_bonus >= 0.0 and math.isfinite(turn_cost + first_turn_bonus)):
        raise ValueError(
            f"turn_cost and first_turn_bonus must be finite and >= 0, got {turn_cost}, {first_turn_bonus}"
        )
    first = passed.bool() & (turns == 1)
    return (-turn_cost * (turns.double() - 1) + first_turn_bonus * first.double()).float()


class ShapingConfig(Protocol):
    """The shaping keys of the `algo:` section (codefu.orchestrator.config.AlgoConfig)."""

    overlong_buffer: int
    overlong_penalty: float
    turn_cost: float
    first_turn_bonus: float


def shaped_rewards(
    rewards: Tensor,
    valid: Tensor,
    last_lengths: Tensor,
    turns: Tensor,
    passed: Tensor,
    algo: ShapingConfig,
    max_len: int,
) -> tuple[Tensor, dict[str, float]]:
    """A step's rewards with the shaping terms `algo` turns on added to the samples the judge scored.

    DAPO's `overlong_penalty` (algo.overlong_buffer > 0) on each sample's last response (a self-repair
    episode's: each turn has its `max_len`, rollout.max_new_tokens); self-repair's `turn_shaping`
    (algo.turn_cost or algo.first_turn_bonus).

    Args:
        rewards: (N,) the judge's rewards (any value where not `valid`).
        valid: (N,) bool, the samples the judge scored; the others get no term.
        last_lengths: (N,) tokens of each sample's last response.
        turns: (N,) turns of each sample's episode (1 without self-repair).
        passed: (N,) bool, each sample's last program passed the hidden tests.

    Returns:
        The (N,) rewards, and each term's mean over the valid samples (0.0 without one) as
        reward/overlong_penalty and reward/turn_shaping, for the terms that are on.
    """
    metrics: dict[str, float] = {}
    if algo.overlong_buffer:
        penalty = overlong_penalty(last_lengths, max_len, algo.overlong_buffer, algo.overlong_penalty)
        rewards = rewards + torch.where(valid, penalty, 0.0)
        metrics["reward/overlong_penalty"] = float(penalty[valid].mean()) if valid.any() else 0.0
    if algo.turn_cost or algo.first_turn_bonus:
        shaping = turn_shaping(turns, passed, algo.turn_cost, algo.first_turn_bonus)
        rewards = rewards + torch.where(valid, shaping, 0.0)
        metrics["reward/turn_shaping"] = float(shaping[valid].mean()) if valid.any() else 0.0
    return rewards, metrics


def outcome_token_rewards(
    rewards: Tensor, mask: Tensor, kl: Tensor | None = None, kl_coef: float = 0.0
) -> Tensor:
    """Per-token rewards of outcome-scored samples, for GAE: each row's reward on its last valid token,
    minus `kl_coef * kl` on every valid token when a KL penalty goes into the reward (verl's
    `apply_kl_penalty`: token_level_rewards = token_level_scores - beta * kl).

    Args:
        rewards: (B,) one reward per sample.
        mask: (B, T) bool or 0/1 float, the response tokens (may start after a prompt); a row without a
            valid token gets no reward anywhere.
        kl: (B, T) per-token KL estimate (e.g. `kl_penalty(old_logprobs, ref_logprobs, "k1")`) or None.
        kl_coef: its weight, finite and >= 0; 0 ignores `kl`.

    Returns:
        (B, T) float32 rewards, 0 at masked positions (even where `kl` is NaN there).
    """
    if rewards.dim() != 1 or mask.dim() != 2 or mask.shape[0] != rewards.shape[0]:
        raise ValueError(
            f"rewards must be (B,) and mask (B, T), got {tuple(rewards.shape)}, {tuple(mask.shape)}"
        )
    if not (kl_coef >= 0.0 and math.isfinite(kl_coef)):
        raise ValueError(f"kl_coef must be a finite number >= 0, got {kl_coef!r}")
    on = mask != 0
    B, T = on.shape
    cols = torch.arange(T).expand(B, T)
    last = torch.where(on, cols, -1).max(-1).values  # -1: no valid token
    out = torch.zeros(B, T, dtype=torch.float32)
    rows = (last >= 0).nonzero().flatten()
    out[rows, last[rows]] = rewards[rows].float()
    if kl_coef > 0:
        if kl is None or kl.shape != mask.shape:
            raise ValueError("kl_coef > 0 needs kl, shaped like mask")
        out = out - kl_coef * torch.where(on, kl.float(), 0.0)
    return torch.where(on, out, 0.0)
