"""The learning math: pure tensor functions (advantages, KL estimators, losses, log-probs, entropy)."""

from codefu.lazy import lazy_exports

#: each public name -> its module (loaded on first use: the package imports no torch until then)
_EXPORTS = {
    "AGG_MODES": "choices",
    "DEFAULT_CHUNK": "logprobs",
    "ESTIMATORS": "estimators",
    "KL_KINDS": "choices",
    "LossSettings": "loss",
    "POLICY_LOSSES": "choices",
    "aggregate_loss": "aggregation",
    "cispo_loss": "policy_losses",
    "entropy_from_logits": "logprobs",
    "explained_variance": "value",
    "gae": "advantages",
    "group_advantages": "advantages",
    "gspo_loss": "policy_losses",
    "kl_penalty": "kl",
    "linear_token_logprobs": "logprobs",
    "loss_normalizer": "loss",
    "masked_entropy_mean": "logprobs",
    "masked_mean": "aggregation",
    "outcome_token_rewards": "shaping",
    "overlong_penalty": "shaping",
    "policy_loss": "policy_losses",
    "reinforce_pp_advantages": "advantages",
    "rl_loss": "loss",
    "rloo_advantages": "advantages",
    "sequence_advantages": "estimators",
    "token_logprobs_from_logits": "logprobs",
    "value_loss": "value",
}
__getattr__, __all__ = lazy_exports(__name__, _EXPORTS)
