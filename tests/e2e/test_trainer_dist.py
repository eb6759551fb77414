"""Multi-rank FSDP2 on CPU (gloo), ranks spawned with torch.multiprocessing -- no Ray.

- 2 ranks x 1 micro-batch per mini-batch give the same weights as 1 rank x 2 micro-batches;
- save at 2 ranks -> load at 1 rank (another process) -> the same next update, and save at 1 -> load at 2.

The 1-rank side runs in this pytest process (a single-rank gloo group); the 2-rank side in spawned
processes that exchange results through files in tmp_path.
"""

from pathlib import Path

import pytest
import torch

from codefu.models.tiny import save_tiny_model
from codefu.trainer import Batch, TrainerConfig, TrainerWorker
from codefu.trainer.packing import plan_micro_batches
from codefu.trainer.testing import grouped_batch, random_batch
from helpers.ranks import end_rank, equal_split_config, spawn_ranks, start_rank

VOCAB = 128
LEN = 12


def config(model_dir: Path) -> TrainerConfig:
    return equal_split_config(model_dir, LEN)


def batches(model_dir: Path) -> tuple[Batch, Batch]:
    """Two batches with fixed old/ref log-probs (from the initial model: the same on every rank)."""
    out = []
    for seed in (1, 2):
        b = random_batch(8, LEN, VOCAB, prompt_len=3, seed=seed)  # all rows full length: packing is exact
        g = torch.Generator().manual_seed(seed)
        b.old_logprobs = -4.8 + 0.1 * torch.randn(b.input_ids.shape, generator=g) * b.response_mask
        b.ref_logprobs = -4.8 + 0.1 * torch.randn(b.input_ids.shape, generator=g) * b.response_mask
        out.append(b)
    return out[0], out[1]


def packed_config(model_dir: Path, packing: str) -> TrainerConfig:
    # 3 prompt groups over 2 ranks: one rank gets 2 groups, the other 1 and stand-in micro-batches
    return TrainerConfig(
        model=str(model_dir), lr=1e-3, adam_eps=1e-5, micro_batch_tokens=48, kl_coef=0.05, packing=packing
    )


def packed_batch() -> Batch:
    b = grouped_batch(3, 4, VOCAB, prompt_len=9, seed=3)
    g = torch.Generator().manual_seed(3)
    b.old_logprobs = -4.8 + 0.1 * torch.randn(b.input_ids.shape, generator=g) * b.response_mask
    b.ref_logprobs = -4.8 + 0.1 * torch.randn(b.input_ids.shape, generator=g) * b.response_mask
    return b


def full_params(w: TrainerWorker) -> dict[str, torch.Tensor]:
    return w.state_dict_for_sync(dtype=torch.float32)  # rank 0 only (others: {})


def _rank_main(rank: int, world_size: int, port: int, job: str, tmp: str) -> None:
    tmp = Path(tmp)
    start_rank(rank, world_size, port)
    b1, b2 = batches(tmp / "model")
    w = TrainerWorker(config(tmp / "model"))
    if job == "train_save":
        m1 = w.update(b1)
        sd = full_params(w)
        w.save(tmp / "ckpt_ws2", extra_state={"saved_by": "2 ranks"})
        w.update(b2)
        if rank == 0:
            torch.save({"after1": sd, "after2": full_params(w), "metrics1": m1}, tmp / "ws2_run.pt")
        else:
            full_params(w)
    elif job == "packed":
        w = TrainerWorker(packed_config(tmp / "model", "shared_prefix"))
        b = packed_batch()
        lp = w.compute_logprobs(b)
        metrics = w.update(b)
        sd = full_params(w)
        if rank == 0:
            torch.save({"logprobs": lp, "params": sd, "metrics": metrics}, tmp / "ws2_packed.pt")
    elif job == "resume":
        extra = w.load(tmp / "ckpt_ws1")
        w.update(b2)
        sd = full_params(w)
        if rank == 0:
            torch.save({"after2": sd, "extra": extra, "step": w.step}, tmp / "ws2_resumed.pt")
    end_rank()


def spawn(job: str, tmp: Path) -> None:
    spawn_ranks(_rank_main, 2, job, str(tmp))


def assert_same(a: dict, b: dict, what: str) -> None:
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], atol=1e-6, rtol=1e-5, msg=lambda s, k=k: f"{what}: {k}: {s}")


@pytest.fixture(scope="module")
def two_rank_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dist")
    save_tiny_model(tmp / "model", seed=0)
    spawn("train_save", tmp)
    return tmp, torch.load(tmp / "ws2_run.pt")


def test_two_ranks_equal_one_rank_with_two_micro_batches(two_rank_run):
    tmp, ws2 = two_rank_run
    b1, _ = batches(tmp / "model")
    w = TrainerWorker(config(tmp / "model"))
    assert w.world_size == 1
    rows = list(range(4))
    assert len(w._my_micro_batches(b1, rows, b1.lengths().tolist())[0]) == 2  # 1 rank: 2 micro-batches
    metrics = w.update(b1)
    assert metrics["optim/steps"] == 4
    for k in ("loss/total", "loss/pg", "loss/kl", "policy/entropy", "optim/grad_norm", "policy/clip_frac"):
        assert metrics[k] == pytest.approx(ws2["metrics1"][k], rel=1e-5, abs=1e-7), k
    assert_same(full_params(w), ws2["after1"], "1 rank vs 2 ranks")


def test_save_at_two_ranks_load_at_one(two_rank_run):
    tmp, ws2 = two_rank_run
    _, b2 = batches(tmp / "model")
    w = TrainerWorker(config(tmp / "model"))
    assert w.load(tmp / "ckpt_ws2") == {"saved_by": "2 ranks"}
    assert w.step == 4
    w.update(b2)
    assert_same(full_params(w), ws2["after2"], "resumed at 1 rank vs uninterrupted 2 ranks")


def test_save_at_one_rank_load_at_two(two_rank_run):
    tmp, _ = two_rank_run
    b1, b2 = batches(tmp / "model")
    w = TrainerWorker(config(tmp / "model"))
    w.update(b1)
    w.save(tmp / "ckpt_ws1", extra_state={"saved_by": "1 rank"})
    w.update(b2)
    spawn("resume", tmp)
    resumed = torch.load(tmp / "ws2_resumed.pt")
    assert resumed["extra"] == {"saved_by": "1 rank"} and resumed["step"] == 8
    assert_same(resumed["after2"], full_params(w), "resumed at 2 ranks vs uninterrupted 1 rank")


def test_two_ranks_packed_equal_one_rank_padded(two_rank_run):
    """Shared-prefix packing over 2 ranks (groups dealt whole, one rank running a stand-in micro-batch)
    gives the log-probs and the update of padded rows on one rank."""
    tmp, _ = two_rank_run
    spawn("packed", tmp)
    ws2 = torch.load(tmp / "ws2_packed.pt")
    w = TrainerWorker(packed_config(tmp / "model", "padded"))
    b = packed_batch()
    plan = plan_micro_batches(b.input_ids, b.lengths().tolist(), b.response_mask, list(range(12)), 48, 2)
    assert sorted(len(rank) for rank in plan) == [1, 2]  # whole groups; one rank runs a stand-in
    torch.testing.assert_close(ws2["logprobs"], w.compute_logprobs(b), atol=1e-5, rtol=1e-5)
    metrics = w.update(b)
    for k in ("loss/total", "loss/kl", "optim/grad_norm"):
        assert ws2["metrics"][k] == pytest.approx(metrics[k], rel=1e-5, abs=1e-7), k
    assert_same(ws2["params"], full_params(w), "2 ranks packed vs 1 rank padded")
