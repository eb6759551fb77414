"""The policy trainer: model loading, FSDP2 sharding, the PPO/GRPO update, checkpoints (docs/trainer.md)."""

from codefu.trainer.batch import Batch, pack_micro_batches, split_across_ranks
from codefu.trainer.config import TrainerConfig
from codefu.trainer.distributed import init_distributed
from codefu.trainer.worker import TrainerWorker

__all__ = [
    "Batch",
    "TrainerConfig",
    "TrainerWorker",
    "init_distributed",
    "pack_micro_batches",
    "split_across_ranks",
]
