"""CUDA graphs of the decode step: one per batch-size bucket, replayed with the batch padded to the bucket.

The decode forward reads everything it needs from ONE static int64 buffer, `packed` [6 + W, max_batch]:
row 0 token ids, 1 positions, 2 slots, 3 context lengths, 4 shared-prefix lengths, 5 shared-prefix group
sizes (host_tables.shared_prefix_groups), rows 6.. the block tables (transposed, W = max blocks per
sequence), and ends at the final hidden states (the lm_head runs after the replay). The
engine fills a host copy (padded columns point at the scratch block, with context length 1), one
host-to-device copy refreshes the buffer, and the graph of that bucket replays. Graphs are captured from
the largest bucket down and share one memory pool (as vLLM / nano-vllm do).
"""

from __future__ import annotations

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
        self.buckets = batch_buckets(max_batch)
        # every column starts as padding, so the warm-up and capture runs write only to the scratch block
        self.packed = pad_column.to(device)[:, None].repeat(1, max_batch).contiguous()
        self.staging = torch.empty_like(self.packed).view(-1)  # contiguous landing place of a host copy
        self.graphs: dict[int, torch.cuda.CUDAGraph] = {}
        self.outputs: dict[int, Tensor] = {}
        pool = None
        for bs in reversed(self.buckets):
            forward(self.packed[:, :bs])  # warm-up: kernel selection, Triton compilation, allocator
            torch.cuda.synchronize(device)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                self.outputs[bs] = forward(self.packed[:, :bs])
            pool = graph.pool() if pool is None else pool
            self.graphs[bs] = graph
        torch.cuda.synchronize(device)

    def bucket(self, batch: int) -> int | None:
        """The smallest captured batch size >= batch; None when the batch is larger than every graph."""
        return next((b for b in self.buckets if b >= batch), None)

    def run(self, packed: Tensor, batch: int) -> Tensor:
        """packed [6 + w, bucket] (host, padded to `bucket(batch)` columns, w <= W block-table columns)
        -> hidden [batch, H]. Table rows past w keep older ids: attention never reads past context_lens."""
        rows, bs = packed.shape
        # host -> a contiguous device buffer -> the strided static slice: a copy from pinned memory into
        # a contiguous target never waits for the device; a strided one might
        staged = self.staging[: rows * bs].view(rows, bs)
        staged.copy_(packed, non_blocking=True)
        self.packed[:rows, :bs].copy_(staged)
        self.graphs[bs].replay()
        return self.outputs[bs][:batch]


__all__ = ["DecodeGraphs", "batch_buckets"]
