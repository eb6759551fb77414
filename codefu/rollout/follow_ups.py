"""Prompts that arrive while an engine generates: a self-repair turn put in as soon as the judge has
checked the turn before it, while the rest of the batch still decodes.

    follow_ups = FollowUps()
    for batch in engine.generate_stream(prompts, sampling, follow_ups):   # on one thread
        ...
    follow_ups.put([FollowUp(index=12, prompt=conversation)])             # on another, any time
    follow_ups.close()                                                    # the stream ends when done

A follow-up is sampled once (n = 1) with the stream's sampling settings; its completion carries
`prompt_index=index` (the caller numbers follow-ups past the stream's own prompts) and sample_index 0.
A follow-up with a `response` continues that interrupted completion (its prompt is the completion's):
the completion that comes back holds the tokens it had and those written now, within the stream's
max_new_tokens over both (the native engine only: others raise). A follow-up put `first` is queued
ahead of the prompts waiting (those put first keep their order).

`interrupt()` ends the stream early: the engine stops, and every sample not finished yet comes back in
a last batch with finish_reason "interrupted" and the tokens it had (loop.over_provision, APRIL).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from codefu.rollout.types import Completion, SamplingParams


@dataclass(frozen=True)
class FollowUp:
    index: int  # the completion's prompt_index
    prompt: list[int]
    response: Completion | None = None  # an interrupted completion of `prompt` to go on with
    first: bool = False  # queued ahead of the stream's prompts (a carried sample: its group waits for it)


class FollowUps:
    """A thread-safe inbox of follow-ups: `put` and `close` from any thread, `take` by the generating one."""

    def __init__(self) -> None:
        self._waiting: list[FollowUp] = []
        self._closed = False
        self.aborted = False  # the caller gave up: the stream stops, dropping what it runs
        self.interrupted = False  # the caller has enough: the stream stops, handing back what it runs
        self._changed = threading.Condition()

    def put(self, follow_ups: list[FollowUp]) -> None:
        with self._changed:
            if self._closed:
                raise RuntimeError("follow-ups put after close()")
            self._waiting += follow_ups
            self._changed.notify_all()

    def close(self, abort: bool = False) -> None:
        """No more follow-ups: the stream ends once those put so far are done; with `abort` (the caller
        failed and will not read the rest) at once, dropping what is waiting and running."""
        with self._changed:
            self._closed = True
            if abort:
                self.aborted, self._waiting = True, []
            self._changed.notify_all()

    def interrupt(self) -> None:
        """No more follow-ups, and the stream stops at once: what is waiting or running comes back as
        interrupted completions (an engine that cannot stop early finishes them)."""
        with self._changed:
            self._closed = self.interrupted = True
            self._changed.notify_all()

    def take(self, wait: bool) -> list[FollowUp] | None:
        """What was put since the last call; None once closed and all taken. With `wait`, blocks until
        something is put or the inbox closes (the engine has nothing else to do)."""
        with self._changed:
            if wait:
                self._changed.wait_for(lambda: self._waiting or self._closed)
            out, self._waiting = self._waiting, []
            return None if not out and self._closed else out


Stream = Callable[[list[list[int]], SamplingParams], Iterator[list[Completion]]]


class LocalConversations:
    """One engine's `generate_stream` taking follow-ups, in this process (the interface
    codefu.orchestrator.episodes.run_episodes_async drives; on Ray: codefu.orchestrator.roles)."""

    def __init__(self, engine: Any, prompts: list[list[int]], sampling: SamplingParams):
        self.engine, self.prompts, self.sampling = engine, prompts, sampling
        self.inbox = FollowUps()
        self.last_batch_at = 0.0  # time.perf_counter() when the last batch came

    def __iter__(self) -> Iterator[list[Completion]]:
        for batch in self.engine.generate_stream(self.prompts, self.sampling, self.inbox):
            self.last_batch_at = time.perf_counter()
            yield batch

    def follow_up(self, index: int, prompt: list[int], after: int) -> None:
        self.inbox.put([FollowUp(index, prompt)])

    def close(self, abort: bool = False) -> None:
        self.inbox.close(abort)

    def interrupt(self) -> None:
        self.inbox.interrupt()


def follow_ups_in_batches(
    stream: Stream, prompts: list[list[int]], sampling: SamplingParams, follow_ups: FollowUps
) -> Iterator[list[Completion]]:
    """For an engine that cannot take prompts mid-batch: `stream` the prompts, then each lot of
    follow-ups that came meanwhile as a batch of its own, until the inbox closes."""
    yield from stream(prompts, sampling)
    lot = 0
    while not follow_ups.aborted and (batch := follow_ups.take(wait=True)) is not None:
        if continued := [f.index for f in batch if f.response is not None]:
            raise ValueError(
                f"follow-ups {continued[:5]} continue interrupted responses: this engine cannot (the native "
                f"engine can)"
            )
        lot += 1  # each lot draws its own samples (the same seed would repeat the first lot's draws)
        seed = None if sampling.seed is None else sampling.seed + 10_007 * lot
        for done in stream([f.prompt for f in batch], replace(sampling, n=1, seed=seed)):
            yield [replace(c, prompt_index=batch[c.prompt_index].index) for c in done]


__all__ = ["FollowUp", "FollowUps", "LocalConversations", "follow_ups_in_batches"]
