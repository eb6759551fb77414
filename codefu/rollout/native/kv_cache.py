"""The paged KV cache: one tensor for every layer's K and V blocks, and a block allocator with refcounts.

    cache  [num_layers, 2, num_blocks + 1, block_size, Hkv, D]     (2: K, V)

Layer l's K cache is `cache[l, 0]` ([num_blocks + 1, block_size, Hkv, D]), a view, so copying a block for
every layer at once is one indexing op. The extra last block is scratch: padded rows of a CUDA-graph batch
write their K/V there and read it back; the allocator never hands it out.
"""

from __future__ import annotations

from collections import deque

import torch
from torch import Tensor


class BlockAllocator:
    """Block ids 0..num_blocks-1 with reference counts: a block shared by the n samples of one prompt has
    refcount n and returns to the free list when its last user releases it."""

    def __init__(self, num_blocks: int) -> None:
        if num_blocks < 1:
            raise ValueError(f"the KV cache needs at least one block, got {num_blocks}")
        self.num_blocks = num_blocks
        self.refcount = [0] * num_blocks
        self._free: deque[int] = deque(range(num_blocks))

    @property
    def num_free(self) -> int:
        return len(self._free)

    def allocate(self) -> int:
        if not self._free:
            raise RuntimeError("KV cache: no free block (the scheduler should have preempted)")
        block = self._free.popleft()
        self.refcount[block] = 1
        return block

    def share(self, block: int) -> int:
        assert self.refcount[block] > 0, f"block {block} is not allocated"
        self.refcount[block] += 1
        return block

    def release(self, blocks: list[int]) -> None:
        for block in blocks:
            assert self.refcount[block] > 0, f"block {block} released twice"
            self.refcount[block] -= 1
            if self.refcount[block] == 0:
                self._free.append(block)


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


__all__ = ["BlockAllocator", "KVCache"]
