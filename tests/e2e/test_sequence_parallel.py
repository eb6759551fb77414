"""Ulysses sequence parallelism on CPU (gloo), ranks spawned with torch.multiprocessing -- no Ray.

For a fixed batch of uneven lengths (padded rows, a token count not divisible by sp, several micro-batches),
1 rank and {2 ranks: sp=2; 4 ranks: sp=4 (kv heads replicated); 4 ranks: dp=2 x sp=2} must give the same
per-token log-probs, the same full gradients right before the optimizer step (after FSDP's reduction), the
same metrics and the same updated weights -- with KL and entropy terms and gradient checkpointing. The cases
share out a tiny Llama (no biases) and a tiny Qwen2 (q/k/v biases), token-mean and seq-mean-token-mean
(whose per-row token count spans ranks), to keep each spawn to one model.
"""

from pathlib import Path

import pytest
import torch

from codefu.models.tiny import save_tiny_model
from codefu.trainer import TrainerWorker
from codefu.trainer.distributed import RankGrid
from codefu.trainer.sequence_parallel import SeqShard, enable_sequence_parallel, kv_replication
from helpers.ranks import end_rank, spawn_ranks, start_rank
from helpers.seq_parallel import MODELS, assert_close, config, run


def _rank_main(rank: int, world_size: int, port: int, sp: int, model: str, agg: str, tmp: str) -> None:
    start_rank(rank, world_size, port)
    result = run(TrainerWorker(config(Path(tmp) / model, sp, agg)))
    if rank == 0:
        torch.save(result, Path(tmp) / f"ws{world_size}_sp{sp}.pt")
    end_rank()


class OneRank:
    """The models, and the 1-rank results (in this process), computed once each."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        for name, overrides in MODELS.items():
            save_tiny_model(tmp / name, seed=0, **overrides)
        self.results: dict = {}

    def __getitem__(self, key: tuple[str, str]) -> dict:
        if key not in self.results:
            self.results[key] = run(TrainerWorker(config(self.tmp / key[0], 1, key[1])))
        return self.results[key]


@pytest.fixture(scope="module")
def one_rank(tmp_path_factory):
    return OneRank(tmp_path_factory.mktemp("sp"))


@pytest.mark.parametrize(
    "world_size,sp,model,agg",
    [
        (2, 2, "qwen2", "token-mean"),
        (4, 4, "llama", "seq-mean-token-mean"),  # 2 kv heads, 4 ranks: each kv head replicated twice
        (4, 2, "qwen2", "seq-mean-token-mean"),
    ],
    ids=["sp2", "sp4", "dp2xsp2"],
)
@pytest.mark.slow
def test_sequence_parallel_equals_one_rank(one_rank, world_size, sp, model, agg):
    tmp = one_rank.tmp
    spawn_ranks(_rank_main, world_size, sp, model, agg, str(tmp))
    got, ref = torch.load(tmp / f"ws{world_size}_sp{sp}.pt"), one_rank[model, agg]
    what = f"{model}, {agg}, {world_size} ranks, sp={sp}"
    assert_close(got["logprobs"], ref["logprobs"], f"{what}: log-probs", atol=1e-6)
    assert ref["grads"].keys() == got["grads"].keys()
    for name, g in ref["grads"].items():
        assert g.abs().max() > 0, name  # every parameter gets a gradient (a vacuous match proves nothing)
        assert_close(got["grads"][name], g, f"{what}: grad {name}", atol=1e-7)
    for k in ("loss/total", "loss/pg", "loss/kl", "policy/entropy", "optim/grad_norm", "policy/clip_frac"):
        assert got["metrics"][k] == pytest.approx(ref["metrics"][k], rel=1e-5, abs=1e-7), (what, k)
    for name, p in ref["params"].items():
        assert_close(got["params"][name], p, f"{what}: weight {name}", atol=1e-6)


@pytest.mark.slow
def test_a_single_rank_run_is_not_trivially_equal(one_rank):
    """The comparisons above can fail: the two aggregations differ on this batch (rows of uneven length)."""
    a, b = one_rank["llama", "token-mean"], one_rank["llama", "seq-mean-token-mean"]
    assert a["metrics"]["loss/pg"] != pytest.approx(b["metrics"]["loss/pg"], rel=1e-3)
    assert not torch.allclose(a["grads"]["lm.lm_head.weight"], b["grads"]["lm.lm_head.weight"], atol=1e-6)


@pytest.mark.parametrize(
    "heads,kv,sp,rep",
    [(4, 4, 2, 1), (4, 2, 2, 1), (4, 2, 4, 2), (8, 1, 4, 4), (28, 4, 4, 1), (28, 4, 2, 1)],
)
def test_kv_replication(heads, kv, sp, rep):
    assert kv_replication(heads, kv, sp) == rep


@pytest.mark.parametrize("heads,kv,sp", [(4, 2, 3), (6, 4, 4), (12, 3, 2), (28, 4, 8)])
def test_heads_not_divisible_is_a_clear_error(heads, kv, sp):
    with pytest.raises(
        ValueError,
        match=rf"trainer.sp_degree={sp}.*num_attention_heads={heads}, "
        rf"num_key_value_heads={kv}",
    ):
        kv_replication(heads, kv, sp)


def test_enable_rejects_a_model_whose_heads_do_not_split(tmp_path):
    from transformers import AutoModelForCausalLM

    lm = AutoModelForCausalLM.from_pretrained(save_tiny_model(tmp_path / "m"))  # 4 q heads, 2 kv heads
    with pytest.raises(ValueError, match=r"sp_degree=3 .*num_attention_heads=4, num_key_value_heads=2"):
        enable_sequence_parallel(lm, lm.model.layers, SeqShard(rank=0, size=3))


def test_layout():
    lay = RankGrid(rank=5, world_size=8, sp=2)
    assert (lay.dp, lay.dp_rank, lay.sp_rank) == (4, 2, 1)
    with pytest.raises(
        ValueError, match=r"trainer.sp_degree=4 must divide the number of trainer ranks \(6\)"
    ):
        RankGrid(rank=0, world_size=6, sp=4)


def test_shard_bounds_cover_the_padded_row():
    assert [SeqShard(r, 4).bounds(15) for r in range(4)] == [(0, 4), (4, 8), (8, 12), (12, 16)]
    assert SeqShard().bounds(15) == (0, 15)
