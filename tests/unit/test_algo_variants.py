"""Advantage estimators (GAE, RLOO, REINFORCE++), policy losses (GSPO, CISPO), the value loss and DAPO's
overlong penalty: numbers worked out by hand, and slow loop-based references that the vectorized code must
match on random inputs with padded (and gapped) masks."""

import math

import pytest
import torch

from codefu.algo import (
    AGG_MODES,
    cispo_loss,
    gae,
    gspo_loss,
    overlong_penalty,
    policy_loss,
    reinforce_pp_advantages,
    rloo_advantages,
    value_loss,
)
from codefu.observability.metrics import CLIP_FRAC

NAN, INF = float("nan"), float("inf")

# ----------------------------------------------------------------------------------------------------
# slow references: plain Python loops and floats


def ref_whiten(rows, masks, eps=1e-8):
    """(x - mean) / sqrt(var + eps) over every valid entry, var Bessel-corrected; 0 where masked."""
    vals = [x for row, m in zip(rows, masks, strict=True) for x, on in zip(row, m, strict=True) if on]
    n = len(vals)
    if n == 0:
        return [[0.0] * len(r) for r in rows]
    mean = sum(vals) / n
    var = sum((x - mean) ** 2 for x in vals) / max(n - 1, 1)
    return [
        [(x - mean) / math.sqrt(var + eps) if on else 0.0 for x, on in zip(row, m, strict=True)]
        for row, m in zip(rows, masks, strict=True)
    ]


def ref_gae(rewards, values, masks, gamma, lam, whiten):
    """Per row: the valid positions, compacted, then the textbook recurrence over them."""
    advs, rets = [], []
    for r, v, m in zip(rewards, values, masks, strict=True):
        idx = [t for t in range(len(m)) if m[t]]
        adv, ret = [0.0] * len(m), [0.0] * len(m)
        last, next_v = 0.0, 0.0
        for t in reversed(idx):
            delta = r[t] + gamma * next_v - v[t]
            last = delta + gamma * lam * last
            adv[t], ret[t], next_v = last, last + v[t], v[t]
        advs.append(adv)
        rets.append(ret)
    return (ref_whiten(advs, masks) if whiten else advs), rets


def ref_returns_to_go(rewards, masks, gamma):
    out = []
    for r, m in zip(rewards, masks, strict=True):
        g, row = 0.0, [0.0] * len(m)
        for t in reversed([t for t in range(len(m)) if m[t]]):
            g = r[t] + gamma * g
            row[t] = g
        out.append(row)
    return out


def ref_rloo(rewards, groups):
    out = []
    for i, (r, g) in enumerate(zip(rewards, groups, strict=True)):
        others = [rewards[j] for j in range(len(rewards)) if groups[j] == g and j != i]
        out.append(r - sum(others) / len(others) if others else 0.0)
    return out


def ref_aggregate(loss, mask, mode):
    sums = [sum(x for x, m in zip(rl, rm, strict=True) if m) for rl, rm in zip(loss, mask, strict=True)]
    counts = [sum(1 for m in rm if m) for rm in mask]
    if mode == "token-mean":
        return sum(sums) / max(sum(counts), 1)
    n_seq = max(sum(1 for c in counts if c), 1)
    if mode == "seq-mean-token-mean":
        return sum(s / c for s, c in zip(sums, counts, strict=True) if c) / n_seq
    denom = n_seq * len(loss[0]) if mode == "seq-mean-token-sum-norm" else n_seq
    return sum(sums) / denom


def token_weights(mask, mode):
    """d aggregate / d loss_bt, per token (lists)."""
    counts = [sum(1 for m in rm if m) for rm in mask]
    n_seq = max(sum(1 for c in counts if c), 1)
    T = len(mask[0])
    out = []
    for rm, c in zip(mask, counts, strict=True):
        if mode == "token-mean":
            w = 1 / max(sum(counts), 1)
        elif mode == "seq-mean-token-mean":
            w = 1 / (n_seq * c) if c else 0.0
        elif mode == "seq-mean-token-sum":
            w = 1 / n_seq
        else:
            w = 1 / (n_seq * T)
        out.append([w if m else 0.0 for m in rm])
    return out


def clip(x, lo, hi):
    return min(max(x, lo), hi)


def _close(a, b, tol=1e-6):
    a, b = (float(x.detach()) if isinstance(x, torch.Tensor) else float(x) for x in (a, b))
    return abs(a - b) <= tol * max(1.0, abs(b))


def _t(rows):
    return torch.tensor(rows, dtype=torch.float64)


def _random_mask(g, B, T, gaps=False):
    """Right-padded rows of random lengths (one empty row); with `gaps`, some holes inside the rows too."""
    lengths = torch.randint(1, T + 1, (B,), generator=g)
    mask = torch.arange(T)[None, :] < lengths[:, None]
    mask[0] = False
    if gaps:
        mask &= torch.rand(B, T, generator=g) > 0.25
    return mask


def _poison(x, mask):
    """x with NaN/inf written at every masked position (alternating)."""
    bad = torch.where(torch.arange(x.numel()).reshape(x.shape) % 2 == 0, NAN, INF).to(x.dtype)
    return torch.where(mask, x, bad)


# ----------------------------------------------------------------------------------------------------
# GAE


def test_gae_by_hand():
    # r = [0, 0, 1], V = [0.5, 0.6, 0.7], gamma 0.9, lam 0.5 (gamma * lam = 0.45):
    # t=2: delta = 1 + 0.9 * 0 - 0.7 = 0.3                      A = 0.3
    # t=1: delta = 0 + 0.9 * 0.7 - 0.6 = 0.03                   A = 0.03 + 0.45 * 0.3 = 0.165
    # t=0: delta = 0 + 0.9 * 0.6 - 0.5 = 0.04                   A = 0.04 + 0.45 * 0.165 = 0.11425
    # returns = A + V = [0.61425, 0.765, 1.0]
    r, v, m = _t([[0.0, 0.0, 1.0]]), _t([[0.5, 0.6, 0.7]]), torch.ones(1, 3, dtype=torch.bool)
    adv, ret = gae(r, v, m, 0.9, 0.5, whiten=False)
    assert torch.allclose(adv, _t([[0.11425, 0.165, 0.3]]), atol=1e-12)
    assert torch.allclose(ret, _t([[0.61425, 0.765, 1.0]]), atol=1e-12)
    # gamma = lam = 1: A_t = (sum of rewards from t) - V_t = [0.5, 0.4, 0.3]; whitened: mean 0.4,
    # Bessel var (0.01 + 0 + 0.01) / 2 = 0.01 -> (A - 0.4) / sqrt(0.01 + 1e-8) = [0.9999995, 0, -0.9999995]
    adv, ret = gae(r, v, m, 1.0, 1.0, whiten=False)
    assert torch.allclose(adv, _t([[0.5, 0.4, 0.3]]), atol=1e-12)
    adv_w, ret_w = gae(r, v, m, 1.0, 1.0)
    assert torch.allclose(adv_w, _t([[0.9999995, 0.0, -0.9999995]]), atol=1e-9)
    assert torch.equal(ret_w, ret)  # the returns are never whitened: [1.0, 1.0, 1.0]
    assert torch.allclose(ret, _t([[1.0, 1.0, 1.0]]), atol=1e-12)


def test_gae_skips_gaps_and_padding():
    # mask [1, 0, 1, 0]: the masked position 1 (tool output, say) is skipped, position 3 is padding; both
    # hold NaN/inf. The valid tokens are the trajectory [r = 0, 1], [V = 0.5, 0.7], gamma 0.9, lam 0.5:
    # t=2: delta = 1 - 0.7 = 0.3, A = 0.3; t=0: delta = 0 + 0.9 * 0.7 - 0.5 = 0.13, A = 0.13 + 0.45 * 0.3
    # = 0.265; returns [0.765, 1.0]; masked positions come out 0
    r, v = _t([[0.0, NAN, 1.0, INF]]), _t([[0.5, INF, 0.7, NAN]])
    m = torch.tensor([[1, 0, 1, 0]])
    adv, ret = gae(r, v, m, 0.9, 0.5, whiten=False)
    assert torch.allclose(adv, _t([[0.265, 0.0, 0.3, 0.0]]), atol=1e-12)
    assert torch.allclose(ret, _t([[0.765, 0.0, 1.0, 0.0]]), atol=1e-12)
    # whitened: mean and std over the 2 valid tokens only; masked stay 0, nothing is NaN
    adv, _ = gae(r, v, m, 0.9, 0.5)
    assert torch.isfinite(adv).all() and adv[0, 1] == 0 and adv[0, 3] == 0
    assert _close(adv[0, 0] + adv[0, 2], 0.0, 1e-12)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("whiten", [False, True])
def test_gae_matches_loop_reference(seed, whiten):
    g = torch.Generator().manual_seed(seed)
    B, T = 5, 9
    mask = _random_mask(g, B, T, gaps=seed % 2 == 1)
    r = torch.randn(B, T, generator=g, dtype=torch.float64)
    v = torch.randn(B, T, generator=g, dtype=torch.float64)
    gamma, lam = [(1.0, 1.0), (0.99, 0.95), (0.9, 0.0), (0.5, 0.7), (0.0, 0.3)][seed]
    want_adv, want_ret = ref_gae(r.tolist(), v.tolist(), mask.tolist(), gamma, lam, whiten)
    adv, ret = gae(_poison(r, mask), _poison(v, mask), mask.double(), gamma, lam, whiten=whiten)
    assert torch.allclose(adv, _t(want_adv), atol=1e-10)
    assert torch.allclose(ret, _t(want_ret), atol=1e-10)


def test_gae_edge_cases_and_errors():
    r, v = torch.zeros(2, 3), torch.zeros(2, 3)
    # nothing valid -> zeros, not NaN; one valid token whitens to 0 (verl raises)
    adv, ret = gae(_poison(r, torch.zeros(2, 3, dtype=torch.bool)), v, torch.zeros(2, 3), 1.0, 1.0)
    assert torch.equal(adv, torch.zeros(2, 3)) and torch.equal(ret, torch.zeros(2, 3))
    one = torch.zeros(2, 3)
    one[1, 0] = 1
    adv, ret = gae(torch.full((2, 3), 5.0), v, one, 1.0, 1.0)
    assert torch.equal(adv, torch.zeros(2, 3)) and ret[1, 0] == 5.0
    # dtypes: float32 in, float32 out; T = 0 is fine
    assert gae(r, v, torch.ones(2, 3), 1.0, 1.0)[0].dtype == torch.float32
    assert gae(torch.zeros(2, 0), torch.zeros(2, 0), torch.zeros(2, 0), 1.0, 1.0)[0].shape == (2, 0)
    with pytest.raises(ValueError, match="gamma"):
        gae(r, v, torch.ones(2, 3), 1.5, 1.0)
    with pytest.raises(ValueError, match="lam"):
        gae(r, v, torch.ones(2, 3), 1.0, -0.1)
    with pytest.raises(ValueError, match="values"):
        gae(r, v[:, :2], torch.ones(2, 3), 1.0, 1.0)


# ----------------------------------------------------------------------------------------------------
# RLOO


def test_rloo_by_hand():
    # one group [1, 0, 0, 1]: A_0 = 1 - (0 + 0 + 1) / 3 = 2/3, A_1 = 0 - (1 + 0 + 1) / 3 = -2/3
    adv = rloo_advantages(torch.tensor([1.0, 0.0, 0.0, 1.0]), torch.tensor([7, 7, 7, 7]))
    assert torch.allclose(adv, torch.tensor([2 / 3, -2 / 3, -2 / 3, 2 / 3]), atol=1e-7)
    # ids -3 and 100 interleaved, 5 alone: group 100 = [3, 1] -> [3 - 1, 1 - 3] = [2, -2];
    # group -3 = [0, 0, 6] -> [0 - 3, 0 - 3, 6 - 0] = [-3, -3, 6]; the singleton has no baseline -> 0
    rewards = torch.tensor([0.0, 3.0, 0.0, 9.0, 1.0, 6.0])
    groups = torch.tensor([-3, 100, -3, 5, 100, -3])
    assert torch.equal(rloo_advantages(rewards, groups), torch.tensor([-3.0, 2.0, -3.0, 0.0, -2.0, 6.0]))
    # integer rewards -> float32; float64 stays float64; empty is fine; shapes are checked
    assert rloo_advantages(torch.tensor([1, 0]), torch.tensor([0, 0])).dtype == torch.float32
    assert rloo_advantages(rewards.double(), groups).dtype == torch.float64
    assert rloo_advantages(torch.zeros(0), torch.zeros(0, dtype=torch.long)).shape == (0,)
    with pytest.raises(ValueError):
        rloo_advantages(torch.zeros(3), torch.zeros(2, dtype=torch.long))


@pytest.mark.parametrize("seed", range(6))
def test_rloo_matches_loop_reference(seed):
    g = torch.Generator().manual_seed(seed)
    sizes = torch.randint(1, 7, (int(torch.randint(1, 10, (1,), generator=g)),), generator=g).tolist()
    ids = torch.randperm(1000, generator=g)[: len(sizes)] - 500  # arbitrary ids, negatives too
    groups = torch.cat([torch.full((s,), int(i)) for s, i in zip(sizes, ids, strict=True)])
    groups = groups[torch.randperm(len(groups), generator=g)]  # any order
    rewards = torch.randn(len(groups), generator=g, dtype=torch.float64)
    want = ref_rloo(rewards.tolist(), groups.tolist())
    assert torch.allclose(rloo_advantages(rewards, groups), _t(want), atol=1e-12)


# ----------------------------------------------------------------------------------------------------
# REINFORCE++


def test_reinforce_pp_by_hand():
    # gamma 0.5; row 0 = [0, 0, 1] -> G = [0.25, 0.5, 1]; row 1 = [0, -1, pad (NaN)] -> G = [-0.5, -1]
    # valid G = [0.25, 0.5, 1, -0.5, -1]: mean 0.25 / 5 = 0.05; deviations [0.2, 0.45, 0.95, -0.55, -1.05],
    # squares sum 0.04 + 0.2025 + 0.9025 + 0.3025 + 1.1025 = 2.55, Bessel var 2.55 / 4 = 0.6375,
    # std 0.798436 -> A = deviation / 0.798436 = [0.25049, 0.56360, 1.18983, -0.68885, -1.31507]
    r = _t([[0.0, 0.0, 1.0], [0.0, -1.0, NAN]])
    m = torch.tensor([[True, True, True], [True, True, False]])
    adv = reinforce_pp_advantages(r, m, 0.5)
    want = _t([[0.25049, 0.56360, 1.18983], [-0.68885, -1.31507, 0.0]])
    assert torch.allclose(adv, want, atol=1e-5) and adv[1, 2] == 0.0


def test_reinforce_pp_carries_the_return_over_a_gap():
    # mask [1, 0, 1], reward 1 on the last token, gamma 0.5: position 0's return is 0.5 * 1 (the gap is
    # skipped, not counted as a step); verl would restart at the gap and give 0. Rows [[1, 0, 1], [1, 1, 1]]
    # with all-zero rewards in row 1: G = [0.5, -, 1, 0, 0, 0], mean 1.5 / 5 = 0.3
    r = _t([[0.0, NAN, 1.0], [0.0, 0.0, 0.0]])
    m = torch.tensor([[1, 0, 1], [1, 1, 1]])
    adv = reinforce_pp_advantages(r, m, 0.5)
    want = ref_whiten([[0.5, 0.0, 1.0], [0.0, 0.0, 0.0]], m.tolist())
    assert torch.allclose(adv, _t(want), atol=1e-12)
    assert adv[0, 0] > adv[1, 0]  # the reward after the gap did reach position 0


def ref_verl_reinforce_pp(rewards, masks, gamma):
    """verl's loop: returns restart after every masked position (the same as ours without gaps)."""
    out = []
    for r, m in zip(rewards, masks, strict=True):
        running, row = 0.0, [0.0] * len(r)
        for t in reversed(range(len(r))):
            running = r[t] + gamma * running
            row[t] = running
            running *= m[t]
        out.append(row)
    return ref_whiten(out, masks)


@pytest.mark.parametrize("seed", range(5))
def test_reinforce_pp_matches_loop_reference(seed):
    g = torch.Generator().manual_seed(seed)
    B, T = 6, 8
    gamma = [1.0, 0.99, 0.5, 0.0, 0.9][seed]
    mask = _random_mask(g, B, T, gaps=True)
    r = torch.randn(B, T, generator=g, dtype=torch.float64)
    want = ref_whiten(ref_returns_to_go(r.tolist(), mask.tolist(), gamma), mask.tolist())
    assert torch.allclose(reinforce_pp_advantages(_poison(r, mask), mask, gamma), _t(want), atol=1e-10)
    # without gaps (right padding only) it is verl's estimator exactly
    mask = _random_mask(g, B, T)
    r_clean = torch.where(mask, r, 0.0)  # verl's loop reads padding rewards; ours ignores them
    want = ref_verl_reinforce_pp(r_clean.tolist(), mask.long().tolist(), gamma)
    assert torch.allclose(reinforce_pp_advantages(_poison(r, mask), mask, gamma), _t(want), atol=1e-10)


def test_reinforce_pp_errors_and_dtype():
    assert reinforce_pp_advantages(torch.ones(2, 3), torch.ones(2, 3), 1.0).dtype == torch.float32
    # outcome reward 1 on every row's last token, gamma 1: every G is 1, every deviation 0 -> zeros, not NaN
    r = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    assert torch.equal(reinforce_pp_advantages(r, torch.ones(2, 3), 1.0), torch.zeros(2, 3))
    # with every token rewarded 1, G = [3, 2, 1] per row: mean 2, Bessel var (1 + 0 + 1) * 2 / 5 = 0.8,
    # A = [1, 0, -1] / sqrt(0.8) = [1.118034, 0, -1.118034]
    want = torch.tensor([[1.118034, 0.0, -1.118034]] * 2)
    assert torch.allclose(reinforce_pp_advantages(torch.ones(2, 3), torch.ones(2, 3), 1.0), want, atol=1e-6)
    with pytest.raises(ValueError, match="gamma"):
        reinforce_pp_advantages(torch.ones(2, 3), torch.ones(2, 3), 1.01)
    with pytest.raises(ValueError):
        reinforce_pp_advantages(torch.ones(2, 3), torch.ones(3, 2), 1.0)


# ----------------------------------------------------------------------------------------------------
# GSPO


def _seq_level_gspo(logp, old, adv, mask, clip_low, clip_high, agg):
    """The paper's sequence objective, one row at a time, with the aggregation mode's per-sequence weight
    (n_i / sum n for token-mean, 1 / |S| for seq-mean-token-mean, ...): loss and, through autograd on the
    row sums, the gradient the token form must reproduce."""
    B, T = logp.shape
    counts = [int(mask[b].sum()) for b in range(B)]
    n_seq = max(sum(1 for c in counts if c), 1)
    total = logp.new_zeros(())
    for b in range(B):
        if counts[b] == 0:
            continue
        idx = [t for t in range(T) if mask[b, t]]
        s = torch.exp(sum(logp[b, t] - old[b, t] for t in idx) / counts[b])
        a = float(adv[b])
        seq_loss = torch.maximum(-a * s, -a * s.clamp(1 - clip_low, 1 + clip_high))
        weight = {
            "token-mean": counts[b] / max(sum(counts), 1),
            "seq-mean-token-sum": counts[b] / n_seq,
            "seq-mean-token-mean": 1 / n_seq,
            "seq-mean-token-sum-norm": counts[b] / (n_seq * T),
        }[agg]
        total = total + weight * seq_loss
    return total


def test_gspo_by_hand():
    # one sequence of 2 tokens: log-ratios [+0.3, -0.5] -> mean -0.1 -> s = exp(-0.1) = 0.904837. Token 0's
    # own ratio exp(0.3) = 1.34986 is outside [0.8, 1.2] (PPO would clip it: A > 0); GSPO uses s only.
    # A = 1: loss = max(-0.904837, -clip(0.904837)) = -0.904837; every token's value is s, so token-mean
    # gives -0.904837 and each token's gradient is -A * s / 2 = -0.452419
    old = _t([[-1.0, -1.0]])
    logp = (old + _t([[0.3, -0.5]])).requires_grad_()
    mask = torch.ones(1, 2)
    loss, m = gspo_loss(logp, old, torch.tensor([1.0]), mask, 0.2, 0.2)
    loss.backward()
    assert _close(loss, -0.904837) and torch.allclose(logp.grad, _t([[-0.452419, -0.452419]]), atol=1e-6)
    assert m["clip_frac"] == 0.0 and _close(m["ratio_mean"], 0.904837) and _close(m["ratio_max"], 0.904837)
    # approx_kl from the TOKEN ratios: k1 = mean(-0.3, 0.5) = 0.1; k3 = mean(r - 1 - log r) =
    # ((1.349859 - 1 - 0.3) + (0.606531 - 1 + 0.5)) / 2 = (0.049859 + 0.106531) / 2 = 0.078195
    assert _close(m["approx_kl_k1"], 0.1) and _close(m["approx_kl"], 0.078195) and m["valid_tokens"] == 2
    # PPO on the same tokens drops token 0 (gradient 0) and keeps token 1
    lp2 = logp.detach().clone().requires_grad_()
    policy_loss(lp2, old, torch.tensor([1.0]), mask)[0].backward()
    assert lp2.grad[0, 0] == 0.0 and lp2.grad[0, 1] != 0.0
    # GSPO's tiny clip range (3e-4 / 4e-4): A = -1: max(0.904837, 0.9997) = 0.9997, the clipped branch ->
    # the whole sequence is clipped: no gradient at all, clip_frac 1
    logp.grad = None
    loss, m = gspo_loss(logp, old, torch.tensor([-1.0]), mask, 3e-4, 4e-4)
    loss.backward()
    assert _close(loss, 0.9997) and torch.equal(logp.grad, torch.zeros(1, 2, dtype=torch.float64))
    assert m["clip_frac"] == 1.0
    # A = +1 below the band: the unclipped branch is the max (pessimistic) -> -0.904837, with gradient
    logp.grad = None
    loss, m = gspo_loss(logp, old, torch.tensor([1.0]), mask, 3e-4, 4e-4)
    loss.backward()
    assert _close(loss, -0.904837) and (logp.grad != 0).all() and m["clip_frac"] == 0.0


def test_gspo_aggregation_by_hand():
    # two sequences at ratio 1: seq 0 has 1 token and A = +1 -> loss -1; seq 1 has 3 tokens and A = -1 ->
    # loss +1. token-mean (the default) weighs by length: (-1 + 3 * 1) / 4 = 0.5; the paper's (and verl's)
    # seq-mean-token-mean weighs sequences equally: (-1 + 1) / 2 = 0
    old = _t([[-1.0, 0.0, 0.0], [-1.0, -2.0, -0.5]])
    mask = torch.tensor([[1, 0, 0], [1, 1, 1]])
    adv = torch.tensor([1.0, -1.0])
    assert _close(gspo_loss(old.clone(), old, adv, mask, 0.2, 0.2)[0], 0.5)
    assert _close(gspo_loss(old.clone(), old, adv, mask, 0.2, 0.2, agg="seq-mean-token-mean")[0], 0.0)
    # a (B, T) advantage constant along each row is the same as (B,)
    adv_bt = adv[:, None].expand(2, 3)
    assert _close(gspo_loss(old.clone(), old, adv_bt, mask, 0.2, 0.2)[0], 0.5)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("agg", AGG_MODES)
def test_gspo_matches_sequence_level_reference(seed, agg):
    g = torch.Generator().manual_seed(seed)
    B, T = 6, 7
    mask = _random_mask(g, B, T)
    old = -torch.rand(B, T, generator=g, dtype=torch.float64) * 3
    logp = old + 0.15 * torch.randn(B, T, generator=g, dtype=torch.float64)  # s roughly 0.9 .. 1.1
    adv = torch.randn(B, generator=g, dtype=torch.float64)
    clip_low, clip_high = (0.03, 0.04) if seed % 2 else (3e-4, 4e-4)
    lp = _poison(logp, mask).requires_grad_()
    loss, m = gspo_loss(
        lp, _poison(old, mask), _poison(adv[:, None].expand(B, T), mask), mask, clip_low, clip_high, agg=agg
    )
    loss.backward()
    ref_lp = logp.clone().requires_grad_()
    want = _seq_level_gspo(ref_lp, old, adv, mask, clip_low, clip_high, agg)
    want.backward()
    assert _close(loss, want, 1e-9)
    assert torch.allclose(lp.grad, ref_lp.grad, atol=1e-12)  # masked positions: exactly 0 in both
    # metrics by loop: a sequence is clipped when its clipped branch is strictly larger
    on = [(b, t) for b in range(B) for t in range(T) if mask[b, t]]
    s = {}
    for b in range(B):
        row = [logp[b, t].item() - old[b, t].item() for t in range(T) if mask[b, t]]
        if row:
            s[b] = math.exp(sum(row) / len(row))
    clipped = [
        (b, t)
        for b, t in on
        if -adv[b].item() * clip(s[b], 1 - clip_low, 1 + clip_high) > -adv[b].item() * s[b]
    ]
    assert _close(m["clip_frac"], len(clipped) / len(on))
    assert _close(m["ratio_mean"], sum(s[b] for b, _ in on) / len(on))
    assert _close(m["ratio_max"], max(s.values()))
    assert _close(m["approx_kl_k1"], sum(old[k].item() - logp[k].item() for k in on) / len(on))
    assert m["valid_tokens"] == len(on)
    # a valid token gets a gradient exactly when its sequence is not clipped (and A != 0)
    for b, t in on:
        assert (lp.grad[b, t] != 0) == ((b, t) not in clipped)


def test_gspo_masked_nan_and_errors():
    old = _t([[-1.0, -1.0, NAN], [NAN, INF, -INF]])
    logp = _t([[-0.9, -1.2, -INF], [INF, NAN, NAN]]).requires_grad_()
    adv = _t([[1.0, 1.0, INF], [NAN, NAN, NAN]])
    mask = torch.tensor([[True, True, False], [False, False, False]])
    for agg in AGG_MODES:
        logp.grad = None
        loss, m = gspo_loss(logp, old, adv, mask, 0.2, 0.2, agg=agg)
        loss.backward()
        assert torch.isfinite(loss) and torch.isfinite(logp.grad).all()
        assert (logp.grad[:, 2] == 0).all() and (logp.grad[1] == 0).all() and (logp.grad[0, :2] != 0).all()
        assert all(math.isfinite(v) for v in m.values())
    loss, m = gspo_loss(logp, old, adv, torch.zeros(2, 3), 0.2, 0.2)
    assert loss.item() == 0.0 and m["valid_tokens"] == 0.0 and m["clip_frac"] == 0.0
    with pytest.raises(ValueError, match="clip_low"):
        gspo_loss(logp, old, adv, mask, -0.1, 0.2)
    with pytest.raises(ValueError, match="advantages"):
        gspo_loss(logp, old, torch.ones(3), mask, 0.2, 0.2)
    with pytest.raises(ValueError):
        gspo_loss(logp, old[:, :2], adv, mask, 0.2, 0.2)
    with pytest.raises(ValueError, match="aggregation"):
        gspo_loss(logp, old, adv, mask, 0.2, 0.2, agg="seq-mean")


# ----------------------------------------------------------------------------------------------------
# CISPO


def test_cispo_by_hand():
    # token ratios exp(0.3) = 1.349859 and exp(-0.5) = 0.606531, both outside [0.8, 1.2]: weights w = [1.2,
    # 0.8]; A = 1, logp = [-0.7, -1.5]: l = -w * A * logp = [0.84, 1.2] -> token-mean 1.02; the gradient
    # is -w * A / 2 = [-0.6, -0.4]: both tokens keep a gradient although both weights were clipped
    old = _t([[-1.0, -1.0]])
    logp = _t([[-0.7, -1.5]]).requires_grad_()
    loss, m = cispo_loss(logp, old, torch.tensor([1.0]), torch.ones(1, 2), 0.2, 0.2)
    loss.backward()
    assert _close(loss, 1.02) and torch.allclose(logp.grad, _t([[-0.6, -0.4]]), atol=1e-12)
    assert m["clip_frac"] == 1.0
    assert _close(m["ratio_mean"], (1.349859 + 0.606531) / 2) and _close(m["ratio_max"], 1.349859)
    # PPO drops token 0 here (A > 0, ratio above 1 + 0.2)
    lp2 = logp.detach().clone().requires_grad_()
    policy_loss(lp2, old, torch.tensor([1.0]), torch.ones(1, 2))[0].backward()
    assert lp2.grad[0, 0] == 0.0
    # no lower bound with clip_low >= 1 (the paper tunes only the upper one): w = [1.2, 0.606531]
    logp.grad = None
    loss, m = cispo_loss(logp, old, torch.tensor([1.0]), torch.ones(1, 2), 1.0, 0.2)
    loss.backward()
    assert torch.allclose(logp.grad, _t([[-0.6, -0.606531 / 2]]), atol=1e-6) and m["clip_frac"] == 0.5
    # inside the band the weight is the ratio itself: ratio 1 -> plain REINFORCE, gradient -A / n
    logp2 = old.clone().requires_grad_()
    cispo_loss(logp2, old, torch.tensor([-2.0]), torch.ones(1, 2), 0.2, 0.2)[0].backward()
    assert torch.allclose(logp2.grad, _t([[1.0, 1.0]]))


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("per_token", [False, True])
@pytest.mark.parametrize("agg", AGG_MODES)
def test_cispo_matches_loop_reference(seed, per_token, agg):
    g = torch.Generator().manual_seed(seed)
    B, T = 5, 7
    mask = _random_mask(g, B, T, gaps=True)
    old = -torch.rand(B, T, generator=g, dtype=torch.float64) * 3
    logp = old + 0.5 * torch.randn(B, T, generator=g, dtype=torch.float64)  # many ratios outside the band
    adv = torch.randn(B, T, generator=g, dtype=torch.float64)
    if not per_token:
        adv = adv[:, 0]
    adv_tok = adv if per_token else adv[:, None].expand(B, T)
    lp = _poison(logp, mask).requires_grad_()
    loss, m = cispo_loss(
        lp, _poison(old, mask), _poison(adv_tok, mask) if per_token else adv, mask, 0.2, 0.28, agg=agg
    )
    loss.backward()
    weights = [
        [clip(math.exp(a - o), 0.8, 1.28) for a, o in zip(lr, orow, strict=True)]
        for lr, orow in zip(logp.tolist(), old.tolist(), strict=True)
    ]
    pg = [
        [-w * a * lp_ for w, a, lp_ in zip(wr, ar, lr, strict=True)]
        for wr, ar, lr in zip(weights, adv_tok.tolist(), logp.tolist(), strict=True)
    ]
    assert _close(loss, ref_aggregate(pg, mask.tolist(), agg), 1e-9)
    tw = token_weights(mask.tolist(), agg)
    want_grad = [
        [-w * a * k for w, a, k in zip(wr, ar, kr, strict=True)]
        for wr, ar, kr in zip(weights, adv_tok.tolist(), tw, strict=True)
    ]
    assert torch.allclose(lp.grad, _t(want_grad), atol=1e-12)
    assert (lp.grad[mask] != 0).all()  # every valid token keeps its gradient, clipped or not
    on = [(b, t) for b in range(B) for t in range(T) if mask[b, t]]
    ratios = {k: math.exp(logp[k].item() - old[k].item()) for k in on}
    assert _close(m["clip_frac"], sum(1 for r in ratios.values() if not 0.8 <= r <= 1.28) / len(on))
    assert 0.0 < m["clip_frac"] < 1.0  # the example does exercise both kinds of tokens
    assert _close(m["ratio_mean"], sum(ratios.values()) / len(on))
    assert _close(m["approx_kl"], sum(r - 1 - math.log(r) for r in ratios.values()) / len(on))


def test_cispo_masked_nan_and_errors():
    old = _t([[-1.0, NAN], [INF, -INF]])
    logp = _t([[-0.9, -INF], [NAN, NAN]]).requires_grad_()
    adv = _t([[1.0, INF], [NAN, NAN]])
    mask = torch.tensor([[1.0, 0.0], [0.0, 0.0]])
    for agg in AGG_MODES:
        logp.grad = None
        loss, m = cispo_loss(logp, old, adv, mask, 0.2, 0.2, agg=agg)
        loss.backward()
        assert torch.isfinite(loss) and torch.isfinite(logp.grad).all()
        assert logp.grad[0, 0] != 0 and (logp.grad.flatten()[1:] == 0).all()
        assert all(math.isfinite(v) for v in m.values())
    with pytest.raises(ValueError, match="clip_high"):
        cispo_loss(logp, old, adv, mask, 0.2, float("nan"))


def test_new_policy_losses_are_drop_in_for_policy_loss_metrics():
    # the same keys as policy_loss (without dual clip), so the trainer's accumulation works unchanged; it
    # prefixes "policy/", which makes the clip key observability's CLIP_FRAC
    old = _t([[-1.0, -2.0]])
    args = (old.clone(), old, torch.tensor([1.0]), torch.ones(1, 2), 0.2, 0.2)
    want = set(policy_loss(*args)[1])
    assert set(gspo_loss(*args)[1]) == want and set(cispo_loss(*args)[1]) == want
    assert "clip_frac" in want and "policy/clip_frac" == CLIP_FRAC
    assert all(isinstance(v, float) for v in gspo_loss(*args)[1].values())


# ----------------------------------------------------------------------------------------------------
# value loss


def test_value_loss_by_hand():
    # c = 0.2, three tokens:
    # t0: v 1.0, v_old 0.5, R 0.0: v_clip = clamp(1.0, 0.3, 0.7) = 0.7; 1.0^2 = 1.0 vs 0.49 -> 1.0 (unclipped)
    # t1: v 2.0, v_old 2.1, R 2.5: v_clip = 2.0 (inside [1.9, 2.3]); 0.25 vs 0.25 -> 0.25, not clipped
    # t2: v 0.9, v_old 0.2, R 1.0: v_clip = 0.4; 0.01 vs 0.36 -> 0.36, the CLIPPED term: no gradient
    # loss = 0.5 * (1.0 + 0.25 + 0.36) / 3 = 0.268333; gradients 0.5 * 2 (v - R) / 3 = [1/3, -1/6, 0]
    v = _t([[1.0, 2.0, 0.9]]).requires_grad_()
    v_old, ret, mask = _t([[0.5, 2.1, 0.2]]), _t([[0.0, 2.5, 1.0]]), torch.ones(1, 3)
    loss, m = value_loss(v, v_old, ret, mask, 0.2)
    loss.backward()
    assert _close(loss, 0.268333) and torch.allclose(v.grad, _t([[1 / 3, -1 / 6, 0.0]]), atol=1e-12)
    assert _close(m["vf_clip_frac"], 1 / 3) and _close(m["vpred_mean"], 1.3) and m["valid_tokens"] == 3
    # unclipped: 0.5 * (1.0 + 0.25 + 0.01) / 3 = 0.21, t2's gradient 0.5 * 2 * (0.9 - 1.0) / 3 = -1/30
    v.grad = None
    loss, m = value_loss(v, v_old, ret, mask, None)
    loss.backward()
    assert _close(loss, 0.21) and torch.allclose(v.grad, _t([[1 / 3, -1 / 6, -1 / 30]]), atol=1e-12)
    assert m["vf_clip_frac"] == 0.0
    # a huge clip range never clips: the same as None
    assert _close(value_loss(v, v_old, ret, mask, 100.0)[0], 0.21)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("clip_range", [None, 0.0, 0.3])
@pytest.mark.parametrize("agg", AGG_MODES)
def test_value_loss_matches_loop_reference(seed, clip_range, agg):
    g = torch.Generator().manual_seed(seed)
    B, T = 5, 6
    mask = _random_mask(g, B, T, gaps=True)
    v_old = torch.randn(B, T, generator=g, dtype=torch.float64)
    v = v_old + 0.5 * torch.randn(B, T, generator=g, dtype=torch.float64)
    ret = torch.randn(B, T, generator=g, dtype=torch.float64)
    vv = _poison(v, mask).requires_grad_()
    loss, m = value_loss(vv, _poison(v_old, mask), _poison(ret, mask), mask, clip_range, agg=agg)
    loss.backward()
    per, grad_dir, n_clipped = [], [], 0
    for b in range(B):
        row, grow = [], []
        for t in range(T):
            e1 = (v[b, t].item() - ret[b, t].item()) ** 2
            if clip_range is None:
                row.append(e1)
                grow.append(v[b, t].item() - ret[b, t].item())
                continue
            vc = clip(v[b, t].item(), v_old[b, t].item() - clip_range, v_old[b, t].item() + clip_range)
            e2 = (vc - ret[b, t].item()) ** 2
            row.append(max(e1, e2))
            inside = v_old[b, t].item() - clip_range < v[b, t].item() < v_old[b, t].item() + clip_range
            grow.append(v[b, t].item() - ret[b, t].item() if e1 >= e2 or inside else 0.0)
            n_clipped += bool(mask[b, t]) and e2 > e1
        per.append(row)
        grad_dir.append(grow)
    assert _close(loss, 0.5 * ref_aggregate(per, mask.tolist(), agg), 1e-9)
    tw = token_weights(mask.tolist(), agg)
    want = [[d * w for d, w in zip(dr, wr, strict=True)] for dr, wr in zip(grad_dir, tw, strict=True)]
    assert torch.allclose(vv.grad, _t(want), atol=1e-12)
    assert _close(m["vf_clip_frac"], n_clipped / int(mask.sum()))
    if clip_range == 0.0:
        assert m["vf_clip_frac"] > 0  # with c = 0 every prediction that moved away from R is clipped


def test_value_loss_masked_nan_and_errors():
    v = _t([[0.5, NAN], [INF, -INF]]).requires_grad_()
    mask = torch.tensor([[True, False], [False, False]])
    loss, m = value_loss(v, _t([[0.4, INF], [NAN, 0.0]]), _t([[1.0, NAN], [NAN, NAN]]), mask, 0.2)
    loss.backward()
    # t0: v_clip = clamp(0.5, 0.2, 0.6) = 0.5 -> 0.5 * (0.5 - 1)^2 = 0.125; gradient 0.5 * 2 * (-0.5) = -0.5
    assert _close(loss, 0.125) and torch.allclose(v.grad, _t([[-0.5, 0.0], [0.0, 0.0]]))
    assert all(math.isfinite(x) for x in m.values())
    loss, m = value_loss(v, v, v, torch.zeros(2, 2), 0.2)
    assert loss.item() == 0.0 and m["valid_tokens"] == 0.0
    with pytest.raises(ValueError, match="clip"):
        value_loss(v, v, v, mask, -0.1)
    with pytest.raises(ValueError):
        value_loss(v, v[:, :1], v, mask, 0.2)


# ----------------------------------------------------------------------------------------------------
# overlong penalty


def ref_overlong(length, max_len, cache_len, factor):
    free = max_len - cache_len
    if length <= free:
        return 0.0
    if length <= max_len:
        return (free - length) / cache_len * factor
    return -factor


def test_overlong_penalty_by_hand():
    # max_len 16, cache 4: free up to 12; 13 -> (12 - 13) / 4 = -0.25; 14 -> -0.5; 16 -> -1; 17 -> -1
    got = overlong_penalty(torch.tensor([0, 12, 13, 14, 16, 17, 1000]), 16, 4, 1.0)
    assert torch.equal(got, torch.tensor([0.0, 0.0, -0.25, -0.5, -1.0, -1.0, -1.0]))
    assert got.dtype == torch.float32
    # factor 0.5 scales it: 14 -> -0.25; shape and float64 are kept
    got = overlong_penalty(torch.tensor([[14.0], [17.0]], dtype=torch.float64), 16, 4, 0.5)
    assert got.shape == (2, 1) and got.dtype == torch.float64 and torch.equal(got, _t([[-0.25], [-0.5]]))
    # cache_len 0: no ramp, no division by zero: 0 up to max_len, -factor past it
    assert torch.equal(overlong_penalty(torch.tensor([16, 17]), 16, 0, 0.5), torch.tensor([0.0, -0.5]))
    # cache_len = max_len: the ramp starts at 0 tokens: 8 -> (0 - 8) / 16 = -0.5
    got = overlong_penalty(torch.tensor([0, 8, 16]), 16, 16, 1.0)
    assert torch.equal(got, torch.tensor([0.0, -0.5, -1.0]))
    # DAPO's setting: 20480 tokens with a 4096 cache -> 18432 is 2048 into the ramp: -0.5
    assert overlong_penalty(torch.tensor([18432]), 20480, 4096, 1.0).item() == -0.5
    # a list works; factor 0 gives zeros
    assert torch.equal(overlong_penalty([20, 30], 16, 4, 0.0), torch.zeros(2))


@pytest.mark.parametrize("seed", range(4))
def test_overlong_penalty_matches_loop_reference(seed):
    g = torch.Generator().manual_seed(seed)
    max_len = int(torch.randint(1, 50, (1,), generator=g))
    cache_len = int(torch.randint(1, max_len + 1, (1,), generator=g))
    factor = float(torch.rand(1, generator=g)) * 2
    lengths = torch.randint(0, 2 * max_len + 2, (40,), generator=g)
    want = [ref_overlong(n, max_len, cache_len, factor) for n in lengths.tolist()]
    assert torch.allclose(overlong_penalty(lengths, max_len, cache_len, factor), torch.tensor(want))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(max_len=16, cache_len=17, factor=1.0), "cache_len"),
        (dict(max_len=16, cache_len=-1, factor=1.0), "cache_len"),
        (dict(max_len=0, cache_len=0, factor=1.0), "max_len"),
        (dict(max_len=16.0, cache_len=4, factor=1.0), "max_len"),
        (dict(max_len=16, cache_len=True, factor=1.0), "cache_len"),
        (dict(max_len=16, cache_len=4, factor=-1.0), "factor"),
        (dict(max_len=16, cache_len=4, factor=float("nan")), "factor"),
        (dict(max_len=16, cache_len=4, factor=float("inf")), "factor"),
    ],
)
def test_overlong_penalty_rejects_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        overlong_penalty(torch.tensor([10]), **kwargs)


def test_overlong_penalty_rejects_bad_lengths():
    with pytest.raises(ValueError, match="lengths"):
        overlong_penalty(torch.tensor([10, -1]), 16, 4, 1.0)
    with pytest.raises(ValueError, match="lengths"):
        overlong_penalty(torch.tensor([float("nan")]), 16, 4, 1.0)
    with pytest.raises(ValueError, match="lengths"):
        overlong_penalty(torch.tensor([True]), 16, 4, 1.0)


# ---------------------------------------------------------------------------------------------------------
# PPO's critic: per-token rewards, the micro-batch normaliser of the value loss, explained variance


def test_outcome_token_rewards_by_hand():
    from codefu.algo import outcome_token_rewards

    mask = torch.tensor([[0, 1, 1, 1, 0], [0, 0, 1, 0, 0], [0, 0, 0, 0, 0]])  # prompt, response, padding
    r = outcome_token_rewards(torch.tensor([0.5, -1.0, 7.0]), mask)
    expected = torch.tensor([[0, 0, 0, 0.5, 0], [0, 0, -1.0, 0, 0], [0, 0, 0, 0, 0]])
    torch.testing.assert_close(r, expected)  # the empty row gets nothing
    kl = torch.tensor([[9.0, 0.1, 0.2, 0.3, float("nan")], [0, 0, 0.4, 0, 0], [0, 0, 0, 0, 0]])
    r = outcome_token_rewards(torch.tensor([0.5, -1.0, 7.0]), mask, kl, kl_coef=0.5)
    expected = torch.tensor([[0, -0.05, -0.1, 0.5 - 0.15, 0], [0, 0, -1.2, 0, 0], [0, 0, 0, 0, 0]])
    torch.testing.assert_close(r, expected)  # NaN outside the mask stays out
    with pytest.raises(ValueError, match="kl_coef > 0 needs kl"):
        outcome_token_rewards(torch.tensor([0.5, -1.0, 7.0]), mask, None, 0.1)
    with pytest.raises(ValueError, match="kl_coef"):
        outcome_token_rewards(torch.tensor([0.5, -1.0, 7.0]), mask, kl, -1.0)


def test_value_loss_micro_batches_add_up_to_the_mini_batch():
    g = torch.Generator().manual_seed(0)
    v, old, ret = (torch.randn(6, 9, generator=g) for _ in range(3))
    mask = (torch.rand(6, 9, generator=g) > 0.3).float()
    whole, _ = value_loss(v, old, ret, mask, 0.2)
    n = float(mask.sum())
    parts = [
        value_loss(v[i : i + 2], old[i : i + 2], ret[i : i + 2], mask[i : i + 2], 0.2, normalizer=n)[0]
        for i in range(0, 6, 2)
    ]
    torch.testing.assert_close(sum(parts), whole)


def test_explained_variance():
    from codefu.algo import explained_variance

    ret = torch.tensor([[1.0, 2.0, 3.0, 99.0]])
    mask = torch.tensor([[1, 1, 1, 0]])
    assert explained_variance(ret, ret, mask) == pytest.approx(1.0)  # a perfect critic
    assert explained_variance(torch.full_like(ret, 2.0), ret, mask) == pytest.approx(0.0)  # the mean
    # V = 0: 1 - Var(R) / Var(R) = 0 too; V = -R: Var(2R) = 4 Var(R) -> -3
    assert explained_variance(-ret, ret, mask) == pytest.approx(-3.0)
    assert math.isnan(explained_variance(ret, torch.ones_like(ret), mask))  # returns do not vary
    assert math.isnan(explained_variance(ret, ret, torch.tensor([[1, 0, 0, 0]])))


@pytest.mark.parametrize("c", [0.0, 1e-3, 0.05, 0.5, 0.95, 0.999, 1.0])
def test_discounted_reverse_cumsum_matches_the_recurrence(c):
    from codefu.algo.advantages import discounted_reverse_cumsum

    g = torch.Generator().manual_seed(1)
    for T in (1, 255, 256, 257, 3001):
        x = torch.randn(3, T, generator=g, dtype=torch.float64)
        ref = torch.zeros_like(x)
        nxt = torch.zeros(3, dtype=torch.float64)
        for t in range(T - 1, -1, -1):
            nxt = x[:, t] + c * nxt
            ref[:, t] = nxt
        torch.testing.assert_close(discounted_reverse_cumsum(x, c), ref, atol=1e-9, rtol=1e-9)


def test_every_name_a_config_may_choose_runs_in_the_loss():
    """codefu.algo.choices (torch-free, what the config checks against) and the math agree: each policy
    loss, aggregation, KL estimator and rollout correction named there runs, and a name not there fails."""
    from codefu.algo.choices import AGG_MODES, KL_KINDS, POLICY_LOSSES, ROLLOUT_CORRECTIONS
    from codefu.algo.loss import LossSettings, rl_loss

    g = torch.Generator().manual_seed(0)
    logprobs = -torch.rand(2, 5, generator=g)
    old = logprobs + 0.1 * torch.randn(2, 5, generator=g)
    mask = torch.ones(2, 5)
    common = dict(
        advantages=torch.tensor([1.0, -1.0]),
        mask=mask,
        row_tokens=torch.tensor([5, 5]),
        normalizer=10.0,
        ref_logprobs=old - 0.05,
        rollout_logprobs=old + 0.02,
        entropy=torch.rand(2, 5, generator=g),
    )
    choices = [("policy_loss", POLICY_LOSSES), ("loss_agg", AGG_MODES), ("kl_kind", KL_KINDS),
               ("rollout_correction", ROLLOUT_CORRECTIONS)]  # fmt: skip
    for key, names in choices:
        for name in names:
            settings = LossSettings(kl_coef=0.1, **{key: name})
            loss, _ = rl_loss(logprobs, old, settings=settings, **common)
            assert torch.isfinite(loss), (key, name)
        with pytest.raises(ValueError, match="no_such"):
            rl_loss(logprobs, old, settings=LossSettings(kl_coef=0.1, **{key: "no_such"}), **common)
