"""The role layout: a pure function from the resources config to Ray placement-group bundles and which
actor goes in which bundle.

    layout = make_layout(ResourcesConfig(trainer_ranks=8, gpus_per_rank=1), kl_enabled=True)
    check_layout(layout, ray.cluster_resources(), nodes)   # CodefuError listing what the cluster lacks
    layout.bundles     # one placement group, strategy layout.strategy ("PACK")
    layout.slots_of("trainer")   # Slot(role, index, bundle, cpus, gpus) per actor

Roles: `trainer` (FSDP ranks), `reference` (a frozen policy with as many ranks, only when the KL term is on),
`critic` (PPO's value model with as many ranks, only with a critic), `rollout` (inference engines) and
`judge` (sandboxes on CPUs; spread by its own pool, not in the placement group).

- colocated (hybrid engine, `colocate: true`, verl's default): one bundle per trainer rank holding the rank,
  its reference rank and rollout worker j = rank j, sharing the rank's GPU (memory is swapped between
  phases); the colocated actors take a sliver of the GPU so that Ray hands them the same device.
- split (`colocate: false`): a bundle per trainer rank (the rank and its reference rank) and a bundle per
  rollout worker with `gpus_per_rollout_worker` GPUs of its own.
- the critic's rank i sits beside trainer rank i (`critic_colocate: true`, verl's default) or, split, in a
  bundle of its own with `gpus_per_rank` GPUs (after every other bundle).

A bundle always sits on one node; the group is PACKed (as few nodes as possible). On CPU the same code path
runs with CPU-only bundles.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from codefu.errors import CodefuError

# The GPU share of a colocated reference or rollout actor: Ray then puts it on its bundle's GPU, and the
# trainer rank's share (1 - slivers) keeps the bundle at one GPU. Shares are Ray bookkeeping, not memory caps.
SLIVER = 0.1
STRATEGY = "PACK"

WeightTransfer = Literal["store", "broadcast"]
WEIGHT_TRANSFERS = get_args(WeightTransfer)


@dataclass
class ResourcesConfig:
    trainer_ranks: int = 1
    """FSDP ranks of the policy (one process each); a multiple of trainer.sp_degree."""
    gpus_per_rank: float = 0.0
    """GPUs per trainer rank: 0 on CPU, 1 on a GPU machine."""
    cpus_per_rank: float = 1.0
    rollout_workers: int = 1
    """Inference engines; prompts are spread over them (whole GRPO groups). Colocated: at most one per trainer
    GPU (worker j shares rank j's GPU)."""
    gpus_per_rollout_worker: float = 0.0
    """GPUs each engine holds in split mode (tensor parallel engines take more than 1); colocated workers
    share their rank's GPU instead."""
    cpus_per_rollout_worker: float = 1.0
    colocate: bool = True
    """Rollout and reference share the trainers' GPUs (hybrid engine); False: rollout on separate GPUs."""
    weight_transfer: WeightTransfer = "store"
    """How the policy's weights reach rollout workers of their own (colocate false): "store" (trainer rank 0
    puts them in Ray's object store, each worker fetches them) or "broadcast" (one collective from rank 0
    to every worker: NCCL between whole GPUs, gloo on CPU). Colocated engines take them in place."""
    critic_colocate: bool = True
    """PPO's critic (algo.estimator: ppo) shares the trainers' GPUs, rank i beside trainer rank i; False: its
    ranks get GPUs of their own (gpus_per_rank each)."""
    judge_cpus: float = 1.0
    """CPUs the judge needs at least (it uses every CPU it is given; more is better)."""
    judge_instance_group: str | None = None
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
class Bundle:
    """One placement-group bundle: resources reserved together on one node."""

    cpus: float
    gpus: float

    def resources(self) -> dict[str, float]:
        return {"CPU": self.cpus} | ({"GPU": self.gpus} if self.gpus else {})


@dataclass(frozen=True)
class Slot:
    """Actor `index` of `role` (a rank, a worker) runs in bundle `bundle` with these resources."""

    role: str
    index: int
    bundle: int
    cpus: float
    gpus: float


@dataclass(frozen=True)
class Layout:
    roles: tuple[RoleNeed, ...]
    bundles: tuple[Bundle, ...] = ()
    slots: tuple[Slot, ...] = ()
    strategy: str = STRATEGY

    def need(self, role: str) -> RoleNeed | None:
        return next((r for r in self.roles if r.role == role), None)

    def slots_of(self, role: str) -> list[Slot]:
        """The role's actors in index order."""
        return sorted((s for s in self.slots if s.role == role), key=lambda s: s.index)

    @property
    def cpus(self) -> float:
        return sum(b.cpus for b in self.bundles) + sum(r.total_cpus for r in self.roles if r.role == "judge")

    @property
    def gpus(self) -> float:
        return sum(b.gpus for b in self.bundles)


def _check(res: ResourcesConfig, sp_degree: int) -> None:
    if res.trainer_ranks < 1 or res.rollout_workers < 1:
        raise CodefuError("resources: trainer_ranks and rollout_workers must be at least 1")
    if res.gpus_per_rank < 0 or res.gpus_per_rollout_worker < 0:
        raise CodefuError("resources: GPU counts cannot be negative")
    if res.cpus_per_rank < 0 or res.cpus_per_rollout_worker < 0 or res.judge_cpus < 0:
        raise CodefuError("resources: CPU counts cannot be negative")
    if sp_degree < 1 or res.trainer_ranks % sp_degree:
        raise CodefuError(
            f"resources.trainer_ranks={res.trainer_ranks} must be a multiple of trainer.sp_degree={sp_degree}"
        )
    if res.colocate and res.gpus_per_rank > 0 and res.rollout_workers > res.trainer_ranks:
        raise CodefuError(
            f"resources: colocated mode runs at most one rollout worker per trainer GPU "
            f"({res.rollout_workers} workers, {res.trainer_ranks} ranks): set resources.colocate=false "
            f"to give rollout workers GPUs of their own"
        )


def make_layout(res: ResourcesConfig, kl_enabled: bool, sp_degree: int = 1, critic: bool = False) -> Layout:
    """Bundles and slots for every actor role (pure). Bundle i < trainer_ranks holds trainer rank i (and
    reference rank i, and with `critic_colocate` critic rank i); colocated rollout worker j sits in bundle
    j, other rollout workers get bundles after the trainers', then split critic ranks theirs. On CPU
    (gpus_per_rank 0) rollout workers beyond the ranks get bundles of their own."""
    _check(res, sp_degree)
    n = res.trainer_ranks
    has_gpu = res.gpus_per_rank > 0
    in_rank_bundle = min(res.rollout_workers, n) if res.colocate else 0
    # actors beside each rank on its GPU: its reference rank, and its rollout worker when colocated; each
    # asks for a sliver so that Ray hands it the bundle's GPU (on CPU, none)
    critic_beside = critic and res.critic_colocate
    beside = (1 if kl_enabled else 0) + (1 if in_rank_bundle else 0) + (1 if critic_beside else 0)
    side_gpus = SLIVER if has_gpu else 0.0
    trainer_gpus = res.gpus_per_rank - SLIVER * beside if has_gpu else 0.0
    if has_gpu and beside and not (trainer_gpus > 0 and res.gpus_per_rank <= 1):
        raise CodefuError(
            f"resources.gpus_per_rank={res.gpus_per_rank:g}: actors beside a trainer rank share its GPU, "
            f"so it must be in ({SLIVER * beside:g}, 1] ({beside} actor(s) of {SLIVER:g} GPU beside it)"
        )
    bundles: list[Bundle] = []
    slots: list[Slot] = []
    for i in range(n):
        slots.append(Slot("trainer", i, i, res.cpus_per_rank, trainer_gpus))
        cpus = res.cpus_per_rank
        if kl_enabled:
            slots.append(Slot("reference", i, i, res.cpus_per_rank, side_gpus))
            cpus += res.cpus_per_rank
        if critic_beside:
            slots.append(Slot("critic", i, i, res.cpus_per_rank, side_gpus))
            cpus += res.cpus_per_rank
        if i < in_rank_bundle:
            slots.append(Slot("rollout", i, i, res.cpus_per_rollout_worker, side_gpus))
            cpus += res.cpus_per_rollout_worker
        bundles.append(Bundle(cpus, res.gpus_per_rank))
    own_gpus = 0.0 if res.colocate else res.gpus_per_rollout_worker
    for j in range(in_rank_bundle, res.rollout_workers):
        slots.append(Slot("rollout", j, len(bundles), res.cpus_per_rollout_worker, own_gpus))
        bundles.append(Bundle(res.cpus_per_rollout_worker, own_gpus))
    if critic and not critic_beside:
        for i in range(n):
            slots.append(Slot("critic", i, len(bundles), res.cpus_per_rank, res.gpus_per_rank))
            bundles.append(Bundle(res.cpus_per_rank, res.gpus_per_rank))
    roles = [RoleNeed("trainer", n, res.cpus_per_rank, trainer_gpus)]
    if kl_enabled:
        roles.append(RoleNeed("reference", n, res.cpus_per_rank, side_gpus))
    if critic:
        critic_gpus = side_gpus if critic_beside else res.gpus_per_rank
        roles.append(RoleNeed("critic", n, res.cpus_per_rank, critic_gpus))
    rollout_gpus = [s.gpus for s in slots if s.role == "rollout"]
    roles.append(RoleNeed("rollout", res.rollout_workers, res.cpus_per_rollout_worker, max(rollout_gpus)))
    roles.append(RoleNeed("judge", 1, res.judge_cpus, 0.0))
    return Layout(tuple(roles), tuple(bundles), tuple(slots))


def _first_fit(bundles: tuple[Bundle, ...], nodes: list[dict[str, float]]) -> int | None:
    """Index of the first bundle that does not fit when bundles are placed largest first, each on the first
    node with room (Ray's PACK may do better or worse; this catches the impossible, e.g. a 2-GPU bundle on
    1-GPU nodes). None: all fit."""
    free = [{"CPU": nd.get("CPU", 0.0), "GPU": nd.get("GPU", 0.0)} for nd in nodes]
    order = sorted(range(len(bundles)), key=lambda i: (-bundles[i].gpus, -bundles[i].cpus, i))
    for i in order:
        b = bundles[i]
        node = next((f for f in free if f["GPU"] >= b.gpus - 1e-9 and f["CPU"] >= b.cpus - 1e-9), None)
        if node is None:
            return i
        node["GPU"] -= b.gpus
        node["CPU"] -= b.cpus
    return None


def check_layout(
    layout: Layout, cluster: dict[str, float], nodes: list[dict[str, float]] | None = None
) -> None:
    """Fail fast, before any actor starts, with everything the cluster lacks in one message. `cluster`: the
    totals (ray.cluster_resources()); `nodes`: each node's resources, to check that the bundles fit."""
    missing = []
    have_cpus, have_gpus = cluster.get("CPU", 0.0), cluster.get("GPU", 0.0)
    if layout.cpus > have_cpus + 1e-9:
        detail = ", ".join(f"{r.role} {r.total_cpus:g}" for r in layout.roles if r.total_cpus)
        missing.append(f"{layout.cpus:g} CPUs needed ({detail}), the cluster has {have_cpus:g}")
    if layout.gpus > have_gpus + 1e-9:
        detail = ", ".join(f"{r.role} {r.total_gpus:g}" for r in layout.roles if r.total_gpus)
        missing.append(f"{layout.gpus:g} GPUs needed ({detail}), the cluster has {have_gpus:g}")
    if not missing and nodes is not None:
        bad = _first_fit(layout.bundles, nodes)
        if bad is not None:
            who = ", ".join(f"{s.role} {s.index}" for s in layout.slots if s.bundle == bad)
            b = layout.bundles[bad]
            sizes = "; ".join(f"{nd.get('CPU', 0):g} CPUs, {nd.get('GPU', 0):g} GPUs" for nd in nodes)
            missing.append(
                f"bundle {bad} ({who}: {b.cpus:g} CPUs, {b.gpus:g} GPUs on one node) fits on no node "
                f"left (nodes: {sizes})"
            )
    if missing:
        raise CodefuError("the cluster is too small: " + "; ".join(missing))
