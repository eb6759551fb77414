"""`TransformersEngine`: the rollout engine on plain transformers `generate`.

How sampling works: `generate` runs in greedy mode with a clean generation config (no processors of its
own, whatever the checkpoint's generation_config.json says) and one logits processor of ours,
`_StepSampler`. At every step that processor receives the raw fp32 logits (B, V) of the last position,
chooses the next token itself (temperature, top-k, top-p, a seeded `torch.Generator`), records the token
and its log-prob under softmax(logits / temperature) over the full vocabulary, and returns scores whose
argmax is the chosen token. `generate` keeps the KV cache, the attention mask of the left-padded batch,
position ids and EOS bookkeeping.

This is the same as `generate(..., output_logits=True, return_dict_in_generate=True)` followed by a
gather of log_softmax(logits / T), but processed step by step: only (B,) tokens and (B,) log-probs are
kept per step, never the (steps, B, V) logits (V = 152k, B = 256, 20k steps would be terabytes).
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor

from codefu.models.lora import AdapterMerger, AdapterWeights
from codefu.rollout.engine import EngineConfig, eos_ids, in_prompt_order, load_for_engine
from codefu.rollout.follow_ups import FollowUps, follow_ups_in_batches
from codefu.rollout.sampling import make_generator, sample_step
from codefu.rollout.types import Completion, SamplingParams

log = logging.getLogger(__name__)


@functools.cache
def _generate_cache_kwarg() -> str:
    """generate's name for a pre-filled cache: newer transformers renamed `past_key_values` to `cache` with
    a deprecation wrapper (the old name warns); older ones take `past_key_values`."""
    import inspect

    from transformers import GenerationMixin

    renamed = inspect.getclosurevars(GenerationMixin.generate).nonlocals.get("new_name")
    return "cache" if renamed == "cache" else "past_key_values"


class _StepSampler:
    """A transformers logits processor that samples the next token itself and records (token, log-prob).

    Called once per step with input_ids (B, L_t) and raw logits (B, V); returns (B, V) scores that are 0 at
    the chosen token and -inf elsewhere, so greedy `generate` takes exactly that token."""

    def __init__(self, sampling: SamplingParams, generator: torch.Generator) -> None:
        self.sampling = sampling
        self.generator = generator
        self.tokens: list[Tensor] = []  # steps x (B,) int64
        self.logprobs: list[Tensor] = []  # steps x (B,) fp32

    def __call__(self, input_ids: Tensor, scores: Tensor) -> Tensor:
        token, logprob = sample_step(scores, self.sampling, self.generator)
        self.tokens.append(token)
        self.logprobs.append(logprob)
        out = torch.full_like(scores, float("-inf"))
        return out.scatter_(-1, token[:, None], 0.0)


class TransformersEngine:
    """A `RolloutEngine` on a transformers causal LM.

    model: a `PreTrainedModel` (decoder-only); tokenizer: used to decode responses and for EOS / pad ids
    (may be None: text is then ""). batch_size: sequences per `generate` call. Results for a given seed are
    reproducible for the same prompts, SamplingParams, batch_size and device; they change if those change.
    """

    def __init__(self, model: Any, tokenizer: Any = None, batch_size: int = 16, device: str | None = None):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.model = model.to(device) if device is not None else model
        self.model.eval()
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.device = next(self.model.parameters()).device
        self.eos_ids = eos_ids(getattr(self.model, "generation_config", None), self.model.config, tokenizer)
        self.pad_id = self._pad_id()
        self.adapter_merger = AdapterMerger()  # the base of LoRA-adapted weights (trainer.lora)

    # ---- building -------------------------------------------------------------------------------
    @classmethod
    def from_config(cls, config: EngineConfig) -> TransformersEngine:
        model, tokenizer = load_for_engine(config)
        return cls(model, tokenizer, batch_size=config.batch_size, device=config.device)

    @classmethod
    def from_pretrained(cls, path: str, **kwargs: Any) -> TransformersEngine:
        """`TransformersEngine.from_pretrained("folder" | "model.gguf", gguf_file=..., dtype=..., device=...,
        batch_size=...)`; see `EngineConfig`."""
        return cls.from_config(EngineConfig(model=str(path), **kwargs))

    def _pad_id(self) -> int:
        for source in (self.tokenizer, getattr(self.model, "generation_config", None), self.model.config):
            pad = getattr(source, "pad_token_id", None) if source is not None else None
            if isinstance(pad, int):
                return pad
        return min(self.eos_ids) if self.eos_ids else 0

    # ---- the interface --------------------------------------------------------------------------
    def generate(self, prompts: list[list[int]], sampling: SamplingParams) -> list[Completion]:
        """len(prompts) * sampling.n completions, result[i * n + j] = sample j of prompt i."""
        return in_prompt_order(self.generate_stream(prompts, sampling))

    def generate_stream(
        self, prompts: list[list[int]], sampling: SamplingParams, follow_ups: FollowUps | None = None
    ) -> Iterator[list[Completion]]:
        """The completions of `generate`, a batch (`batch_size` sequences) at a time as each is done; with
        `follow_ups`, then the prompts put there, in batches of what came meanwhile, until it closes."""
        if follow_ups is not None:
            yield from follow_ups_in_batches(self.generate_stream, prompts, sampling, follow_ups)
            return
        for i, p in enumerate(prompts):
            if len(p) == 0:
                raise ValueError(f"prompt {i} is empty")
        generator = make_generator(self.device, sampling.seed)
        stop_ids = self.eos_ids | set(sampling.stop_token_ids)
        # Every (prompt, sample) pair is one sequence; similar lengths go together to save padding.
        items = [(pi, si) for pi in range(len(prompts)) for si in range(sampling.n)]
        order = sorted(range(len(items)), key=lambda k: len(prompts[items[k][0]]))
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            batch = [prompts[items[k][0]] for k in chunk]
            done = []
            for k, (tokens, logprobs, reason) in zip(
                chunk, self._generate_batch(batch, sampling, generator, stop_ids), strict=True
            ):
                pi, si = items[k]
                done.append(
                    Completion(
                        prompt_index=pi,
                        sample_index=si,
                        prompt_ids=list(prompts[pi]),
                        token_ids=tokens,
                        text=self._decode(tokens),
                        logprobs=logprobs,
                        finish_reason=reason,
                    )
                )
            yield done

    def load_weights(self, state: dict[str, Tensor] | AdapterWeights) -> None:
        """Copy a full (unsharded) state dict into the model in place, converting dtype and device.

        Every key must be a key of model.state_dict(); every model key must be given, except a tied alias
        (e.g. lm_head.weight tied to the embeddings) whose storage is shared with a key that is given.
        LoRA adapters (`AdapterWeights`) are merged into the weights they adapt, from the base values held
        at the first such load (codefu.models.lora.AdapterMerger); full weights are a new base."""
        own = self.model.state_dict()
        if isinstance(state, AdapterWeights):
            self.adapter_merger.apply(own, state)
            return
        self.adapter_merger.forget()
        unexpected = sorted(set(state) - set(own))
        if unexpected:
            raise KeyError(f"load_weights: not model keys: {unexpected[:5]} ({len(unexpected)} in all)")
        given_ptrs = {own[k].data_ptr() for k in state}
        missing = sorted(k for k in set(own) - set(state) if own[k].data_ptr() not in given_ptrs)
        if missing:
            raise KeyError(f"load_weights: model keys missing: {missing[:5]} ({len(missing)} in all)")
        with torch.no_grad():
            for name, value in state.items():
                if own[name].shape != value.shape:
                    raise ValueError(
                        f"load_weights: {name} is {tuple(value.shape)}, the model's {tuple(own[name].shape)}"
                    )
                own[name].copy_(value)

    # ---- internals -----------------------------------------------------------------------------
    def _generate_batch(
        self, batch: list[list[int]], sampling: SamplingParams, generator: torch.Generator, stop_ids: set[int]
    ) -> Iterator[tuple[list[int], list[float], str]]:
        from transformers import GenerationConfig, LogitsProcessorList

        width = max(len(p) for p in batch)
        input_ids = torch.full((len(batch), width), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, p in enumerate(batch):  # left padding
            input_ids[row, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            attention_mask[row, width - len(p) :] = 1
        sampler = _StepSampler(sampling, generator)
        gen_config = GenerationConfig(
            do_sample=False,
            max_new_tokens=sampling.max_new_tokens,
            eos_token_id=sorted(stop_ids) or None,
            pad_token_id=self.pad_id,
        )
        input_ids, attention_mask = input_ids.to(self.device), attention_mask.to(self.device)
        with _clean_generation_config(self.model), torch.no_grad():
            sequences = self.model.generate(
                input_ids=input_ids,
                attention_mask=attention_mask,
                **(self._shared_prefill(batch, input_ids, attention_mask) or {}),
                generation_config=gen_config,
                logits_processor=LogitsProcessorList([sampler]),
            )
        steps = sequences.shape[1] - width
        tokens = torch.stack(sampler.tokens[:steps], dim=1).cpu().tolist()  # (B, steps)
        logprobs = torch.stack(sampler.logprobs[:steps], dim=1).cpu().tolist()  # (B, steps)
        for row_tokens, row_logprobs in zip(tokens, logprobs, strict=True):
            end = next((t + 1 for t, tok in enumerate(row_tokens) if tok in stop_ids), None)
            if end is None:
                yield row_tokens, row_logprobs, "length"
            else:
                yield row_tokens[:end], row_logprobs[:end], "stop"

    def _shared_prefill(
        self, batch: list[list[int]], input_ids: Tensor, attention_mask: Tensor
    ) -> dict[str, Any] | None:
        """`generate`'s cache argument: the KV cache of every row's prompt but its last token, each
        distinct prompt run once and its cache copied to the rows that repeat it (a GRPO group is n copies
        of one prompt). None when no prompt repeats: `generate` then prefills as usual. Either way
        `generate` itself runs the last prompt token."""
        first: dict[tuple[int, ...], int] = {}
        inverse = [first.setdefault(tuple(p), len(first)) for p in batch]
        if len(first) == len(batch) or input_ids.shape[1] < 2:
            return None
        unique_rows = [inverse.index(u) for u in range(len(first))]
        ids = input_ids[unique_rows, :-1]
        mask = attention_mask[unique_rows, :-1]
        # positions as `generate` numbers a left-padded row: 0 at its first real token
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        out = self.model(
            input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, logits_to_keep=1
        )
        cache = out["cache"] if "cache" in out else out["past_key_values"]  # renamed like generate's kwarg
        cache.batch_select_indices(torch.tensor(inverse, device=input_ids.device))
        return {_generate_cache_kwarg(): cache}

    def _decode(self, tokens: list[int]) -> str:
        if self.tokenizer is None:
            return ""
        return self.tokenizer.decode(tokens, skip_special_tokens=True)


@contextlib.contextmanager
def _clean_generation_config(model: Any) -> Iterator[None]:
    """Hide the checkpoint's generation defaults (e.g. Qwen's repetition_penalty=1.05, top_k=20) from
    `generate`: it fills every unset field from model.generation_config, which would add processors."""
    from transformers import GenerationConfig

    saved = getattr(model, "generation_config", None)
    model.generation_config = GenerationConfig()
    try:
        yield
    finally:
        model.generation_config = saved


__all__ = ["TransformersEngine"]
