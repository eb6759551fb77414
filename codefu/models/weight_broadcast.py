"""Weights from trainer rank 0 to the rollout workers by a collective broadcast (resources.weight_transfer:
broadcast): NCCL between GPUs, gloo between CPU processes, over a group of its own.

The trainer's ranks already form the default torch.distributed group (FSDP), and an engine process may
hold none, so this group is built apart from it: a TCPStore that trainer rank 0 hosts, and a process group
made directly on it (no `init_process_group`, which a process can do once). Member 0 sends, members 1..N
(the rollout workers) receive, each into a flat buffer laid out as `FlatLayout` says (codefu/models/
weights.py): one collective per sync, whatever the number of tensors.

    sender = WeightBroadcast.host(ip, size, timeout_s)  # trainer rank 0: its store; the address pickles
    (on every member at once, the sender included)
    group = WeightBroadcast.join(address, rank, device, timeout_s, store?, own_host)
    sender: group.send(packed.flat)      receivers: group.receive(flat)     # the same number of elements

A member that dies or never calls makes the others' calls fail after `timeout_s` with an error saying so
(gloo raises when a peer closes its connection or the timeout passes; an NCCL collective is watched
against the clock). Joining ends with a one-element broadcast, so an unreachable member shows then. The
NCCL path is not tested yet (it needs two GPUs).
"""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor


@dataclass(frozen=True)
class GroupAddress:
    """Where the group's store listens (trainer rank 0's node) and how many members it waits for."""

    host: str
    port: int
    size: int


class WeightBroadcast:
    """One member of a weight-broadcast group: rank 0 sends, the others receive."""

    def __init__(self, group: dist.ProcessGroup, rank: int, size: int, backend: str, timeout_s: float):
        self.group = group
        self.rank = rank
        self.size = size
        self.backend = backend
        self.timeout_s = timeout_s

    @staticmethod
    def host(host: str, size: int, timeout_s: float) -> tuple[GroupAddress, dist.TCPStore]:
        """Start the group's store on this node, listening on every interface on a port the kernel picks
        as it binds (no race for a free port); `host` is this node's address as the others reach it. Pass
        the store to `join` as member 0."""
        timeout = datetime.timedelta(seconds=timeout_s)
        store = dist.TCPStore("0.0.0.0", 0, size, is_master=True, timeout=timeout, wait_for_workers=False)
        return GroupAddress(host, store.port, size), store

    @classmethod
    def join(
        cls,
        address: GroupAddress,
        rank: int,
        device: torch.device,
        timeout_s: float,
        store: dist.TCPStore | None = None,
        own_host: str | None = None,
    ) -> WeightBroadcast:
        """Join as `rank` (0: the sender, with the store `host` returned); returns once all `size` members
        have joined, or raises after `timeout_s`. NCCL where `device` is a GPU, else gloo (on `own_host`,
        this member's address as the others reach it; None: the hostname's)."""
        if not 0 <= rank < address.size:
            raise ValueError(f"rank {rank} outside a group of {address.size}")
        timeout = datetime.timedelta(seconds=timeout_s)
        if store is None:
            store = dist.TCPStore(address.host, address.port, address.size, is_master=False, timeout=timeout)
        store = dist.PrefixStore("codefu-weights", store)
        if device.type == "cuda":
            options = dist.ProcessGroupNCCL.Options()
            options._timeout = timeout
            group: dist.ProcessGroup = dist.ProcessGroupNCCL(store, rank, address.size, options)
            backend = "nccl"
        else:
            options = dist.ProcessGroupGloo._Options()
            options._timeout = timeout
            # bound to this member's own address: gloo's default device takes the hostname's, which on
            # a host whose name resolves to loopback the other nodes cannot reach
            device_of = dist.ProcessGroupGloo
            own = (
                device_of.create_device(hostname=own_host) if own_host else device_of.create_default_device()
            )
            options._devices = [own]
            group = dist.ProcessGroupGloo(store, rank, address.size, options)
            backend = "gloo"
        member = cls(group, rank, address.size, backend, timeout_s)
        member._store = store  # the store's connection lives as long as the group
        # a first collective: NCCL connects lazily, and a member that cannot be reached must show here,
        # not at the first sync
        member._broadcast(torch.ones(1, device=device))
        return member

    def send(self, flat: Tensor) -> None:
        """Member 0: `flat` to every other member (returns once sent)."""
        if self.rank != 0:
            raise RuntimeError(f"member {self.rank} of the weight group cannot send: only member 0 sends")
        self._broadcast(flat)

    def receive(self, flat: Tensor) -> None:
        """Members 1..N: fill `flat` (on this member's device, the sender's element count and dtype)."""
        if self.rank == 0:
            raise RuntimeError("member 0 of the weight group sends; it receives nothing")
        self._broadcast(flat)

    def _broadcast(self, flat: Tensor) -> None:
        opts = dist.BroadcastOptions()
        opts.rootRank = 0
        opts.rootTensor = 0
        try:
            work = self.group.broadcast([flat], opts)
            if flat.is_cuda:  # NCCL's wait() only orders streams: watch the collective against the clock
                deadline = time.monotonic() + self.timeout_s
                while not work.is_completed():
                    if time.monotonic() > deadline:
                        raise RuntimeError("timed out")
                    time.sleep(0.001)
            work.wait()
            if flat.is_cuda:
                torch.cuda.current_stream(flat.device).synchronize()  # the copy is done before it is read
        except RuntimeError as e:
            raise RuntimeError(
                f"the weight broadcast ({self.backend}, member {self.rank} of {self.size}, "
                f"{flat.numel() * flat.element_size() / 2**20:.1f} MiB) failed: a member died, did not take "
                f"part, or did not within {self.timeout_s:g} s (loop.weight_sync_timeout_s): {e}"
            ) from e

    def close(self) -> None:
        shutdown = getattr(self.group, "shutdown", None)
        if shutdown is not None:
            shutdown()


__all__ = ["GroupAddress", "WeightBroadcast"]
