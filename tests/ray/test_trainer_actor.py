"""The Ray wrapper only forwards: one rank, one update, log-probs and a weight sync through Ray."""

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
