"""A thin Ray actor around a `RolloutEngine`: the engine is built inside the actor's process.

    actor = make_rollout_actor(EngineConfig(model="path/to/model"), num_gpus=1)
    completions = ray.get(actor.generate.remote(prompt_ids, SamplingParams(n=8, seed=step)))
    for ref in actor.generate_stream.remote(prompt_ids, sampling):  # batches as they finish
        batch = ray.get(ref)
    ray.get(actor.load_weights.remote(state_dict, version=1))  # completions say which weights wrote them
    ray.get(actor.load_weights_in_flight.remote(state_dict, 2))  # while a generate_stream runs (see there)

`engine` is an `EngineConfig` (a `TransformersEngine` is loaded from it) or a zero-argument callable
returning any `RolloutEngine` (it is pickled to the actor: keep it importable from `codefu`, or a
`functools.partial` over picklable objects).
"""

from __future__ import annotations

import inspect
import logging
import os
import socket
import sys
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any

import ray
import torch
from torch import Tensor

from codefu.models.lora import AdapterWeights
from codefu.models.weight_broadcast import GroupAddress, WeightBroadcast
from codefu.models.weights import SharedWeights
from codefu.rollout.choice import choose_engine
from codefu.rollout.engine import EngineConfig, RolloutEngine
from codefu.rollout.follow_ups import FollowUp, FollowUps, follow_ups_in_batches
from codefu.rollout.hf_engine import TransformersEngine
from codefu.rollout.native import NativeEngine
from codefu.rollout.settings import ENGINES
from codefu.rollout.types import Completion, SamplingParams
from codefu.rollout.vllm_engine import VllmEngine, vllm_importable

EngineSpec = EngineConfig | Callable[[], RolloutEngine]
log = logging.getLogger(__name__)


def build_engine(engine: EngineSpec) -> RolloutEngine:
    """The engine an `EngineConfig` names (`engine.engine`: "transformers" | "native"), or callable()."""
    if not isinstance(engine, EngineConfig):
        return engine()
    if engine.engine == "auto":
        chosen, why = choose_engine(engine, engine.model, engine.gguf_file)
        if chosen == "vllm" and not vllm_importable():  # an environment of its own: not this process
            chosen, why = "transformers", f"{why}, but not in this Python ({sys.executable})"
        log.info("rollout engine: %s (%s)", chosen, why)
        engine = replace(engine, engine=chosen)
    if engine.engine == "transformers":
        return TransformersEngine.from_config(engine)
    if engine.engine == "native":
        return NativeEngine.from_config(engine)
    if engine.engine == "vllm":
        return VllmEngine.from_config(engine)
    raise ValueError(f"unknown rollout engine {engine.engine!r}: expected one of {', '.join(ENGINES)}")


class RolloutWorker:
    """The actor's body; a plain class (testable without Ray)."""

    def __init__(self, engine: EngineSpec) -> None:
        self.engine = build_engine(engine)
        self.version = 0  # the weights' version (load_weights): stamped on every completion it writes
        self._inboxes: dict[str, FollowUps] = {}  # the follow-ups of each stream that takes them
        self._inboxes_lock = threading.Lock()
        # held while the engine generates: weights for an engine that cannot take them mid-generation
        # (load_weights_in_flight) wait for it
        self._engine_busy = threading.Lock()
        self._weight_group: WeightBroadcast | None = None  # resources.weight_transfer broadcast: its member
        self._received: tuple[Any, int | None] | None = None  # weights received, kept for load_received
        self._received_lock = threading.Lock()  # `_received`: set on the weights thread, taken on another

    def generate(self, prompts: list[list[int]], sampling: SamplingParams) -> list[Completion]:
        with self._engine_busy:
            started = self.version
            return self._stamped(self.engine.generate(prompts, sampling), started)

    def _stamped(self, completions: list[Completion], started: int) -> list[Completion]:
        """`completions` marked with the version of the weights that wrote them: the engine's own account,
        so a driver can check that no engine served older weights than it was told it holds. Their
        oldest token's (min of the engine's token_versions) when the engine tells each token's; else the
        version held when the generation `started` (weights that came later did not write them)."""
        for c in completions:
            c.policy_version = min(c.token_versions) if c.token_versions else started
        return completions

    def generate_stream(
        self, prompts: list[list[int]], sampling: SamplingParams, follow_ups: str | None = None
    ) -> Iterator[list[Completion]]:
        """`generate`'s completions in batches as they finish (a Ray streaming generator from the actor).
        With `follow_ups` (a name for this stream), prompts given to `follow_up` under that name while it
        runs are generated too (see codefu.rollout.follow_ups), until `end_follow_ups`."""
        stream = getattr(self.engine, "generate_stream", None) or self._in_one_batch
        with self._engine_busy:  # released when the stream ends, fails or is closed
            started = self.version
            if follow_ups is None:
                yield from self._stamped_stream(stream(prompts, sampling), started)
                return
            inbox = self._inbox(follow_ups)
            try:
                if "follow_ups" in inspect.signature(stream).parameters:
                    yield from self._stamped_stream(stream(prompts, sampling, inbox), started)
                else:  # a stream that cannot take them: each lot that came meanwhile as a stream of its own
                    batches = follow_ups_in_batches(stream, prompts, sampling, inbox)
                    yield from self._stamped_stream(batches, started)
            finally:
                with self._inboxes_lock:
                    self._inboxes.pop(follow_ups, None)

    def _stamped_stream(
        self, batches: Iterable[list[Completion]], started: int
    ) -> Iterator[list[Completion]]:
        for batch in batches:
            yield self._stamped(batch, started)

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

    @ray.method(concurrency_group="follow_ups")
    def interrupt(self, stream: str) -> None:
        """That stream stops now: what it has not finished comes back interrupted (FollowUps.interrupt).
        A stream that has ended already (its inbox gone: `end_follow_ups` made it first) has nothing to
        stop."""
        with self._inboxes_lock:
            inbox = self._inboxes.get(stream)
        if inbox is not None:
            inbox.interrupt()

    def _inbox(self, stream: str) -> FollowUps:
        with self._inboxes_lock:  # whichever side comes first makes it
            return self._inboxes.setdefault(stream, FollowUps())

    def load_weights(self, state: dict[str, Tensor] | None, version: int | None = None) -> None:
        """The trainer's weights, `version` from now on (None: the version stays); `state` None: the weights
        held already are `version` too (a step that did not change the policy). Between generations (the
        actor's default group runs one method at a time); during one: `load_weights_in_flight`."""
        self._load(state, version)

    def _load(self, state: dict[str, Tensor] | None, version: int | None) -> None:
        if self.accepts_weights_in_flight():  # it labels each token itself: it learns the version too
            self.engine.load_weights(state, version)
        elif state is not None:
            self.engine.load_weights(state)
        if version is not None:
            self.version = version

    # on a thread of their own (the actor's "weights" concurrency group), so they run while generate_stream
    # runs on the default group
    @ray.method(concurrency_group="weights")
    def load_weights_in_flight(
        self, state: dict[str, Tensor] | list[Any] | None, version: int | None = None
    ) -> None:
        """`load_weights` while a generation may be running (asynchronous RL). An engine that accepts
        weights in flight (the native one) loads them at its next step boundary and goes on with them:
        this returns once they are loaded, and the tokens sampled after carry `version`
        (Completion.token_versions). Any other engine (transformers: its `generate` cannot be
        interrupted) loads them only after the running generation (the whole stream) has ended: this
        returns then, and that generation's completions are all of the version it started with.
        `state` may be `[ObjectRef]`: fetched here, on this method's thread, so that no call to the
        actor's other methods waits behind the transfer of a large state dict."""
        if isinstance(state, list):
            state = ray.get(state[0])
        if self.accepts_weights_in_flight():
            self.engine.update_weights_in_flight(state, version)
            if version is not None:
                self.version = version
            return
        with self._engine_busy:
            self._load(state, version)

    @ray.method(concurrency_group="weights")
    def accepts_weights_in_flight(self) -> bool:
        """Whether the engine takes weights mid-generation (`load_weights_in_flight` then returns before
        a running generation ends); a thread of its own, so it answers while one runs."""
        return hasattr(self.engine, "update_weights_in_flight")

    @ray.method(concurrency_group="weights")
    def join_weight_group(self, address: GroupAddress, rank: int, layout: Any, timeout_s: float) -> None:
        """Join trainer rank 0's weight-broadcast group (resources.weight_transfer: broadcast) as member
        `rank`; `layout`: what it sends (the trainer's `weight_layout`: FlatLayout, dtype, LoRA scaling or
        None). Returns once every member has joined."""
        device = getattr(self.engine, "device", None)
        if device is None:  # an engine that does not say (vLLM's): its process's GPU, if it has one
            device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        device = torch.device(device)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
        own_host = ray.util.get_node_ip_address()  # where the sender reaches this node
        self._weight_group = WeightBroadcast.join(address, rank, device, timeout_s, own_host=own_host)
        self._weight_layout, self._weight_device = layout, device

    @ray.method(concurrency_group="weights")
    def receive_weights(self, version: int | None = None, load: bool = True) -> None:
        """The trainer's weights through the weight group, as `version`; `load`: loaded as
        `load_weights_in_flight` does (mid-generation where the engine can, else once its generation has
        ended), else kept for `load_received` (only the newest: an older one not loaded yet is dropped)."""
        if self._weight_group is None:
            raise RuntimeError("receive_weights() before join_weight_group(): this worker is in no group")
        layout, dtype, adapter_scaling = self._weight_layout
        flat = torch.empty(layout.numel, dtype=dtype, device=self._weight_device)
        self._weight_group.receive(flat)
        views = layout.views(flat)
        state = views if adapter_scaling is None else AdapterWeights(views, adapter_scaling)
        if not load:
            with self._received_lock:
                self._received = (state, version)
            return
        self.load_weights_in_flight(state, version)
        del state, views, flat
        if self._weight_device.type == "cuda":
            torch.cuda.empty_cache()  # the buffer's memory back, not held in this process's cache

    def load_received(self, version: int | None = None) -> None:
        """Between generations: load the newest weights `receive_weights` kept, as `version` or as their
        own if newer (they may have come after the caller looked); none kept: the weights held are
        `version` too."""
        with self._received_lock:
            received, self._received = self._received, None
        state, own = received or (None, None)
        versions = [v for v in (own, version) if v is not None]
        self._load(state, max(versions) if versions else None)

    def load_shared_weights(self, shared: SharedWeights, version: int | None = None) -> None:
        """Weights lent by a trainer rank on the same GPU (CUDA IPC): mapped, copied in place, unmapped."""
        self._load(shared.open(), version)
        if torch.cuda.is_available():
            torch.cuda.synchronize()  # the copies are done before the trainer may free its buffer

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


RolloutActor = ray.remote(concurrency_groups={"follow_ups": 1, "weights": 1})(RolloutWorker)


def make_rollout_actor(engine: EngineSpec, num_cpus: float = 1, num_gpus: float = 0, **options: Any) -> Any:
    """Start one rollout actor (extra `options` go to `.options()`, e.g. a placement group strategy). A
    vLLM engine with a Python of its own (`vllm_python`) runs in that interpreter."""
    if isinstance(engine, EngineConfig) and engine.engine == "vllm" and engine.vllm_python:
        runtime_env = dict(options.pop("runtime_env", None) or {})
        options["runtime_env"] = runtime_env | {"py_executable": engine.vllm_python}
    return RolloutActor.options(num_cpus=num_cpus, num_gpus=num_gpus, **options).remote(engine)
