"""`rl_loss`: the whole micro-batch loss in codefu.algo (normaliser, per-sequence weights, policy, KL and
entropy terms), checked by hand and for invariance to how a mini-batch is cut (rows and token windows)."""

import pytest
import torch

from codefu.algo import LossSettings, loss_normalizer, rl_loss

MASK = torch.tensor([[0, 1, 1, 1, 1, 1], [0, 0, 1, 1, 0, 0], [0, 0, 0, 0, 0, 0]], dtype=torch.float64)
ADV = torch.tensor([1.0, -2.0, 5.0], dtype=torch.float64)


def inputs(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    lp = -torch.rand(MASK.shape, generator=g, dtype=torch.float64) * MASK
    old = (lp + 0.05 * torch.randn(MASK.shape, generator=g, dtype=torch.float64)) * MASK
    ref = (lp + 0.1 * torch.randn(MASK.shape, generator=g, dtype=torch.float64)) * MASK
    ent = torch.rand(MASK.shape, generator=g, dtype=torch.float64)
    return lp, old, ref, ent


def test_normalizer_per_mode():
    assert loss_normalizer(MASK, LossSettings(loss_agg="token-mean")) == 7.0  # response tokens
    assert loss_normalizer(MASK, LossSettings(loss_agg="seq-mean-token-mean")) == 2.0  # non-empty rows
    assert loss_normalizer(MASK, LossSettings(loss_agg="seq-mean-token-sum-norm")) == 2.0 * 6  # |S| x T
    assert loss_normalizer(MASK, LossSettings(loss_agg="seq-mean-token-sum-norm", norm_length=100)) == 200.0
    assert loss_normalizer(torch.zeros(2, 3), LossSettings()) == 1.0  # empty: never a division by 0


def test_on_policy_seq_mean_token_mean_by_hand():
    # ratio 1: the policy term is -A per token; seq-mean-token-mean averages each row, then the rows
    lp = torch.zeros(MASK.shape, dtype=torch.float64, requires_grad=True)
    s = LossSettings(loss_agg="seq-mean-token-mean")
    loss, parts = rl_loss(lp, lp.detach(), ADV, MASK, MASK.sum(-1), loss_normalizer(MASK, s), s)
    assert loss.item() == pytest.approx((-1.0 + 2.0) / 2)
    loss.backward()
    # each row's tokens share 1/(row tokens x rows) of its advantage, whatever the row's length
    assert lp.grad[0, 1:].tolist() == pytest.approx([-1.0 / 5 / 2] * 5)
    assert lp.grad[1, 2:4].tolist() == pytest.approx([2.0 / 2 / 2] * 2)
    assert parts["kl"] == 0 and parts["pg"] == pytest.approx(loss.item())


def test_terms_add_up_and_kl_needs_a_reference():
    lp, old, ref, ent = inputs()
    base = LossSettings(loss_agg="token-mean")
    full = LossSettings(loss_agg="token-mean", kl_coef=0.1, entropy_coef=0.01)
    n = loss_normalizer(MASK, full)
    _, pg_only = rl_loss(lp, old, ADV, MASK, MASK.sum(-1), n, base, entropy=ent)
    loss, parts = rl_loss(lp, old, ADV, MASK, MASK.sum(-1), n, full, entropy=ent, ref_logprobs=ref)
    assert parts["pg"] == pytest.approx(float(pg_only["pg"]))
    assert float(parts["kl"]) > 0 and float(parts["entropy"]) > 0
    assert float(loss) == pytest.approx(
        float(parts["pg"]) - 0.01 * float(parts["entropy"]) + 0.1 * float(parts["kl"])
    )
    with pytest.raises(ValueError, match="reference policy"):
        rl_loss(lp, old, ADV, MASK, MASK.sum(-1), n, full, entropy=ent)


@pytest.mark.parametrize(
    "agg", ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
)
def test_split_into_rows_and_token_windows_adds_up_to_the_whole(agg):
    lp, old, ref, ent = inputs(1)
    s = LossSettings(loss_agg=agg, kl_coef=0.05, entropy_coef=0.01)
    n = loss_normalizer(MASK, s)
    whole, _ = rl_loss(lp, old, ADV, MASK, MASK.sum(-1), n, s, entropy=ent, ref_logprobs=ref)
    # rows {0} and {1, 2}, and each cut in two token windows (as sequence parallelism cuts them); the
    # per-row weights count the WHOLE row's tokens
    parts = 0.0
    for rows in ([0], [1, 2]):
        for lo, hi in ((0, 3), (3, 6)):
            window = torch.zeros_like(MASK[rows])
            window[:, lo:hi] = MASK[rows][:, lo:hi]
            loss, _ = rl_loss(
                lp[rows],
                old[rows],
                ADV[rows],
                window,
                MASK[rows].sum(-1),
                n,
                s,
                entropy=ent[rows],
                ref_logprobs=ref[rows],
            )
            parts += float(loss)
    assert parts == pytest.approx(float(whole), rel=1e-12)


@pytest.mark.parametrize("name", ["gspo", "cispo"])
@pytest.mark.parametrize("agg", ["token-mean", "seq-mean-token-mean"])
def test_policy_loss_choice_runs_that_loss_over_the_whole_mini_batch(name, agg):
    from codefu.algo import cispo_loss, gspo_loss

    lp, old, _, _ = inputs(2)
    s = LossSettings(loss_agg=agg, policy_loss=name)
    n = loss_normalizer(MASK, s)
    loss, parts = rl_loss(lp, old, ADV, MASK, MASK.sum(-1), n, s)
    direct = {"gspo": gspo_loss, "cispo": cispo_loss}[name]
    # seq-mean-token-mean is the per-row mean of the token losses, averaged over the non-empty rows
    expected, metrics = direct(lp, old, ADV, MASK, 0.2, 0.2, agg)
    assert float(loss) == pytest.approx(float(expected), rel=1e-12)
    assert parts["clip_frac"] == pytest.approx(metrics["clip_frac"])
    # and, like PPO's, it adds up over row cuts when each part gets the whole mini-batch's normaliser
    halves = sum(
        float(rl_loss(lp[r], old[r], ADV[r], MASK[r], MASK[r].sum(-1), n, s)[0]) for r in ([0], [1, 2])
    )
    assert halves == pytest.approx(float(loss), rel=1e-12)
    ppo, _ = rl_loss(lp, old, ADV, MASK, MASK.sum(-1), n, LossSettings(loss_agg=agg))
    assert float(ppo) != pytest.approx(float(loss))  # a different loss was run


def test_unknown_policy_loss_is_refused():
    lp, old, _, _ = inputs()
    with pytest.raises(ValueError, match="unknown policy loss 'trpo'"):
        rl_loss(lp, old, ADV, MASK, MASK.sum(-1), 7.0, LossSettings(policy_loss="trpo"))
