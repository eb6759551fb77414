"""The start and end of a rank spawned by a multi-rank test (torch.multiprocessing.spawn, gloo or NCCL)."""

import faulthandler
import os
import sys
from typing import Any

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from codefu.trainer.distributed import init_distributed, joining_store, listening_store


def spawn_ranks(rank_main: Any, world_size: int, *args: Any) -> None:
    """rank_main(rank, world_size, port, *args) in world_size processes, which meet (`start_rank`) at a
    store this process listens on for the spawn: its port is bound before any rank starts."""
    store = listening_store(world_size)
    mp.spawn(rank_main, args=(world_size, store.port, *args), nprocs=world_size, join=True)


def start_rank(rank: int, world_size: int, port: int, device: str = "cpu") -> None:
    # a rank that aborts in C++ (spawn reports only "terminated with signal SIGABRT") prints where each
    # of its Python threads was
    faulthandler.enable()
    torch.set_num_threads(1)
    init_distributed(rank, world_size, device=device, store=joining_store("127.0.0.1", port, world_size))


def end_rank() -> None:
    """Every rank done with its groups (rank 0's results written) before any rank closes its own: a rank
    that tears down gloo pairs a peer still holds can abort in gloo's threads. Then the process leaves
    without the interpreter's teardown: twice (2026-12-03, 2026-12-04) a rank whose work was done died
    there with SIGABRT ("terminate called without an active exception", no Python frame left), which
    spawn reports as the test's failure."""
    dist.barrier()
    dist.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def equal_split_config(model_dir: Any, seq_len: int, **overrides: Any) -> Any:
    """A TrainerConfig whose mini-batch of 4 full-length rows (seq_len tokens) is one micro-batch per rank
    at 2 ranks and two at 1 rank (a budget of 2 rows), with every loss term on: the multi-rank tests'
    comparison of 2 ranks against 1."""
    from codefu.trainer import TrainerConfig

    base = dict(
        model=str(model_dir),
        lr=1e-3,
        adam_eps=1e-5,
        mini_batch_size=4,
        ppo_epochs=2,
        micro_batch_tokens=2 * seq_len,
        warmup_steps=2,
        schedule="cosine",
        total_steps=20,
        kl_coef=0.05,
        entropy_coef=0.01,
        keep_last=0,
    )
    return TrainerConfig(**(base | overrides))
