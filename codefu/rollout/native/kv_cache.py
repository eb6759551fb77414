"""The paged KV cache: one tensor for every layer's K and V blocks, and a block allocator with refcounts.

    cache  [num_layers, 2, num_blocks + 1, block_size, Hkv, D]     (2: K, V)

Layer l's K cache is `cache[l, 0]` ([num_blocks + 1, block_size, Hkv, D]), a view, so copying a block for
every layer at once is one indexing op. The extra last block is scratch: padded rows of a CUDA-graph batch
write their K/V there and read it back; the allocator never hands it out.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict, deque

import torch
from torch import Tensor


class PrefixCache:
    """Full KV blocks of finished sequences, found again by their tokens while the weights stay the same: a
    self-repair turn's conversation starts with the previous turn's prompt and response, whose K/V need
    not be computed again (nor a prompt sampled again in a later call).

    A block is known by (its parent's entry id, its block_size tokens): exact, no hash can collide, and
    the entries below an evicted block can no longer be reached (entry ids are never reused)."""

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self._entries: dict[tuple[int, tuple[int, ...]], tuple[int, int]] = {}  # key -> (entry id, block)
        self._key_of: dict[int, tuple[int, tuple[int, ...]]] = {}  # block -> its key
        self._ids = itertools.count(1)  # 0: the root

    def __contains__(self, block: int) -> bool:
        return block in self._key_of

    def __len__(self) -> int:
        return len(self._key_of)

    def match(self, tokens: list[int], max_blocks: int) -> list[int]:
        """The cached blocks holding the longest run of `tokens`' first full blocks (at most max_blocks)."""
        bs, parent, out = self.block_size, 0, []
        for b in range(min(max_blocks, len(tokens) // bs)):
            hit = self._entries.get((parent, tuple(tokens[b * bs : (b + 1) * bs])))
            if hit is None:
                break
            parent, block = hit
            out.append(block)
        return out

    def insert(self, tokens: list[int], blocks: list[int], written: int) -> None:
        """Remember blocks[b] as holding tokens' block b, for every block whose K/V are all written (the
        first `written` tokens). A block whose tokens are cached already (in another block, e.g. a
        sample's shared prompt block) is not added twice."""
        bs, parent = self.block_size, 0
        for b in range(min(written // bs, len(blocks))):
            key = (parent, tuple(tokens[b * bs : (b + 1) * bs]))
            hit = self._entries.get(key)
            if hit is None:
                self.forget(blocks[b])  # its old key (under an evicted parent) no longer says what it holds
                hit = (next(self._ids), blocks[b])
                self._entries[key] = hit
                self._key_of[blocks[b]] = key
            parent = hit[0]

    def forget(self, block: int) -> None:
        key = self._key_of.pop(block, None)
        if key is not None:
            del self._entries[key]

    def clear(self) -> None:
        self._entries.clear()
        self._key_of.clear()


class BlockAllocator:
    """Block ids 0..num_blocks-1 with reference counts: a block shared by the n samples of one prompt has
    refcount n and is free again when its last user releases it. With a `PrefixCache`, a free block that
    the cache knows keeps its K/V until it is needed (least recently freed first): `num_free` counts it,
    `share` takes it back."""

    def __init__(self, num_blocks: int, cache: PrefixCache | None = None) -> None:
        if num_blocks < 1:
            raise ValueError(f"the KV cache needs at least one block, got {num_blocks}")
        self.num_blocks = num_blocks
        self.cache = cache
        self.refcount = [0] * num_blocks
        self._free: deque[int] = deque(range(num_blocks))
        self._cached_free: OrderedDict[int, None] = OrderedDict()  # free, K/V kept: oldest first

    @property
    def num_free(self) -> int:
        return len(self._free) + len(self._cached_free)

    def allocate(self) -> int:
        if self._free:
            block = self._free.popleft()
        elif self._cached_free:
            block, _ = self._cached_free.popitem(last=False)
            assert self.cache is not None
            self.cache.forget(block)
        else:
            raise RuntimeError("KV cache: no free block (the scheduler should have preempted)")
        self.refcount[block] = 1
        return block

    def share(self, block: int) -> int:
        if self.refcount[block] == 0:  # a cached block nobody holds: in use again
            assert block in self._cached_free, f"block {block} is not allocated"
            del self._cached_free[block]
        self.refcount[block] += 1
        return block

    def release(self, blocks: list[int]) -> None:
        for block in blocks:
            assert self.refcount[block] > 0, f"block {block} released twice"
            self.refcount[block] -= 1
            if self.refcount[block] == 0:
                if self.cache is not None and block in self.cache:
                    self._cached_free[block] = None
                else:
                    self._free.append(block)

    def drop_cache(self) -> None:
        """Forget every cached block (the weights changed: their K/V are stale)."""
        if self.cache is not None:
            self.cache.clear()
        self._free.extend(self._cached_free)
        self._cached_free.clear()


class KVCache:
    """The cache tensor (see the module docstring), its per-layer views, and block copies."""

    def __init__(
        self,
        num_layers: int,
        num_blocks: int,
        block_size: int,
        num_kv_heads: int,
        head_dim: int,
        dtype: torch.dtype,
        device: torch.device | str,
    ) -> None:
        self.num_blocks, self.block_size = num_blocks, block_size
        self.scratch_block = num_blocks
        shape = (num_layers, 2, num_blocks + 1, block_size, num_kv_heads, head_dim)
        # zeros, not empty: the reference decode path multiplies masked-out entries by 0, and 0 * NaN = NaN
        self.data = torch.zeros(shape, dtype=dtype, device=device)

    def layer(self, i: int) -> tuple[Tensor, Tensor]:
        return self.data[i, 0], self.data[i, 1]

    def copy_blocks(self, src: list[int], dst: list[int]) -> None:
        """Block dst[j] := block src[j], in every layer, K and V (one gather + one scatter)."""
        if src:
            device = self.data.device
            s = torch.tensor(src, dtype=torch.long, device=device)
            d = torch.tensor(dst, dtype=torch.long, device=device)
            self.data[:, :, d] = self.data[:, :, s]

    @staticmethod
    def bytes_per_block(
        num_layers: int, block_size: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype
    ) -> int:
        return (
            2
            * num_layers
            * block_size
            * num_kv_heads
            * head_dim
            * torch.empty((), dtype=dtype).element_size()
        )


__all__ = ["BlockAllocator", "KVCache", "PrefixCache"]
