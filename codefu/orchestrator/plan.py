"""The cluster plan: a pure function from the resources config to what each role needs.

    plan = make_plan(ResourcesConfig(trainer_ranks=8, gpus_per_rank=1), kl_enabled=True)
    check_plan(plan, ray.cluster_resources())   # CodefuError listing what the cluster lacks

Roles: `trainer` (FSDP ranks), `reference` (a frozen policy, only when the KL term is on), `rollout`
(inference engines) and `judge` (sandboxes on CPUs). In `colocate` mode rollout and reference share the
trainers' GPUs (memory is swapped between phases); otherwise each role holds its own devices.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from codefu.errors import CodefuError


@dataclass
class ResourcesConfig:
    trainer_ranks: int = 1
    """FSDP ranks of the policy (one process each)."""
    gpus_per_rank: float = 0.0
    """GPUs per trainer rank: 0 on CPU, 1 on a GPU machine."""
    cpus_per_rank: float = 1.0
    rollout_workers: int = 1
    """Inference engines; with `colocate` at most one per trainer GPU."""
    gpus_per_rollout_worker: float = 0.0
    """GPUs each engine holds when not colocated (tensor parallel engines take more than 1)."""
    cpus_per_rollout_worker: float = 1.0
    colocate: bool = True
    """Rollout and reference share the trainers' GPUs (hybrid engine); False: separate GPUs."""
    judge_cpus: float = 1.0
    """CPUs the judge needs at least (it uses every CPU it is given; more is better)."""
    judge_group: str | None = None
    """Judge only on the nodes of this `codefu launch` instance group (e.g. "cpu"); None: every node."""


@dataclass(frozen=True)
class RoleNeed:
    role: str
    count: int  # actors
    cpus: float  # per actor
    gpus: float  # per actor

    @property
    def total_cpus(self) -> float:
        return self.count * self.cpus

    @property
    def total_gpus(self) -> float:
        return self.count * self.gpus


@dataclass(frozen=True)
class Plan:
    roles: tuple[RoleNeed, ...]

    def need(self, role: str) -> RoleNeed | None:
        return next((r for r in self.roles if r.role == role), None)

    @property
    def cpus(self) -> float:
        return sum(r.total_cpus for r in self.roles)

    @property
    def gpus(self) -> float:
        return sum(r.total_gpus for r in self.roles)


def make_plan(res: ResourcesConfig, kl_enabled: bool) -> Plan:
    """What every role needs. In colocated mode the GPU is counted once, by the trainer ranks; the
    colocated actors take a fraction of it so Ray places them beside a rank without reserving more."""
    if res.trainer_ranks < 1 or res.rollout_workers < 1:
        raise CodefuError("resources: trainer_ranks and rollout_workers must be at least 1")
    if res.gpus_per_rank < 0 or res.gpus_per_rollout_worker < 0:
        raise CodefuError("resources: GPU counts cannot be negative")
    roles = []
    shared = res.colocate and res.gpus_per_rank > 0
    # A colocated actor asks for a sliver of its rank's GPU: Ray then puts it on a GPU node, and the
    # trainer rank's share (1 - slivers) keeps the total at one GPU per rank.
    sliver = 0.1 if shared else 0.0
    colocated_per_rank = (1 if kl_enabled else 0) + math.ceil(res.rollout_workers / res.trainer_ranks)
    if shared and res.rollout_workers > res.trainer_ranks:
        raise CodefuError(
            f"resources: colocated mode runs at most one rollout worker per trainer GPU "
            f"({res.rollout_workers} workers, {res.trainer_ranks} ranks)"
        )
    trainer_gpus = res.gpus_per_rank - sliver * colocated_per_rank if shared else res.gpus_per_rank
    roles.append(RoleNeed("trainer", res.trainer_ranks, res.cpus_per_rank, trainer_gpus))
    if kl_enabled:
        ref_gpus = sliver if shared else res.gpus_per_rank
        roles.append(RoleNeed("reference", 1, res.cpus_per_rank, ref_gpus))
    rollout_gpus = sliver if shared else res.gpus_per_rollout_worker
    roles.append(RoleNeed("rollout", res.rollout_workers, res.cpus_per_rollout_worker, rollout_gpus))
    roles.append(RoleNeed("judge", 1, res.judge_cpus, 0.0))
    return Plan(tuple(roles))


def check_plan(plan: Plan, cluster: dict[str, float]) -> None:
    """Fail fast, before any actor starts, with everything the cluster lacks in one message."""
    missing = []
    have_cpus, have_gpus = cluster.get("CPU", 0.0), cluster.get("GPU", 0.0)
    if plan.cpus > have_cpus + 1e-9:
        detail = ", ".join(f"{r.role} {r.total_cpus:g}" for r in plan.roles if r.total_cpus)
        missing.append(f"{plan.cpus:g} CPUs needed ({detail}), the cluster has {have_cpus:g}")
    if plan.gpus > have_gpus + 1e-9:
        detail = ", ".join(f"{r.role} {r.total_gpus:g}" for r in plan.roles if r.total_gpus)
        missing.append(f"{plan.gpus:g} GPUs needed ({detail}), the cluster has {have_gpus:g}")
    if missing:
        raise CodefuError("the cluster is too small: " + "; ".join(missing))
