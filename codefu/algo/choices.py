"""The names a run config chooses among for the learning math: the loss aggregation, the KL estimator,
the policy loss and the rollout correction. Torch-free, so that a config loads and is checked without
torch; the modules that implement them refuse any other name, and tests/unit/test_algo_variants.py runs
every name here through the loss."""

from __future__ import annotations

#: codefu.algo.aggregation's modes (docs/algo.md, "Algorithm conventions")
AGG_MODES: tuple[str, ...] = (
    "token-mean",
    "seq-mean-token-sum",
    "seq-mean-token-mean",
    "seq-mean-token-sum-norm",
)

#: codefu.algo.kl's estimators
KL_KINDS: tuple[str, ...] = ("k1", "k2", "k3")

#: The policy-gradient losses `trainer.policy_loss` chooses from (docs/algo.md): codefu.algo.loss's
POLICY_LOSSES: tuple[str, ...] = ("ppo", "gspo", "cispo")

#: the modes codefu.algo.rollout_correction's weights take; "none" means no correction
ROLLOUT_CORRECTIONS: tuple[str, ...] = (
    "none",
    "token_truncate",
    "token_mask",
    "sequence_truncate",
    "sequence_mask",
)
