"""The start and end of a rank spawned by a multi-rank test (torch.multiprocessing.spawn, gloo or NCCL)."""

import faulthandler

import torch
import torch.distributed as dist

from codefu.trainer.distributed import init_distributed


def start_rank(rank: int, world_size: int, port: int, device: str = "cpu") -> None:
    # a rank that aborts in C++ (spawn reports only "terminated with signal SIGABRT") prints where each
    # of its Python threads was
    faulthandler.enable()
    torch.set_num_threads(1)
    init_distributed(rank, world_size, f"tcp://127.0.0.1:{port}", device=device)


def end_rank() -> None:
    """Every rank done with its groups (rank 0's results written) before any rank closes its own: a rank
    that tears down gloo pairs a peer still holds can abort in gloo's threads."""
    dist.barrier()
    dist.destroy_process_group()
