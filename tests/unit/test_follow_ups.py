"""Prompts that arrive while an engine generates (self-repair turns put in as their checks come back):
the inbox, the batch-at-a-time fallback of engines that cannot admit them mid-batch, the rollout
worker's named inboxes."""

from __future__ import annotations

import threading
import time

import pytest

from codefu.models.tiny import tiny_model, tiny_tokenizer
from codefu.rollout import SamplingParams, TransformersEngine
from codefu.rollout.actor import RolloutWorker
from codefu.rollout.follow_ups import FollowUp, FollowUps

PROMPTS = [[1, 40, 41, 42], [1, 50, 51]]
SAMPLING = SamplingParams(n=2, temperature=0.9, max_new_tokens=5, seed=3)


def test_the_inbox_gives_what_was_put_once_and_none_when_closed_and_empty():
    inbox = FollowUps()
    assert inbox.take(wait=False) == []
    inbox.put([FollowUp(5, [1, 2])])
    inbox.put([FollowUp(6, [3])])
    assert inbox.take(wait=False) == [FollowUp(5, [1, 2]), FollowUp(6, [3])]
    threading.Timer(0.05, inbox.put, args=([FollowUp(7, [4])],)).start()
    assert inbox.take(wait=True) == [FollowUp(7, [4])]  # waited for it
    inbox.put([FollowUp(8, [5])])
    inbox.close()
    assert inbox.take(wait=True) == [FollowUp(8, [5])]  # closing keeps what is waiting
    assert inbox.take(wait=True) is None and inbox.take(wait=False) is None
    with pytest.raises(RuntimeError, match="after close"):
        inbox.put([FollowUp(9, [6])])
    aborted = FollowUps()
    aborted.put([FollowUp(1, [1])])
    aborted.close(abort=True)  # the caller failed: what waits is dropped
    assert aborted.aborted and aborted.take(wait=True) is None


def engine() -> TransformersEngine:
    return TransformersEngine(tiny_model(seed=0), tiny_tokenizer(), batch_size=4)


def test_an_engine_without_mid_batch_admission_takes_follow_ups_batch_by_batch():
    """The transformers engine: its prompts first, then each lot of follow-ups that came meanwhile, one
    sample each, numbered as put; each lot draws anew (the same seed would repeat the first lot)."""
    eng, inbox = engine(), FollowUps()
    got = []
    for batch in eng.generate_stream(PROMPTS, SAMPLING, inbox):
        got += batch
        if len(got) == len(PROMPTS) * SAMPLING.n:  # the prompts are done: two lots of the same prompt
            inbox.put([FollowUp(10, PROMPTS[0]), FollowUp(11, PROMPTS[1])])
        elif len(got) == len(PROMPTS) * SAMPLING.n + 2:
            inbox.put([FollowUp(12, PROMPTS[0]), FollowUp(13, PROMPTS[1])])
            inbox.close()
    first = sorted((c.prompt_index, c.sample_index) for c in got[:4])
    assert first == [(0, 0), (0, 1), (1, 0), (1, 1)]
    later = sorted(got[4:], key=lambda c: c.prompt_index)
    assert [(c.prompt_index, c.sample_index, c.prompt_ids) for c in later] == [
        (10, 0, PROMPTS[0]),
        (11, 0, PROMPTS[1]),
        (12, 0, PROMPTS[0]),
        (13, 0, PROMPTS[1]),
    ]
    # the same prompts in the same order: another lot, other draws
    assert [c.token_ids for c in later[:2]] != [c.token_ids for c in later[2:]]


def test_the_worker_routes_follow_ups_by_stream_name_and_an_early_end_does_not_leave_it_waiting():
    worker = RolloutWorker(engine)
    out = []

    def put_later():
        time.sleep(0.05)
        worker.follow_up("s1", [FollowUp(4, PROMPTS[1])])
        worker.end_follow_ups("s1")

    threading.Thread(target=put_later).start()
    for batch in worker.generate_stream(PROMPTS[:1], SAMPLING, "s1"):
        out += batch
    assert [c.prompt_index for c in out] == [0, 0, 4]
    assert worker._inboxes == {}  # the stream's inbox is gone with it

    worker.end_follow_ups("s2")  # a driver that gave up before the stream began
    assert [c.prompt_index for b in worker.generate_stream(PROMPTS[:1], SAMPLING, "s2") for c in b] == [0, 0]

    class GenerateOnly:  # an engine with `generate` alone
        def __init__(self):
            self.inner = engine()

        def generate(self, prompts, sampling):
            return self.inner.generate(prompts, sampling)

        def load_weights(self, state):
            pass

    class TwoArgumentStream(GenerateOnly):  # an engine whose stream takes no follow-ups
        def generate_stream(self, prompts, sampling):
            yield self.generate(prompts, sampling)

    streaming = RolloutWorker(TwoArgumentStream)
    streaming.follow_up("s4", [FollowUp(7, PROMPTS[0])])
    streaming.end_follow_ups("s4")
    streamed = [c for b in streaming.generate_stream(PROMPTS[1:], SAMPLING, "s4") for c in b]
    assert [(c.prompt_index, c.sample_index) for c in streamed] == [(0, 0), (0, 1), (7, 0)]

    plain = RolloutWorker(GenerateOnly)
    plain.follow_up("s3", [FollowUp(9, PROMPTS[0])])
    plain.end_follow_ups("s3")
    streamed = [c for b in plain.generate_stream(PROMPTS[1:], SAMPLING, "s3") for c in b]
    assert [(c.prompt_index, c.sample_index) for c in streamed] == [(0, 0), (0, 1), (9, 0)]
