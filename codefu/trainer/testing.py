"""Tiny models and synthetic batches for tests, smoke runs and benchmarks (no downloads)."""

from __future__ import annotations

from pathlib import Path

import torch

from codefu.trainer.batch import Batch

#: A 2-layer Llama (vocab 128, hidden 64): ~0.1M parameters, builds in milliseconds.
TINY_LLAMA = dict(
    model_type="llama",
    vocab_size=128,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=512,
    tie_word_embeddings=False,
)


def save_tiny_model(path: str | Path, seed: int = 0, **overrides) -> Path:
    """A random-init TINY_LLAMA (plus overrides) saved with save_pretrained (fp32 safetensors) at `path`."""
    from transformers import AutoConfig, AutoModelForCausalLM

    spec = dict(TINY_LLAMA) | overrides
    config = AutoConfig.for_model(spec.pop("model_type"), **spec)
    torch.manual_seed(seed)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.save_pretrained(path)
    return Path(path)


def random_batch(
    n: int,
    max_len: int,
    vocab_size: int,
    prompt_len: int = 4,
    min_len: int | None = None,
    seed: int = 0,
    per_token_advantages: bool = False,
) -> Batch:
    """n right-padded sequences of random lengths in [min_len, max_len]: `prompt_len` prompt tokens, the rest
    response; random advantages; old_logprobs and ref_logprobs left None (fill them from a worker)."""
    g = torch.Generator().manual_seed(seed)
    min_len = max_len if min_len is None else min_len
    lengths = torch.randint(min_len, max_len + 1, (n,), generator=g)
    cols = torch.arange(max_len)[None]
    attention = (cols < lengths[:, None]).long()
    response = attention * (cols >= prompt_len).long()
    ids = torch.randint(0, vocab_size, (n, max_len), generator=g) * attention
    adv_shape = (n, max_len) if per_token_advantages else (n,)
    advantages = torch.randn(adv_shape, generator=g)
    return Batch(input_ids=ids, attention_mask=attention, response_mask=response, advantages=advantages)
