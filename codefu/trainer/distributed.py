"""Process-group bring-up and the few collectives the trainer uses (one code path for 1 and N ranks)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh


def listening_store(world_size: int, timeout_s: float = 1800.0) -> dist.TCPStore:
    """The rendezvous of a process group's rank 0: a TCPStore listening on every interface on a port the
    kernel picks as it binds, so no other process can take the port between a pick and a bind (a port
    picked free and bound later once met EADDRINUSE on a busy Ray node). The other ranks join it at its
    `.port` on rank 0's address (`joining_store`); it returns at once, before they do."""
    return dist.TCPStore(
        "0.0.0.0", 0, world_size, is_master=True, timeout=timedelta(seconds=timeout_s), wait_for_workers=False
    )


def joining_store(host: str, port: int, world_size: int, timeout_s: float = 1800.0) -> dist.TCPStore:
    """A rank's connection to rank 0's `listening_store` at host:port (waits up to timeout_s for it)."""
    return dist.TCPStore(host, port, world_size, is_master=False, timeout=timedelta(seconds=timeout_s))


def init_distributed(
    rank: int | None = None,
    world_size: int | None = None,
    init_method: str | None = None,
    device: str = "auto",
    timeout_s: float = 1800.0,
    store: dist.Store | None = None,
) -> tuple[int, int]:
    """Initialize the default process group unless it already is; returns (rank, world_size).

    The ranks meet through `store` when given (`listening_store` on rank 0, `joining_store` on the others),
    else at init_method; rank / world_size / init_method default to the torchrun environment (RANK,
    WORLD_SIZE, MASTER_ADDR, MASTER_PORT); without any of it, a single rank listens on its own store. On
    CUDA the backend is "cpu:gloo,cuda:nccl": NCCL for the GPU collectives, gloo for CPU tensors (CPU
    offload keeps gradients on the CPU, and the gradient-norm all-reduce then runs there). On CPU it is
    gloo.
    """
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    rank = int(os.environ.get("RANK", 0)) if rank is None else rank
    world_size = int(os.environ.get("WORLD_SIZE", 1)) if world_size is None else world_size
    if store is None and init_method is None:
        if "MASTER_ADDR" in os.environ:
            init_method = "env://"
        elif world_size == 1:
            store = listening_store(1, timeout_s)  # rank 0's rendezvous, as with several ranks
        else:
            raise ValueError(
                "init_distributed: world_size > 1 needs a store, init_method or MASTER_ADDR/MASTER_PORT"
            )
    use_cuda = resolve_device(device).type == "cuda"
    if use_cuda:
        torch.cuda.set_device(resolve_device(device))
    backend = "cpu:gloo,cuda:nccl" if use_cuda else "gloo"
    dist.init_process_group(
        backend,
        init_method=init_method,
        store=store,
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=timeout_s),
    )
    return rank, world_size


def resolve_device(device: str = "auto") -> torch.device:
    """ "auto" -> this rank's GPU (LOCAL_RANK, else 0) when CUDA is available, else the CPU."""
    if device == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
        return torch.device("cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    return dev


def make_mesh(device: torch.device) -> DeviceMesh:
    """A 1-D mesh over every rank of the default group (FSDP shards each parameter over all of them)."""
    return init_device_mesh(device.type, (dist.get_world_size(),))


@dataclass(frozen=True)
class RankGrid:
    """Where a rank sits in the (dp, sp) grid: world = dp * sp, rank = dp_rank * sp + sp_rank, so the sp
    ranks that share sequences are consecutive (one node, where the all-to-all is cheapest)."""

    rank: int
    world_size: int
    sp: int = 1

    def __post_init__(self) -> None:
        if self.sp < 1 or self.world_size % self.sp:
            raise ValueError(
                f"trainer.sp_degree={self.sp} must divide the number of trainer ranks ({self.world_size})"
            )

    @property
    def dp(self) -> int:
        return self.world_size // self.sp

    @property
    def dp_rank(self) -> int:
        return self.rank // self.sp

    @property
    def sp_rank(self) -> int:
        return self.rank % self.sp


def sp_group(grid: RankGrid, device: torch.device) -> Any:
    """This rank's sequence-parallel process group (a collective: every rank calls it); None for sp == 1.
    FSDP keeps its own 1-D mesh over all ranks: parameters are sharded over the whole world."""
    if grid.sp == 1:
        return None
    mesh = init_device_mesh(device.type, (grid.dp, grid.sp), mesh_dim_names=("dp", "sp"))
    return mesh.get_group("sp")


def all_reduce(t: Tensor, op: str = "sum") -> Tensor:
    """In-place all-reduce ("sum" or "max") over the default group; returns `t`."""
    dist.all_reduce(t, op=dist.ReduceOp.SUM if op == "sum" else dist.ReduceOp.MAX)
    return t
