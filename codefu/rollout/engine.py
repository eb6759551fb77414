"""The rollout engine interface: every backend (transformers now, faster engines later) implements it."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from torch import Tensor

from codefu.rollout.types import Completion, SamplingParams


@runtime_checkable
class RolloutEngine(Protocol):
    """Samples responses from the current policy and takes new weights after each update."""

    def generate(self, prompts: list[list[int]], sampling: SamplingParams) -> list[Completion]:
        """`sampling.n` completions per prompt: len(result) == len(prompts) * sampling.n, ordered by prompt,
        then sample (result[i * n + j] is sample j of prompt i). prompts: token ids, no padding."""
        ...

    def load_weights(self, state: dict[str, Tensor]) -> None:
        """Copy a full state dict (the policy's parameter names, unsharded tensors) into the model."""
        ...
