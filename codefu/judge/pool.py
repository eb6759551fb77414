"""The judge spread over a Ray cluster: one judge actor per node, each using that node's CPUs.

Actors are thin wrappers around `Judge`. The pool keeps a bounded number of submissions in flight per
actor, gives each submission a global timeout, and resubmits work whose actor died to another actor
(restarting the dead one). Without Ray, `Judge.judge_many` is the local pool with the same interface.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace

import ray
from ray.exceptions import GetTimeoutError, RayError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from codefu.judge.arrivals import Arrivals
from codefu.judge.extract import Program
from codefu.judge.judge import ARRIVAL_POLL_S, Judge, JudgeConfig, SingleRun, judge_identical_once
from codefu.judge.sandbox import Limits
from codefu.node_labels import group_resource
from codefu.types import Problem, Status, Verdict

log = logging.getLogger(__name__)


class JudgeWorker:
    """What runs inside a judge actor: a `Judge` sized to the CPUs the actor holds."""

    def __init__(self, config: JudgeConfig):
        self.judge_ = Judge(config)

    def judge(self, problem: Problem, response: str) -> Verdict:
        return self.judge_.judge(problem, response)

    def run_once(self, program: Program, stdin: str, limits: Limits) -> SingleRun:
        return self.judge_.run_once(program, stdin, limits)

    def node(self) -> str:
        return ray.get_runtime_context().get_node_id()

    def compile_cache_stats(self) -> dict[str, int]:
        return {"hits": self.judge_.compiler.hits, "misses": self.judge_.compiler.misses}


JudgeActor = ray.remote(JudgeWorker)


@dataclass
class PoolConfig:
    cpus_per_node: float | None = None
    """CPUs each node's judge actor reserves and runs sandboxes on (None: all the node's CPUs)."""
    in_flight_per_worker: int = 2
    """Submissions queued per sandbox slot: enough to keep CPUs busy, few enough to spread work."""
    submission_timeout_s: float = 600.0
    """A submission not judged by then is SANDBOX_ERROR (counted as ours, not the model's)."""
    max_attempts: int = 3
    """Tries per submission when actors die under it."""
    worker_start_timeout_s: float = 120.0
    """A replacement actor that has not answered by then is given up (its node is dropped)."""
    instance_group: str | None = None
    """Only nodes of this `codefu launch` instance group judge (they hold the Ray resource
    `codefu-group-<name>`), e.g. a CPU group beside the GPU trainers; None: every node with a CPU."""


@dataclass
class _Slot:
    actor: ray.actor.ActorHandle
    node_id: str
    workers: int
    in_flight: int = 0
    starting: ray.ObjectRef | None = None
    """A replacement actor's first answer, not heard yet: it gets no work until it answers (a node that
    just died still looks alive for seconds, and an actor placed on it never starts)."""
    starting_since: float = 0.0


class RayJudgePool:
    def __init__(
        self,
        judge: JudgeConfig | None = None,
        pool: PoolConfig | None = None,
        on_load: Callable[[int, int], None] | None = None,
    ):
        """on_load(queued, in_flight) hears the backlog as it changes (e.g. the run's Prometheus gauges)."""
        if not ray.is_initialized():
            raise RuntimeError("RayJudgePool needs ray.init() first")
        self.judge_config = judge or JudgeConfig()
        self.config = pool or PoolConfig()
        self.on_load = on_load
        nodes = [n for n in ray.nodes() if n["Alive"] and n["Resources"].get("CPU", 0) >= 1]
        group = self.config.instance_group
        if group is not None:
            nodes = [n for n in nodes if n["Resources"].get(group_resource(group), 0) > 0]
        if not nodes:
            where = f" in instance group {group!r} (Ray resource {group_resource(group)})" if group else ""
            raise RuntimeError(f"no Ray node with a CPU is alive{where}: the judge needs at least one")
        self.slots = [self._start(n["NodeID"], n["Resources"]["CPU"]) for n in nodes]
        ray.get([s.actor.node.remote() for s in self.slots])  # fail here, not mid-run, if actors can't start
        # judge_many may run on several threads at once (self-repair: public checks and hidden-test
        # scoring): the slots' in-flight counts, restarts and the load each call reports are shared
        self._lock = threading.RLock()
        self._queued: dict[int, int] = {}  # each running call's submissions not yet sent
        self._calls = itertools.count()

    def _start(self, node_id: str, node_cpus: float) -> _Slot:
        cpus = min(self.config.cpus_per_node or node_cpus, node_cpus)
        workers = max(1, int(cpus))
        actor = JudgeActor.options(
            num_cpus=cpus,
            max_concurrency=workers * self.config.in_flight_per_worker,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
        ).remote(replace(self.judge_config, workers=workers, judge_identical_once=False))
        return _Slot(actor, node_id, workers)

    @property
    def capacity(self) -> int:
        return sum(s.workers for s in self.slots)

    def judge_many(self, items: Iterable[tuple[Problem, str]]) -> Iterator[tuple[int, Verdict]]:
        """Judge every (problem, response); yields (position, verdict) as each finishes. `items` may arrive
        over time (a generator that waits for each completion to be decoded): each is judged as it comes."""
        if self.judge_config.judge_identical_once:  # here, so that twins on different nodes meet
            return judge_identical_once(items, self._judge_each)
        return self._judge_each(items)

    def _judge_each(self, items: Iterable[tuple[Problem, str]]) -> Iterator[tuple[int, Verdict]]:
        call = next(self._calls)
        try:
            yield from self._judge_arrivals(items, call)
        finally:
            self._report_load(call, None)

    def _report_load(self, call: int, queued: int | None) -> None:
        """One call's queue (None: it ended); `on_load` hears every running call's queue and what is in
        flight on the slots."""
        with self._lock:
            if queued is None:
                self._queued.pop(call, None)
            else:
                self._queued[call] = queued
            total = (sum(self._queued.values()), sum(s.in_flight for s in self.slots))
        if self.on_load is not None:
            self.on_load(*total)

    def _judge_arrivals(
        self, items: Iterable[tuple[Problem, str]], call: int
    ) -> Iterator[tuple[int, Verdict]]:
        problem_refs: dict[int, ray.ObjectRef] = {}
        queue: deque[tuple[int, ray.ObjectRef, str, int]] = deque()
        arrivals = Arrivals(items)  # items may still be arriving (completions being decoded)
        count = 0
        in_flight: dict[ray.ObjectRef, tuple[int, ray.ObjectRef, str, int, _Slot, float]] = {}
        while queue or in_flight or not arrivals.finished:
            for problem, response in arrivals.take():
                if id(problem) not in problem_refs:
                    problem_refs[id(problem)] = ray.put(problem)
                queue.append((count, problem_refs[id(problem)], response, 1))
                count += 1
            self._dispatch(queue, in_flight)
            self._report_load(call, len(queue))
            starting = self._starting()
            if not in_flight and not starting:
                arrivals.wait(1.0)
                continue
            # while more may arrive, wake now and then to send them out
            timeout = 1.0 if arrivals.finished else ARRIVAL_POLL_S
            done, _ = ray.wait(list(in_flight) + starting, num_returns=1, timeout=timeout)
            for ref in done:
                if ref not in in_flight:
                    self._started(ref)
                    continue
                i, pref, response, attempt, slot, _ = in_flight.pop(ref)
                with self._lock:
                    slot.in_flight -= 1
                try:
                    yield i, ray.get(ref)
                except RayError as e:  # the actor, its node or the task died: not the program's doing
                    if attempt >= self.config.max_attempts:
                        yield (
                            i,
                            Verdict(
                                Status.SANDBOX_ERROR, message=f"judge worker failed {attempt} times: {e}"
                            ),
                        )
                        continue
                    log.warning("judge worker on node %s failed (%s); retrying elsewhere", slot.node_id, e)
                    self._restart(slot)
                    queue.appendleft((i, pref, response, attempt + 1))
            self._give_up_slow_starts()
            now = time.monotonic()
            for ref, (i, _, _, _, slot, started) in list(in_flight.items()):
                if now - started > self.config.submission_timeout_s:
                    in_flight.pop(ref)
                    with self._lock:
                        slot.in_flight -= 1
                    ray.cancel(ref, force=False)
                    yield i, Verdict(Status.SANDBOX_ERROR, message="judge timeout for this submission")

    def _dispatch(self, queue, in_flight) -> None:
        with self._lock:
            working = self._working()
            while queue and working:
                slot = min(working, key=lambda s: s.in_flight / s.workers)
                if slot.in_flight >= slot.workers * self.config.in_flight_per_worker:
                    return
                i, pref, response, attempt = queue.popleft()
                ref = slot.actor.judge.remote(pref, response)
                slot.in_flight += 1
                in_flight[ref] = (i, pref, response, attempt, slot, time.monotonic())

    def _restart(self, slot: _Slot) -> None:
        """Replace a dead actor (its node may be gone: then drop the slot if others remain); once, when
        two calls see it fail."""
        with self._lock:
            self._restart_unlocked(slot)

    def _restart_unlocked(self, slot: _Slot) -> None:
        if slot not in self.slots or slot.starting is not None:
            return  # dropped, or already being replaced, by another failure
        try:
            ray.get(slot.actor.node.remote(), timeout=10)
            return  # still alive: the failure was the task's, not the actor's
        except Exception:  # noqa: BLE001 - any failure to answer means the actor is gone
            pass
        alive = {n["NodeID"]: n for n in ray.nodes() if n["Alive"]}
        if slot.node_id in alive:
            fresh = self._start(slot.node_id, alive[slot.node_id]["Resources"].get("CPU", 1))
            slot.actor, slot.workers = fresh.actor, fresh.workers
            slot.starting, slot.starting_since = slot.actor.node.remote(), time.monotonic()
        elif len(self.slots) > 1:
            self.slots.remove(slot)

    def _working(self) -> list[_Slot]:
        """The slots that take work: every one but a replacement actor that has not answered yet."""
        with self._lock:
            return [s for s in self.slots if s.starting is None]

    def _starting(self) -> list[ray.ObjectRef]:
        with self._lock:
            return [s.starting for s in self.slots if s.starting is not None]

    def _started(self, ref: ray.ObjectRef) -> None:
        """A replacement actor answered, or failed to start: it takes work, or its slot goes."""
        with self._lock:
            slot = next((s for s in self.slots if s.starting == ref), None)
            if slot is None:
                return  # another call heard it first
            try:
                ray.get(ref)
            except RayError as e:
                self._drop(slot, f"its replacement actor did not start ({e})")
                return
            slot.starting = None

    def _give_up_slow_starts(self) -> None:
        limit = self.config.worker_start_timeout_s
        now = time.monotonic()
        with self._lock:
            for slot in list(self.slots):
                if slot.starting is not None and now - slot.starting_since > limit:
                    self._drop(slot, f"its replacement actor did not answer in {limit:.0f} s")

    def _drop(self, slot: _Slot, why: str) -> None:
        ray.kill(slot.actor)
        self.slots.remove(slot)
        if not self.slots:
            raise RuntimeError(
                f"the judge has no worker left: the last one, on node {slot.node_id}, is gone: {why}"
            )
        log.warning("judge node %s dropped: %s", slot.node_id, why)

    def run_once(self, program: Program, stdin: str, limits: Limits) -> SingleRun:
        """`Judge.run_once` on the working node with the least in flight (what a program prints: the
        test audit's reference answers); an actor that fails or a run past the submission timeout is an
        error of ours (`SingleRun.error`), not tried again."""
        with self._lock:
            slot = min(self._working(), key=lambda s: s.in_flight / s.workers)
            slot.in_flight += 1
        try:
            ref = slot.actor.run_once.remote(program, stdin, limits)
            return ray.get(ref, timeout=self.config.submission_timeout_s)
        except (RayError, GetTimeoutError) as e:
            return SingleRun(False, error=f"judge worker on node {slot.node_id} failed: {e}"[:1000])
        finally:
            with self._lock:
                slot.in_flight -= 1

    def compile_cache_stats(self) -> dict[str, dict[str, int]]:
        """Each working actor's compile cache hits and misses, by node id."""
        return {s.node_id: ray.get(s.actor.compile_cache_stats.remote()) for s in self._working()}

    def close(self) -> None:
        for s in self.slots:
            ray.kill(s.actor)
        self.slots = []
