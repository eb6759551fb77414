"""The Ray actors of a run, placed by the layout, behind a handful of verbs the loop calls.

Every call goes to all ranks of a group (FSDP collectives need every rank) and reads rank 0's answer. The
actors start in the bundles of one placement group (layout.py: which role goes in which bundle;
placement.py: the Ray side). Several rollout workers share each `generate` call: whole GRPO groups (all n
samples of a prompt) per worker.
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import ray

from codefu.errors import CodefuError
from codefu.orchestrator.config import RunConfig
from codefu.orchestrator.layout import Layout, check_layout, make_layout
from codefu.orchestrator.placement import in_bundle, release, reserve
from codefu.rollout.actor import make_rollout_actor
from codefu.rollout.engine import EngineConfig
from codefu.rollout.follow_ups import FollowUp
from codefu.rollout.types import Completion, SamplingParams
from codefu.trainer.actor import make_trainer_ranks
from codefu.trainer.batch import Batch
from codefu.trainer.checkpoint import CheckpointRefused, DamagedCheckpoint


def split_prompts(n_prompts: int, n_workers: int) -> list[range]:
    """Contiguous runs of prompts per worker, sizes differing by at most one (the first workers take the
    extra); workers beyond the prompts get empty runs. Pure: the same on every call."""
    base, extra = divmod(n_prompts, n_workers)
    out, start = [], 0
    for w in range(n_workers):
        size = base + (1 if w < extra else 0)
        out.append(range(start, start + size))
        start += size
    return out


def worker_seed(seed: int | None, worker: int) -> int | None:
    """Worker w samples with seed + w * 1_000_003: worker 0 draws what a single worker would."""
    return None if seed is None else seed + worker * 1_000_003


class RolloutWorkers:
    """Rollout actors behind one `generate`: prompts are cut into contiguous runs, one per worker (all n
    samples of a prompt on one worker, so a GRPO group never straddles two), and the completions come back
    in the order one worker returns them, prompt_index counting over all prompts."""

    def __init__(self, actors: Sequence[Any]):
        if not actors:
            raise ValueError("RolloutWorkers needs at least one actor")
        self.actors = list(actors)

    def generate(self, prompts: list[list[int]], sampling: SamplingParams) -> list[Completion]:
        work = [(w, run) for w, run in enumerate(split_prompts(len(prompts), len(self.actors))) if run]
        futures = [
            self.actors[w].generate.remote(
                prompts[run.start : run.stop], replace(sampling, seed=worker_seed(sampling.seed, w))
            )
            for w, run in work
        ]
        out: list[Completion] = []
        for (_, run), completions in zip(work, ray.get(futures), strict=True):
            out += [replace(c, prompt_index=c.prompt_index + run.start) for c in completions]
        return out

    def generate_stream(
        self, prompts: list[list[int]], sampling: SamplingParams
    ) -> Iterator[list[Completion]]:
        """`generate`'s completions in batches as each worker finishes them (in no fixed order), from the
        workers' streaming generators."""
        yield from merged(launch_streams(self.actors, prompts, sampling))

    def conversations(
        self, prompts: list[list[int]], sampling: SamplingParams, every_worker: bool = False
    ) -> WorkerConversations:
        """`generate_stream` that also takes follow-ups (self-repair turns) while it runs; `every_worker`:
        a stream on each worker, also one without prompts (WorkerConversations.go_on)."""
        return WorkerConversations(self.actors, prompts, sampling, every_worker)

    def load_weights(self, state: Any, version: int | None = None, timeout_s: float | None = None) -> None:
        """Every worker loads `state`: one object in Ray's store (an ObjectRef, or a dict put here once), as
        weights `version`; `state` None: the weights they hold are `version` too. A worker that has not
        loaded them after `timeout_s` seconds (None: no limit) is a CodefuError naming it and its node, as
        is a worker that died."""
        ref = state if state is None or isinstance(state, ray.ObjectRef) else ray.put(state)
        self.wait([a.load_weights.remote(ref, version) for a in self.actors], "load the weights", timeout_s)

    def load_in_flight(self) -> bool:
        """Whether every worker's engine takes weights while it generates (the native engine)."""
        calls = [a.accepts_weights_in_flight.remote() for a in self.actors]
        return all(self.answers(calls, "say whether it takes weights mid-generation"))

    def push_weights(self, state: Any, version: int) -> list[Any]:
        """`load_weights` without waiting, also while the workers generate: each loads `state` (an
        ObjectRef; None: relabel) at its engine's next step, and tokens after it carry `version`. Returns
        the calls, for `wait`."""
        # wrapped: the worker fetches it on its weights thread, its other calls never wait for the transfer
        wrapped = None if state is None else [state]
        return [a.load_weights_in_flight.remote(wrapped, version) for a in self.actors]

    def load_shared_weights(self, shared: Sequence[Any], version: int | None = None) -> None:
        """Worker w loads what the trainer rank on its GPU shared (`shared[w]`)."""
        calls = [a.load_shared_weights.remote(shared[w], version) for w, a in enumerate(self.actors)]
        self.wait(calls, "load the shared weights", None)

    def wait(self, calls: list[Any], what: str, timeout_s: float | None) -> list[Any]:
        """The answers of `calls` (call w on worker w); a CodefuError naming the workers (and their nodes)
        that died or had not answered within `timeout_s` seconds: a stalled transfer must not hang the run."""
        ready, pending = ray.wait(calls, num_returns=len(calls), timeout=timeout_s)
        if pending:
            stalled = [w for w, c in enumerate(calls) if c in pending]
            raise CodefuError(
                f"rollout workers {self.named(stalled)} did not {what} within {timeout_s:g} s "
                f"(loop.weight_sync_timeout_s): a stalled transfer or a hung engine"
            )
        return self.answers(calls, what)

    def answers(self, calls: list[Any], what: str) -> list[Any]:
        """ray.get(calls), a worker's death as a CodefuError naming it and its node."""
        with self.deaths_named(what):
            return ray.get(calls)

    @contextlib.contextmanager
    def deaths_named(self, what: str) -> Iterator[None]:
        """A block in which a worker's death (RayActorError) becomes a CodefuError naming the worker, its
        node and `what` it was asked to do; another actor's death is raised as it is."""
        try:
            yield
        except ray.exceptions.RayActorError as e:
            named = self.died(e, what)
            if named is None:
                raise
            raise named from e

    def died(self, error: ray.exceptions.RayActorError, what: str) -> CodefuError | None:
        """A worker's death (`error`) as a CodefuError naming the worker, its node, and what it was doing;
        None if the dead actor is none of these workers."""
        dead_id = error.actor_id.hex() if isinstance(error.actor_id, bytes) else str(error.actor_id or "")
        dead = [w for w, a in enumerate(self.actors) if a._actor_id.hex() == dead_id]
        if not dead:
            return None
        return CodefuError(f"rollout worker {self.named(dead)} died while asked to {what}: {error}")

    def named(self, workers: list[int]) -> str:
        """'0 (node 10.0.0.2), 3 (node ...)': worker indices with the address of the node each runs on."""
        return ", ".join(f"{w} (node {actor_node(self.actors[w])})" for w in workers)

    def release_memory(self, weights: bool = False) -> bool:
        """Each worker's KV cache (and, with `weights`, its weights) freed; whether any weights were."""
        return any(ray.get([a.release_memory.remote(weights) for a in self.actors]))

    def stats(self) -> list[dict[str, float]]:
        """Each worker's engine numbers of its last call (the native engine's `last_stats`; {} for others)."""
        return ray.get([a.stats.remote() for a in self.actors])


def actor_node(actor: Any) -> str:
    """The address of the node `actor` runs (or ran) on, from Ray's actor table (kept after its death);
    "unknown" if it cannot tell. (Read through ray._private: the public state API needs the dashboard.)"""
    try:
        import ray._private.state

        address = ray._private.state.actors(actor._actor_id.hex())["Address"]
        return f"{address['IPAddress']}, node id {address['NodeID'][:8]}"
    except Exception:  # a report of a failure must not fail itself
        return "unknown"


def engine_metrics(calls: list[list[dict[str, float]]]) -> dict[str, float]:
    """The engine numbers of a generation phase from each call's per-worker `last_stats` (native engine;
    {} for others): the smallest KV cache, decode steps (the most of any worker: the phase's length in
    steps), the mean decode batch over them, preemptions and prefix-cached tokens in all, and the
    seconds the slowest worker spent taking its memory back (KV cache, CUDA graphs), prefilling and
    decoding."""
    per_worker: dict[int, list[dict[str, float]]] = {}
    for call in calls:
        for w, stats in enumerate(call):
            if stats:
                per_worker.setdefault(w, []).append(stats)
    if not per_worker:
        return {}

    def total(key: str, w: int) -> float:
        return sum(s.get(key, 0.0) for s in per_worker[w])

    steps = sum(total("decode_steps", w) for w in per_worker)
    return {
        "rollout/kv_cache_tokens": min(s["kv_cache_tokens"] for w in per_worker for s in per_worker[w]),
        "rollout/decode_steps": max(total("decode_steps", w) for w in per_worker),
        "rollout/decode_batch_mean": sum(total("decode_batch_sum", w) for w in per_worker) / max(steps, 1.0),
        # of the context tokens' K/V reads one per sequence would make, those shared-prefix groups avoided
        "rollout/decode_shared_frac": sum(total("decode_shared_tokens", w) for w in per_worker)
        / max(sum(total("decode_context_sum", w) for w in per_worker), 1.0),
        "rollout/preemptions": sum(total("preemptions", w) for w in per_worker),
        # prompt tokens whose K/V the prefix cache gave back (a self-repair turn's conversation so far)
        "rollout/prefix_cached_tokens": sum(total("cached_tokens", w) for w in per_worker),
        # where the generate phase's time went (compare decode_s with bench/rollout.py's alone)
        "rollout/resume_s": max(total("resume_s", w) for w in per_worker),
        "rollout/prefill_s": max(total("prefill_s", w) for w in per_worker),
        "rollout/decode_s": max(total("decode_s", w) for w in per_worker),
        "rollout/graph_capture_s": max(total("graph_capture_s", w) for w in per_worker),  # within decode_s
    }


def launch_streams(
    actors: Sequence[Any],
    prompts: list[list[int]],
    sampling: SamplingParams,
    follow_ups: str | None = None,
    every_worker: bool = False,
) -> dict[Any, tuple[int, range]]:
    """Each worker's `generate_stream` on its run of the prompts (split_prompts), with its seed
    (worker_seed): {stream: (worker, run)}. Workers beyond the prompts get none, unless `every_worker`
    (streams taking `follow_ups` that may be given work of their own: WorkerConversations.go_on)."""
    runs = split_prompts(len(prompts), len(actors))
    work = [(w, run) for w, run in enumerate(runs) if run or every_worker]
    return {
        actors[w].generate_stream.remote(
            prompts[run.start : run.stop], replace(sampling, seed=worker_seed(sampling.seed, w)), follow_ups
        ): (w, run)
        for w, run in work
    }


def merged(launched: dict[Any, tuple[int, range]]) -> Iterator[list[Completion]]:
    """The batches of `launch_streams`' streams as they come, prompt indices counted over all prompts."""
    streams = dict(launched)
    while streams:
        ready, _ = ray.wait(list(streams), num_returns=1)
        for stream in ready:
            try:
                completions = ray.get(next(stream))
            except StopIteration:
                del streams[stream]
                continue
            offset = streams[stream][1].start
            yield [replace(c, prompt_index=c.prompt_index + offset) for c in completions]


class WorkerConversations:
    """The workers' streams of `generate_stream` taking follow-ups (codefu.orchestrator.episodes'
    `Conversations`): iterate for the completions (of the prompts, then of the follow-ups) in batches as
    they finish; `follow_up` puts a next turn on the worker that wrote the turn before it (its K/V are in
    that engine's prefix cache); `close` when no more will come. Prompt indices count over all prompts;
    the caller numbers follow-ups after them."""

    def __init__(
        self, actors: Sequence[Any], prompts: list[list[int]], sampling: SamplingParams, every_worker: bool
    ):
        self.actors = actors
        self.name = uuid.uuid4().hex  # the workers' inboxes of this stream
        self.streams = launch_streams(actors, prompts, sampling, self.name, every_worker)
        self.offset = {w: run.start for w, run in self.streams.values()}
        self.worker_of = {i: w for w, run in self.streams.values() for i in run}
        self.calls: list[Any] = []  # follow-up calls not known to have succeeded yet
        self.continued = [0] * len(actors)  # continuations given to each worker (`go_on`)
        self.closed = False
        self.last_batch_at = 0.0  # time.perf_counter() when the last batch came

    def __iter__(self) -> Iterator[list[Completion]]:
        for batch in merged(self.streams):
            self.last_batch_at = time.perf_counter()
            yield batch

    def follow_up(self, index: int, prompt: list[int], after: int) -> None:
        """Prompt `index` (its completion's prompt_index) after the turn of prompt `after`, on its worker.
        Raises the error of an earlier follow-up call (its turn would never come)."""
        if self.calls:
            done, self.calls = ray.wait(self.calls, num_returns=len(self.calls), timeout=0)
            ray.get(done)
        w = self.worker_of[index] = self.worker_of[after]
        local = FollowUp(index - self.offset[w], prompt)
        self.calls.append(self.actors[w].follow_up.remote(self.name, [local]))

    def go_on(self, index: int, prompt: list[int], response: Completion | None) -> None:
        """A sample of `prompt` as prompt `index`, on the worker given the fewest so far, ahead of the
        prompts waiting there: `response` (an interrupted completion of it) continued, or None: a new one.
        Its completion comes back with that prompt_index and, continued, every token, old and new. (Made
        with `every_worker`, so that every worker has a stream to take it.)"""
        w = min(self.offset, key=lambda w: self.continued[w])
        self.continued[w] += 1
        self.worker_of[index] = w
        local = FollowUp(index - self.offset[w], prompt, response, first=True)
        self.calls.append(self.actors[w].follow_up.remote(self.name, [local]))

    def interrupt(self) -> None:
        """Every worker stops now; the completions it had not finished come in its last batch, marked
        interrupted. After `close` (a stream that has ended has nothing to stop)."""
        assert self.closed, "interrupt() called before close(): a follow-up could still be on its way"
        ray.get([self.actors[w].interrupt.remote(self.name) for w in self.offset])

    def close(self, abort: bool = False) -> None:
        """No more follow-ups; raises the first error of a follow-up call. `abort`: the workers drop what
        they are generating (the caller failed)."""
        if self.closed:
            return
        self.closed = True
        ends = [self.actors[w].end_follow_ups.remote(self.name, abort) for w in self.offset]
        ray.get(ends if abort else self.calls + ends)


def needs_reference(cfg: RunConfig) -> bool:
    """A KL term (in the loss or in the reward) is on: the batch needs the reference policy's log-probs."""
    return cfg.trainer.kl_coef > 0 or cfg.algo.kl_reward_coef > 0


def needs_reference_ranks(cfg: RunConfig) -> bool:
    """A frozen copy of the policy runs as the reference: with a KL term, unless LoRA trains (then the
    reference is the policy's own base weights, its adapters switched off: no second copy)."""
    return needs_reference(cfg) and not cfg.trainer.lora.enabled


def run_layout(cfg: RunConfig) -> Layout:
    """The layout of the run's roles: the reference only with a KL term, the critic only with PPO."""
    return make_layout(
        cfg.resources,
        kl_enabled=needs_reference_ranks(cfg),
        sp_degree=cfg.trainer.sp_degree,
        critic=cfg.algo.estimator == "ppo",
    )


#: the trainer kind (codefu.trainer.actor.KINDS) of each layout role
_KIND_OF_ROLE = {"trainer": "policy", "reference": "reference", "critic": "critic"}


def _trainer_ranks(
    tcfg: Any, layout: Layout, pg: Any, role: str, options: dict[str, Any], value_clip: float | None = None
) -> list[Any]:
    """The ranks of `role` ("trainer", "reference" or "critic"), rank r in its bundle."""
    slots = layout.slots_of(role)
    return make_trainer_ranks(
        tcfg,
        len(slots),
        kind=_KIND_OF_ROLE[role],
        value_clip=value_clip,
        num_gpus=slots[0].gpus,
        num_cpus=slots[0].cpus,
        per_rank=[in_bundle(pg, s.bundle) for s in slots],
        **options,
    )


def role_process_options(
    gpus: int, cuda_allocator: str | None = None, concurrent: bool = False
) -> dict[str, Any]:
    """Ray options of a role's processes: on CPU every core for each (the phases take turns), half of them
    when sampling and training run at once (`concurrent`: loop.mode one_step_off or async; each would
    otherwise fight the other for every core), or as many threads as the driver's OMP_NUM_THREADS says
    (several runs sharing one machine); on GPU the CUDA allocator's settings (`trainer.cuda_allocator`,
    for the trainer's processes), read by torch at its first allocation, so they go in before the process
    starts."""
    if gpus == 0:
        cores = max(1, (os.cpu_count() or 1) // (2 if concurrent else 1))
        env = {"OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS") or str(cores)}
    else:
        env = {"PYTORCH_CUDA_ALLOC_CONF": cuda_allocator} if cuda_allocator else {}
    return {"runtime_env": {"env_vars": env}} if env else {}


class Roles:
    """Trainer ranks, the reference policy (only with a KL term, as many ranks), PPO's critic (only with
    `algo.estimator: ppo`, as many ranks), the rollout workers."""

    def __init__(self, cfg: RunConfig):
        layout = run_layout(cfg)
        check_layout(layout, ray.cluster_resources(), [n["Resources"] for n in ray.nodes() if n["Alive"]])
        self.pg = reserve(layout)
        try:
            self._start(cfg, layout)
        except BaseException:
            release(self.pg)  # and every actor started in it: a failed start holds nothing
            raise

    def _start(self, cfg: RunConfig, layout: Layout) -> None:
        """The roles' actors in the reserved group, and the state the loop keeps about them."""
        concurrent = cfg.loop.mode != "sync"  # sampling while training
        options = role_process_options(layout.gpus, concurrent=concurrent)
        trainer_options = role_process_options(layout.gpus, cfg.trainer.cuda_allocator, concurrent)
        # rollout worker w and trainer rank w on one GPU: memory taken in turns, weights synced in place
        self.colocated = cfg.resources.colocate and layout.gpus > 0
        self.offload_optimizer = self.colocated and cfg.trainer.offload_optimizer
        # colocated engines hold no weights in the trainer's turn: the sync after the update brings them
        self._engine_weights_released = False
        self.critic_colocated = cfg.resources.critic_colocate
        self.memory_metrics: dict[str, float] = {}
        self.weight_sync_timeout_s = cfg.loop.weight_sync_timeout_s
        self.weights_version = 0  # of the rollout workers' weights: 0 is the model they started with
        self._generating = False
        self._engine_stats: list[list[dict[str, float]]] = []  # the open generation phase's calls
        self._reloads: list[Any] = []  # the learners' optimizer state on its way back to the GPUs
        self.trainer = _trainer_ranks(cfg.trainer, layout, self.pg, "trainer", trainer_options)
        self.lora = cfg.trainer.lora.enabled  # syncs send only the adapters; the engines keep the rest
        self.kl = needs_reference(cfg)
        kl = needs_reference_ranks(cfg)
        self.reference = (
            _trainer_ranks(cfg.trainer, layout, self.pg, "reference", trainer_options) if kl else None
        )
        self.offload_reference = self.colocated and kl and cfg.trainer.offload_reference
        self._reference_moves: list[Any] = []  # the reference's weights on their way back to the GPUs
        self._move_metrics: dict[str, float] = {}  # the reference's moves, reported with the update
        self.critic = None
        if layout.need("critic"):
            critic_cfg, clip = cfg.critic.trainer_config(cfg.trainer), cfg.critic.value_clip
            self.critic = _trainer_ranks(critic_cfg, layout, self.pg, "critic", trainer_options, clip)
        if layout.gpus > 0:
            # an engine sizes its KV cache from the GPU memory free when it starts: the policy, reference
            # and critic must hold theirs by then, or the cache takes what they are still loading (seen at
            # 7B: the engine's first forward out of memory beside a half-loaded reference); split on one
            # GPU (a share each, for loop.mode one_step_off / async) the same holds
            learners = [*self.trainer, *(self.reference or []), *(self.critic or [])]
            ray.get([a.ready.remote() for a in learners])
        engine = EngineConfig.of(cfg.rollout, cfg.trainer.model, cfg.trainer.gguf_file)
        self.rollout = RolloutWorkers(
            [
                make_rollout_actor(
                    engine, num_cpus=s.cpus, num_gpus=s.gpus, **in_bundle(self.pg, s.bundle), **options
                )
                for s in layout.slots_of("rollout")
            ]
        )
        # resources.weight_transfer broadcast: trainer rank 0 and the workers form a group of their own
        self.weight_broadcast = not self.colocated and cfg.resources.weight_transfer == "broadcast"
        if self.weight_broadcast:
            self._join_weight_group()

    def _join_weight_group(self) -> None:
        """Trainer rank 0 (member 0, the sender) and every rollout worker (members 1..N) join one group;
        returns once all have, or raises naming the workers that did not within loop.weight_sync_timeout_s."""
        rank0, workers = self.trainer[0], self.rollout.actors
        address = ray.get(rank0.host_weight_group.remote(1 + len(workers), self.weight_sync_timeout_s))
        layout = ray.get(rank0.weight_layout.remote())
        sender = rank0.join_weight_group.remote(address)
        joins = [
            a.join_weight_group.remote(address, w + 1, layout, self.weight_sync_timeout_s)
            for w, a in enumerate(workers)
        ]
        self.rollout.wait(joins, "join the weight-broadcast group", self.weight_sync_timeout_s)
        ray.get(sender)

    @contextlib.contextmanager
    def generating(self) -> Iterator[None]:
        """One generation phase, which may hold several `generate` calls (the turns of self-repair
        episodes): colocated, the trainers' optimizer state leaves the GPUs for the whole phase
        (trainer.offload_optimizer) and the engines' KV caches are freed at its end, so the memory moves
        once, not once per call; their numbers are in `memory_metrics` until the next phase."""
        if self._generating:
            yield
            return
        self._generating = True
        self.memory_metrics = self._reloaded()  # a reload no update collected (a step without one)
        if self._engine_weights_released:
            # a step without an update (and so without its sync): the same weights
            self.sync_weights(self.weights_version)
        learners = [*self.trainer, *(self.critic if self.critic and self.critic_colocated else [])]
        if self.offload_optimizer:
            self.memory_metrics |= _summed(ray.get([a.offload_optimizer.remote() for a in learners]))
        if self.offload_reference and self.reference is not None and not self._reference_moves:
            # back while the engines decode: their KV caches were sized with the reference in place
            self._reference_moves = [a.reload_weights.remote() for a in self.reference]
        self._engine_stats = []  # each call's, per worker
        try:
            yield
        finally:
            self._generating = False
            self.memory_metrics |= engine_metrics(self._engine_stats)
            if self.colocated:
                # the trainer's turn on the shared GPUs: generate takes the cache back, the sync the weights
                # (with LoRA the engines keep theirs: an adapter sync needs them)
                self._engine_weights_released = self.rollout.release_memory(weights=not self.lora)
            if self.offload_optimizer:
                # back while the reference pass runs on its own actors; whatever the learners do next
                # queues behind it on theirs, and the update reports its numbers (`_reloaded`)
                self._reloads = [a.reload_optimizer.remote() for a in learners]

    def generate(self, prompts: list[list[int]], sampling: SamplingParams) -> list[Completion]:
        """The rollout workers' completions, in a generation phase of their own unless one is open."""
        with self.generating():
            completions = self.rollout.generate(prompts, sampling)
            self._engine_stats.append(self.rollout.stats())
        return completions

    def generate_stream(
        self, prompts: list[list[int]], sampling: SamplingParams
    ) -> Iterator[list[Completion]]:
        """`generate`'s completions in batches as they finish, in a generation phase of their own unless one
        is open."""
        with self.generating():
            yield from self.rollout.generate_stream(prompts, sampling)
            self._engine_stats.append(self.rollout.stats())

    @contextlib.contextmanager
    def conversations(
        self, prompts: list[list[int]], sampling: SamplingParams, every_worker: bool = False
    ) -> Iterator[WorkerConversations]:
        """The rollout workers' `WorkerConversations` (self-repair turns as they come), in a generation
        phase of their own unless one is open; closed at the end."""
        with self.generating():
            conversations = self.rollout.conversations(prompts, sampling, every_worker)
            try:
                yield conversations
            finally:
                conversations.close()
            self._engine_stats.append(self.rollout.stats())

    def logprobs(self, batch_ref: Any, reference: bool = False) -> Any:
        """The policy's log-probs of the batch's tokens, or with `reference` the reference policy's: the
        reference ranks', or with LoRA the policy's own with its adapters switched off."""
        if reference and self.reference is None:
            assert self.lora, "no reference policy in this run (no KL term)"
            return ray.get([a.compute_logprobs.remote(batch_ref, False) for a in self.trainer])[0]
        group = self.reference if reference else self.trainer
        assert group is not None
        logprobs = ray.get([a.compute_logprobs.remote(batch_ref) for a in group])[0]
        if reference and self.offload_reference:
            # the reload (queued before the pass on the same actors) is done; the update gets the memory
            moves, self._reference_moves = self._reference_moves, []
            self._move_metrics |= _summed(ray.get(moves)) if moves else {}
            self._move_metrics |= _summed(ray.get([a.offload_weights.remote() for a in group]))
        return logprobs

    def values(self, batch_ref: Any) -> Any:
        assert self.critic is not None
        return ray.get([a.compute_values.remote(batch_ref) for a in self.critic])[0]

    def update(self, batch: Batch | Any) -> dict[str, float]:
        """One policy update on `batch` (a Batch, or an ObjectRef of one to share it with the critic), with
        the numbers of the optimizer state's move back to the GPUs if it is still to be collected."""
        ref = batch if isinstance(batch, ray.ObjectRef) else ray.put(batch)
        updates = [a.update.remote(ref) for a in self.trainer]
        moved, self._move_metrics = self._move_metrics, {}
        return self._reloaded() | moved | ray.get(updates)[0]

    def update_critic(self, batch_ref: Any) -> dict[str, float]:
        assert self.critic is not None
        updates = [a.update.remote(batch_ref) for a in self.critic]
        return self._reloaded() | ray.get(updates)[0]

    def _reloaded(self) -> dict[str, float]:
        """Wait for the optimizer state's move back (started as generation ended); its numbers, once."""
        reloads, self._reloads = self._reloads, []
        return _summed(ray.get(reloads)) if reloads else {}

    def sync_weights(self, version: int | None = None) -> None:
        """The rollout workers take the policy's weights, as `version` (None: their version stays)."""
        if self.colocated:
            # rollout worker w shares trainer rank w's GPU (its bundle): in place, through CUDA IPC
            shared = ray.get([a.share_weights.remote() for a in self.trainer])
            self.rollout.load_shared_weights(shared, version)
            ray.get([a.drop_shared_weights.remote() for a in self.trainer])
            self._engine_weights_released = False
            if version is not None:
                self.weights_version = version
            return
        if self.weight_broadcast:
            receives = self.receive_weights(version)
            self.broadcast_weights(receives)
            self.rollout.wait(receives, "load the weights", self.weight_sync_timeout_s)
            if version is not None:
                self.weights_version = version
            return
        self.load_rollout_weights(self.publish_weights(), version)

    def receive_weights(self, version: int | None, load: bool = True) -> list[Any]:
        """The rollout workers wait for the next weight broadcast (not waited for: `broadcast_weights`
        sends it), to load it as `version` at once (`load`: as `push_weights` loads them) or to keep it for
        `load_received`. Their calls, for `RolloutWorkers.wait`."""
        return [a.receive_weights.remote(version, load) for a in self.rollout.actors]

    def load_received(self, version: int | None) -> None:
        """Every rollout worker loads the newest weights it received and kept (`receive_weights` without
        `load`), as `version` or newer, within loop.weight_sync_timeout_s."""
        calls = [a.load_received.remote(version) for a in self.rollout.actors]
        self.rollout.wait(calls, "load the weights", self.weight_sync_timeout_s)
        if version is not None:
            self.weights_version = version

    def broadcast_weights(self, receives: list[Any]) -> None:
        """Trainer rank 0 sends the policy's weights to the workers waiting in `receives`
        (`receive_weights`, call w worker w's); returns once sent. A worker that dies meanwhile is named
        with its node as soon as its call fails; a transfer not done within loop.weight_sync_timeout_s
        fails naming the workers that had not received it."""
        sends = [a.broadcast_weights.remote() for a in self.trainer]
        waiting, deadline = [*sends, *receives], time.monotonic() + self.weight_sync_timeout_s
        while any(s in waiting for s in sends):
            ready, waiting = ray.wait(waiting, num_returns=1, timeout=max(0.0, deadline - time.monotonic()))
            if not ready:
                stalled = [w for w, c in enumerate(receives) if c in waiting]
                raise CodefuError(
                    f"the weight broadcast did not finish within {self.weight_sync_timeout_s:g} s "
                    f"(loop.weight_sync_timeout_s, resources.weight_transfer broadcast); rollout workers "
                    f"{self.rollout.named(stalled) or 'none'} had not received it: a stalled transfer"
                )
            for call in ready:
                try:
                    self.rollout.answers([call], "receive the weights")
                except ray.exceptions.RayTaskError as e:
                    if call in sends:  # the peer that broke it, when a worker died: named by its own call
                        done, _ = ray.wait(receives, num_returns=len(receives), timeout=5.0)
                        for receive in done:
                            with contextlib.suppress(ray.exceptions.RayTaskError):
                                self.rollout.answers([receive], "receive the weights")
                    where = "trainer rank 0" if call in sends else "a rollout worker"
                    raise CodefuError(f"the weight broadcast failed on {where}: {e}") from e

    def publish_weights(self) -> Any:
        """The policy's full state dict in Ray's store (an ObjectRef; never copied to the driver): a
        collective on every rank, rank 0's object kept; with LoRA, only the adapters (every placement).
        Split placement only for full weights (colocated engines take them in place: `sync_weights`)."""
        verb = "adapters_for_sync" if self.lora else "state_dict_for_sync"  # LoRA: only the adapters travel
        refs = [getattr(a, verb).remote() for a in self.trainer]
        ray.get(refs[1:])
        return refs[0]

    def load_rollout_weights(self, weights: Any, version: int | None = None) -> None:
        """Every rollout worker loads `weights` (`publish_weights`' object; None: the weights they hold are
        `version` too), within loop.weight_sync_timeout_s."""
        self.rollout.load_weights(weights, version, self.weight_sync_timeout_s)
        if version is not None:
            self.weights_version = version

    def save(self, root: str, step: int, extra_state: dict[str, Any]) -> str:
        """Checkpoint `root/step_N` (the policy) and `root/critic/step_N`. The critic's is written first:
        the policy's checkpoint is what a resume looks for, so when it exists the critic's does too."""
        self._reloaded()  # a failed move back is raised here, not lost
        if self.critic is not None:
            ray.get([a.save.remote(critic_root(root), None, step) for a in self.critic])
        return ray.get([a.save.remote(root, extra_state, step) for a in self.trainer])[0]

    def load(self, path: str) -> dict[str, Any]:
        """Resume from the policy's checkpoint `path` (root/step_N) and, with a critic, root/critic/step_N."""
        critic_path = None
        if self.critic is not None:
            critic_path = Path(critic_root(str(Path(path).parent))) / Path(path).name
            if not critic_path.is_dir():
                raise CodefuError(
                    f"{path} has no critic checkpoint ({critic_path} is missing): it was written by a run "
                    f"without a critic; resume it with its own algo.estimator, or start a new run"
                )
        try:
            if critic_path is not None:
                ray.get([a.load.remote(str(critic_path)) for a in self.critic])
            return ray.get([a.load.remote(path) for a in self.trainer])[0]
        except ray.exceptions.RayTaskError as e:
            if not isinstance(e.cause, CheckpointRefused):  # not the checkpoint's: a bug, with its traceback
                raise
            raise CodefuError(resume_refused(e.cause, path, critic_path)) from e

    def export_hf(self, path: str) -> str:
        return ray.get([a.export_hf.remote(path) for a in self.trainer])[0]

    def drop_checkpoints(self, root: str) -> None:
        if self.critic is not None:
            ray.get([a.drop_checkpoints.remote(critic_root(root)) for a in self.critic])
            with contextlib.suppress(OSError):  # the critic's folder, once empty (root is shared storage)
                Path(critic_root(root)).rmdir()
        ray.get([a.drop_checkpoints.remote(root) for a in self.trainer])

    def close(self) -> None:
        try:
            for a in [*self.trainer, *(self.reference or []), *(self.critic or []), *self.rollout.actors]:
                ray.kill(a)
        finally:
            release(self.pg)  # ends any actor left in it too


def resume_refused(refused: CheckpointRefused, path: str, critic_path: Path | None) -> str:
    """The command line's one line for a checkpoint the trainer refused, with the way out of a damaged one:
    the step's folders (the policy's and, with a critic, the critic's) moved aside, the one before is the
    latest."""
    line = f"cannot resume from {path}: {refused}"
    if isinstance(refused, DamagedCheckpoint):
        folders = " and ".join(str(p) for p in (path, critic_path) if p is not None)
        line += f"; move {folders} aside to resume from the checkpoint before it, or start a new run"
    return line


def critic_root(root: str) -> str:
    """Where the critic's checkpoints go beside the policy's under `root`."""
    return str(Path(root) / "critic")


def _summed(per_rank: list[dict[str, float]]) -> dict[str, float]:
    """Bytes add up over ranks; seconds are the slowest rank's (they move at once)."""
    out: dict[str, float] = {}
    for metrics in per_rank:
        for k, v in metrics.items():
            out[k] = max(out.get(k, 0.0), v) if k.startswith("timing/") else out.get(k, 0.0) + v
    return out
