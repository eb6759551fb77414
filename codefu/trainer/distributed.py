"""Process-group bring-up and the few collectives the trainer uses (one code path for 1 and N ranks)."""

from __future__ import annotations

import os
import random
import socket
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh

# A rendezvous port is picked here and bound later by rank 0's TCPStore: in between, any process may take
# it. Ports the kernel gives to outgoing connections (ip_local_port_range, 32768-60999 by default) are
# taken all the time on a Ray node (a slow-tier run met EADDRINUSE on one), and Ray's workers listen on
# 10002-19999 by default: the pick comes from between the two.
RENDEZVOUS_PORTS = range(20000, 32768)


def free_port() -> int:
    """A TCP port free now on 127.0.0.1 (for a process group's rendezvous), outside the kernel's range for
    outgoing connections and Ray's worker ports when one is free there, else any free port."""
    low, high = _ephemeral_ports()
    candidates = [p for p in RENDEZVOUS_PORTS if not low <= p <= high]
    tries = random.SystemRandom().sample(candidates, min(32, len(candidates)))  # unseeded: per process
    for port in [*tries, 0]:  # 0: the kernel's pick
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return s.getsockname()[1]
    raise OSError("no free TCP port on 127.0.0.1")


def _ephemeral_ports() -> tuple[int, int]:
    """The kernel's range of ports for outgoing connections (Linux; elsewhere the IANA range)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 49152, 65535


def init_distributed(
    rank: int | None = None,
    world_size: int | None = None,
    init_method: str | None = None,
    device: str = "auto",
    timeout_s: float = 1800.0,
) -> tuple[int, int]:
    """Initialize the default process group unless it already is; returns (rank, world_size).

    rank / world_size / init_method default to the torchrun environment (RANK, WORLD_SIZE, MASTER_ADDR,
    MASTER_PORT); without any of it, a single-rank group on a free port of 127.0.0.1. On CUDA the backend is
    "cpu:gloo,cuda:nccl": NCCL for the GPU collectives, gloo for CPU tensors (CPU offload keeps gradients
    on the CPU, and the gradient-norm all-reduce then runs there). On CPU it is gloo.
    """
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    rank = int(os.environ.get("RANK", 0)) if rank is None else rank
    world_size = int(os.environ.get("WORLD_SIZE", 1)) if world_size is None else world_size
    if init_method is None:
        if "MASTER_ADDR" in os.environ:
            init_method = "env://"
        elif world_size == 1:
            init_method = f"tcp://127.0.0.1:{free_port()}"
        else:
            raise ValueError("init_distributed: world_size > 1 needs init_method or MASTER_ADDR/MASTER_PORT")
    use_cuda = resolve_device(device).type == "cuda"
    if use_cuda:
        torch.cuda.set_device(resolve_device(device))
    backend = "cpu:gloo,cuda:nccl" if use_cuda else "gloo"
    dist.init_process_group(
        backend,
        init_method=init_method,
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
