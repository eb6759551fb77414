"""The critic on several ranks (CPU, gloo, spawned with torch.multiprocessing; no Ray): 2 data-parallel
ranks and 2 sequence-parallel ranks give the values, metrics and weights of 1 rank, through two updates
(the first trains the zero-initialised head, so the second's values depend on the whole model).
"""

from pathlib import Path

import pytest
import torch
from torch.distributed.tensor import DTensor

from codefu.models.tiny import save_tiny_model
from codefu.trainer.critic import CriticWorker
from helpers.ranks import end_rank, spawn_ranks, start_rank
from helpers.seq_parallel import assert_close, batch, config


def run(w: CriticWorker) -> dict:
    b = batch()
    g = torch.Generator().manual_seed(7)
    b.old_values = w.compute_values(b) + 0.3 * torch.randn(b.input_ids.shape, generator=g) * b.response_mask
    b.returns = torch.randn(b.input_ids.shape, generator=g) * b.response_mask
    m1 = w.update(b)
    values = w.compute_values(b)
    m2 = w.update(b)
    params = {
        n: (p.full_tensor() if isinstance(p, DTensor) else p).detach().clone()  # a collective
        for n, p in w.model.named_parameters()
    }
    return {"metrics": [m1, m2], "values": values, "params": params}


def critic(model_dir: Path, sp: int) -> CriticWorker:
    return CriticWorker(config(model_dir, sp, "token-mean"), value_clip=0.2)


def _rank_main(rank: int, world_size: int, port: int, sp: int, tmp: str) -> None:
    start_rank(rank, world_size, port)
    result = run(critic(Path(tmp) / "model", sp))
    if rank == 0:
        torch.save(result, Path(tmp) / f"critic_sp{sp}.pt")
    end_rank()


@pytest.fixture(scope="module")
def one_rank(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("critic")
    save_tiny_model(tmp / "model", seed=0, model_type="qwen2")
    return tmp, run(critic(tmp / "model", 1))


@pytest.mark.parametrize("sp", [1, 2], ids=["dp2", "sp2"])
@pytest.mark.slow
def test_two_ranks_equal_one_rank(one_rank, sp):
    tmp, ref = one_rank
    spawn_ranks(_rank_main, 2, sp, str(tmp))
    got = torch.load(tmp / f"critic_sp{sp}.pt")
    what = f"critic, 2 ranks, sp={sp}"
    assert ref["values"].abs().max() > 0  # the head was trained: a vacuous match proves nothing
    assert_close(got["values"], ref["values"], f"{what}: values", atol=1e-5)
    for step in (0, 1):
        for k in ("critic/vf_loss", "critic/vf_clip_frac", "critic/vpred_mean", "critic/grad_norm"):
            assert got["metrics"][step][k] == pytest.approx(ref["metrics"][step][k], rel=1e-5, abs=1e-7), k
    assert ref["metrics"][1]["critic/vf_clip_frac"] > 0  # the clip is exercised
    for name, p in ref["params"].items():
        assert_close(got["params"][name], p, f"{what}: weight {name}", atol=1e-6)
