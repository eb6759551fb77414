"""The training batch handed to the trainer workers, and how it is cut into ranks and micro-batches.

Every rank receives the same whole `Batch` (one Ray object, shared through the object store) and picks its
own rows with the deterministic functions below, so the split never needs communication and is identical
on every rank and after a resume.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

import torch
from torch import Tensor


@dataclass
class Batch:
    """B sequences, prompt + response, right-padded to T.

    Log-prob columns are aligned with `input_ids`: `old_logprobs[b, t]` = log p(input_ids[b, t] |
    input_ids[b, :t]); column 0 has no prediction and is 0. `response_mask` must be 0 at t = 0.
    """

    input_ids: Tensor  # (B, T) int64, prompt + response, right-padded (pad id is irrelevant)
    attention_mask: Tensor  # (B, T) 0/1, 1 on real tokens (a prefix of each row)
    response_mask: Tensor  # (B, T) 0/1, 1 on response tokens whose log-probs are trained
    old_logprobs: Tensor | None = None  # (B, T) fp32, log-probs of the sampling policy (needed by update)
    ref_logprobs: Tensor | None = None  # (B, T) fp32, reference policy log-probs (only when kl_coef > 0)
    rollout_logprobs: Tensor | None = None  # (B, T) fp32, the engine's (only with a rollout correction)
    advantages: Tensor | None = None  # (B,) per sequence or (B, T) per token, fp32 (needed by update)
    old_values: Tensor | None = None  # (B, T) fp32, the critic's values when sampled (aligned as log-probs)
    returns: Tensor | None = None  # (B, T) fp32, the critic's targets (GAE's returns)

    def __post_init__(self) -> None:
        B, T = self.input_ids.shape
        for f in fields(self):
            v = getattr(self, f.name)
            if v is None or (f.name == "advantages" and v.dim() == 1):
                if v is not None and v.shape[0] != B:
                    raise ValueError(f"Batch.advantages must be (B,) or (B, T), got {tuple(v.shape)}")
                continue
            if tuple(v.shape) != (B, T):
                raise ValueError(f"Batch.{f.name} must be (B, T) = {(B, T)}, got {tuple(v.shape)}")
        if B and T and bool(self.response_mask[:, 0].any()):
            raise ValueError("Batch.response_mask must be 0 in column 0 (no token predicts it)")

    def __len__(self) -> int:
        return self.input_ids.shape[0]

    def lengths(self) -> Tensor:
        """(B,) int64: real tokens per row (attention_mask is a prefix of ones)."""
        return self.attention_mask.long().sum(-1)

    def select(self, rows: list[int] | Tensor, device: torch.device | str | None = None) -> Batch:
        """The given rows, trimmed to their longest length (columns beyond are padding), on `device`."""
        idx = torch.as_tensor(rows, dtype=torch.long)
        width = max(int(self.lengths()[idx].max()), 2) if len(idx) else 2
        width = min(width, self.input_ids.shape[1])
        out = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if v is not None:
                v = v[idx]
                if v.dim() == 2:
                    v = v[:, :width]
                v = v.to(device) if device is not None else v
            out[f.name] = v
        return Batch(**out)

    def zero_weight(self) -> Batch:
        """The same rows with every mask zeroed: runs forward/backward (keeping ranks in step for FSDP's
        collectives) but contributes nothing to any loss or gradient."""
        return replace(self, response_mask=torch.zeros_like(self.response_mask))


def split_across_ranks(lengths: list[int], world_size: int) -> list[list[int]]:
    """Deal sequences to ranks balancing tokens: longest first, each to the least-loaded rank (ties: the
    lowest rank, then fewer rows). Returns, per rank, positions into `lengths` in increasing order."""
    load = [0] * world_size
    parts: list[list[int]] = [[] for _ in range(world_size)]
    for i in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        r = min(range(world_size), key=lambda r: (load[r], len(parts[r]), r))
        parts[r].append(i)
        load[r] += lengths[i]
    return [sorted(p) for p in parts]


def pack_micro_batches(lengths: list[int], budget: int) -> list[list[int]]:
    """First-fit decreasing packing of sequences into micro-batches whose padded size (rows x longest row)
    is at most `budget` tokens; a sequence longer than the budget gets a micro-batch of its own.

    Returns lists of positions into `lengths`. Because sequences arrive longest first, the first sequence of
    a micro-batch is its longest, so adding one more costs (rows + 1) x first length.
    """
    bins: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lambda i: (-lengths[i], i)):
        for b in bins:
            if (len(b) + 1) * lengths[b[0]] <= budget:
                b.append(i)
                break
        else:
            bins.append([i])
    return bins
