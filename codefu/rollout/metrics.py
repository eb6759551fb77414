"""How far the rollout engine's log-probs are from the trainer's for the same tokens.

Both sides should compute log_softmax(logits / temperature)[token] (see codefu.rollout.types); they
differ by numerics (batching, padding, kernels, bf16 vs fp32, a quantised or faster rollout engine) or by
a bug (wrong temperature, stale weights after a sync). With d = trainer - rollout (the log importance
ratio log pi_train / pi_rollout), over the tokens where mask is true:

    logprob_diff_abs_mean   mean |d|
    logprob_diff_abs_max    max |d|
    logprob_diff_mean       mean d (signed: > 0 means the trainer finds the tokens likelier)
    logprob_ratio_dev       mean |exp(d) - 1|, the importance ratio's distance from 1 (vs the clip eps)
    logprob_kl_k3           mean exp(d) - 1 - d, the k3 estimate of KL(pi_rollout || pi_train) (>= 0)

All are 0 when the two agree exactly.
"""

from __future__ import annotations

import torch
from torch import Tensor


def logprob_mismatch(
    rollout_logprobs: Tensor, trainer_logprobs: Tensor, mask: Tensor, prefix: str = "rollout/"
) -> dict[str, float]:
    """rollout_logprobs, trainer_logprobs: (B, T) float; mask: (B, T) bool or 0/1, true on response tokens.

    Returns {prefix + name: float} for the names in the module docstring, plus `logprob_tokens` (the count);
    every value is 0.0 when the mask is empty."""
    if rollout_logprobs.shape != trainer_logprobs.shape or rollout_logprobs.shape != mask.shape:
        raise ValueError(
            f"shapes differ: rollout {tuple(rollout_logprobs.shape)}, "
            f"trainer {tuple(trainer_logprobs.shape)}, mask {tuple(mask.shape)}"
        )
    m = mask.bool()
    d = (trainer_logprobs.detach().double() - rollout_logprobs.detach().double())[m]
    names = ("diff_abs_mean", "diff_abs_max", "diff_mean", "ratio_dev", "kl_k3")
    if d.numel() == 0:
        out = dict.fromkeys((f"{prefix}logprob_{n}" for n in names), 0.0)
    else:
        values = (
            d.abs().mean(),
            d.abs().max(),
            d.mean(),
            (torch.exp(d) - 1).abs().mean(),
            (torch.exp(d) - 1 - d).mean(),
        )
        out = {f"{prefix}logprob_{n}": float(v) for n, v in zip(names, values, strict=True)}
    out[f"{prefix}logprob_tokens"] = float(d.numel())
    return out
