"""Importance weights for the rollout-trainer mismatch: truncated (TIS) or masked (MIS) importance
sampling, per token or per sequence.

The engine that samples (bf16 kernels, another attention, CUDA graphs) and the trainer that learns compute
slightly different probabilities for the same weights, so the samples come from pi_rollout while the
gradient assumes pi_trainer. The correction weighs each token's policy-gradient term by
w = pi_trainer / pi_rollout, bounded by a threshold C:

    token_truncate      w_t = min(rho_t, C)                                    (TIS, Yao et al. 2025)
    token_mask          w_t = rho_t if 1/C <= rho_t <= C else 0                (MIS, token level)
    sequence_truncate   w_t = min(rho_seq, C)        rho_seq = prod_t rho_t     (one weight per sequence)
    sequence_mask       w_t = rho_seq if 1/C <= rho_seq <= C else 0            (MIS, sequence level)

with rho_t = exp(log pi_trainer(y_t) - log pi_rollout(y_t)). The weights are constants (no gradient). Where
the sources and verl's / ms-swift's conventions differ from these, docs/algo.md says so.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from codefu.algo.choices import ROLLOUT_CORRECTIONS

#: |log rho| is clamped to this before exp (a sequence's summed log-ratio can reach thousands)
_LOG_CLAMP = 30.0
#: bucket edges of the logged ratio histogram (per token)
RATIO_EDGES = (0.5, 0.8, 1.25, 2.0)


def rollout_correction_weights(
    trainer_logprobs: Tensor, rollout_logprobs: Tensor, mask: Tensor, mode: str, threshold: float
) -> tuple[Tensor, dict[str, float]]:
    """(weights, metrics): weights (B, T) float32 in [0, max(C, 1)]-ish per the module docstring, 1 where
    `mask` is 0 (they multiply a mask there); metrics over the valid tokens:
    "weight_mean", "truncated_frac" (weights capped at C), "masked_frac" (weights set to 0),
    "log_ratio_mean" (mean log rho_t: the mismatch's k1 KL), and the ratio histogram "ratio_frac_<lo>_<hi>"
    over RATIO_EDGES (per token, before any bound).

    Args:
        trainer_logprobs, rollout_logprobs: (B, T) log-probs of the sampled tokens under each.
        mask: (B, T) bool or 0/1, the response tokens. Masked positions never matter (NaN-safe).
        mode: one of ROLLOUT_CORRECTIONS ("none": all ones, and the metrics).
        threshold: C > 1 (finite).
    """
    if mode not in ROLLOUT_CORRECTIONS:
        choices = ", ".join(ROLLOUT_CORRECTIONS)
        raise ValueError(f"unknown rollout correction {mode!r}; choose one of {choices}")
    if not (threshold > 1.0 and math.isfinite(threshold)):
        raise ValueError(f"threshold must be a finite number > 1, got {threshold!r}")
    if not trainer_logprobs.shape == rollout_logprobs.shape == mask.shape or mask.dim() != 2:
        raise ValueError(
            "trainer_logprobs, rollout_logprobs and mask must all be (B, T), got "
            f"{tuple(trainer_logprobs.shape)}, {tuple(rollout_logprobs.shape)}, {tuple(mask.shape)}"
        )
    on = mask != 0
    log_rho = torch.where(on, trainer_logprobs.detach().double() - rollout_logprobs.detach().double(), 0.0)
    rho = log_rho.clamp(-_LOG_CLAMP, _LOG_CLAMP).exp()
    if mode.startswith("sequence"):
        seq = log_rho.sum(-1, keepdim=True).clamp(-_LOG_CLAMP, _LOG_CLAMP).exp()  # (B, 1)
        base = seq.expand_as(rho)
    else:
        base = rho
    lo, hi = 1.0 / threshold, threshold
    if mode.endswith("truncate"):
        weights, truncated, masked = base.clamp(max=hi), base > hi, torch.zeros_like(on)
    elif mode.endswith("mask"):
        keep = (base >= lo) & (base <= hi)
        weights, truncated, masked = torch.where(keep, base, 0.0), torch.zeros_like(on), ~keep
    else:
        weights, truncated, masked = torch.ones_like(rho), torch.zeros_like(on), torch.zeros_like(on)
    weights = torch.where(on, weights, 1.0)
    n = max(int(on.sum()), 1)
    metrics = {
        "weight_mean": float(weights[on].sum()) / n,
        "truncated_frac": float((truncated & on).sum()) / n,
        "masked_frac": float((masked & on).sum()) / n,
        "log_ratio_mean": float(log_rho[on].sum()) / n,
    }
    edges = (0.0, *RATIO_EDGES, math.inf)
    r = rho[on]
    for a, b in zip(edges[:-1], edges[1:], strict=True):
        metrics[f"ratio_frac_{a:g}_{b:g}"] = float(((r >= a) & (r < b)).sum()) / n
    return weights.float(), metrics
