"""The optimizer's state off the GPU while a colocated engine generates (trainer.offload_optimizer): the
memory comes free, the state comes back bit for bit, and training goes on as if it never left."""

from __future__ import annotations

import pytest
import torch

from codefu.models.tiny import save_tiny_model
from codefu.trainer import TrainerConfig, TrainerWorker
from codefu.trainer.critic import CriticWorker
from codefu.trainer.testing import random_batch

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    # wide enough that AdamW's state is visible in memory_allocated (~2 x 4 MB of fp32)
    return save_tiny_model(
        tmp_path_factory.mktemp("m") / "model", seed=0, hidden_size=256, intermediate_size=1024
    )


def batch():
    b = random_batch(4, 24, 128, prompt_len=4, min_len=8, seed=1)
    b.advantages = torch.tensor([1.0, -1.0, 0.5, -0.5])
    return b


def test_offload_frees_the_state_and_training_continues_identically(model_dir):
    cfg = TrainerConfig(model=str(model_dir), device="cuda", dtype="float32", lr=1e-3)
    moved, stayed = TrainerWorker(cfg), TrainerWorker(cfg)
    b = batch()
    b.old_logprobs = moved.compute_logprobs(b)
    assert moved.offload_optimizer() == {}  # no state before the first step
    for w in (moved, stayed):
        w.update(b)
    state = [t.clone() for t in moved._optimizer_tensors()]
    before = torch.cuda.memory_allocated()
    m = moved.offload_optimizer()
    assert m["memory/optimizer_offloaded_gb"] * 2**30 >= 2 * 4 * sum(
        p.numel() for p in moved.model.parameters()
    )
    assert torch.cuda.memory_allocated() < before - 0.9 * m["memory/optimizer_offloaded_gb"] * 2**30
    assert all(t.device.type == "cpu" and t.is_pinned() for t in moved._optimizer_tensors())
    assert moved.offload_optimizer() == {}  # twice: nothing more to move
    assert "timing/reload_s" in moved.reload_optimizer()
    for t, saved in zip(moved._optimizer_tensors(), state, strict=True):
        assert t.device.type == "cuda"
        torch.testing.assert_close(t, saved, atol=0, rtol=0)  # back bit for bit
    moved.offload_optimizer()
    moved.update(b)  # reloads first
    stayed.update(b)
    assert all(t.device.type == "cuda" for t in moved._optimizer_tensors())
    a, s = moved.state_dict_for_sync(dtype=torch.float32), stayed.state_dict_for_sync(dtype=torch.float32)
    for k in a:
        torch.testing.assert_close(a[k], s[k], atol=0, rtol=0)


def test_a_checkpoint_saved_while_offloaded_holds_the_state(model_dir, tmp_path):
    cfg = TrainerConfig(model=str(model_dir), device="cuda", dtype="float32", lr=1e-3)
    w = CriticWorker(cfg, value_clip=None)
    b = batch()
    b.old_values = w.compute_values(b)
    b.returns = torch.ones_like(b.old_values) * b.response_mask
    w.update(b)
    w.offload_optimizer()
    w.save(tmp_path / "ckpt")  # brings the state back first
    fresh = CriticWorker(cfg, value_clip=None)
    fresh.load(tmp_path / "ckpt")
    w.update(b)
    fresh.update(b)
    torch.testing.assert_close(fresh.compute_values(b), w.compute_values(b), atol=0, rtol=0)


def test_a_forward_pass_gives_its_cached_memory_back(model_dir):
    # a colocated engine sizes its KV cache from the free memory: a reference (or critic) that kept its
    # pass's cached blocks would take them from the cache every step
    cfg = TrainerConfig(
        model=str(model_dir), device="cuda", dtype="float32", forward_micro_batch_tokens=16384
    )
    reference = TrainerWorker(cfg, frozen=True)
    b = random_batch(64, 256, 128, prompt_len=8, min_len=64, seed=2)
    torch.cuda.synchronize()
    allocated, reserved = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
    torch.cuda.reset_peak_memory_stats()
    reference.compute_logprobs(b)
    assert torch.cuda.max_memory_allocated() > allocated + 32 * 2**20  # the pass needed blocks of its own
    assert torch.cuda.memory_reserved() <= reserved + 2 * 2**20


def test_the_reference_offloaded_frees_its_weights_and_comes_back_identically(model_dir):
    cfg = TrainerConfig(model=str(model_dir), device="cuda", dtype="float32")
    reference = TrainerWorker(cfg, frozen=True)
    b = batch()
    expected = reference.compute_logprobs(b)
    weight_bytes = sum(p.numel() * p.element_size() for p in reference.model.parameters())
    torch.cuda.synchronize()
    allocated = torch.cuda.memory_allocated()
    moved = reference.offload_weights()
    assert moved["memory/reference_offloaded_gb"] * 2**30 >= weight_bytes
    assert torch.cuda.memory_allocated() <= allocated - weight_bytes
    assert all(h.is_pinned() for h in reference._host_weights)
    assert "timing/reference_reload_s" in reference.reload_weights()
    assert torch.cuda.memory_allocated() >= allocated
    torch.testing.assert_close(reference.compute_logprobs(b), expected, atol=0, rtol=0)
    reference.offload_weights()
    torch.testing.assert_close(reference.compute_logprobs(b), expected, atol=0, rtol=0)  # reloads itself
