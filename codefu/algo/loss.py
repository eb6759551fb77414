"""The RL loss of one micro-batch, whole: the aggregation mode's normaliser, its per-sequence token weights,
the clipped policy term, the KL and entropy terms and their sum. Pure functions of tensors; the trainer
only runs forward, backward and the optimizer step around `rl_loss`.

Why a mini-batch normaliser: every micro-batch of a mini-batch, on every rank, divides by the count of the
whole mini-batch, so the micro-batch losses add up to the mini-batch loss whatever the split (see
`aggregate_loss`)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from codefu.algo.aggregation import aggregate_loss
from codefu.algo.choices import POLICY_LOSSES
from codefu.algo.kl import kl_penalty
from codefu.algo.policy_losses import cispo_loss, gspo_loss, policy_loss
from codefu.algo.rollout_correction import rollout_correction_weights

#: The losses of POLICY_LOSSES besides PPO's (which adds a dual clip), all called alike.
_OTHER_LOSSES = {"gspo": gspo_loss, "cispo": cispo_loss}


@dataclass(frozen=True)
class LossSettings:
    """The loss knobs (the trainer's `clip_low`, `clip_high`, `dual_clip`, `loss_agg`, `kl_coef`, `kl_kind`,
    `entropy_coef`, `norm_length`, `policy_loss`, `rollout_correction`, `rollout_correction_threshold`)."""

    clip_low: float = 0.2
    clip_high: float = 0.2
    dual_clip: float | None = None
    loss_agg: str = "token-mean"
    kl_coef: float = 0.0
    kl_kind: str = "k3"
    entropy_coef: float = 0.0
    norm_length: int | None = None  # Dr. GRPO's constant L; None: the padded batch length
    policy_loss: str = "ppo"  # one of POLICY_LOSSES
    rollout_correction: str = "none"  # one of codefu.algo.choices.ROLLOUT_CORRECTIONS
    rollout_correction_threshold: float = 2.0

    @property
    def aggregation(self) -> str:
        """The `aggregate_loss` mode the loss runs in. Dr. GRPO's constant-length mode is
        seq-mean-token-sum with the normaliser multiplied by L; seq-mean-token-mean is seq-mean-token-sum
        over tokens weighted 1 / (their row's response tokens), counted over the whole row: with sequence
        parallelism a rank sees only part of each row."""
        sums = ("seq-mean-token-sum-norm", "seq-mean-token-mean")
        return "seq-mean-token-sum" if self.loss_agg in sums else self.loss_agg


def loss_normalizer(response_mask: Tensor, settings: LossSettings) -> float:
    """The mini-batch's denominator (response_mask: all its rows, [B, T]): valid tokens for token-mean,
    non-empty sequences for the sequence modes (times L for Dr. GRPO's seq-mean-token-sum-norm)."""
    resp = response_mask != 0
    if settings.aggregation == "token-mean":
        n = float(resp.sum())
    else:
        n = float((resp.sum(-1) > 0).sum())
        if settings.loss_agg == "seq-mean-token-sum-norm":
            n *= settings.norm_length or response_mask.shape[1]
    return max(n, 1.0)


def rl_loss(
    logprobs: Tensor,
    old_logprobs: Tensor,
    advantages: Tensor,
    mask: Tensor,
    row_tokens: Tensor,
    normalizer: float,
    settings: LossSettings,
    entropy: Tensor | None = None,
    ref_logprobs: Tensor | None = None,
    rollout_logprobs: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor | float]]:
    """(loss, parts) of one micro-batch.

    logprobs, old_logprobs, mask: [B, T] (mask: this rank's window of the response tokens); advantages:
    [B] or [B, T]; row_tokens: [B], each row's response tokens over the WHOLE row (for the per-sequence
    weights of seq-mean-token-mean); entropy, ref_logprobs: [B, T] or None (needed when entropy_coef or
    kl_coef is set); rollout_logprobs: [B, T], the engine's, needed by a rollout correction: its
    importance weights (pi_old / pi_rollout, `rollout_correction_weights`) weigh the policy term only.
    parts: "pg", "kl", "entropy" (0-dim tensors, detached), policy_loss's metrics and, with a rollout
    correction, its metrics prefixed "rollout_is/".
    """
    if settings.loss_agg == "seq-mean-token-mean":
        mask = mask / row_tokens.clamp(min=1).to(mask.dtype).unsqueeze(-1)
    agg = settings.aggregation
    clips = (settings.clip_low, settings.clip_high)
    pg_mask, correction = mask, {}
    mode = settings.rollout_correction
    if mode != "none":
        if rollout_logprobs is None:
            raise ValueError(f"rollout_correction={mode!r} needs the rollout's log-probs")
        threshold = settings.rollout_correction_threshold
        weights, m = rollout_correction_weights(old_logprobs, rollout_logprobs, mask, mode, threshold)
        pg_mask = mask * weights.to(mask.dtype)
        correction = {f"rollout_is/{k}": v for k, v in m.items()}
    if settings.policy_loss == "ppo":
        dual = settings.dual_clip
        pg, metrics = policy_loss(
            logprobs, old_logprobs, advantages, pg_mask, *clips, dual, agg=agg, normalizer=normalizer
        )
    elif settings.policy_loss in _OTHER_LOSSES:
        loss_fn = _OTHER_LOSSES[settings.policy_loss]
        pg, metrics = loss_fn(logprobs, old_logprobs, advantages, pg_mask, *clips, agg, normalizer)
    else:
        raise ValueError(f"unknown policy loss {settings.policy_loss!r}; choose one of {POLICY_LOSSES}")
    zero = torch.zeros((), dtype=pg.dtype, device=pg.device)
    ent = aggregate_loss(entropy, mask, agg, normalizer) if entropy is not None else zero
    loss = pg - settings.entropy_coef * ent if settings.entropy_coef else pg
    kl = zero
    if settings.kl_coef > 0:
        if ref_logprobs is None:
            raise ValueError("kl_coef > 0 needs the reference policy's log-probs")
        kl = aggregate_loss(kl_penalty(logprobs, ref_logprobs, settings.kl_kind), mask, agg, normalizer)
        loss = loss + settings.kl_coef * kl
    return loss, {"pg": pg.detach(), "kl": kl.detach(), "entropy": ent.detach(), **metrics, **correction}
