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


def grouped_batch(
    groups: int, n: int, vocab_size: int, prompt_len: int = 9, max_response: int = 12, seed: int = 0
) -> Batch:
    """`groups` prompts (random tokens, lengths prompt_len, prompt_len + 1, ...) with `n` random responses
    each (1 .. max_response - 1 tokens), rows grouped by prompt as the loop's are; random advantages."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for i in range(groups):
        prompt = torch.randint(6, vocab_size, (prompt_len + i,), generator=g)
        for _ in range(n):
            length = int(torch.randint(1, max_response, (1,), generator=g))
            rows.append((prompt, torch.randint(6, vocab_size, (length,), generator=g)))
    B, T = len(rows), max(len(p) + len(r) for p, r in rows)
    ids = torch.zeros(B, T, dtype=torch.long)
    attention = torch.zeros(B, T, dtype=torch.long)
    response = torch.zeros(B, T, dtype=torch.long)
    for b, (p, r) in enumerate(rows):
        end = len(p) + len(r)
        ids[b, :end] = torch.cat([p, r])
        attention[b, :end] = 1
        response[b, len(p) : end] = 1
    return Batch(ids, attention, response, advantages=torch.randn(B, generator=g))
