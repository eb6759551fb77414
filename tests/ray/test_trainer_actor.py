"""The Ray wrapper only forwards: one rank, one update, log-probs and a weight sync through Ray."""

import pytest
import ray
import torch

from codefu.models.tiny import save_tiny_model
from codefu.trainer import TrainerConfig
from codefu.trainer.actor import make_trainer_ranks
from codefu.trainer.testing import random_batch


def test_trainer_actor_round_trip(local_ray, tmp_path):
    model_dir = save_tiny_model(tmp_path / "model")
    cfg = TrainerConfig(model=str(model_dir), lr=1e-3, device="cpu")
    (policy,) = make_trainer_ranks(cfg, world_size=1)
    (reference,) = make_trainer_ranks(cfg, world_size=1, kind="reference")
    batch = random_batch(4, 10, vocab_size=128, prompt_len=3, seed=0)
    batch.old_logprobs = ray.get(policy.compute_logprobs.remote(batch))
    batch.ref_logprobs = ray.get(reference.compute_logprobs.remote(batch))
    torch.testing.assert_close(batch.old_logprobs, batch.ref_logprobs, atol=1e-6, rtol=1e-6)
    metrics = ray.get(policy.update.remote(batch))
    assert metrics["optim/steps"] == 1 and ray.get(policy.step.remote()) == 1
    weights = ray.get(policy.state_dict_for_sync.remote())
    assert "model.embed_tokens.weight" in weights
    path = ray.get(policy.save.remote(str(tmp_path / "ckpt"), {"k": 1}))
    assert path.endswith("step_00000001") and ray.get(policy.load.remote(path)) == {"k": 1}


def test_two_ranks_meet_at_rank_0_and_update_together(local_ray, tmp_path):
    model_dir = save_tiny_model(tmp_path / "model")
    cfg = TrainerConfig(model=str(model_dir), lr=1e-3, device="cpu")
    ranks = make_trainer_ranks(cfg, world_size=2, num_cpus=0.5)
    batch = random_batch(4, 10, vocab_size=128, prompt_len=3, seed=0)
    batch.old_logprobs = ray.get([a.compute_logprobs.remote(batch) for a in ranks])[0]
    metrics = ray.get([a.update.remote(batch) for a in ranks])  # FSDP's collectives: both ranks in one group
    assert metrics[0]["optim/grad_norm"] == pytest.approx(metrics[1]["optim/grad_norm"], rel=1e-6)
    assert ray.get([a.step.remote() for a in ranks]) == [1, 1]


def test_a_rank_that_cannot_start_says_why_at_every_call(local_ray, tmp_path):
    cfg = TrainerConfig(model=str(tmp_path / "no-such-model"), device="cpu")
    (rank,) = make_trainer_ranks(cfg, world_size=1, num_cpus=0.5)
    with pytest.raises(Exception, match="no-such-model"):
        ray.get(rank.ready.remote())
    with pytest.raises(Exception, match="policy rank 0 did not start.*no-such-model"):
        ray.get(rank.step.remote())
