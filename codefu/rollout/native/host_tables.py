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


__all__ = ["HostBlockTables"]
