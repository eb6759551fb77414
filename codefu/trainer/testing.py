"""Synthetic batches for tests, smoke runs and benchmarks (tiny models: codefu.models.tiny)."""

from __future__ import annotations

import torch

from codefu.trainer.batch import Batch


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
