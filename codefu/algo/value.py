"""The critic's loss: PPO's clipped value loss, for GAE (`codefu.algo.advantages.gae`).

A pure tensor function like the policy losses; formulas and the comparison with verl are in docs/algo.md,
"Value loss". A `mask` is `(B, T)`, bool or 0/1 float; positions where it is 0 never affect the loss, the
metrics or the gradient, even when a value or return there is NaN or inf.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from codefu.algo.aggregation import aggregate_loss, masked_mean


def value_loss(
    values: Tensor,
    old_values: Tensor,
    returns: Tensor,
    mask: Tensor,
    clip: float | None,
    agg: str = "token-mean",
    normalizer: float | Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """PPO's clipped value loss (as verl's `compute_value_loss`, from TRL / OpenAI baselines).

    v_clip = clip(v, v_old - c, v_old + c)
    l_t    = max( (v - R)^2, (v_clip - R)^2 )          clip = c >= 0; with clip=None, l_t = (v - R)^2
    loss   = 0.5 * aggregate_loss(l, mask, agg)

    The max is pessimistic: where the clipped error is larger, that term is used and, v_clip being pinned
    at a bound, the token gets no gradient (as PPO's clipped policy term).

    Args:
        values: (B, T) the critic's current predictions, with gradient.
        old_values: (B, T) its predictions when the batch was collected (those GAE used).
        returns: (B, T) the targets (GAE's returns).
        mask: (B, T) bool or 0/1 float.
        clip: c >= 0, how far a prediction may move from `old_values` before clipping; None: unclipped.
        agg: an `aggregate_loss` mode.
        normalizer: `aggregate_loss`'s: the whole mini-batch's denominator, for micro-batches that must add
            up to the mini-batch's loss (the trainer's gradient accumulation); None: this batch's own.

    Returns:
        (loss, metrics): loss 0-dim with gradient to `values`; metrics, means over the valid tokens:
        "vf_clip_frac" (tokens where the clipped error is strictly larger; verl's vf_clipfrac; 0 unclipped),
        "vpred_mean" (of `values`), "valid_tokens".
    """
    if values.dim() != 2 or not values.shape == old_values.shape == returns.shape == mask.shape:
        raise ValueError(
            f"values, old_values, returns and mask must all be (B, T), got {tuple(values.shape)}, "
            f"{tuple(old_values.shape)}, {tuple(returns.shape)}, {tuple(mask.shape)}"
        )
    if clip is not None and not (clip >= 0.0 and math.isfinite(clip)):
        raise ValueError(f"clip must be a finite number >= 0 or None, got {clip}")
    on = mask != 0
    v = torch.where(on, values, 0.0)  # masked entries replaced before any arithmetic (NaN-safe)
    ret = torch.where(on, returns.detach().to(values.dtype), 0.0)
    err = (v - ret).square()
    if clip is None:
        per_token = err
        clipped = torch.zeros_like(on)
    else:
        v_old = torch.where(on, old_values.detach().to(values.dtype), 0.0)
        err_clipped = (torch.clamp(v, v_old - clip, v_old + clip) - ret).square()
        per_token = torch.maximum(err, err_clipped)
        clipped = err_clipped > err
    loss = 0.5 * aggregate_loss(per_token, mask, agg, normalizer)
    with torch.no_grad():
        stats = [masked_mean(s.detach().to(torch.float32), on).float() for s in (clipped, v)]
        vals = torch.stack([*stats, on.sum().float()]).tolist()
    return loss, dict(zip(["vf_clip_frac", "vpred_mean", "valid_tokens"], vals, strict=True))


def explained_variance(values: Tensor, returns: Tensor, mask: Tensor) -> float:
    """1 - Var(R - V) / Var(R) over the valid tokens (verl's `vf_explained_var`): 1 when the critic
    predicts every return, 0 when it predicts no better than the returns' mean, negative when worse. NaN
    when the returns do not vary (or fewer than two tokens are valid). Population variances, float64."""
    if not values.shape == returns.shape == mask.shape:
        raise ValueError(
            f"values, returns and mask must have one shape, got {tuple(values.shape)}, "
            f"{tuple(returns.shape)}, {tuple(mask.shape)}"
        )
    on = mask != 0
    n = int(on.sum())
    if n < 2:
        return float("nan")
    ret = returns.detach().double()[on]
    err = ret - values.detach().double()[on]
    var_ret = float(ret.var(unbiased=False))
    if var_ret == 0.0:
        return float("nan")
    return 1.0 - float(err.var(unbiased=False)) / var_ret
