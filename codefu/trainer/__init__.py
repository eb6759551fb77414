"""The policy trainer: model loading, FSDP2 sharding, the PPO/GRPO update, checkpoints (docs/trainer.md)."""

from codefu.lazy import lazy_exports

#: each public name -> its module (loaded on first use: the package imports no torch until then)
_EXPORTS = {
    "Batch": "batch",
    "TrainerConfig": "config",
    "TrainerWorker": "worker",
    "init_distributed": "distributed",
    "pack_micro_batches": "batch",
    "split_across_ranks": "batch",
}
__getattr__, __all__ = lazy_exports(__name__, _EXPORTS)
