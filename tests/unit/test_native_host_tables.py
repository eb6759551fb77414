"""HostBlockTables: the persistent host copy of running sequences' block tables."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest

from codefu.rollout.native.host_tables import SHARED_GROUP_MAX, HostBlockTables, shared_prefix_groups


@dataclass
class Seq:
    seq_id: int
    block_table: list[int] = field(default_factory=list)


def expected(seqs: list[Seq], width: int, fill: int) -> np.ndarray:
    out = np.full((len(seqs), width), fill, dtype=np.int64)
    for i, s in enumerate(seqs):
        out[i, : len(s.block_table)] = s.block_table
    return out


def test_rows_follow_growth_departures_and_rebuilt_tables():
    tables = HostBlockTables(rows=3, width=6, fill=99)
    a, b, c = Seq(0, [5]), Seq(1, [7, 8]), Seq(2, [1])
    for seqs in ([a, b], [b, a]):  # order of the batch does not matter
        assert (tables.gather(seqs, 2)[1] == expected(seqs, 2, 99)).all()
    a.block_table.append(9)  # grows by one block
    assert (tables.gather([a, b], 3)[1] == expected([a, b], 3, 99)).all()
    # b leaves (finished or preempted): its row goes to c; b comes back later with a rebuilt table
    assert (tables.gather([a, c], 2)[1] == expected([a, c], 2, 99)).all()
    b.block_table = [3]
    c.block_table += [4, 6]
    _, got = tables.gather([c, b, a], 6)
    assert (got == expected([c, b, a], 6, 99)).all()
    assert len(tables.row_of) == 3 and not tables.free_rows
    # a table rebuilt while its sequence kept its row (not expected from the scheduler, still handled)
    a.block_table = [2, 0]
    assert (tables.gather([a], 6)[1] == expected([a], 6, 99)).all()
    assert sorted(tables.free_rows) == [r for r in range(3) if r != tables.row_of[0]]


def test_rows_stay_with_running_sequences_left_out_of_a_step():
    """A prefill step names only the new sequences: the running ones (in `live`) keep their rows, which
    are their token slots on the device."""
    tables = HostBlockTables(rows=3, width=4, fill=99)
    a, b, c = Seq(0, [5]), Seq(1, [7]), Seq(2, [1])
    first = tables.rows([a, b])
    assert tables.rows([c], live={0, 1, 2}) == [r for r in range(3) if r not in first]
    assert tables.rows([b, a], live={0, 1, 2}) == first[::-1]
    freed = tables.rows([a, c])  # b is not live any more: its row is given back
    assert freed == [first[0], tables.row_of[2]] and tables.free_rows == [first[1]]


def test_shared_prefix_groups_follow_a_prompts_samples():
    """Two prompts that begin with the same system prompt (block 1 shared by all) and 3 samples each
    sharing their prompt's blocks; between them one sample whose table was rebuilt (preempted): groups
    are the prompts' samples with their whole prompt, the common first block alone makes none."""
    tables = np.array(
        [
            [1, 2, 3, 10, 0],
            [1, 2, 3, 11, 0],
            [1, 2, 3, 12, 0],
            [1, 20, 21, 0, 0],  # rebuilt: only the system prompt's block in common with its neighbours
            [1, 4, 5, 13, 0],
            [1, 4, 5, 14, 0],
            [1, 4, 5, 15, 16],
        ]
    )
    lens = np.array([60, 55, 49, 40, 64, 50, 70])
    shared, sizes = shared_prefix_groups(tables, lens, block_size=16, max_group=8)
    assert sizes.tolist() == [3, 0, 0, 0, 3, 0, 0]
    assert shared.tolist() == [48, 48, 48, 0, 48, 48, 48]


def test_shared_prefix_groups_share_only_whole_blocks_before_the_current_token():
    """The block holding a sequence's current token is not shared, even if the ids match (e.g. the
    padding past a short table): the group shares what its shortest member has whole."""
    tables = np.array([[7, 8, 9, 0], [7, 8, 9, 0]])
    shared, sizes = shared_prefix_groups(tables, np.array([33, 40]), block_size=16, max_group=8)
    assert (sizes.tolist(), shared.tolist()) == ([2, 0], [32, 32])
    shared, sizes = shared_prefix_groups(tables, np.array([16, 40]), block_size=16, max_group=8)
    assert (sizes.tolist(), shared.tolist()) == ([0, 0], [0, 0])  # row 0's only block holds its token


def test_shared_prefix_groups_cut_at_max_group():
    tables = np.tile(np.array([[3, 4, 5]]), (5, 1))
    shared, sizes = shared_prefix_groups(tables, np.full(5, 40), block_size=16, max_group=2)
    assert sizes.tolist() == [2, 0, 2, 0, 0] and shared.tolist() == [32, 32, 32, 32, 0]
    assert shared_prefix_groups(tables[:1], np.array([40]), 16, 8)[1].tolist() == [0]


def test_shared_prefix_groups_larger_than_the_kernels_tile_are_refused():
    tables = np.tile(np.array([[3, 4, 5]]), (3, 1))
    with pytest.raises(ValueError, match="SHARED_GROUP_MAX"):
        shared_prefix_groups(tables, np.full(3, 40), block_size=16, max_group=SHARED_GROUP_MAX + 1)
