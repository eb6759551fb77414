"""The native engine's block allocator and scheduler alone (no model): sharing, partial admission of a
cohort, the prefill token budget, preemption of the youngest, and every block coming back."""

from __future__ import annotations

import pytest

from codefu.rollout.native.kv_cache import BlockAllocator, PrefixCache
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


# ---- the prefix cache ------------------------------------------------------------------------------------


def test_prefix_cache_finds_the_longest_run_of_full_blocks_and_nothing_else():
    cache = PrefixCache(BS)
    tokens = list(range(1, 12))  # blocks [1-4] [5-8], then 3 tokens
    cache.insert(tokens, [7, 3, 9], written=10)  # K/V of the first 10 tokens: the two full blocks
    assert len(cache) == 2 and 7 in cache and 3 in cache and 9 not in cache
    assert cache.match(tokens + [99], max_blocks=10) == [7, 3]
    assert cache.match(tokens, max_blocks=1) == [7]
    assert cache.match([1, 2, 3, 4, 0, 6, 7, 8], max_blocks=10) == [7]  # the second block differs
    assert cache.match([5, 6, 7, 8], max_blocks=10) == []  # a block is known with what came before it
    cache.insert(tokens, [8, 4], written=8)  # the same tokens again: the first blocks stay
    assert len(cache) == 2 and cache.match(tokens, 10) == [7, 3]
    cache.forget(7)  # its block taken for other work: what hung under it cannot be reached
    assert cache.match(tokens, 10) == [] and 3 in cache
    cache.insert(tokens, [5, 3], written=8)  # 3 again, now under a new parent
    assert cache.match(tokens, 10) == [5, 3] and len(cache) == 2


def test_allocator_keeps_cached_blocks_until_their_memory_is_needed():
    alloc = BlockAllocator(3, PrefixCache(BS))
    a, b = alloc.allocate(), alloc.allocate()
    alloc.cache.insert([1, 2, 3, 4, 5, 6, 7, 8, 9], [a, b], written=8)
    alloc.release([a, b])
    assert alloc.num_free == 3 and alloc.refcount[a] == 0 and a in alloc.cache
    assert alloc.share(alloc.cache.match([1, 2, 3, 4, 0], 5)[0]) == a  # found again, held again
    assert alloc.refcount[a] == 1 and alloc.num_free == 2
    c = alloc.allocate()  # the truly free block first
    assert c not in (a, b) and b in alloc.cache
    assert alloc.allocate() == b and b not in alloc.cache  # then the oldest cached one, forgotten
    with pytest.raises(RuntimeError, match="no free block"):
        alloc.allocate()
    alloc.release([a, b, c])
    alloc.drop_cache()  # new weights
    assert len(alloc.cache) == 0 and alloc.num_free == 3
    assert sorted(alloc.allocate() for _ in range(3)) == [0, 1, 2]


def test_admission_starts_after_the_cached_blocks():
    alloc = BlockAllocator(20, PrefixCache(BS))
    sched = Scheduler(alloc, BS, max_num_seqs=8, max_prefill_tokens=64)
    first = cohort(0, 6, 1)
    sched.add(first)
    sched.schedule()
    seq = sched.running[0]
    seq.tokens += [50, 51, 52, 53]  # 10 tokens: K/V of 9 written, two full blocks
    table = list(seq.block_table)
    sched.finish(seq, "stop")
    assert alloc.num_free == 20 and len(alloc.cache) == 2
    # the next turn: the conversation so far, then more
    sched.add(Cohort([Sequence(1, 0, 0, seq.all_tokens() + [60, 61, 62])]))
    step = sched.schedule()
    assert isinstance(step, PrefillStep)
    admitted = step.cohorts[0]
    assert admitted.cached == 2 * BS and admitted.seqs[0].block_table[:2] == table[:2]
    assert [alloc.refcount[b] for b in table[:2]] == [1, 1]
    # exactly a whole number of cached blocks: the last one runs again (its logits sample the next token)
    sched.add(Cohort([Sequence(2, 1, 0, list(range(1, 5)) + [5, 6, 50, 51])]))
    assert sched.schedule().cohorts[0].cached == BS
