"""Loss aggregation: the masked mean, and a per-token loss (B, T) reduced to a scalar in one of AGG_MODES,
optionally over the denominator of a whole mini-batch (`normalizer`). The modes and the normalizer are
written down with formulas in docs/algo.md, "Algorithm conventions".

A `mask` is `(B, T)`, bool or 0/1 float; positions where it is 0 never affect a result, even when the loss
there is NaN or inf.
"""

from __future__ import annotations

import torch
from torch import Tensor

from codefu.algo.choices import AGG_MODES


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
