"""Advantage estimators: GRPO's group advantages, GAE (with a critic), RLOO and REINFORCE++.

Pure tensor functions: tensors in, tensors out, no state. The conventions (the group std, how a mask with
gaps is walked, what whitening divides by, what a group of one gets) are written down with formulas in
docs/algo.md, "Algorithm conventions" and "Other estimators and losses"; tests/unit/test_grpo.py and
tests/unit/test_algo_variants.py check them against numbers worked out by hand and against plain-loop
references.

Shapes: `B` sequences, `T` response tokens (padded), `N` samples. A `mask` is `(B, T)`, bool or 0/1
float; positions where it is 0 never affect a result, even when a reward or value there is NaN or inf, and
come out as 0. Everything is computed in float64, without gradient (advantages and returns are targets).

Masks with gaps (e.g. tool output inside a multi-turn response, masked out of the loss): the valid tokens
of a row are one trajectory, in order; masked positions are skipped, not treated as the end of the
episode. Discounting counts valid steps only, and the value after a row's last valid token is 0.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

#: Added to the variance before the square root when whitening (verl's `masked_whiten`).
WHITEN_EPS = 1e-8


def _check_rows(name: str, x: Tensor, mask: Tensor) -> None:
    if x.dim() != 2 or x.shape != mask.shape:
        raise ValueError(f"{name} and mask must both be (B, T), got {tuple(x.shape)}, {tuple(mask.shape)}")


def _check_unit(name: str, x: float) -> None:
    if not 0.0 <= x <= 1.0:  # also rejects NaN
        raise ValueError(f"{name} must be in [0, 1], got {x}")


def _out_dtype(*tensors: Tensor) -> torch.dtype:
    """The promoted floating dtype of the inputs (float32 for integer ones)."""
    dtype = torch.float32
    for t in tensors:
        dtype = torch.promote_types(dtype, t.dtype) if t.is_floating_point() else dtype
    return dtype


def _compact(on: Tensor) -> tuple[Tensor, Tensor]:
    """(order, valid): `x.gather(1, order)` puts each row's valid entries first, in their order (the gaps
    and padding after them); `valid` (float64, 0/1) marks the entries that are valid after the move."""
    order = torch.sort((~on).to(torch.int8), dim=1, stable=True).indices
    return order, on.gather(1, order).double()


def _scatter_back(compact: Tensor, order: Tensor, on: Tensor) -> Tensor:
    """The inverse of `_compact`'s gather, 0 where `on` is False."""
    out = torch.zeros_like(compact).scatter(1, order, compact)
    return torch.where(on, out, 0.0)


#: positions per block of `discounted_reverse_cumsum`: its Python loop runs T / this times
_SCAN_BLOCK = 256


def discounted_reverse_cumsum(x: Tensor, c: float) -> Tensor:
    """y_t = sum_{k >= t} c^(k - t) x_k along the last dim of (B, T) float64 `x`, for c in [0, 1]: the
    recurrence y_t = x_t + c * y_{t+1} of GAE and of discounted returns.

    In blocks of up to 256 positions, each in closed form (y_i = (sum_{j >= i} c^j x_j) / c^i inside the
    block, plus the next block's y carried in as c^(k - i) y_k), so a 20k-token response takes ~80 steps
    of Python instead of 20k; the block is short enough that c^block stays far above float64's smallest
    number (1e-200), so the division loses nothing."""
    T = x.shape[-1]
    if c == 0.0 or T == 0:
        return x.clone()
    block = _SCAN_BLOCK if c == 1.0 else max(1, min(_SCAN_BLOCK, int(200 / -math.log10(c))))
    out = torch.empty_like(x)
    carry = x.new_zeros(x.shape[:-1])  # y at the first position after the current block
    for start in range(((T - 1) // block) * block, -1, -block):
        blk = x[..., start : start + block]
        k = blk.shape[-1]
        powers = c ** torch.arange(k, dtype=x.dtype, device=x.device)  # c^0 .. c^(k-1)
        tail = (blk * powers).flip(-1).cumsum(-1).flip(-1)  # sum_{j >= i} c^j x_j
        y = tail / powers + carry.unsqueeze(-1) * (c * powers.flip(-1))  # + c^(k - i) * carry
        out[..., start : start + k] = y
        carry = y[..., 0]
    return out


def masked_whiten(values: Tensor, mask: Tensor) -> Tensor:
    """(x - mean) / sqrt(var + WHITEN_EPS) over the valid entries of the whole batch; 0 where masked.

    mean and var are over every entry where `mask` is nonzero, var Bessel-corrected (divides by n - 1, as
    verl's `masked_whiten`). With no valid entry everything is 0; with one, it is 0 (x - mean = 0; verl
    raises instead). Masked entries may hold NaN or inf. Computed in float64, returned in float64.
    """
    if values.shape != mask.shape:
        raise ValueError(f"values and mask differ in shape: {tuple(values.shape)}, {tuple(mask.shape)}")
    on = mask != 0
    x = torch.where(on, values.double(), 0.0)
    n = on.sum().double()
    mean = x.sum() / n.clamp(min=1.0)
    dev = torch.where(on, x - mean, 0.0)
    var = (dev * dev).sum() / (n - 1.0).clamp(min=1.0)
    return dev / torch.sqrt(var + WHITEN_EPS)


def group_advantages(
    rewards: Tensor,
    group_index: Tensor,
    norm_by_std: bool = True,
    eps: float = 1e-6,
    valid: Tensor | None = None,
) -> Tensor:
    """GRPO advantages: each reward relative to the other valid rewards of its group.

    A_i = (r_i - mean_g) / (std_g + eps), std_g Bessel-corrected (divides by n_g - 1, as verl), over the
    valid members of group g; with `norm_by_std=False`, A_i = r_i - mean_g (Dr. GRPO). A group with at
    most one valid member gives 0. Invalid entries (e.g. the judge's own SANDBOX_ERROR) give 0 and are
    left out of their group's mean and std; their reward may be anything, NaN included.

    Args:
        rewards: (N,) float rewards.
        group_index: (N,) integer group id per sample; any values, any order, not necessarily contiguous.
        norm_by_std: divide by the group std (GRPO) or not (Dr. GRPO).
        eps: added to the std, outside the square root.
        valid: (N,) bool, True where the reward counts; None means all valid.

    Returns:
        (N,) advantages in the dtype of `rewards` (float32 for integer rewards); computed in float64.
    """
    if rewards.dim() != 1 or group_index.shape != rewards.shape:
        raise ValueError(f"rewards and group_index must be (N,), got {rewards.shape}, {group_index.shape}")
    out_dtype = rewards.dtype if rewards.is_floating_point() else torch.float32
    if valid is None:
        valid = torch.ones_like(rewards, dtype=torch.bool)
    elif valid.shape != rewards.shape:
        raise ValueError(f"valid must be (N,) like rewards, got {valid.shape}")
    valid = valid.bool()
    if rewards.numel() == 0:
        return torch.zeros_like(rewards, dtype=out_dtype)

    uniq, gid = torch.unique(group_index, return_inverse=True)  # contiguous ids 0..G-1
    n_groups = uniq.numel()
    r = torch.where(valid, rewards.double(), 0.0)  # an invalid NaN reward must not reach any sum
    w = valid.double()
    count = torch.zeros(n_groups, dtype=torch.float64, device=r.device).index_add_(0, gid, w)
    total = torch.zeros_like(count).index_add_(0, gid, r)
    mean = total / count.clamp(min=1.0)
    dev = torch.where(valid, r - mean[gid], 0.0)
    adv = dev
    if norm_by_std:
        sq = torch.zeros_like(count).index_add_(0, gid, dev * dev)
        std = (sq / (count - 1.0).clamp(min=1.0)).sqrt()
        adv = dev / (std[gid] + eps)
    keep = valid & (count[gid] > 1.0)
    return torch.where(keep, adv, 0.0).to(out_dtype)


def gae(
    token_rewards: Tensor,
    values: Tensor,
    mask: Tensor,
    gamma: float,
    lam: float,
    whiten: bool = True,
) -> tuple[Tensor, Tensor]:
    """Generalized advantage estimation (Schulman et al. 2015) over the valid response tokens.

    For the valid positions t of a row, in order, with t' the next valid position (V_{t'} = 0 after the
    last one):
        delta_t = r_t + gamma * V_{t'} - V_t
        A_t     = delta_t + gamma * lam * A_{t'}
        R_t     = A_t + V_t                           (the critic's target; never whitened)
    and with `whiten`, A is then whitened over all valid tokens of the batch (`masked_whiten`: mean 0,
    Bessel-corrected std 1, as verl). Masked positions are skipped (see the module docstring): their
    rewards and values are ignored, so put an outcome reward on the row's last valid token.

    Args:
        token_rewards: (B, T) per-token rewards (an outcome reward on the last valid token, plus any
            per-token terms such as a KL penalty).
        values: (B, T) the critic's V at each token.
        mask: (B, T) bool or 0/1 float, the response tokens.
        gamma, lam: discount and GAE lambda, both in [0, 1].
        whiten: whiten the advantages over the batch's valid tokens.

    Returns:
        (advantages, returns), both (B, T), 0 at masked positions, in the promoted dtype of the rewards
        and values (at least float32); computed in float64, without gradient.
    """
    _check_rows("token_rewards", token_rewards, mask)
    _check_rows("values", values, mask)
    _check_unit("gamma", gamma)
    _check_unit("lam", lam)
    out_dtype = _out_dtype(token_rewards, values)
    on = mask != 0
    r = torch.where(on, token_rewards.detach().double(), 0.0)
    v = torch.where(on, values.detach().double(), 0.0)
    # each row's valid tokens moved to its front, in order: the trajectory without its gaps
    order, valid = _compact(on)
    rc, vc = r.gather(1, order), v.gather(1, order)
    next_v = torch.cat([vc[:, 1:], vc.new_zeros(vc.shape[0], 1)], 1) * valid.roll(-1, 1)  # 0 after the last
    delta = (rc + gamma * next_v - vc) * valid
    adv = _scatter_back(discounted_reverse_cumsum(delta, gamma * lam), order, on)
    returns = torch.where(on, adv + v, 0.0)
    if whiten:
        adv = masked_whiten(adv, on)
    return adv.to(out_dtype), returns.to(out_dtype)


def rloo_advantages(rewards: Tensor, group_index: Tensor) -> Tensor:
    """REINFORCE leave-one-out (Kool et al. 2019; Ahmadian et al. 2024): each reward minus the mean of
    the OTHER rewards of its group, not whitened.

    A_i = r_i - (1 / (n_g - 1)) * sum_{j in g, j != i} r_j = n_g / (n_g - 1) * (r_i - mean_g).
    A group of one has no baseline and gets 0 (verl leaves its raw reward instead).

    Args:
        rewards: (N,) rewards, one per sample.
        group_index: (N,) integer group id per sample; any values, any order (as `group_advantages`).

    Returns:
        (N,) advantages in the dtype of `rewards` (float32 for integer rewards); computed in float64.
    """
    if rewards.dim() != 1 or group_index.shape != rewards.shape:
        raise ValueError(
            f"rewards and group_index must be (N,), got {tuple(rewards.shape)}, {tuple(group_index.shape)}"
        )
    out_dtype = rewards.dtype if rewards.is_floating_point() else torch.float32
    if rewards.numel() == 0:
        return torch.zeros_like(rewards, dtype=out_dtype)
    dev = group_advantages(rewards.detach().double(), group_index, norm_by_std=False)  # r_i - mean_g; 0 alone
    _, gid, count = torch.unique(group_index, return_inverse=True, return_counts=True)
    n = count[gid].double()
    return (dev * n / (n - 1.0).clamp(min=1.0)).to(out_dtype)


def reinforce_pp_advantages(token_rewards: Tensor, mask: Tensor, gamma: float) -> Tensor:
    """REINFORCE++ (Hu 2025): per-token discounted return-to-go, whitened over the batch's valid tokens.

    For the valid positions t of a row, in order, with t' the next valid one (G = 0 after the last):
        G_t = r_t + gamma * G_{t'}
        A   = masked_whiten(G)     (mean 0, Bessel-corrected std 1 over all valid tokens of the batch)
    With an outcome reward only, gamma = 1 gives every token of a row the same G (the reward), so A is the
    reward whitened over the batch, token-weighted. Masked positions are skipped (see the module
    docstring); verl restarts the return at every masked position instead, which differs only for masks
    with gaps.

    Args:
        token_rewards: (B, T) per-token rewards (outcome reward on the last valid token, KL terms per token).
        mask: (B, T) bool or 0/1 float, the response tokens.
        gamma: discount in [0, 1].

    Returns:
        (B, T) advantages, 0 at masked positions, in the rewards' dtype (at least float32); computed in
        float64, without gradient. (The un-whitened returns are not returned: there is no critic.)
    """
    _check_rows("token_rewards", token_rewards, mask)
    _check_unit("gamma", gamma)
    on = mask != 0
    r = torch.where(on, token_rewards.detach().double(), 0.0)
    order, valid = _compact(on)
    returns = _scatter_back(discounted_reverse_cumsum(r.gather(1, order) * valid, gamma), order, on)
    return masked_whiten(returns, on).to(_out_dtype(token_rewards))
