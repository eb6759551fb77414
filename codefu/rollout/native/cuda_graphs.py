"""CUDA graphs of the decode step: one per batch-size bucket, replayed with the batch padded to the bucket.

The decode forward reads everything it needs from ONE static int64 buffer, `packed` [6 + W, max_batch]:
row 0 token ids, 1 positions, 2 slots, 3 context lengths, 4 shared-prefix lengths, 5 shared-prefix group
sizes (host_tables.shared_prefix_groups), rows 6.. the block tables (transposed, W = max blocks per
sequence), and ends at the final hidden states (the lm_head runs after the replay). The
engine fills a host copy (padded columns point at the scratch block, with context length 1), one
host-to-device copy refreshes the buffer, and the graph of that bucket replays. All graphs share one
memory pool (as vLLM / nano-vllm do): only one runs at a time, and its output is read before the next.

A bucket's graph is captured the first time a batch needs it, not all up front: a colocated engine frees
its KV cache for the trainer's turn, so its graphs (which hold the cache's addresses) are captured again
at every generate call, and a GRPO batch that starts at 128 sequences of a `max_num_seqs` of 256 never
uses the 8 largest buckets, the costliest to capture.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
from torch import Tensor


def batch_buckets(max_batch: int) -> list[int]:
    """1, 2, 4, 8, 16, 32, 48, ... up to max_batch (always included)."""
    small = [b for b in (1, 2, 4, 8) if b < max_batch]
    return small + list(range(16, max_batch, 16)) + [max_batch]


class DecodeGraphs:
    """Captured decode steps; `forward(packed[:, :bs]) -> hidden [bs, H]` is what each graph records (the
    lm_head runs after the replay: keeping (bs, V) fp32 logits per graph would cost GBs for V = 152k)."""

    def __init__(
        self, forward: Callable[[Tensor], Tensor], max_batch: int, pad_column: Tensor, device: torch.device
    ) -> None:
        self.forward, self.device = forward, device
        self.buckets = batch_buckets(max_batch)
        self.pad = pad_column.to(device)[:, None]
        self.packed = self.pad.repeat(1, max_batch).contiguous()
        self.staging = torch.empty_like(self.packed).view(-1)  # contiguous landing place of a host copy
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.outputs: dict[int, Tensor] = {}
        self.capture_s = 0.0  # spent capturing, summed over the buckets captured so far
        self._pool = None

    def capture(self, bs: int) -> None:
        """Record the decode step of bucket `bs`. The warm-up run before it executes for real, so the
        buffer is reset to padding first: it then writes only to the scratch block, never to the slots of
        the sequences being decoded (whose ids the buffer holds from the previous replay)."""
        start = time.perf_counter()
        self.packed.copy_(self.pad.expand_as(self.packed))
        self.forward(self.packed[:, :bs])  # warm-up: kernel selection, Triton compilation, allocator
        torch.cuda.synchronize(self.device)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self._pool):
            self.outputs[bs] = self.forward(self.packed[:, :bs])
        self._pool = graph.pool() if self._pool is None else self._pool
        self.graphs[bs] = graph
        torch.cuda.synchronize(self.device)
        self.capture_s += time.perf_counter() - start

    def bucket(self, batch: int) -> int | None:
        """The smallest bucket >= batch (its graph is captured at its first run); None when the batch is
        larger than every bucket."""
        return next((b for b in self.buckets if b >= batch), None)

    def run(self, packed: Tensor, batch: int) -> Tensor:
        """packed [6 + w, bucket] (host, padded to `bucket(batch)` columns, w <= W block-table columns)
        -> hidden [batch, H]. Table rows past w keep older ids: attention never reads past context_lens."""
        rows, bs = packed.shape
        if bs not in self.graphs:
            self.capture(bs)
        # host -> a contiguous device buffer -> the strided static slice: a copy from pinned memory into
        # a contiguous target never waits for the device; a strided one might
        staged = self.staging[: rows * bs].view(rows, bs)
        staged.copy_(packed, non_blocking=True)
        self.packed[:rows, :bs].copy_(staged)
        self.graphs[bs].replay()
        return self.outputs[bs][:batch]


__all__ = ["DecodeGraphs", "batch_buckets"]
