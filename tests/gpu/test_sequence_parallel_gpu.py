"""Ulysses sequence parallelism on 2 GPUs (NCCL, "cpu:gloo,cuda:nccl" group) against 1 GPU: the same
log-probs, gradients and updated weights for the CPU test's batch (fp32 compute, TF32 off, so the
comparison is tight). Needs 2 GPUs: `pytest tests/gpu/test_sequence_parallel_gpu.py` on an x2 machine."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs"),
]

from codefu.models.tiny import save_tiny_model  # noqa: E402
from codefu.trainer import TrainerWorker  # noqa: E402
from helpers.ranks import end_rank, spawn_ranks, start_rank  # noqa: E402
from helpers.seq_parallel import MODELS, assert_close, config, run  # noqa: E402


def gpu_config(model_dir: Path, sp: int):
    return replace(config(model_dir, sp, "token-mean"), device="auto", dtype="float32")


def _rank_main(rank: int, world_size: int, port: int, tmp: str) -> None:
    os.environ["LOCAL_RANK"] = str(rank)  # resolve_device("auto") -> cuda:rank
    torch.backends.cuda.matmul.allow_tf32 = False
    start_rank(rank, world_size, port, device="auto")
    result = run(TrainerWorker(gpu_config(Path(tmp) / "qwen2", world_size)))
    if rank == 0:
        result["grads"] = {k: g.cpu() for k, g in result["grads"].items()}
        torch.save(result, Path(tmp) / "gpu_sp2.pt")
    end_rank()


def test_two_gpus_sp2_equal_one_gpu(tmp_path):
    save_tiny_model(tmp_path / "qwen2", seed=0, **MODELS["qwen2"])
    spawn_ranks(_rank_main, 2, str(tmp_path))
    got = torch.load(tmp_path / "gpu_sp2.pt")
    torch.backends.cuda.matmul.allow_tf32 = False
    ref = run(TrainerWorker(gpu_config(tmp_path / "qwen2", 1)))  # 1 rank in this process, cuda:0
    assert_close(got["logprobs"], ref["logprobs"], "log-probs", atol=2e-5)
    for name, g in ref["grads"].items():
        torch.testing.assert_close(got["grads"][name].cpu(), g.cpu(), atol=1e-5, rtol=1e-3, msg=name)
    for name, p in ref["params"].items():
        torch.testing.assert_close(got["params"][name], p, atol=1e-5, rtol=1e-4, msg=name)
