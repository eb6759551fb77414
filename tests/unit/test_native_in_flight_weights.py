"""Weights updated while the native engine generates (asynchronous RL, PipelineRL style): handed over from
another thread, loaded at a step boundary; the running sequences go on under the new weights, each token
labelled with the version that sampled it (CPU, tiny Llama, fp32)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
import torch

from codefu.models.tiny import tiny_model
from codefu.rollout import EngineConfig, NativeEngine, SamplingParams
from codefu.rollout.follow_ups import FollowUp, FollowUps
from codefu.rollout.types import Completion
from helpers.threads import one_thread  # noqa: F401 (autouse: one intra-op thread)

# two prompts longer than a block (16): their prompt blocks go through the prefix cache; one shorter
PROMPTS = [list(range(10, 30)), list(range(40, 75)), [1, 7, 8, 9]]
STOPS = tuple(range(100, 106))  # ~5% a step under a near-uniform tiny model: sequences end at many steps
# n=3 samples of 3 prompts, 4 at a time: cohorts split, later samples are admitted after the update
SAMPLING = SamplingParams(n=3, temperature=1.0, max_new_tokens=24, seed=3, stop_token_ids=STOPS)
GREEDY = SamplingParams(n=1, temperature=0.0, max_new_tokens=24)
WAIT_S = 10.0  # a generous bound on waits that take milliseconds: a hang fails instead of blocking


@pytest.fixture(scope="module")
def models():
    return tiny_model(seed=0), tiny_model(seed=1)


def make_engine(model, **knobs) -> NativeEngine:
    config = EngineConfig(model="(in memory)", engine="native", kv_cache_tokens=2048, **knobs)
    return NativeEngine.from_hf_model(model, None, config)


def forward_logprobs(model, prompt: list[int], response: list[int]) -> torch.Tensor:
    """The trainer's quantity under `model`: log_softmax(logits) of each response token (temperature 1)."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + response])).logits[0].float()
    scaled = logits[len(prompt) - 1 : len(prompt) + len(response) - 1]
    return torch.log_softmax(scaled, dim=-1).gather(-1, torch.tensor(response)[:, None]).squeeze(1)


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


class Updater(threading.Thread):
    """update_weights_in_flight on a thread of its own; what it raised, if anything."""

    def __init__(self, engine: NativeEngine, state, version: int) -> None:
        super().__init__(daemon=True)
        self.engine, self.state, self.version = engine, state, version
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.engine.update_weights_in_flight(self.state, self.version)
        except BaseException as error:
            self.error = error

    def finish(self) -> None:
        self.join(WAIT_S)
        assert not self.is_alive(), "update_weights_in_flight did not return"


def versions_of(c: Completion) -> list[int]:
    assert c.token_versions is not None and len(c.token_versions) == len(c.token_ids)
    return c.token_versions


def test_weights_handed_over_mid_stream_load_at_a_step_boundary(models):
    """The stream yields its first batch; another thread hands over new weights (version 1), which wait
    for the stream's next step; then every completion is a run of 0s and a run of 1s: the finished ones
    all 0, some both, later admissions all 1. Tokens of version 0 have the old model's log-probs, tokens
    sampled from the new weights do not (those of a sequence begun after the update are exactly the new
    model's); then the prefix cache serves no K/V of the old weights to the next call."""
    old, new = models
    engine = make_engine(old, max_num_seqs=4)
    stream = engine.generate_stream(PROMPTS, SAMPLING)
    before = next(stream)  # the stream is paused at a step boundary
    updater = Updater(engine, new.state_dict(), 1)
    updater.start()
    wait_until(lambda: engine.weights_pending)
    assert updater.is_alive() and engine.version == 0  # it waits for the stream's next step
    after = [c for batch in stream for c in batch]
    updater.finish()
    assert updater.error is None and engine.version == 1
    assert len(before) + len(after) == len(PROMPTS) * SAMPLING.n

    assert before and all(set(versions_of(c)) == {0} for c in before)
    crossed = [c for c in after if 0 in versions_of(c) and 1 in versions_of(c)]
    begun_after = [c for c in after if set(versions_of(c)) == {1}]
    assert crossed and begun_after
    for c in before + after:
        versions = versions_of(c)
        assert versions == sorted(versions) and set(versions) <= {0, 1}  # 0s, then 1s
        old_lp = forward_logprobs(old, c.prompt_ids, c.token_ids)
        k = versions.count(0)
        torch.testing.assert_close(torch.tensor(c.logprobs[:k]), old_lp[:k], atol=1e-4, rtol=0)
    # tokens sampled by the new weights (attending to the old weights' K/V) are not the old model's
    gaps = []
    for c in crossed:
        old_lp = forward_logprobs(old, c.prompt_ids, c.token_ids).tolist()
        gaps += [abs(a - b) for a, b, v in zip(c.logprobs, old_lp, versions_of(c), strict=True) if v == 1]
    assert max(gaps) > 1e-3
    for c in begun_after:  # prefilled by the new weights, from no cached K/V of the old ones
        expected = forward_logprobs(new, c.prompt_ids, c.token_ids)
        torch.testing.assert_close(torch.tensor(c.logprobs), expected, atol=1e-4, rtol=0)

    # the blocks of sequences that crossed the update did not go back to the prefix cache
    again = engine.generate(PROMPTS, GREEDY)
    fresh = make_engine(new).generate(PROMPTS, GREEDY)
    assert [c.token_ids for c in again] == [c.token_ids for c in fresh]
    for a, f in zip(again, fresh, strict=True):
        torch.testing.assert_close(torch.tensor(a.logprobs), torch.tensor(f.logprobs), atol=1e-5, rtol=0)
        assert a.token_versions == [1] * len(a.token_ids)


def test_loads_at_once_without_a_running_step_and_from_the_streams_own_thread(models):
    """No generation running: the update loads at once. From the thread that consumes the stream (paused
    at a yield: a step boundary), too, instead of waiting for itself. A version alone (state None) only
    relabels: the tokens after it carry it, and the weights stay the old model's."""
    old, new = models
    engine = make_engine(old)
    engine.update_weights_in_flight(new.state_dict(), 1)
    assert engine.version == 1
    out = engine.generate(PROMPTS, GREEDY)
    assert [c.token_ids for c in out] == [c.token_ids for c in make_engine(new).generate(PROMPTS, GREEDY)]

    engine = make_engine(old)
    stream = engine.generate_stream(PROMPTS, SAMPLING)
    first = next(stream)
    engine.update_weights_in_flight(None, 7)  # returns: no deadlock
    rest = [c for batch in stream for c in batch]
    assert all(set(versions_of(c)) == {0} for c in first)
    assert any(set(versions_of(c)) == {0, 7} for c in rest)
    for c in first + rest:
        assert versions_of(c) == sorted(versions_of(c))
        expected = forward_logprobs(old, c.prompt_ids, c.token_ids)  # the same weights throughout
        torch.testing.assert_close(torch.tensor(c.logprobs), expected, atol=1e-4, rtol=0)


def test_a_stream_idle_for_follow_ups_takes_weights_at_once(models):
    """A stream waiting for follow-ups runs nothing: an update loads at once (it does not wait for the
    next follow-up), and a follow-up put after it is written by the new weights."""
    old, new = models
    engine = make_engine(old)
    inbox = FollowUps()
    got: list[Completion] = []

    def consume() -> None:
        for batch in engine.generate_stream(PROMPTS, GREEDY, inbox):
            got.extend(batch)

    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    wait_until(lambda: len(got) == len(PROMPTS))  # all done: the stream waits for follow-ups
    updater = Updater(engine, new.state_dict(), 1)
    updater.start()
    updater.finish()  # returned with the inbox still open
    assert updater.error is None and engine.version == 1 and consumer.is_alive()
    inbox.put([FollowUp(9, PROMPTS[1])])
    inbox.close()
    consumer.join(WAIT_S)
    assert not consumer.is_alive()
    follow_up = got[-1]
    assert follow_up.prompt_index == 9 and set(versions_of(follow_up)) == {1}
    expected = forward_logprobs(new, follow_up.prompt_ids, follow_up.token_ids)
    torch.testing.assert_close(torch.tensor(follow_up.logprobs), expected, atol=1e-4, rtol=0)


def test_a_bad_update_raises_in_its_caller_and_the_stream_goes_on(models):
    old, _ = models
    engine = make_engine(old)
    stream = engine.generate_stream(PROMPTS, SAMPLING)
    first = next(stream)
    updater = Updater(engine, {"model.bogus": torch.zeros(1)}, 1)
    updater.start()
    wait_until(lambda: engine.weights_pending)
    rest = [c for batch in stream for c in batch]
    updater.finish()
    assert isinstance(updater.error, KeyError) and "model.bogus" in str(updater.error)
    assert engine.version == 0 and len(first) + len(rest) == len(PROMPTS) * SAMPLING.n
    assert all(set(versions_of(c)) == {0} for c in first + rest)
