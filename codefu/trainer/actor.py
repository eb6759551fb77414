"""TrainerActor: a thin Ray actor around TrainerWorker or CriticWorker (one actor per rank; no logic of
its own).

    ranks = make_trainer_ranks(cfg, world_size=2)             # rank 0's node hosts the rendezvous
    critic = make_trainer_ranks(critic_cfg, 2, kind="critic", value_clip=0.5)
    metrics = ray.get([a.update.remote(batch_ref) for a in ranks])[0]

Every rank gets the same Batch (pass one ObjectRef to all); results that are the same on every rank are
read from rank 0.
"""

from __future__ import annotations

from typing import Any

from codefu.trainer.batch import Batch
from codefu.trainer.config import TrainerConfig
from codefu.trainer.distributed import free_port, init_distributed

#: what a group of ranks trains: the policy, the frozen reference policy, or PPO's critic
KINDS = ("policy", "reference", "critic")


class TrainerActor:
    """One rank. Construct through `ray.remote(TrainerActor)` (see make_trainer_ranks)."""

    def __init__(
        self,
        cfg: TrainerConfig,
        rank: int,
        world_size: int,
        init_method: str,
        kind: str = "policy",
        value_clip: float | None = None,
    ):
        from codefu.trainer.critic import CriticWorker
        from codefu.trainer.worker import TrainerWorker

        init_distributed(rank, world_size, init_method, device=cfg.device)
        if kind == "critic":
            self.worker = CriticWorker(cfg, value_clip)
        else:
            self.worker = TrainerWorker(cfg, frozen=kind == "reference")

    def compute_logprobs(self, batch: Batch):
        return self.worker.compute_logprobs(batch)

    def compute_values(self, batch: Batch):
        return self.worker.compute_values(batch)

    def update(self, batch: Batch) -> dict[str, float]:
        return self.worker.update(batch)

    def state_dict_for_sync(self, to_cpu: bool = True) -> dict[str, Any]:
        return self.worker.state_dict_for_sync(to_cpu=to_cpu)

    def share_weights(self) -> Any:
        return self.worker.share_weights()

    def drop_shared_weights(self) -> None:
        self.worker.drop_shared_weights()

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
    init_method: str | None = None,
    **options: Any,
) -> list[Any]:
    """Start `world_size` TrainerActor ranks of `kind` (one of KINDS; `value_clip`: the critic's). Extra
    `options` go to `.options()` (e.g. a runtime_env); `per_rank[r]` adds rank r's own (e.g. its
    placement-group bundle). `init_method`: where rank 0 listens;
    default a free port on the driver's node, which suits one machine (orchestrator.placement.rendezvous
    gives one on rank 0's node)."""
    import ray

    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if per_rank is not None and len(per_rank) != world_size:
        raise ValueError(f"per_rank has {len(per_rank)} entries for {world_size} ranks")
    init_method = init_method or f"tcp://{node_address()}:{free_port()}"
    cls = ray.remote(TrainerActor)
    return [
        cls.options(
            num_cpus=num_cpus, num_gpus=num_gpus, **options, **(per_rank[rank] if per_rank else {})
        ).remote(cfg, rank, world_size, init_method, kind, value_clip)
        for rank in range(world_size)
    ]
