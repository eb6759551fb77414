"""The native engine's block allocator and scheduler alone (no model): sharing, partial admission of a
cohort, the prefill token budget, preemption of the youngest, and every block coming back."""

from __future__ import annotations

import pytest

from codefu.rollout.native.kv_cache import BlockAllocator
from codefu.rollout.native.scheduler import Cohort, DecodeStep, PrefillStep, Scheduler, Sequence

BS = 4


def cohort(first_id: int, prompt_len: int, n: int) -> Cohort:
    prompt = list(range(1, prompt_len + 1))
    return Cohort([Sequence(first_id + j, first_id, j, list(prompt)) for j in range(n)])


def sample_all(seqs: list[Sequence]) -> None:
    for s in seqs:
        s.tokens.append(7)
        s.logprobs.append(-1.0)


def test_allocator_refcounts():
    alloc = BlockAllocator(3)
    a = alloc.allocate()
    alloc.share(a)
    alloc.release([a])
    assert alloc.num_free == 2 and alloc.refcount[a] == 1
    alloc.release([a])
    assert alloc.num_free == 3
    with pytest.raises(AssertionError, match="released twice"):
        alloc.release([a])


def test_cohort_shares_full_blocks_and_copies_the_partial_one():
    alloc = BlockAllocator(20)
    sched = Scheduler(alloc, BS, max_num_seqs=8, max_prefill_tokens=64)
    sched.add(cohort(0, 10, 3))  # 2 full blocks + 2 tokens
    step = sched.schedule()
    assert isinstance(step, PrefillStep) and len(step.cohorts) == 1
    tables = [s.block_table for s in step.cohorts[0].seqs]
    assert tables[1][:2] == tables[2][:2] == tables[0][:2]
    assert [alloc.refcount[b] for b in tables[0][:2]] == [3, 3]
    assert len({t[2] for t in tables}) == 3
    assert step.copies == [(tables[0][2], tables[1][2]), (tables[0][2], tables[2][2])]
    assert alloc.num_free == 20 - 2 - 3


def test_a_cohort_that_does_not_fit_is_admitted_in_part_and_the_rest_waits_first():
    alloc = BlockAllocator(6)
    sched = Scheduler(alloc, BS, max_num_seqs=8, max_prefill_tokens=64)
    sched.add(cohort(0, 6, 4))  # 1 full + 1 partial: 1 + 2 per sample (its copy and one spare) => 2 fit
    sched.add(cohort(10, 3, 1))
    step = sched.schedule()
    assert isinstance(step, PrefillStep)
    assert [s.seq_id for g in step.cohorts for s in g.seqs] == [0, 1]
    assert [s.seq_id for s in sched.waiting[0].seqs] == [2, 3] and len(sched.waiting) == 2


def test_prefill_token_budget_counts_padding():
    alloc = BlockAllocator(100)
    sched = Scheduler(alloc, BS, max_num_seqs=100, max_prefill_tokens=20)
    for i in range(4):
        sched.add(cohort(10 * i, 8 if i else 3, 1))
    step = sched.schedule()
    assert isinstance(step, PrefillStep)
    assert len(step.cohorts) == 2  # widths 3, 8: 2 x 8 = 16 <= 20; a third would pad to 24


def test_decode_preempts_the_youngest_and_everything_is_freed():
    alloc = BlockAllocator(4)
    sched = Scheduler(alloc, BS, max_num_seqs=8, max_prefill_tokens=64)
    sched.add(cohort(0, 3, 1))
    sched.add(cohort(1, 3, 1))
    step = sched.schedule()
    assert isinstance(step, PrefillStep) and len(sched.running) == 2  # 1 block + 1 spare each
    sample_all(sched.running)  # 4 tokens each: the next decode still fits their first block
    step = sched.schedule()
    assert isinstance(step, DecodeStep) and len(step.seqs) == 2
    sample_all(step.seqs)  # 5 tokens: each needs a second block (2 free)
    step = sched.schedule()
    assert isinstance(step, DecodeStep) and len(step.seqs) == 2 and alloc.num_free == 0
    sample_all(step.seqs)
    for _ in range(3):  # up to 8 tokens: still two blocks each
        assert len(sched.schedule().seqs) == 2
        sample_all(sched.running)
    # 9 tokens: a third block each, none free: the youngest (seq 1) is preempted for the oldest
    step = sched.schedule()
    assert isinstance(step, DecodeStep) and [s.seq_id for s in step.seqs] == [0]
    assert sched.num_preemptions == 1
    preempted = sched.waiting[0].seqs[0]
    assert preempted.seq_id == 1 and preempted.block_table == [] and len(preempted.tokens) == 6
    sched.finish(step.seqs[0], "stop")
    step = sched.schedule()  # readmitted: its prompt and its tokens so far are prefilled again
    assert isinstance(step, PrefillStep) and step.cohorts[0].prefix == preempted.all_tokens()
    sched.finish(preempted, "length")
    assert sched.done and alloc.num_free == 4 and sum(alloc.refcount) == 0
