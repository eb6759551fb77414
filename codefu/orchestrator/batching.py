"""From sampled completions and their scores to the trainer's `Batch` (pure functions)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from codefu.rollout.types import Completion
from codefu.trainer.batch import Batch


def completions_to_batch(completions: Sequence[Completion], advantages: Tensor, trained: Tensor) -> Batch:
    """Right-padded prompt + response rows; the rollout's log-probs become `old_logprobs`.

    advantages: (B,) one per completion; trained: (B,) bool, False for samples the judge could not score
    (their response mask is zeroed, so they add nothing to the loss). A completion's `loss_mask` (an
    episode's feedback turns: 0) is its row of the response mask: tokens the model did not write are
    context, never trained, whatever loss, ratio, KL or entropy term reads the mask.
    """
    rows = [c.prompt_ids + c.token_ids for c in completions]
    B, T = len(rows), max(len(r) for r in rows)
    input_ids = torch.zeros(B, T, dtype=torch.long)
    attention = torch.zeros(B, T, dtype=torch.long)
    response = torch.zeros(B, T, dtype=torch.long)
    old = torch.zeros(B, T, dtype=torch.float32)
    for b, c in enumerate(completions):
        p, r = len(c.prompt_ids), len(c.token_ids)
        input_ids[b, : p + r] = torch.tensor(rows[b])
        attention[b, : p + r] = 1
        if trained[b]:
            mask = c.loss_mask if c.loss_mask is not None else [1] * r
            response[b, p : p + r] = torch.tensor(mask, dtype=torch.long)
        old[b, p : p + r] = torch.tensor(c.logprobs, dtype=torch.float32)
    return Batch(input_ids, attention, response, old_logprobs=old, advantages=advantages.float())


def mixed_groups(passed: Sequence[bool], group: Sequence[int]) -> set[int]:
    """Groups whose samples do not all share one pass/fail outcome: the only ones GRPO learns from when
    rewards are pass/fail (keyed on passing, not on the shaped score, as DAPO's dynamic sampling)."""
    outcomes: dict[int, set[bool]] = {}
    for ok, g in zip(passed, group, strict=True):
        outcomes.setdefault(g, set()).add(ok)
    return {g for g, seen in outcomes.items() if len(seen) == 2}
