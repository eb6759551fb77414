"""The rollout engine interface every backend implements (transformers, native), and how one is built:
`EngineConfig` (the model and its `EngineSettings`), the EOS ids of a model, loading it for an engine."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any, Protocol, runtime_checkable

import torch
from torch import Tensor

from codefu.models import DTYPE_BY_NAME, load_model, resolve_dtype_name, warn_if_slow_on_cpu
from codefu.rollout.settings import EngineSettings
from codefu.rollout.types import Completion, SamplingParams


@runtime_checkable
class RolloutEngine(Protocol):
    """Samples responses from the current policy and takes new weights after each update.

    An engine may also offer `generate_stream(prompts, sampling, follow_ups=None) ->
    Iterator[list[Completion]]`: the same completions, in batches as they finish, then (with a
    `codefu.rollout.follow_ups.FollowUps` inbox) those of the prompts put there meanwhile, until it
    closes. Both built-in engines do (the native one admits follow-ups into the running batch);
    `RolloutWorker.generate_stream` falls back to `generate` for engines without it.

    An engine may also take weights while it generates: `update_weights_in_flight(state, version)` from
    another thread, and `load_weights(state, version=None)` (the native one; see RolloutWorker
    .load_weights_in_flight)."""

    def generate(self, prompts: list[list[int]], sampling: SamplingParams) -> list[Completion]:
        """`sampling.n` completions per prompt: len(result) == len(prompts) * sampling.n, ordered by prompt,
        then sample (result[i * n + j] is sample j of prompt i). prompts: token ids, no padding."""
        ...

    def load_weights(self, state: dict[str, Tensor]) -> None:
        """Copy a full state dict (the policy's parameter names, unsharded tensors) into the model."""
        ...


@dataclass
class EngineConfig(EngineSettings):
    """How to build a rollout engine (the Ray actor gets one of these): a model and its settings."""

    model: str = field(kw_only=True)
    """HF folder, hub id, or a .gguf file."""
    gguf_file: str | None = field(default=None, kw_only=True)
    """A .gguf file name inside `model`."""

    @classmethod
    def of(cls, settings: EngineSettings, model: str, gguf_file: str | None = None) -> EngineConfig:
        """The engine settings of `settings` (an `EngineSettings` or a subclass, e.g. the run's `rollout:`)
        for this model."""
        knobs = {f.name: getattr(settings, f.name) for f in fields(EngineSettings)}
        return cls(**knobs, model=model, gguf_file=gguf_file)


def in_prompt_order(batches: Iterable[list[Completion]]) -> list[Completion]:
    """The completions of a `generate_stream` as `generate` returns them: by prompt, then sample."""
    return sorted((c for batch in batches for c in batch), key=lambda c: (c.prompt_index, c.sample_index))


def eos_ids(generation_config: Any, hf_config: Any, tokenizer: Any) -> set[int]:
    """Token ids that end a response: the EOS ids of the generation config, the model config and the
    tokenizer (any may be None or lack one; an id or a list of ids each)."""
    ids: set[int] = set()
    for source in (generation_config, hf_config, tokenizer):
        eos = getattr(source, "eos_token_id", None) if source is not None else None
        if eos is None:
            continue
        ids.update([eos] if isinstance(eos, int) else eos)
    return ids


def load_for_engine(config: EngineConfig) -> tuple[Any, Any]:
    """(model, tokenizer or None) for an engine, loaded as the trainer loads its policy."""
    dtype = resolve_dtype_name(config.dtype, config.device)
    model, tokenizer = load_model(config.model, config.gguf_file, dtype)
    if torch.device(config.device).type == "cpu":
        warn_if_slow_on_cpu(DTYPE_BY_NAME[dtype])
    return model, tokenizer
