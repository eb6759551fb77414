"""The rollout worker's version stamps and its weight loads while a generation runs (RolloutWorker without
Ray, on fake engines): an engine that labels each token gives policy_version = its oldest; one that does
not, the version held when the generation started; weights in flight go to an engine that takes them, and
wait for the generation otherwise."""

from __future__ import annotations

import threading
from collections.abc import Iterator

from codefu.rollout.actor import RolloutWorker
from codefu.rollout.types import Completion, SamplingParams

SAMPLING = SamplingParams(max_new_tokens=3)
WAIT_S = 10.0


def completion(index: int, versions: list[int] | None = None) -> Completion:
    return Completion(index, 0, [1], [5, 6, 7], "", [-1.0] * 3, token_versions=versions)


class Uninterruptible:
    """An engine like the transformers one: two batches, no token labels, loads only between generations."""

    def __init__(self) -> None:
        self.loads: list[dict] = []
        self.generating = False

    def generate(self, prompts: list[list[int]], sampling: SamplingParams) -> list[Completion]:
        return [c for batch in self.generate_stream(prompts, sampling) for c in batch]

    def generate_stream(
        self, prompts: list[list[int]], sampling: SamplingParams
    ) -> Iterator[list[Completion]]:
        self.generating = True
        try:
            yield [completion(0)]
            yield [completion(1)]
        finally:
            self.generating = False

    def load_weights(self, state: dict) -> None:
        assert not self.generating, "weights loaded into a running generation"
        self.loads.append(state)


class InFlight:
    """An engine like the native one: labels each token, takes weights in flight."""

    def __init__(self) -> None:
        self.version = 0
        self.handed: list[tuple[dict | None, int | None]] = []

    def generate(self, prompts: list[list[int]], sampling: SamplingParams) -> list[Completion]:
        return [completion(0, [3, 3, 4]), completion(1, [4, 4, 4])]

    def load_weights(self, state: dict | None, version: int | None = None) -> None:
        self.version = version if version is not None else self.version

    def update_weights_in_flight(self, state: dict | None, version: int | None = None) -> None:
        self.handed.append((state, version))


def test_a_completion_carries_the_version_its_generation_started_with():
    worker = RolloutWorker(Uninterruptible)
    assert not worker.accepts_weights_in_flight()
    stream = worker.generate_stream([[1]], SAMPLING)
    first = next(stream)
    worker.version = 5  # as a load from another thread would (the actor's default group never does)
    rest = [c for batch in stream for c in batch]
    assert [c.policy_version for c in first + rest] == [0, 0]
    assert [c.policy_version for c in worker.generate([[1]], SAMPLING)] == [5, 5]


def test_an_engine_that_labels_tokens_gives_the_oldest_and_takes_weights_in_flight():
    worker = RolloutWorker(InFlight)
    assert worker.accepts_weights_in_flight()
    assert [c.policy_version for c in worker.generate([[1]], SAMPLING)] == [3, 4]
    worker.load_weights_in_flight({"w": 1}, 2)
    assert worker.engine.handed == [({"w": 1}, 2)] and worker.version == 2
    worker.load_weights(None, 3)  # a relabel reaches the engine too: its tokens carry it
    assert worker.engine.version == 3 and worker.version == 3


def test_weights_for_an_uninterruptible_engine_wait_for_the_running_generation():
    worker = RolloutWorker(Uninterruptible)
    stream = worker.generate_stream([[1]], SAMPLING)
    first = next(stream)  # running: the worker holds it
    loader = threading.Thread(target=worker.load_weights_in_flight, args=({"w": 1}, 1), daemon=True)
    loader.start()
    loader.join(0.2)
    assert loader.is_alive() and worker.engine.loads == [] and worker.version == 0
    rest = [c for batch in stream for c in batch]
    loader.join(WAIT_S)
    assert not loader.is_alive() and worker.engine.loads == [{"w": 1}] and worker.version == 1
    assert [c.policy_version for c in first + rest] == [0, 0]

    dropped = worker.generate_stream([[1]], SAMPLING)  # a consumer that gives up frees it too
    next(dropped)
    dropped.close()
    worker.load_weights_in_flight({"w": 2}, 2)  # would wait forever if the stream still held the worker
    assert worker.engine.loads[-1] == {"w": 2} and worker.version == 2
