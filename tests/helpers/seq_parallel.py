"""Ulysses sequence-parallel checks shared by the CPU (gloo) and GPU tiers: the config, batch and one update."""

from __future__ import annotations

from pathlib import Path

import torch
from torch.distributed.tensor import DTensor

from codefu.trainer import Batch, TrainerConfig, TrainerWorker
from codefu.trainer.testing import random_batch

VOCAB = 128


LEN = 15  # not a multiple of 2 or 4: the last rank's slice reaches into padding


MODELS = {"llama": {}, "qwen2": {"model_type": "qwen2"}}  # TINY_LLAMA's sizes: 4 q heads, 2 kv heads


def config(model_dir: Path, sp: int, loss_agg: str) -> TrainerConfig:
    # budget: 2 full rows per rank-slice (x sp for a group), so 1 rank runs several micro-batches
    return TrainerConfig(
        model=str(model_dir),
        device="cpu",
        lr=1e-3,
        adam_eps=1e-5,
        micro_batch_tokens=2 * LEN,
        kl_coef=0.05,
        entropy_coef=0.01,
        loss_agg=loss_agg,
        sp_degree=sp,
        keep_last=0,
    )


def batch() -> Batch:
    b = random_batch(7, LEN, VOCAB, prompt_len=3, min_len=4, seed=5)
    g = torch.Generator().manual_seed(5)
    b.old_logprobs = (-4.8 + 0.1 * torch.randn(b.input_ids.shape, generator=g)) * b.response_mask
    b.ref_logprobs = (-4.8 + 0.1 * torch.randn(b.input_ids.shape, generator=g)) * b.response_mask
    return b


def run(w: TrainerWorker) -> dict:
    """log-probs, full gradients before the step, metrics and weights after one update (every rank calls)."""
    b = batch()
    out: dict = {"logprobs": w.compute_logprobs(b), "grads": {}}
    clip = w._clip_gradients

    def capture() -> float:
        for name, p in w.model.named_parameters():
            g = p.grad
            out["grads"][name] = (g.full_tensor() if isinstance(g, DTensor) else g).clone()  # a collective
        return clip()

    w._clip_gradients = capture
    out["metrics"] = w.update(b)
    out["params"] = w.state_dict_for_sync(dtype=torch.float32)  # rank 0 (others: {})
    return out


def assert_close(a, b, what: str, atol: float) -> None:
    torch.testing.assert_close(a, b, atol=atol, rtol=1e-5, msg=lambda s: f"{what}: {s}")
