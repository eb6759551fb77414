"""GRPO/PPO math as pure tensor functions: advantages, KL estimators, loss aggregation, log-probs, entropy.

Every function takes tensors and returns tensors (plus a metrics dict of floats for `policy_loss`); none
keeps state, talks to other ranks or knows about models. The conventions (Bessel-corrected std, where the
epsilon goes, what `valid=False` means, the KL estimators, the aggregation modes and their `normalizer`)
are written down with formulas in docs/algo.md, "Algorithm conventions".

Shapes: `N` samples (completions), `B` sequences in a (micro-)batch, `T` response tokens (padded),
`V` vocabulary. A `mask` is `(B, T)`, bool or 0/1 float; positions where it is 0 never affect a result,
even when the loss there is NaN or inf.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Literal

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint

KLKind = Literal["k1", "k2", "k3"]
AggMode = Literal["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]

KL_KINDS: tuple[str, ...] = ("k1", "k2", "k3")
AGG_MODES: tuple[str, ...] = (
    "token-mean",
    "seq-mean-token-sum",
    "seq-mean-token-mean",
    "seq-mean-token-sum-norm",
)

#: Log-ratios are clamped to this before `exp` (as verl), so a ratio is finite in fp32.
LOG_RATIO_CLAMP = 20.0
#: The k3 penalty is clamped to [-K3_CLAMP, K3_CLAMP] (verl's `low_var_kl`).
K3_CLAMP = 10.0
#: Default number of token positions per chunk in the log-prob/entropy functions: with a 150k vocabulary
#: one fp32 chunk is 1024 * 151936 * 4 B = 0.62 GB.
DEFAULT_CHUNK = 1024


# ----------------------------------------------------------------------------------------------------
# advantages


def group_advantages(
    rewards: Tensor,
    group_index: Tensor,
    norm_by_std: bool = True,
    eps: float = 1e-6,
    valid: Tensor | None = None,
) -> Tensor:
    """GRPO advantages: each reward relative to the other valid rewards of its group.

    A_i = (r_i - mean_g) / (std_g + eps), std_g Bessel-corrected (divides by n_g - 1, as verl), over the
    valid members of group g; with `norm_by_std=False`, A_i = r_i - mean_g (Dr. GRPO). A group with at
    most one valid member gives 0. Invalid entries (e.g. the judge's own SANDBOX_ERROR) give 0 and are
    left out of their group's mean and std; their reward may be anything, NaN included.

    Args:
        rewards: (N,) float rewards.
        group_index: (N,) integer group id per sample; any values, any order, not necessarily contiguous.
        norm_by_std: divide by the group std (GRPO) or not (Dr. GRPO).
        eps: added to the std, outside the square root.
        valid: (N,) bool, True where the reward counts; None means all valid.

    Returns:
        (N,) advantages in the dtype of `rewards` (float32 for integer rewards); computed in float64.
    """
    if rewards.dim() != 1 or group_index.shape != rewards.shape:
        raise ValueError(f"rewards and group_index must be (N,), got {rewards.shape}, {group_index.shape}")
    out_dtype = rewards.dtype if rewards.is_floating_point() else torch.float32
    if valid is None:
        valid = torch.ones_like(rewards, dtype=torch.bool)
    elif valid.shape != rewards.shape:
        raise ValueError(f"valid must be (N,) like rewards, got {valid.shape}")
    valid = valid.bool()
    if rewards.numel() == 0:
        return torch.zeros_like(rewards, dtype=out_dtype)

    uniq, gid = torch.unique(group_index, return_inverse=True)  # contiguous ids 0..G-1
    n_groups = uniq.numel()
    r = torch.where(valid, rewards.double(), 0.0)  # an invalid NaN reward must not reach any sum
    w = valid.double()
    count = torch.zeros(n_groups, dtype=torch.float64, device=r.device).index_add_(0, gid, w)
    total = torch.zeros_like(count).index_add_(0, gid, r)
    mean = total / count.clamp(min=1.0)
    dev = torch.where(valid, r - mean[gid], 0.0)
    adv = dev
    if norm_by_std:
        sq = torch.zeros_like(count).index_add_(0, gid, dev * dev)
        std = (sq / (count - 1.0).clamp(min=1.0)).sqrt()
        adv = dev / (std[gid] + eps)
    keep = valid & (count[gid] > 1.0)
    return torch.where(keep, adv, 0.0).to(out_dtype)


# ----------------------------------------------------------------------------------------------------
# KL estimators


def kl_penalty(logprobs: Tensor, ref_logprobs: Tensor, kind: str) -> Tensor:
    """Per-token estimate of KL(pi || pi_ref) from the log-probs of tokens sampled from pi.

    With d = logprobs - ref_logprobs:
      - "k1": d (unbiased, high variance, can be negative);
      - "k2": d^2 / 2 (biased, non-negative; its gradient is the true KL gradient in expectation);
      - "k3": exp(-d) + d - 1 (unbiased, non-negative, low variance; verl's `low_var_kl`): -d is first
        clamped to +-LOG_RATIO_CLAMP, the result to [-K3_CLAMP, K3_CLAMP].

    Args:
        logprobs, ref_logprobs: (B, T) (any equal shapes) token log-probs under the policy and the reference.
        kind: "k1", "k2" or "k3".

    Returns:
        Elementwise penalty of the same shape (no masking or reduction: pass it to `aggregate_loss`).
    """
    d = logprobs - ref_logprobs
    if kind == "k1":
        return d
    if kind == "k2":
        return 0.5 * d.square()
    if kind == "k3":
        neg = (-d).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)  # log(ref / pi)
        return (neg.exp() - neg - 1.0).clamp(-K3_CLAMP, K3_CLAMP)
    raise ValueError(f"unknown KL kind {kind!r}; choose one of {', '.join(KL_KINDS)}")


# ----------------------------------------------------------------------------------------------------
# aggregation


def masked_mean(values: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Mean of `values` where `mask` is nonzero (weighted by a float mask); 0, not NaN, when empty.

    Args:
        values: any shape; mask: same shape, bool or float. dim: None for the mean over everything.
    """
    m = mask.to(values.dtype)
    s = torch.where(m != 0, values * m, 0.0)
    if dim is None:
        return s.sum() / m.sum().clamp(min=1.0)
    return s.sum(dim) / m.sum(dim).clamp(min=1.0)


def aggregate_loss(
    loss_mat: Tensor,
    mask: Tensor,
    mode: str = "token-mean",
    normalizer: float | Tensor | None = None,
) -> Tensor:
    """Reduce a per-token loss (B, T) to a scalar. Masked positions never contribute (NaN-safe).

    With s_b = sum_t m_bt l_bt, n_b = sum_t m_bt and S = the sequences with n_b > 0:
      - "token-mean":              sum_b s_b / sum_b n_b  (every token weighs the same; DAPO, verl default)
      - "seq-mean-token-sum":      sum_b s_b / |S|
      - "seq-mean-token-mean":     sum_{b in S} (s_b / n_b) / |S|  (original GRPO; every sequence the same)
      - "seq-mean-token-sum-norm": sum_b s_b / (|S| * T), T = loss_mat.shape[-1] (Dr. GRPO: a constant
        length normalizer; pass `normalizer` = |S| * max response length to make it truly constant)

    Sequences whose mask is all zero add nothing and are not counted in |S|, so padding rows (e.g. added
    to even out ranks) change nothing. An empty batch gives 0.

    `normalizer` replaces the whole denominator above: sum_b n_b, |S|, |S| or |S| * T. Use it with
    gradient accumulation and data parallelism: give every micro-batch of a mini-batch, on every rank, the
    denominator of the whole mini-batch (its valid tokens; its non-empty sequences; those times a fixed
    length L for "seq-mean-token-sum-norm"); the micro-batch losses then add up exactly to the loss of the
    whole mini-batch, so the update does not depend on how the mini-batch is split (dividing each
    micro-batch by its own count and averaging does; TRL issue #3021). Summing the micro-batch gradients
    is then correct: do not also divide by the number of micro-batches, and undo any 1/world_size
    averaging the data-parallel gradient reduction applies.

    Args:
        loss_mat: (B, T) per-token loss.
        mask: (B, T) bool or 0/1 float.
        mode: one of AGG_MODES.
        normalizer: None (this batch's own denominator) or the mini-batch's, a float or 0-dim tensor.

    Returns:
        0-dim tensor, differentiable with respect to `loss_mat`.
    """
    if loss_mat.shape != mask.shape or loss_mat.dim() != 2:
        raise ValueError(f"loss_mat and mask must both be (B, T), got {loss_mat.shape}, {mask.shape}")
    m = mask.to(loss_mat.dtype)
    masked = torch.where(m != 0, loss_mat * m, 0.0)
    if mode == "token-mean":
        denom = m.sum().clamp(min=1.0) if normalizer is None else normalizer
        return masked.sum() / denom
    if mode not in AGG_MODES:
        raise ValueError(f"unknown aggregation mode {mode!r}; choose one of {', '.join(AGG_MODES)}")
    seq_sum = masked.sum(-1)  # (B,)
    n_tok = m.sum(-1)  # (B,)
    n_seq = (n_tok > 0).sum().clamp(min=1).to(loss_mat.dtype)
    if mode == "seq-mean-token-sum":
        num, denom = seq_sum.sum(), n_seq
    elif mode == "seq-mean-token-mean":
        num, denom = (seq_sum / n_tok.clamp(min=1.0)).sum(), n_seq
    else:  # "seq-mean-token-sum-norm"
        num, denom = seq_sum.sum(), n_seq * max(loss_mat.shape[-1], 1)
    return num / (denom if normalizer is None else normalizer)


# ----------------------------------------------------------------------------------------------------
# policy loss


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


# ----------------------------------------------------------------------------------------------------
# log-probs and entropy from logits, in chunks


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """fp32 for bf16/fp16/fp32 logits, fp64 for fp64 (used by tests against exact references)."""
    return torch.promote_types(dtype, torch.float32)


def _chunked_rows(fn: Callable[..., Tensor], logits: Tensor, extra: Tensor | None, chunk_size: int) -> Tensor:
    """Apply `fn(logits_chunk (n, V)[, extra_chunk (n,)]) -> (n,)` over the token positions of `logits`
    (..., V) in chunks of `chunk_size` rows, and return (...,). Under autograd each chunk is
    checkpointed, so only one chunk's fp32 intermediates exist at a time in backward too."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    lead = logits.shape[:-1]
    if logits.dim() > 2 and not logits.is_contiguous():
        # e.g. logits[:, :-1]: flattening would copy the whole tensor; go row by row instead
        rows = [
            _chunked_rows(fn, logits[i], None if extra is None else extra[i], chunk_size)
            for i in range(logits.shape[0])
        ]
        return torch.stack(rows) if rows else logits.new_zeros(lead, dtype=_compute_dtype(logits.dtype))
    flat = logits.reshape(-1, logits.shape[-1])
    flat_extra = None if extra is None else extra.reshape(-1)
    use_ckpt = torch.is_grad_enabled() and logits.requires_grad
    outs = []
    for start in range(0, flat.shape[0], chunk_size):
        args = [flat[start : start + chunk_size]]
        if flat_extra is not None:
            args.append(flat_extra[start : start + chunk_size])
        if use_ckpt:
            outs.append(checkpoint(fn, *args, use_reentrant=False, preserve_rng_state=False))
        else:
            outs.append(fn(*args))
    if not outs:
        return logits.new_zeros(lead, dtype=_compute_dtype(logits.dtype))
    return torch.cat(outs).reshape(lead)


def token_logprobs_from_logits(
    logits: Tensor,
    token_ids: Tensor,
    chunk_size: int = DEFAULT_CHUNK,
    temperature: float = 1.0,
) -> Tensor:
    """log softmax(logits / temperature)[token_ids], in fp32, `chunk_size` token positions at a time.

    No shifting: `logits[..., t, :]` must be the prediction for `token_ids[..., t]` (for a causal LM
    pass `logits[:, :-1]` and `input_ids[:, 1:]`). Sample with the same temperature as the rollout.

    Args:
        logits: (B, T, V) (or (N, V)), any float dtype (bf16 is upcast per chunk).
        token_ids: (B, T) (or (N,)) integer ids.

    Returns:
        (B, T) fp32 (fp64 for fp64 logits) log-probs, differentiable with respect to `logits`.
    """
    if token_ids.shape != logits.shape[:-1]:
        raise ValueError(f"token_ids {token_ids.shape} must match logits {logits.shape} without the last dim")

    def fn(chunk: Tensor, ids: Tensor) -> Tensor:
        z = chunk.to(_compute_dtype(chunk.dtype))
        if temperature != 1.0:
            z = z / temperature
        return z.gather(-1, ids.long().unsqueeze(-1)).squeeze(-1) - torch.logsumexp(z, dim=-1)

    return _chunked_rows(fn, logits, token_ids, chunk_size)


def entropy_from_logits(
    logits: Tensor,
    mask: Tensor | None = None,
    chunk_size: int = DEFAULT_CHUNK,
    temperature: float = 1.0,
) -> Tensor:
    """Entropy of softmax(logits / temperature) at each position, in fp32, `chunk_size` positions at a time.

    H = logsumexp(z) - sum_v softmax(z)_v z_v.

    Args:
        logits: (B, T, V) (or (N, V)), any float dtype.
        mask: optional (B, T); positions where it is 0 get entropy 0.

    Returns:
        (B, T) fp32 (fp64 for fp64 logits) per-token entropy, differentiable with respect to `logits`.
        For the usual scalar metric use `masked_entropy_mean`.
    """

    def fn(chunk: Tensor) -> Tensor:
        z = chunk.to(_compute_dtype(chunk.dtype))
        if temperature != 1.0:
            z = z / temperature
        lse = torch.logsumexp(z, dim=-1)
        p_z = torch.softmax(z, dim=-1) * z.masked_fill(z == float("-inf"), 0.0)  # 0 * -inf is 0 here
        return lse - p_z.sum(-1)

    ent = _chunked_rows(fn, logits, None, chunk_size)
    if mask is not None:
        ent = torch.where(mask != 0, ent, 0.0)
    return ent


def masked_entropy_mean(
    logits: Tensor, mask: Tensor, chunk_size: int = DEFAULT_CHUNK, temperature: float = 1.0
) -> Tensor:
    """Mean entropy over the positions where `mask` (B, T) is nonzero; 0-dim fp32 tensor, 0 when empty."""
    return masked_mean(entropy_from_logits(logits, mask, chunk_size, temperature), mask)


# ----------------------------------------------------------------------------------------------------
# the lm_head and the log-probs in one step: the trainer's head


def _head_stats(logits: Tensor, token_ids: Tensor, temperature: float, with_entropy: bool):
    """(log-probs, logsumexp, entropy or None) of logits (n, V) / temperature at token_ids (n,), fp32."""
    z = logits.to(_compute_dtype(logits.dtype))
    if temperature != 1.0:
        z = z / temperature
    lse = torch.logsumexp(z, dim=-1)
    lp = z.gather(-1, token_ids.unsqueeze(-1)).squeeze(-1) - lse
    if not with_entropy:
        return lp, lse, None
    p = torch.exp(z - lse.unsqueeze(-1))
    # a -inf logit has p = 0: counted as 0, not as 0 * -inf
    return lp, lse, lse - (p * z.clamp_min(torch.finfo(z.dtype).min)).sum(-1)


def _head_logits_grad(
    logits: Tensor, token_ids: Tensor, lse: Tensor, grad_lp: Tensor, temperature: float
) -> Tensor:
    """d(sum grad_lp * lp) / d logits = grad_lp * (onehot(token_ids) - softmax(z)) / temperature, (n, V) in
    the logits' dtype."""
    z = logits.to(lse.dtype)
    if temperature != 1.0:
        z = z / temperature
    g = grad_lp.unsqueeze(-1) / temperature
    onehot = torch.arange(z.shape[-1], device=z.device) == token_ids.unsqueeze(-1)
    return (g * (onehot.to(z.dtype) - torch.exp(z - lse.unsqueeze(-1)))).to(logits.dtype)


@functools.cache
def _compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
    """fn through torch.compile, once per process: the compiled head functions read the (n, V) logits once
    or twice instead of writing and reading fp32 copies."""
    return torch.compile(fn, dynamic=True)


class _LinearTokenLogprobs(torch.autograd.Function):
    """lp = log softmax((hidden @ weight.T + bias) / temperature)[token_ids], keeping only hidden and the
    logsumexp for backward (the logits are computed again there): the memory of a checkpointed head
    without recomputing its softmax twice."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, token_ids, temperature, with_entropy, compiled):
        logits = torch.nn.functional.linear(hidden, weight, bias)
        stats = _compiled(_head_stats) if compiled else _head_stats
        lp, lse, ent = stats(logits, token_ids, temperature, with_entropy)
        ctx.save_for_backward(hidden, weight, bias, token_ids, lse)
        ctx.temperature, ctx.compiled = temperature, compiled
        if ent is None:
            ent = torch.zeros_like(lp)
        ctx.mark_non_differentiable(ent)
        return lp, ent

    @staticmethod
    def backward(ctx, grad_lp, _grad_ent):
        hidden, weight, bias, token_ids, lse = ctx.saved_tensors
        logits = torch.nn.functional.linear(hidden, weight, bias)
        logits_grad = _compiled(_head_logits_grad) if ctx.compiled else _head_logits_grad
        grad = logits_grad(logits, token_ids, lse, grad_lp, ctx.temperature)
        del logits
        grad_hidden = grad @ weight if ctx.needs_input_grad[0] else None
        grad_weight = grad.t() @ hidden if ctx.needs_input_grad[1] else None
        grad_bias = grad.sum(0) if bias is not None and ctx.needs_input_grad[2] else None
        return grad_hidden, grad_weight, grad_bias, None, None, None, None


def linear_token_logprobs(
    hidden: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    token_ids: Tensor,
    temperature: float = 1.0,
    with_entropy: bool = False,
    compiled: bool = False,
) -> tuple[Tensor, Tensor]:
    """Log-probs of token_ids under the linear head: log softmax((hidden @ weight.T + bias) / temperature),
    differentiable with respect to hidden, weight and bias, and the entropy of the same distribution as a
    metric (not differentiable; zeros unless `with_entropy`; an entropy bonus needs `entropy_from_logits`).

    Backward computes the logits again from the saved hidden states, as a checkpointed head would, but
    its softmax only once. `compiled` runs the softmax work through torch.compile (on GPU: the logits
    are read, not copied to fp32).

    Args:
        hidden: (n, H) in the head's dtype; weight: (V, H); bias: (V,) or None; token_ids: (n,).

    Returns:
        (log-probs, entropy), each (n,) fp32 (fp64 for fp64 inputs).
    """
    if token_ids.shape != hidden.shape[:-1] or hidden.dim() != 2:
        raise ValueError(
            f"hidden {tuple(hidden.shape)} must be (n, H) and token_ids {tuple(token_ids.shape)} (n,)"
        )
    return _LinearTokenLogprobs.apply(
        hidden, weight, bias, token_ids.long(), temperature, with_entropy, compiled
    )
