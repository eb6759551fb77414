"""Policy losses: PPO's clipped surrogate (`policy_loss`) and, beside it, GSPO and CISPO.

GSPO and CISPO take the same tensors as `policy_loss` and return `(loss, metrics)` with the same metric
keys, so one can stand in for the other: "clip_frac", "approx_kl", "approx_kl_k1", "ratio_mean", "ratio_max",
"valid_tokens" (floats; means over this call's valid tokens; the trainer prefixes them with `policy/`, so
"clip_frac" is `codefu.observability.metrics.CLIP_FRAC`). What "ratio" and "clip" mean differs per loss
and is said in each docstring. Formulas, sources and the differences from verl are in docs/algo.md,
"GSPO" and "CISPO".

A `mask` is `(B, T)`, bool or 0/1 float; positions where it is 0 never affect the loss, the metrics or the
gradient, even when a log-prob or advantage there is NaN or inf.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from codefu.algo.aggregation import aggregate_loss, masked_mean
from codefu.algo.kl import LOG_RATIO_CLAMP


def masked_policy_inputs(
    logprobs: Tensor, old_logprobs: Tensor, advantages: Tensor, mask: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The inputs of a policy loss, checked: (on, logprobs, old_logprobs, advantages as (B, T)) with every
    masked entry replaced by 0 BEFORE any arithmetic, so that a NaN there reaches neither the loss nor the
    gradient. advantages: (B,) per sequence or (B, T) per token; old_logprobs and advantages detached."""
    if logprobs.shape != old_logprobs.shape or logprobs.shape != mask.shape or logprobs.dim() != 2:
        raise ValueError(
            f"logprobs, old_logprobs and mask must be (B, T), got "
            f"{tuple(logprobs.shape)}, {tuple(old_logprobs.shape)}, {tuple(mask.shape)}"
        )
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(-1)
    if (
        advantages.dim() != 2
        or advantages.shape[0] != logprobs.shape[0]
        or advantages.shape[1]
        not in (
            1,
            logprobs.shape[1],
        )
    ):
        raise ValueError(
            f"advantages must be (B,) or (B, T) with B, T = {tuple(logprobs.shape)}, "
            f"got {tuple(advantages.shape)}"
        )
    on = mask != 0
    lp = torch.where(on, logprobs, 0.0)
    old = torch.where(on, old_logprobs.detach().to(logprobs.dtype), 0.0)
    adv = torch.where(on, advantages.detach().to(logprobs.dtype), 0.0)
    return on, lp, old, adv


def policy_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip: float | None = None,
    agg: str = "token-mean",
    normalizer: float | Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """PPO clipped surrogate with separate low/high clip (DAPO's clip-higher) and optional dual clip.

    ratio = exp(logprobs - old_logprobs) (log-ratio clamped to +-LOG_RATIO_CLAMP);
    pg = max(-A * ratio, -A * clip(ratio, 1 - clip_low, 1 + clip_high));
    with dual_clip = c > 1: pg = min(pg, -A * c) where A < 0 (bounds the loss of a token whose ratio
    exploded under a negative advantage). Off by default (verl always applies c = 3).
    The loss is `aggregate_loss(pg, mask, agg, normalizer)`; minimizing it raises the log-prob of tokens
    with positive advantage.

    Args:
        logprobs: (B, T) current policy log-probs, with gradient.
        old_logprobs: (B, T) log-probs of the policy that sampled (no gradient needed).
        advantages: (B,) per sequence (broadcast over T) or (B, T) per token.
        mask: (B, T) bool or 0/1 float, the response tokens that count.
        clip_low, clip_high: the ratio is clipped to [1 - clip_low, 1 + clip_high].
        dual_clip: None, or the constant c > 1.
        agg, normalizer: see `aggregate_loss`.

    Returns:
        (loss, metrics): loss a 0-dim tensor with gradient to `logprobs`; metrics, means over valid tokens:
        "clip_frac" (the clipped branch is strictly larger, so its zero gradient is taken),
        "approx_kl" (k3 estimate of KL(old || current): mean of r - 1 - log r, r = ratio; >= 0),
        "approx_kl_k1" (mean of old - logprobs), "ratio_mean", "ratio_max", "valid_tokens",
        and "dual_clip_frac" when dual clip is on.
    """
    if dual_clip is not None and dual_clip <= 1.0:
        raise ValueError(f"dual_clip must be > 1 (or None), got {dual_clip}")
    on, lp, old, adv = masked_policy_inputs(logprobs, old_logprobs, advantages, mask)
    log_ratio = (lp - old).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    ratio = log_ratio.exp()
    pg_unclipped = -adv * ratio
    pg_clipped = -adv * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    pg = torch.maximum(pg_unclipped, pg_clipped)
    if dual_clip is not None:
        pg_dual = -adv * dual_clip
        dual_active = (adv < 0) & (pg_dual < pg)
        pg = torch.where(adv < 0, torch.minimum(pg, pg_dual), pg)
    loss = aggregate_loss(pg, mask, agg, normalizer)

    with torch.no_grad():
        lr = log_ratio.detach()
        r = ratio.detach()
        stats = [
            (pg_clipped > pg_unclipped).detach(),
            r - 1.0 - lr,
            -lr,
            r,
        ]
        if dual_clip is not None:
            stats.append(dual_active.detach())
        means = [masked_mean(s.to(torch.float32).expand_as(lr), on).float() for s in stats]
        r_max = torch.where(on, r, 0.0).max() if r.numel() else r.new_zeros(())
        vals = torch.stack([*means, r_max.float(), on.sum().float()]).tolist()  # one device sync
    keys = ["clip_frac", "approx_kl", "approx_kl_k1", "ratio_mean"]
    if dual_clip is not None:
        keys.append("dual_clip_frac")
    keys += ["ratio_max", "valid_tokens"]
    return loss, dict(zip(keys, vals, strict=True))


def _check_clips(clip_low: float, clip_high: float) -> None:
    for name, c in (("clip_low", clip_low), ("clip_high", clip_high)):
        if not (c >= 0.0 and math.isfinite(c)):  # also rejects NaN
            raise ValueError(f"{name} must be a finite number >= 0, got {c}")


def _ratio_metrics(
    token_log_ratio: Tensor, loss_ratio: Tensor, clipped: Tensor, on: Tensor
) -> dict[str, float]:
    """policy_loss's metrics: clip_frac (of `clipped`), approx_kl (k3 of the TOKEN ratios: mean of
    r - 1 - log r), approx_kl_k1 (mean of old - logprobs), ratio_mean and ratio_max (of `loss_ratio`, the
    ratio the loss uses), valid_tokens; all over the valid tokens, with one device sync."""
    with torch.no_grad():
        lr = token_log_ratio.detach().clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
        r = loss_ratio.detach()
        stats = [clipped, lr.exp() - 1.0 - lr, -lr, r]
        means = [masked_mean(s.to(torch.float32), on).float() for s in stats]
        r_max = torch.where(on, r, 0.0).max() if r.numel() else r.new_zeros(())
        vals = torch.stack([*means, r_max.float(), on.sum().float()]).tolist()
    keys = ["clip_frac", "approx_kl", "approx_kl_k1", "ratio_mean", "ratio_max", "valid_tokens"]
    return dict(zip(keys, vals, strict=True))


def gspo_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_low: float,
    clip_high: float,
    agg: str = "token-mean",
    normalizer: float | Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """GSPO (Zheng et al. 2025, arXiv:2507.18071): PPO's clipped surrogate on a sequence-level ratio.

    s_i   = exp( (1/n_i) sum_{t valid} (logprobs_it - old_it) )     (log clamped to +-LOG_RATIO_CLAMP)
    s_it  = sg[s_i] * exp(logprobs_it - sg[logprobs_it])            (value s_i; gradient s_i d logprobs_it)
    l_it  = max(-A_i * s_it, -A_i * clip(s_it, 1 - clip_low, 1 + clip_high))
    loss  = aggregate_loss(l, mask, agg)

    The token form is verl's (`compute_policy_loss_gspo`): with agg="seq-mean-token-mean" its gradient is
    exactly that of the paper's sequence objective mean_i max(-A_i s_i, -A_i clip(s_i)). The default here
    is "token-mean" (every token weighs the same, as every other loss in codefu): the loss is then
    sum_i n_i l_i / sum_i n_i, so longer responses weigh more; verl always uses seq-mean-token-mean,
    whatever loss_agg_mode says. A whole sequence is clipped or not: GSPO's clip ranges are tiny (the paper
    uses 3e-4 / 4e-4).

    The sequence mean needs the whole row: with sequence parallelism, gather the row's log-ratio sum first.

    Args:
        logprobs: (B, T) current policy log-probs, with gradient.
        old_logprobs: (B, T) log-probs of the sampling policy.
        advantages: (B,) per sequence (broadcast over T), or (B, T) (used per token, as verl).
        mask: (B, T) bool or 0/1 float.
        clip_low, clip_high: s is clipped to [1 - clip_low, 1 + clip_high]; both >= 0.
        agg: an `aggregate_loss` mode.
        normalizer: the whole mini-batch's denominator (`aggregate_loss`), or None for this batch's own.

    Returns:
        (loss, metrics): loss 0-dim with gradient to `logprobs`; metrics as `policy_loss`'s, token-weighted:
        "clip_frac" (tokens whose clipped branch is strictly larger, so they get no gradient: whole
        sequences), "ratio_mean"/"ratio_max" of s_i over the valid tokens, "approx_kl"/"approx_kl_k1" of
        the per-token ratios, "valid_tokens".
    """
    _check_clips(clip_low, clip_high)
    on, lp, old, adv = masked_policy_inputs(logprobs, old_logprobs, advantages, mask)
    token_lr = (lp - old).detach()  # 0 where masked
    n_tok = on.sum(-1)
    seq_lr = (token_lr.double().sum(-1) / n_tok.clamp(min=1)).to(lp.dtype)  # (B,), summed in float64
    # value: log s_i; gradient: 1 to each valid token's log-prob (the detached difference is exactly 0)
    log_s = ((lp - lp.detach()) + seq_lr.unsqueeze(-1)).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    s = log_s.exp()
    pg_unclipped = -adv * s
    pg_clipped = -adv * s.clamp(1.0 - clip_low, 1.0 + clip_high)
    loss = aggregate_loss(torch.maximum(pg_unclipped, pg_clipped), mask, agg, normalizer)
    return loss, _ratio_metrics(token_lr, s, pg_clipped > pg_unclipped, on)


def cispo_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    clip_low: float,
    clip_high: float,
    agg: str = "token-mean",
    normalizer: float | Tensor | None = None,
) -> tuple[Tensor, dict[str, float]]:
    """CISPO (MiniMax-M1, arXiv:2506.13585): REINFORCE with a clipped, stop-gradient importance weight.

    r_t  = exp(logprobs_t - old_t)                                   (log clamped to +-LOG_RATIO_CLAMP)
    l_t  = -sg[clip(r_t, 1 - clip_low, 1 + clip_high)] * A_t * logprobs_t
    loss = aggregate_loss(l, mask, agg)

    Unlike PPO, clipping caps a token's weight but never drops its gradient: every valid token gets
    -w_t A_t d logprobs_t. Only the gradient is meaningful; the loss value depends on the log-probs'
    magnitude (verl's form; `-w A (logprobs - sg[logprobs])` would have the same gradient and value 0).
    The paper tunes only the upper bound: a `clip_low` >= 1 leaves the weight without a lower bound.

    Args:
        logprobs: (B, T) current policy log-probs, with gradient.
        old_logprobs: (B, T) log-probs of the sampling policy.
        advantages: (B,) per sequence (broadcast over T) or (B, T) per token.
        mask: (B, T) bool or 0/1 float.
        clip_low, clip_high: the weight is clipped to [1 - clip_low, 1 + clip_high]; both >= 0.
        agg: an `aggregate_loss` mode.
        normalizer: the whole mini-batch's denominator (`aggregate_loss`), or None for this batch's own.

    Returns:
        (loss, metrics): loss 0-dim with gradient to `logprobs`; metrics as `policy_loss`'s: "clip_frac"
        (tokens whose weight was clipped, either side; verl's convention; they keep their gradient),
        "ratio_mean"/"ratio_max" of the unclipped r_t, "approx_kl"/"approx_kl_k1", "valid_tokens".
    """
    _check_clips(clip_low, clip_high)
    on, lp, old, adv = masked_policy_inputs(logprobs, old_logprobs, advantages, mask)
    token_lr = (lp - old).detach().clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    ratio = token_lr.exp()
    weight = ratio.clamp(1.0 - clip_low, 1.0 + clip_high)  # detached: a constant per token
    loss = aggregate_loss(-weight * adv * lp, mask, agg, normalizer)
    return loss, _ratio_metrics(token_lr, ratio, weight != ratio, on)
