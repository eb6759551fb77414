"""Ulysses sequence parallelism (DeepSpeed-Ulysses, as verl uses it): `trainer.sp_degree` ranks share each
sequence, every rank holding a contiguous 1/sp slice of the (padded) token dimension.

Everything outside attention is per token, so it runs on the local slice unchanged. Attention needs the
whole sequence: an all-to-all turns (b, heads, T/sp, d) into (b, heads/sp, T, d) -- each rank then runs
ordinary causal attention over the full sequence for its share of the heads -- and a second all-to-all turns
the output back into the sequence slice. Both are autograd functions whose backward is the opposite
all-to-all, so gradients flow to the rank that computed each input.

It plugs into transformers through its attention registry: `enable_sequence_parallel(lm, group)` registers
"codefu_ulysses" (a wrapper of torch SDPA) and switches the model to it. Positions are global (the caller
passes position ids of its slice), and the registry gives custom attentions no mask, so attention is plainly
causal: right-padded rows only (a `Batch` always is).

Heads: q heads must be divisible by sp; kv heads too, or, when there are fewer kv heads than sp and sp is a
multiple of them, each kv head is replicated sp/kv times before the all-to-all (verl does the same).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import Tensor, nn

ATTENTION_NAME = "codefu_ulysses"  # no "sdpa" in the name: transformers would run its SDPA checks on it


@dataclass(frozen=True)
class SeqShard:
    """This rank's place in its sequence-parallel group (size 1: the whole sequence, no group)."""

    rank: int = 0
    size: int = 1
    group: Any = None  # the torch ProcessGroup of the sp ranks sharing these sequences; None when size 1

    def bounds(self, length: int) -> tuple[int, int]:
        """Token positions [start, end) of this rank's slice of rows of `length` tokens, padded up to a
        multiple of the group size (the last rank's slice may reach past `length` into padding)."""
        chunk = -(-length // self.size)
        return self.rank * chunk, (self.rank + 1) * chunk


def kv_replication(num_heads: int, num_kv_heads: int, sp: int) -> int:
    """How many times each kv head is copied so that the kv heads split evenly over `sp` ranks (1: none).

    Raises a ValueError naming `trainer.sp_degree` and the model's head counts when it cannot be done."""
    if sp < 1:
        raise ValueError(f"trainer.sp_degree must be >= 1, got {sp}")
    if num_heads % sp == 0:
        if num_kv_heads % sp == 0:
            return 1
        if sp % num_kv_heads == 0:
            return sp // num_kv_heads
    raise ValueError(
        f"trainer.sp_degree={sp} must divide the model's attention heads: num_attention_heads={num_heads}, "
        f"num_key_value_heads={num_kv_heads} (kv heads must be divisible by sp_degree, or divide it)"
    )


def token_window(x: Tensor, lo: int, hi: int) -> Tensor:
    """Columns [lo, hi) of a (b, T) tensor, zero beyond T (the padding of the last rank's slice)."""
    if hi > x.shape[1]:
        x = F.pad(x, (0, hi - x.shape[1]))
    return x[:, lo:hi]


# ----------------------------------------------------------------------------------------------------
# the all-to-all, differentiable


def _all_to_all(x: Tensor, scatter_dim: int, gather_dim: int, group: Any) -> Tensor:
    """Cut `x` into n pieces along scatter_dim, send piece i to rank i, and join what arrives along
    gather_dim in rank order. gloo and NCCL both implement all_to_all_single (on gloo for CPU tensors)."""
    n = dist.get_world_size(group)
    send = torch.stack(x.chunk(n, dim=scatter_dim)).contiguous()  # (n, ...): piece i for rank i
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    return torch.cat(recv.unbind(0), dim=gather_dim)


class _AllToAll(torch.autograd.Function):
    """Forward: all-to-all scattering scatter_dim, gathering gather_dim. Backward: the inverse all-to-all
    (scatter gather_dim, gather scatter_dim), which routes each gradient back to the rank of its input."""

    @staticmethod
    def forward(ctx: Any, x: Tensor, scatter_dim: int, gather_dim: int, group: Any) -> Tensor:
        ctx.dims, ctx.group = (scatter_dim, gather_dim), group
        return _all_to_all(x, scatter_dim, gather_dim, group)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None, None, None]:
        scatter_dim, gather_dim = ctx.dims
        return _all_to_all(grad, gather_dim, scatter_dim, ctx.group), None, None, None


def all_to_all(x: Tensor, scatter_dim: int, gather_dim: int, group: Any) -> Tensor:
    """Differentiable all-to-all over `group` (see _AllToAll)."""
    return _AllToAll.apply(x, scatter_dim, gather_dim, group)


# ----------------------------------------------------------------------------------------------------
# the attention function and how it is plugged in


# trainer.compile compiles each decoder layer: run the collectives eagerly (a graph break around attention)
# rather than asking dynamo to trace c10d calls inside an autograd.Function
@torch.compiler.disable
def ulysses_attention(
    module: nn.Module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[Tensor, None]:
    """transformers attention-function signature: query (b, h, s, d), key/value (b, kv, s, d) for this
    rank's s = T/sp positions -> output (b, s, h, d). `attention_mask` is ignored: the registry hands custom
    attentions None, and for right-padded rows full causal attention is exact (no real token attends to a
    later pad)."""
    group = module.codefu_sp_group
    if getattr(module, "sliding_window", None):
        raise NotImplementedError("trainer.sp_degree > 1 does not support sliding-window attention layers")
    rep = module.codefu_kv_replication
    if rep > 1:  # fewer kv heads than ranks: copy each so that every rank gets whole kv heads
        key, value = key.repeat_interleave(rep, dim=1), value.repeat_interleave(rep, dim=1)
    q = all_to_all(query, 1, 2, group)  # (b, h/sp, T, d): whole sequence, a share of the heads
    k = all_to_all(key, 1, 2, group)
    v = all_to_all(value, 1, 2, group)
    out = F.scaled_dot_product_attention(
        q, k, v, dropout_p=dropout, scale=scaling, is_causal=True, enable_gqa=q.shape[1] != k.shape[1]
    )  # (b, h/sp, T, d)
    out = all_to_all(out.transpose(1, 2), 1, 2, group)  # (b, T, h/sp, d) -> (b, s, h, d)
    return out.contiguous(), None


def enable_sequence_parallel(lm: nn.Module, layers: nn.ModuleList, shard: SeqShard) -> None:
    """Switch a transformers causal LM to Ulysses attention over `shard.group` (a no-op for size 1)."""
    if shard.size == 1:
        return
    from transformers import AttentionInterface

    cfg = lm.config
    heads = cfg.num_attention_heads
    rep = kv_replication(heads, getattr(cfg, "num_key_value_heads", None) or heads, shard.size)
    AttentionInterface.register(ATTENTION_NAME, ulysses_attention)
    lm.set_attn_implementation(ATTENTION_NAME)
    for layer in layers:
        attn = getattr(layer, "self_attn", None)
        if attn is None:
            raise TypeError(f"{type(layer).__name__}: no `self_attn` module for sequence parallelism")
        # on the module rather than a global: the attention function receives it, and two models in one
        # process (policy and reference in a test) stay independent
        attn.codefu_sp_group = shard.group
        attn.codefu_kv_replication = rep
