"""KL estimators: per-token estimates of KL(pi || pi_ref) from the log-probs of the sampled tokens (k1, k2,
k3), and the clamp any log-ratio of two policies gets before `exp` (here and in the policy losses).
Formulas in docs/algo.md, "Algorithm conventions".
"""

from __future__ import annotations

from torch import Tensor

from codefu.algo.choices import KL_KINDS

#: Log-ratios are clamped to this before `exp` (as verl), so a ratio is finite in fp32.
LOG_RATIO_CLAMP = 20.0
#: The k3 penalty is clamped to [-K3_CLAMP, K3_CLAMP] (verl's `low_var_kl`).
K3_CLAMP = 10.0


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
