"""The block tables of running sequences in one persistent host array, updated as tables grow.

A decode step needs every running sequence's block table as one integer array. Converting Python lists
each step costs O(batch x blocks) interpreter work: at batch 256 with 5k-token contexts (330 blocks per
sequence) that took longer (~10 ms) than the GPU's whole decode step. Here each running sequence owns a
row; a step writes only the blocks added since the last step (one per `block_size` tokens) and gathers
the rows with one fancy index.

A sequence that leaves the running set (finished, or preempted) gives its row back at the next `rows` /
`gather` whose `live` set lacks it; when it runs again it is written afresh. A sequence's row number is
also its slot in the engine's device buffer of last sampled tokens (see engine.py): the row is stable for
as long as the sequence runs.
"""

from __future__ import annotations

from collections.abc import Collection
from collections.abc import Sequence as Seq
from typing import Protocol

import numpy as np

#: Sequences of one shared-prefix group at most: the decode kernel puts the group's queries in one tile of
#: SHARED_GROUP_MAX x (query heads per KV head) rows (8 x 7 = 56 for Qwen2.5-7B, padded to 64).
SHARED_GROUP_MAX = 8


class _HasBlockTable(Protocol):
    seq_id: int
    block_table: list[int]


class HostBlockTables:
    """rows: at most this many sequences run at once; width: max blocks per sequence; fill: the id
    written past a table's end (the scratch block)."""

    def __init__(self, rows: int, width: int, fill: int) -> None:
        self.array = np.full((rows, width), fill, dtype=np.int64)
        self.fill = fill
        self.row_of: dict[int, int] = {}  # seq_id -> row
        self.written: dict[int, int] = {}  # seq_id -> table entries already in its row
        self.free_rows = list(range(rows - 1, -1, -1))

    def rows(self, seqs: Seq[_HasBlockTable], live: Collection[int] | None = None) -> list[int]:
        """Each sequence's row, its block table written up to date. `live`: ids of every running sequence
        (default: `seqs`); rows of sequences not in it are given back first."""
        live = {s.seq_id for s in seqs} if live is None else live
        for gone in [sid for sid in self.row_of if sid not in live]:
            self.free_rows.append(self.row_of.pop(gone))
            del self.written[gone]
        rows = []
        for s in seqs:
            table = s.block_table
            row = self.row_of.get(s.seq_id)
            done = self.written.get(s.seq_id, 0)
            if row is None:
                row = self.row_of[s.seq_id] = self.free_rows.pop()
                done = -1
            if done < 0 or done > len(table) or (done and self.array[row, 0] != table[0]):
                self.array[row, :] = self.fill  # new here, or its table was rebuilt: write it whole
                done = 0
            if done < len(table):
                self.array[row, done : len(table)] = table[done:]
            self.written[s.seq_id] = len(table)
            rows.append(row)
        return rows

    def gather(
        self, seqs: Seq[_HasBlockTable], width: int, live: Collection[int] | None = None
    ) -> tuple[list[int], np.ndarray]:
        """(rows, (len(seqs), width) int64 tables): row i is seqs[i]'s block table, padded with `fill`."""
        rows = self.rows(seqs, live)
        return rows, self.array[rows, :width]


def shared_prefix_groups(
    tables: np.ndarray, context_lens: np.ndarray, block_size: int, max_group: int
) -> tuple[np.ndarray, np.ndarray]:
    """Groups of consecutive rows whose block tables begin with the same pages, for shared-prefix decode
    attention (triton_decode.py): (shared_lens, group_sizes), int32 [n] each. A group's first row holds its
    size, the others 0; every row of a group holds the tokens the group shares, rows alone hold 0.

    tables (n, width): each sequence's block table; context_lens [n]: tokens it attends to this step, its
    current one (whose block is being written) included. Only whole blocks before every member's current
    token count as shared; equal page ids mean the same K/V (the scheduler shares a prompt's full blocks
    among its samples, and never writes a shared block). A group shares its first pair's blocks and
    grows while the next pair shares at least as many (a prompt's samples share all of its full blocks;
    prompts that begin alike, e.g. with one system prompt, share fewer, and such a link ends a group); it
    holds at most max_group rows (a longer run is cut into several groups)."""
    if max_group > SHARED_GROUP_MAX:
        raise ValueError(f"max_group {max_group} > SHARED_GROUP_MAX ({SHARED_GROUP_MAX}): the kernel's tile")
    n = len(tables)
    shared = np.zeros(n, dtype=np.int32)
    sizes = np.zeros(n, dtype=np.int32)
    if n < 2 or max_group < 2:
        return shared, sizes
    full = (np.asarray(context_lens) - 1) // block_size  # whole blocks before each current token
    same = tables[1:] == tables[:-1]
    common = np.where(same.all(axis=1), tables.shape[1], same.argmin(axis=1))
    link = np.minimum(common, np.minimum(full[1:], full[:-1])).tolist()  # blocks rows i, i+1 share
    i = 0
    while i < n - 1:
        blocks = link[i]
        # a row whose next pair shares more starts no group: it would cut that pair's prefix to its own
        if blocks <= 0 or (i + 1 < n - 1 and link[i + 1] > blocks):
            i += 1
            continue
        j = i + 1  # the group's last row so far
        while j < n - 1 and j + 1 - i < max_group and link[j] >= blocks:
            j += 1
        sizes[i] = j + 1 - i
        shared[i : j + 1] = blocks * block_size
        i = j + 1
    return shared, sizes


__all__ = ["SHARED_GROUP_MAX", "HostBlockTables", "shared_prefix_groups"]
