"""The learning math: pure tensor functions (advantages, KL estimators, losses, log-probs, entropy)."""

from codefu.algo.advantages import gae, reinforce_pp_advantages, rloo_advantages
from codefu.algo.estimators import ESTIMATORS, sequence_advantages
from codefu.algo.grpo import (
    AGG_MODES,
    DEFAULT_CHUNK,
    KL_KINDS,
    aggregate_loss,
    entropy_from_logits,
    group_advantages,
    kl_penalty,
    linear_token_logprobs,
    masked_entropy_mean,
    masked_mean,
    policy_loss,
    token_logprobs_from_logits,
)
from codefu.algo.loss import POLICY_LOSSES, LossSettings, loss_normalizer, rl_loss
from codefu.algo.policy_losses import cispo_loss, gspo_loss
from codefu.algo.shaping import outcome_token_rewards, overlong_penalty
from codefu.algo.value_loss import explained_variance, value_loss

__all__ = [
    "AGG_MODES",
    "DEFAULT_CHUNK",
    "ESTIMATORS",
    "KL_KINDS",
    "LossSettings",
    "POLICY_LOSSES",
    "aggregate_loss",
    "cispo_loss",
    "entropy_from_logits",
    "explained_variance",
    "gae",
    "group_advantages",
    "gspo_loss",
    "kl_penalty",
    "linear_token_logprobs",
    "loss_normalizer",
    "masked_entropy_mean",
    "masked_mean",
    "outcome_token_rewards",
    "overlong_penalty",
    "policy_loss",
    "reinforce_pp_advantages",
    "rl_loss",
    "rloo_advantages",
    "sequence_advantages",
    "token_logprobs_from_logits",
    "value_loss",
]
