"""TrainerActor: a thin Ray actor around TrainerWorker or CriticWorker (one actor per rank; no logic of
its own).

    ranks = make_trainer_ranks(cfg, world_size=2)             # rank 0 hosts the rendezvous
    critic = make_trainer_ranks(critic_cfg, 2, kind="critic", value_clip=0.5)
    metrics = ray.get([a.update.remote(batch_ref) for a in ranks])[0]

Every rank gets the same Batch (pass one ObjectRef to all); results that are the same on every rank are
read from rank 0.
"""

from __future__ import annotations

from typing import Any

from codefu.trainer.batch import Batch
from codefu.trainer.config import TrainerConfig
from codefu.trainer.distributed import init_distributed, joining_store, listening_store

#: what a group of ranks trains: the policy, the frozen reference policy, or PPO's critic
KINDS = ("policy", "reference", "critic")


class TrainerActor:
    """One rank. Construct through `ray.remote(TrainerActor)` and `start` it (see make_trainer_ranks): the
    process group needs rank 0's rendezvous address before any rank can join it."""

    def __init__(
        self,
        cfg: TrainerConfig,
        rank: int,
        world_size: int,
        kind: str = "policy",
        value_clip: float | None = None,
    ):
        self.cfg, self.rank, self.world_size = cfg, rank, world_size
        self.kind, self.value_clip = kind, value_clip
        # rank 0 listens at once, on a port the kernel picks as it binds: no other process can take it (a
        # single rank too: a MASTER_PORT inherited from a launcher would be one port for every role)
        self.store = listening_store(world_size) if rank == 0 else None
        self._worker: Any = None
        self._weight_store: Any = None  # rank 0, resources.weight_transfer broadcast: its group's store
        self._weight_group: Any = None  # ... and its membership (WeightBroadcast)
        self._weight_timeout_s = 0.0
        self._start_error: BaseException | None = None

    def rendezvous(self) -> tuple[str, int]:
        """Rank 0's address and port, for the other ranks' `start`."""
        if self.store is None:
            raise RuntimeError(f"rendezvous() on rank {self.rank}: only rank 0 has one")
        return node_address(), self.store.port

    def start(self, rendezvous: tuple[str, int] | None = None) -> None:
        """Join the process group (rank 0's `rendezvous`, None for a single rank) and build the worker."""
        try:
            from codefu.trainer.critic import CriticWorker
            from codefu.trainer.worker import TrainerWorker

            if self.store is None and rendezvous is None:
                raise ValueError(f"rank {self.rank} of {self.world_size} needs rank 0's rendezvous to start")
            store = self.store if self.store is not None else joining_store(*rendezvous, self.world_size)
            init_distributed(self.rank, self.world_size, device=self.cfg.device, store=store)
            if self.kind == "critic":
                self._worker = CriticWorker(self.cfg, self.value_clip)
            else:
                self._worker = TrainerWorker(self.cfg, frozen=self.kind == "reference")
        except BaseException as e:
            self._start_error = e
            raise

    @property
    def worker(self) -> Any:
        if self._worker is None:
            why = f": {self._start_error!r}" if self._start_error else " (start() was not called)"
            raise RuntimeError(f"{self.kind} rank {self.rank} did not start{why}") from self._start_error
        return self._worker

    def ready(self) -> None:
        """Returns once this rank has started (its weights in memory); raises what stopped it."""
        self.worker  # noqa: B018 -- the property raises for a rank that did not start

    def compute_logprobs(self, batch: Batch, adapters: bool = True):
        return self.worker.compute_logprobs(batch, adapters)

    def compute_values(self, batch: Batch):
        return self.worker.compute_values(batch)

    def update(self, batch: Batch) -> dict[str, float]:
        return self.worker.update(batch)

    def state_dict_for_sync(self, to_cpu: bool = True) -> dict[str, Any]:
        return self.worker.state_dict_for_sync(to_cpu=to_cpu)

    def adapters_for_sync(self) -> Any:
        return self.worker.adapters_for_sync()

    def share_weights(self) -> Any:
        return self.worker.share_weights()

    def drop_shared_weights(self) -> None:
        self.worker.drop_shared_weights()

    def weight_layout(self) -> Any:
        return self.worker.weight_layout()

    def host_weight_group(self, size: int, timeout_s: float) -> Any:
        """Rank 0: start the weight-broadcast group's store (resources.weight_transfer: broadcast) for
        `size` members (this rank and the rollout workers); returns its address, for `join_weight_group`."""
        from codefu.models.weight_broadcast import WeightBroadcast

        if self.rank != 0:
            raise RuntimeError(f"host_weight_group() on rank {self.rank}: rank 0 sends the weights")
        address, self._weight_store = WeightBroadcast.host(node_address(), size, timeout_s)
        self._weight_timeout_s = timeout_s
        return address

    def join_weight_group(self, address: Any) -> None:
        """Rank 0 joins its group as member 0 (returns once every rollout worker has joined)."""
        from codefu.models.weight_broadcast import WeightBroadcast

        self._weight_group = WeightBroadcast.join(
            address, 0, self.worker.device, self._weight_timeout_s, self._weight_store, own_host=address.host
        )

    def broadcast_weights(self) -> None:
        """A collective on every rank; rank 0 sends the weights to the workers of its weight group."""
        self.worker.broadcast_weights(self._weight_group)

    def offload_optimizer(self) -> dict[str, float]:
        return self.worker.offload_optimizer()

    def reload_optimizer(self) -> dict[str, float]:
        return self.worker.reload_optimizer()

    def offload_weights(self) -> dict[str, float]:
        return self.worker.offload_weights()

    def reload_weights(self) -> dict[str, float]:
        return self.worker.reload_weights()

    def save(self, root: str, extra_state: dict[str, Any] | None = None, name_step: int | None = None) -> str:
        return self.worker.save(root, extra_state, name_step)

    def load(self, path: str) -> dict[str, Any]:
        return self.worker.load(path)

    def export_hf(self, path: str) -> str:
        return self.worker.export_hf(path)

    def drop_checkpoints(self, root: str) -> None:
        self.worker.drop_checkpoints(root)

    def step(self) -> int:
        return self.worker.step


def node_address() -> str:
    import ray

    return ray.util.get_node_ip_address()


def make_trainer_ranks(
    cfg: TrainerConfig,
    world_size: int = 1,
    kind: str = "policy",
    value_clip: float | None = None,
    num_gpus: float = 0,
    num_cpus: float = 1,
    per_rank: list[dict[str, Any]] | None = None,
    **options: Any,
) -> list[Any]:
    """Start `world_size` TrainerActor ranks of `kind` (one of KINDS; `value_clip`: the critic's). Extra
    `options` go to `.options()` (e.g. a runtime_env); `per_rank[r]` adds rank r's own (e.g. its
    placement-group bundle). Several ranks meet at rank 0, wherever it runs: this waits for rank 0's process
    to listen, not for any rank to load its model (`ready` does; every later call queues behind it)."""
    import ray

    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if per_rank is not None and len(per_rank) != world_size:
        raise ValueError(f"per_rank has {len(per_rank)} entries for {world_size} ranks")
    cls = ray.remote(TrainerActor)
    ranks = [
        cls.options(
            num_cpus=num_cpus, num_gpus=num_gpus, **options, **(per_rank[rank] if per_rank else {})
        ).remote(cfg, rank, world_size, kind, value_clip)
        for rank in range(world_size)
    ]
    rendezvous = ray.get(ranks[0].rendezvous.remote()) if world_size > 1 else None
    for rank in ranks:
        rank.start.remote(rendezvous)
    return ranks
