"""Log-probs and entropy of tokens from logits, computed in fp32 a chunk of token positions at a time, and
the trainer's head: the lm_head and the log-probs in one autograd function that keeps no logits for
backward.

Shapes: `B` sequences, `T` token positions, `V` vocabulary; the head takes `n` positions of hidden size
`H`. A `mask` is `(B, T)`, bool or 0/1 float.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor
from torch.utils.checkpoint import checkpoint

from codefu.algo.aggregation import masked_mean

#: Default number of token positions per chunk in the log-prob/entropy functions: with a 150k vocabulary
#: one fp32 chunk is 1024 * 151936 * 4 B = 0.62 GB.
DEFAULT_CHUNK = 1024


# ----------------------------------------------------------------------------------------------------
# log-probs and entropy from logits, in chunks


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """fp32 for bf16/fp16/fp32 logits, fp64 for fp64 (used by tests against exact references)."""
    return torch.promote_types(dtype, torch.float32)


def _chunked_rows(fn: Callable[..., Tensor], logits: Tensor, extra: Tensor | None, chunk_size: int) -> Tensor:
    """Apply `fn(logits_chunk (n, V)[, extra_chunk (n,)]) -> (n,)` over the token positions of `logits`
    (..., V) in chunks of `chunk_size` rows, and return (...,). Under autograd each chunk is
    checkpointed, so only one chunk's fp32 intermediates exist at a time in backward too."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    lead = logits.shape[:-1]
    if logits.dim() > 2 and not logits.is_contiguous():
        # e.g. logits[:, :-1]: flattening would copy the whole tensor; go row by row instead
        rows = [
            _chunked_rows(fn, logits[i], None if extra is None else extra[i], chunk_size)
            for i in range(logits.shape[0])
        ]
        return torch.stack(rows) if rows else logits.new_zeros(lead, dtype=_compute_dtype(logits.dtype))
    flat = logits.reshape(-1, logits.shape[-1])
    flat_extra = None if extra is None else extra.reshape(-1)
    use_ckpt = torch.is_grad_enabled() and logits.requires_grad
    outs = []
    for start in range(0, flat.shape[0], chunk_size):
        args = [flat[start : start + chunk_size]]
        if flat_extra is not None:
            args.append(flat_extra[start : start + chunk_size])
        if use_ckpt:
            outs.append(checkpoint(fn, *args, use_reentrant=False, preserve_rng_state=False))
        else:
            outs.append(fn(*args))
    if not outs:
        return logits.new_zeros(lead, dtype=_compute_dtype(logits.dtype))
    return torch.cat(outs).reshape(lead)


def token_logprobs_from_logits(
    logits: Tensor,
    token_ids: Tensor,
    chunk_size: int = DEFAULT_CHUNK,
    temperature: float = 1.0,
) -> Tensor:
    """log softmax(logits / temperature)[token_ids], in fp32, `chunk_size` token positions at a time.

    No shifting: `logits[..., t, :]` must be the prediction for `token_ids[..., t]` (for a causal LM
    pass `logits[:, :-1]` and `input_ids[:, 1:]`). Sample with the same temperature as the rollout.

    Args:
        logits: (B, T, V) (or (N, V)), any float dtype (bf16 is upcast per chunk).
        token_ids: (B, T) (or (N,)) integer ids.

    Returns:
        (B, T) fp32 (fp64 for fp64 logits) log-probs, differentiable with respect to `logits`.
    """
    if token_ids.shape != logits.shape[:-1]:
        raise ValueError(f"token_ids {token_ids.shape} must match logits {logits.shape} without the last dim")

    def fn(chunk: Tensor, ids: Tensor) -> Tensor:
        z = chunk.to(_compute_dtype(chunk.dtype))
        if temperature != 1.0:
            z = z / temperature
        return z.gather(-1, ids.long().unsqueeze(-1)).squeeze(-1) - torch.logsumexp(z, dim=-1)

    return _chunked_rows(fn, logits, token_ids, chunk_size)


def entropy_from_logits(
    logits: Tensor,
    mask: Tensor | None = None,
    chunk_size: int = DEFAULT_CHUNK,
    temperature: float = 1.0,
) -> Tensor:
    """Entropy of softmax(logits / temperature) at each position, in fp32, `chunk_size` positions at a time.

    H = logsumexp(z) - sum_v softmax(z)_v z_v.

    Args:
        logits: (B, T, V) (or (N, V)), any float dtype.
        mask: optional (B, T); positions where it is 0 get entropy 0.

    Returns:
        (B, T) fp32 (fp64 for fp64 logits) per-token entropy, differentiable with respect to `logits`.
        For the usual scalar metric use `masked_entropy_mean`.
    """

    def fn(chunk: Tensor) -> Tensor:
        z = chunk.to(_compute_dtype(chunk.dtype))
        if temperature != 1.0:
            z = z / temperature
        lse = torch.logsumexp(z, dim=-1)
        p_z = torch.softmax(z, dim=-1) * z.masked_fill(z == float("-inf"), 0.0)  # 0 * -inf is 0 here
        return lse - p_z.sum(-1)

    ent = _chunked_rows(fn, logits, None, chunk_size)
    if mask is not None:
        ent = torch.where(mask != 0, ent, 0.0)
    return ent


def masked_entropy_mean(
    logits: Tensor, mask: Tensor, chunk_size: int = DEFAULT_CHUNK, temperature: float = 1.0
) -> Tensor:
    """Mean entropy over the positions where `mask` (B, T) is nonzero; 0-dim fp32 tensor, 0 when empty."""
    return masked_mean(entropy_from_logits(logits, mask, chunk_size, temperature), mask)


# ----------------------------------------------------------------------------------------------------
# the lm_head and the log-probs in one step: the trainer's head


def _head_stats(logits: Tensor, token_ids: Tensor, temperature: float, with_entropy: bool):
    """(log-probs, logsumexp, entropy or None) of logits (n, V) / temperature at token_ids (n,), fp32."""
    z = logits.to(_compute_dtype(logits.dtype))
    if temperature != 1.0:
        z = z / temperature
    lse = torch.logsumexp(z, dim=-1)
    lp = z.gather(-1, token_ids.unsqueeze(-1)).squeeze(-1) - lse
    if not with_entropy:
        return lp, lse, None
    p = torch.exp(z - lse.unsqueeze(-1))
    # a -inf logit has p = 0: counted as 0, not as 0 * -inf
    return lp, lse, lse - (p * z.clamp_min(torch.finfo(z.dtype).min)).sum(-1)


def _head_logits_grad(
    logits: Tensor, token_ids: Tensor, lse: Tensor, grad_lp: Tensor, temperature: float
) -> Tensor:
    """d(sum grad_lp * lp) / d logits = grad_lp * (onehot(token_ids) - softmax(z)) / temperature, (n, V) in
    the logits' dtype."""
    z = logits.to(lse.dtype)
    if temperature != 1.0:
        z = z / temperature
    g = grad_lp.unsqueeze(-1) / temperature
    onehot = torch.arange(z.shape[-1], device=z.device) == token_ids.unsqueeze(-1)
    return (g * (onehot.to(z.dtype) - torch.exp(z - lse.unsqueeze(-1)))).to(logits.dtype)


@functools.cache
def _compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
    """fn through torch.compile, once per process: the compiled head functions read the (n, V) logits once
    or twice instead of writing and reading fp32 copies."""
    return torch.compile(fn, dynamic=True)


class _LinearTokenLogprobs(torch.autograd.Function):
    """lp = log softmax((hidden @ weight.T + bias) / temperature)[token_ids], keeping only hidden and the
    logsumexp for backward (the logits are computed again there): the memory of a checkpointed head
    without recomputing its softmax twice."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, token_ids, temperature, with_entropy, compiled):
        logits = torch.nn.functional.linear(hidden, weight, bias)
        stats = _compiled(_head_stats) if compiled else _head_stats
        lp, lse, ent = stats(logits, token_ids, temperature, with_entropy)
        ctx.save_for_backward(hidden, weight, bias, token_ids, lse)
        ctx.temperature, ctx.compiled = temperature, compiled
        if ent is None:
            ent = torch.zeros_like(lp)
        ctx.mark_non_differentiable(ent)
        return lp, ent

    @staticmethod
    def backward(ctx, grad_lp, _grad_ent):
        hidden, weight, bias, token_ids, lse = ctx.saved_tensors
        logits = torch.nn.functional.linear(hidden, weight, bias)
        logits_grad = _compiled(_head_logits_grad) if ctx.compiled else _head_logits_grad
        grad = logits_grad(logits, token_ids, lse, grad_lp, ctx.temperature)
        del logits
        grad_hidden = grad @ weight if ctx.needs_input_grad[0] else None
        grad_weight = grad.t() @ hidden if ctx.needs_input_grad[1] else None
        grad_bias = grad.sum(0) if bias is not None and ctx.needs_input_grad[2] else None
        return grad_hidden, grad_weight, grad_bias, None, None, None, None


def linear_token_logprobs(
    hidden: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    token_ids: Tensor,
    temperature: float = 1.0,
    with_entropy: bool = False,
    compiled: bool = False,
) -> tuple[Tensor, Tensor]:
    """Log-probs of token_ids under the linear head: log softmax((hidden @ weight.T + bias) / temperature),
    differentiable with respect to hidden, weight and bias, and the entropy of the same distribution as a
    metric (not differentiable; zeros unless `with_entropy`; an entropy bonus needs `entropy_from_logits`).

    Backward computes the logits again from the saved hidden states, as a checkpointed head would, but
    its softmax only once. `compiled` runs the softmax work through torch.compile (on GPU: the logits
    are read, not copied to fp32).

    Args:
        hidden: (n, H) in the head's dtype; weight: (V, H); bias: (V,) or None; token_ids: (n,).

    Returns:
        (log-probs, entropy), each (n,) fp32 (fp64 for fp64 inputs).
    """
    if token_ids.shape != hidden.shape[:-1] or hidden.dim() != 2:
        raise ValueError(
            f"hidden {tuple(hidden.shape)} must be (n, H) and token_ids {tuple(token_ids.shape)} (n,)"
        )
    return _LinearTokenLogprobs.apply(
        hidden, weight, bias, token_ids.long(), temperature, with_entropy, compiled
    )
