"""Continuous batching over a paged KV cache: which sequences run in the next step, and their blocks.

Every step is either a PREFILL of newly admitted work or a DECODE of every running sequence (one token
each); prefill goes first whenever something waiting fits (vLLM's rule, which keeps the batch full).

- Waiting work is a `Cohort`: sequences whose tokens so far are identical (the n fresh samples of a
  prompt, or one preempted sequence). A cohort's tokens are prefilled ONCE; its sequences share the full
  blocks (refcount) and each gets its own copy of the partial last block, so no block is ever written by
  two sequences. Part of a cohort can be admitted when only part fits; the rest stays first in line.
- Admission needs free blocks for the prefix plus one spare block per admitted sequence (headroom for
  its next tokens), and fits the token budget of a prefill step (padded width x sequences).
- Before a decode step each sequence gets the block its next token needs. When none is free the
  youngest running sequence is PREEMPTED: its blocks are freed and it waits again, first in line; on
  readmission its prompt and its tokens so far are prefilled again (recompute), and it keeps its tokens
  and log-probs. The oldest sequence alone always fits (`max_model_len` <= cache size), so the batch
  always makes progress.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from codefu.rollout.native.kv_cache import BlockAllocator


@dataclass(eq=False)  # identity: a generated __eq__ compares every field (prompts!) in `in` / `remove`
class Sequence:
    """One sample of one prompt: its tokens, what it has produced, and where its K/V live."""

    seq_id: int
    prompt_index: int
    sample_index: int
    prompt: list[int]
    tokens: list[int] = field(default_factory=list)  # sampled so far
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)  # the weights' version that sampled each token
    block_table: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    # its K/V were written (in part) by weights replaced while it ran: it keeps them (PipelineRL does), but
    # the prefix cache must not hand them to another prompt as the current weights' K/V
    stale_kv: bool = False

    @property
    def num_tokens(self) -> int:
        return len(self.prompt) + len(self.tokens)

    def all_tokens(self) -> list[int]:
        return self.prompt + self.tokens


@dataclass
class Cohort:
    """Waiting sequences with identical tokens so far: prefilled once, blocks shared."""

    seqs: list[Sequence]
    cached: int = 0  # leading prefix tokens whose K/V the prefix cache had (set on admission)
    first: bool = False  # queued ahead of the rest (Scheduler.add)

    @property
    def prefix(self) -> list[int]:
        return self.seqs[0].all_tokens()

    @property
    def length(self) -> int:
        """len(prefix), without building it (the scheduler asks every step while work waits)."""
        return self.seqs[0].num_tokens


@dataclass
class PrefillStep:
    cohorts: list[Cohort]  # each cohort's prefix runs once; its sequences sample from the last position
    copies: list[tuple[int, int]]  # (src, dst) blocks to copy AFTER the forward (partial last blocks)


@dataclass
class DecodeStep:
    seqs: list[Sequence]  # one token each


class Scheduler:
    def __init__(
        self, allocator: BlockAllocator, block_size: int, max_num_seqs: int, max_prefill_tokens: int
    ) -> None:
        self.allocator = allocator
        self.block_size = block_size
        self.max_num_seqs = max_num_seqs
        self.max_prefill_tokens = max_prefill_tokens
        self.waiting: deque[Cohort] = deque()
        self.running: list[Sequence] = []  # admission order: the last is the youngest
        self.finished: list[Sequence] = []  # finished since the engine last took them (in finish order)
        self.num_preemptions = 0

    def add(self, cohort: Cohort, first: bool = False) -> None:
        """Queue `cohort`: last, or `first` (before everything waiting; several in the order added)."""
        if not first:
            self.waiting.append(cohort)
            return
        ahead = 0
        while ahead < len(self.waiting) and self.waiting[ahead].first:
            ahead += 1
        cohort.first = True
        self.waiting.insert(ahead, cohort)

    @property
    def done(self) -> bool:
        return not self.waiting and not self.running

    def schedule(self) -> PrefillStep | DecodeStep:
        prefill = self._admit()
        if prefill is not None:
            return prefill
        self._reserve_decode_blocks()
        return DecodeStep(list(self.running))

    def finish(self, seq: Sequence, reason: str) -> None:
        """A sequence is done: its blocks go back at once, so waiting work can join the next step.

        The engine learns of a stop token one step late (it launches step t+1 before it reads step t's
        tokens), so the sequence may have been finished already (its length cap was reached at launch:
        only the reason changes) or preempted meanwhile (it waits alone in its cohort: it leaves the
        queue)."""
        already = seq.finish_reason is not None
        seq.finish_reason = reason
        if already:
            return
        self.finished.append(seq)
        if seq.block_table:  # running (a running sequence always holds a block)
            self.running.remove(seq)
            self._release(seq)
        else:
            self.waiting = deque(g for g in self.waiting if g.seqs != [seq])

    # ---- internals -------------------------------------------------------------------------------
    def _admit(self) -> PrefillStep | None:
        cohorts: list[Cohort] = []
        copies: list[tuple[int, int]] = []
        width = 0
        while self.waiting:
            cohort = self.waiting[0]
            length = cohort.length
            room = self.max_num_seqs - len(self.running)
            if room <= 0:
                break
            cache = self.allocator.cache
            # at least the last token runs: its logits sample the first new token
            hits = cache.match(cohort.prefix, (length - 1) // self.block_size) if cache is not None else []
            new_width = max(width, length - len(hits) * self.block_size)
            if (len(cohorts) + 1) * new_width > self.max_prefill_tokens:
                break
            full, partial = divmod(length, self.block_size)
            per_seq = (1 if partial else 0) + 1  # its copy of the partial block + one block of headroom
            k = min(len(cohort.seqs), room, (self.allocator.num_free - full) // per_seq)
            if k < 1 and not self.running and not cohorts and full + (partial > 0) <= self.allocator.num_free:
                k = 1  # alone in an empty batch it runs without headroom (it fits: max_model_len)
            if k < 1:
                break
            split = k < len(cohort.seqs)
            if split:  # admit part of the cohort; the rest keeps its place in line
                admitted = Cohort(cohort.seqs[:k])
                cohort.seqs = cohort.seqs[k:]
            else:
                admitted = self.waiting.popleft()
            copies += self._allocate_prefix(admitted, full, partial, hits)
            cohorts.append(admitted)
            self.running.extend(admitted.seqs)
            width = new_width
            if split:
                break  # no room for more now
        return PrefillStep(cohorts, copies) if cohorts else None

    def _allocate_prefix(
        self, cohort: Cohort, full: int, partial: int, hits: list[int]
    ) -> list[tuple[int, int]]:
        """Blocks for a cohort's prefix: the first sequence owns them (the prefix cache's `hits` first,
        taken before any allocation could evict them), the others share the full ones and get their own
        copy of the partial last one (copied after the prefill writes it)."""
        first, *others = cohort.seqs
        first.block_table = [self.allocator.share(b) for b in hits]
        first.block_table += [self.allocator.allocate() for _ in range(full + (partial > 0) - len(hits))]
        cohort.cached = len(hits) * self.block_size
        copies = []
        for seq in others:
            seq.block_table = [self.allocator.share(b) for b in first.block_table[:full]]
            if partial:
                block = self.allocator.allocate()
                seq.block_table.append(block)
                copies.append((first.block_table[-1], block))
        return copies

    def _reserve_decode_blocks(self) -> None:
        """Each running sequence stores its last token's K/V this step: give it a block for that position,
        preempting the youngest sequences while none is free."""
        preempted: set[int] = set()  # a set, not `seq in self.running`: O(batch) per step, not O(batch^2)
        for seq in list(self.running):
            if seq.seq_id in preempted:  # preempted below for an older one
                continue
            needed = -(-seq.num_tokens // self.block_size)
            while len(seq.block_table) < needed:
                if self.allocator.num_free == 0:
                    victim = self.running[-1]
                    self._preempt(victim)
                    preempted.add(victim.seq_id)
                    if victim is seq:
                        break
                    continue
                seq.block_table.append(self.allocator.allocate())

    def _preempt(self, seq: Sequence) -> None:
        self.running.remove(seq)
        self._release(seq)  # its readmission finds in the prefix cache what it had computed
        self.waiting.appendleft(Cohort([seq], first=True))  # the oldest work: ahead of what `add` puts first
        self.num_preemptions += 1

    def _release(self, seq: Sequence) -> None:
        """A sequence leaves the batch: its blocks go back, the full ones whose K/V are all written (every
        token but its last, not yet run) remembered by the prefix cache unless older weights wrote them."""
        if self.allocator.cache is not None and not seq.stale_kv:
            self.allocator.cache.insert(seq.all_tokens(), seq.block_table, seq.num_tokens - 1)
        self.allocator.release(seq.block_table)
        seq.block_table = []
        seq.stale_kv = False  # readmitted (preempted), it is prefilled again by the weights of then


__all__ = ["DecodeStep", "Cohort", "PrefillStep", "Scheduler", "Sequence"]
