"""CriticWorker: one rank of PPO's critic, the value model, an FSDP2 worker like the policy's.

Everything but the model and the loss is the policy trainer's (worker.py): the rank grid, the split into
ranks, mini-batches and micro-batches, epochs, gradient clipping, AdamW and its schedule, checkpoints. The
model is `ValueModel` (the decoder with a scalar head, no lm_head) and the loss PPO's clipped value loss
(`codefu.algo.value`), token-mean over the mini-batch's response tokens (verl's critic default).
"""

from __future__ import annotations

from typing import Any

from torch import Tensor, nn

from codefu.algo.loss import LossSettings
from codefu.algo.value import value_loss
from codefu.trainer.batch import Batch
from codefu.trainer.config import TrainerConfig
from codefu.trainer.packing import PackedLayout
from codefu.trainer.sequence_parallel import token_window
from codefu.trainer.worker import TrainerWorker

#: critic metrics averaged over the mini-batch's response tokens
_TOKEN_MEAN_METRICS = ("vf_clip_frac", "vpred_mean")


class CriticWorker(TrainerWorker):
    """One critic rank. Verbs: compute_values, update, save, load, drop_checkpoints.

    Args:
        cfg: the critic's trainer config (its model, lr, ... ; orchestrator: `CriticConfig.trainer_config`).
        value_clip: PPO's value clip c (`value_loss`); None: unclipped.
        model: an already built transformers causal LM instead of loading `cfg.model` (its lm_head is
            dropped).
    """

    VALUE_HEAD = True
    OPTIM_METRICS = "critic"

    def __init__(
        self,
        cfg: TrainerConfig,
        value_clip: float | None = 0.5,
        model: nn.Module | None = None,
        tokenizer: Any = None,
    ):
        super().__init__(cfg, frozen=False, model=model, tokenizer=tokenizer)
        self.value_clip = value_clip
        self.loss_settings = LossSettings(loss_agg="token-mean")  # the normalizer: response tokens

    def compute_values(self, batch: Batch) -> Tensor:
        """(B, T) fp32 values aligned like `Batch.old_logprobs` (column t: V of the state in which token t
        was sampled), 0 outside `response_mask`; on every rank."""
        return self._per_token(batch)

    def compute_logprobs(self, batch: Batch) -> Tensor:
        raise TypeError("a critic has no log-probs: call compute_values")

    def _check_update_batch(self, batch: Batch) -> None:
        if batch.old_values is None or batch.returns is None:
            raise ValueError("the critic's update() needs batch.old_values and batch.returns")

    def _micro_loss(
        self, mb: Batch, normalizer: float, layout: PackedLayout | None = None
    ) -> tuple[Tensor, dict[str, float], dict[str, float]]:
        values, _, (lo, hi) = self._forward(mb, False, layout)
        assert mb.old_values is not None and mb.returns is not None
        loss, m = value_loss(
            values,
            token_window(mb.old_values, lo, hi).to(values),
            token_window(mb.returns, lo, hi).to(values),
            token_window(mb.response_mask, lo, hi).to(values.dtype),
            self.value_clip,
            "token-mean",
            normalizer,
        )
        n_tok = m["valid_tokens"]
        sums = {"critic/vf_loss": float(loss.detach()), "critic/tokens": n_tok}
        return loss, sums | {f"critic/{k}": m[k] * n_tok for k in _TOKEN_MEAN_METRICS}, {}

    def _mini_batch_metrics(
        self, totals: dict[str, float], batch: Batch, rows: list[int]
    ) -> dict[str, float]:
        tokens = max(totals.pop("critic/tokens"), 1.0)
        totals.pop("perf/computed_tokens", None)  # the policy's update reports it
        for k in _TOKEN_MEAN_METRICS:
            totals[f"critic/{k}"] /= tokens
        return totals

    def state_dict_for_sync(self, *args: Any, **kwargs: Any) -> dict[str, Tensor]:
        raise TypeError("a critic's weights go to no engine")

    def export_hf(self, *args: Any, **kwargs: Any) -> str:
        raise TypeError("a critic is not a causal LM: it is kept in its checkpoints only")
