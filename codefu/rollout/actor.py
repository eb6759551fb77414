"""A thin Ray actor around a `RolloutEngine`: the engine is built inside the actor's process.

    actor = make_rollout_actor(EngineConfig(model="path/to/model"), num_gpus=1)
    completions = ray.get(actor.generate.remote(prompt_ids, SamplingParams(n=8, seed=step)))
    for ref in actor.generate_stream.remote(prompt_ids, sampling):  # batches as they finish
        batch = ray.get(ref)
    ray.get(actor.load_weights.remote(state_dict, version=1))  # completions say which weights wrote them

`engine` is an `EngineConfig` (a `TransformersEngine` is loaded from it) or a zero-argument callable
returning any `RolloutEngine` (it is pickled to the actor: keep it importable from `codefu`, or a
`functools.partial` over picklable objects).
"""

from __future__ import annotations

import inspect
import os
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import ray
import torch
from torch import Tensor

from codefu.models.weights import SharedWeights
from codefu.rollout.engine import EngineConfig, RolloutEngine
from codefu.rollout.follow_ups import FollowUp, FollowUps, follow_ups_in_batches
from codefu.rollout.hf_engine import TransformersEngine
from codefu.rollout.native import NativeEngine
from codefu.rollout.types import Completion, SamplingParams

EngineSpec = EngineConfig | Callable[[], RolloutEngine]


def build_engine(engine: EngineSpec) -> RolloutEngine:
    """The engine an `EngineConfig` names (`engine.engine`: "transformers" | "native"), or callable()."""
    if not isinstance(engine, EngineConfig):
        return engine()
    if engine.engine == "transformers":
        return TransformersEngine.from_config(engine)
    if engine.engine == "native":
        return NativeEngine.from_config(engine)
    raise ValueError(f"unknown rollout engine {engine.engine!r}: expected 'transformers' or 'native'")


class RolloutWorker:
    """The actor's body; a plain class (testable without Ray)."""

    def __init__(self, engine: EngineSpec) -> None:
        self.engine = build_engine(engine)
        self.version = 0  # the weights' version (load_weights): stamped on every completion it writes
        self._inboxes: dict[str, FollowUps] = {}  # the follow-ups of each stream that takes them
        self._inboxes_lock = threading.Lock()

    def generate(self, prompts: list[list[int]], sampling: SamplingParams) -> list[Completion]:
        return self._stamped(self.engine.generate(prompts, sampling))

    def _stamped(self, completions: list[Completion]) -> list[Completion]:
        """`completions` marked with the version of the weights that wrote them: the engine's own account,
        so a driver can check that no engine served older weights than it was told it holds."""
        for c in completions:
            c.policy_version = self.version
        return completions

    def generate_stream(
        self, prompts: list[list[int]], sampling: SamplingParams, follow_ups: str | None = None
    ) -> Iterator[list[Completion]]:
        """`generate`'s completions in batches as they finish (a Ray streaming generator from the actor).
        With `follow_ups` (a name for this stream), prompts given to `follow_up` under that name while it
        runs are generated too (see codefu.rollout.follow_ups), until `end_follow_ups`."""
        stream = getattr(self.engine, "generate_stream", None) or self._in_one_batch
        if follow_ups is None:
            yield from self._stamped_stream(stream(prompts, sampling))
            return
        inbox = self._inbox(follow_ups)
        try:
            if "follow_ups" in inspect.signature(stream).parameters:
                yield from self._stamped_stream(stream(prompts, sampling, inbox))
            else:  # a stream that cannot take them: each lot that came meanwhile as a stream of its own
                yield from self._stamped_stream(follow_ups_in_batches(stream, prompts, sampling, inbox))
        finally:
            with self._inboxes_lock:
                self._inboxes.pop(follow_ups, None)

    def _stamped_stream(self, batches: Iterable[list[Completion]]) -> Iterator[list[Completion]]:
        for batch in batches:
            yield self._stamped(batch)

    def _in_one_batch(self, prompts: list[list[int]], sampling: SamplingParams) -> Iterator[list[Completion]]:
        """The stream of an engine that has only `generate`: one batch."""
        yield self.engine.generate(prompts, sampling)

    # on a thread of their own (the actor's "follow_ups" concurrency group), so they reach the inbox while
    # generate_stream runs (Ray does not promise their order: the driver ends a stream only after every
    # follow-up it put came back, or when it gives up)
    @ray.method(concurrency_group="follow_ups")
    def follow_up(self, stream: str, follow_ups: list[FollowUp]) -> None:
        """More prompts for the running `generate_stream(..., follow_ups=stream)`."""
        self._inbox(stream).put(follow_ups)

    @ray.method(concurrency_group="follow_ups")
    def end_follow_ups(self, stream: str, abort: bool = False) -> None:
        """No more follow-ups: that stream ends when what it has is done (also when it has not started:
        a driver that gives up early must not leave it waiting); with `abort`, at once."""
        self._inbox(stream).close(abort)

    def _inbox(self, stream: str) -> FollowUps:
        with self._inboxes_lock:  # whichever side comes first makes it
            return self._inboxes.setdefault(stream, FollowUps())

    def load_weights(self, state: dict[str, Tensor] | None, version: int | None = None) -> None:
        """The trainer's weights, `version` from now on (None: the version stays); `state` None: the weights
        held already are `version` too (a step that did not change the policy)."""
        if state is not None:
            self.engine.load_weights(state)
        if version is not None:
            self.version = version

    def load_shared_weights(self, shared: SharedWeights, version: int | None = None) -> None:
        """Weights lent by a trainer rank on the same GPU (CUDA IPC): mapped, copied in place, unmapped."""
        self.engine.load_weights(shared.open())
        if torch.cuda.is_available():
            torch.cuda.synchronize()  # the copies are done before the trainer may free its buffer
        if version is not None:
            self.version = version

    def release_memory(self, weights: bool = False) -> bool:
        """Free what the engine can give back between rollouts (the native engine's KV cache and CUDA
        graphs; with `weights`, its weights too) for a trainer on the same GPU; its next `generate` takes
        the cache again, the weights must be loaded again before it. Other engines: no-op. Returns
        whether the weights were released."""
        release = getattr(self.engine, "release_memory", None)
        if release is None:
            return False
        release(weights=weights)
        return weights

    def stats(self) -> dict[str, float]:
        """The last `generate`'s engine numbers (the native engine's `last_stats`); {} for other engines."""
        return dict(getattr(self.engine, "last_stats", {}))

    def ping(self) -> dict[str, Any]:
        """Alive check: host, pid and the engine's class."""
        return {"host": socket.gethostname(), "pid": os.getpid(), "engine": type(self.engine).__name__}


RolloutActor = ray.remote(concurrency_groups={"follow_ups": 1})(RolloutWorker)


def make_rollout_actor(engine: EngineSpec, num_cpus: float = 1, num_gpus: float = 0, **options: Any) -> Any:
    """Start one rollout actor (extra `options` go to `.options()`, e.g. a placement group strategy)."""
    return RolloutActor.options(num_cpus=num_cpus, num_gpus=num_gpus, **options).remote(engine)
