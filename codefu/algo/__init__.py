"""The learning math: pure tensor functions (advantages, KL estimators, losses, log-probs, entropy)."""

from codefu.algo.advantages import gae, group_advantages, reinforce_pp_advantages, rloo_advantages
from codefu.algo.aggregation import AGG_MODES, aggregate_loss, masked_mean
from codefu.algo.estimators import ESTIMATORS, sequence_advantages
from codefu.algo.kl import KL_KINDS, kl_penalty
from codefu.algo.logprobs import (
    DEFAULT_CHUNK,
    entropy_from_logits,
    linear_token_logprobs,
    masked_entropy_mean,
    token_logprobs_from_logits,
)
from codefu.algo.loss import POLICY_LOSSES, LossSettings, loss_normalizer, rl_loss
from codefu.algo.policy_losses import cispo_loss, gspo_loss, policy_loss
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
