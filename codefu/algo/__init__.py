"""The learning math: pure tensor functions (advantages, KL estimators, losses, log-probs, entropy)."""

from codefu.algo.grpo import (
    AGG_MODES,
    DEFAULT_CHUNK,
    KL_KINDS,
    aggregate_loss,
    entropy_from_logits,
    group_advantages,
    kl_penalty,
    masked_entropy_mean,
    masked_mean,
    policy_loss,
    token_logprobs_from_logits,
)
from codefu.algo.loss import LossSettings, loss_normalizer, rl_loss

__all__ = [
    "AGG_MODES",
    "DEFAULT_CHUNK",
    "KL_KINDS",
    "LossSettings",
    "aggregate_loss",
    "entropy_from_logits",
    "group_advantages",
    "kl_penalty",
    "loss_normalizer",
    "masked_entropy_mean",
    "masked_mean",
    "policy_loss",
    "rl_loss",
    "token_logprobs_from_logits",
]
