"""Sampling ahead of training (loop.mode one_step_off and async): while the trainer updates on step t, a
thread of the driver already samples steps t+1, t+2, ... with the newest weights the rollout workers have,
never more than `max_staleness` policy versions behind the weights that will train on them.

    sampler = OffPolicySampler(SingleTurnSampler(...), bound=1, end=cfg.loop.steps)
    sampled = sampler.sample(step, timer)        # waits only if the step is not sampled yet
    sampler.sync_weights(step + 1, True, timer)  # the trainer's new weights: loaded before the next step
                                                 # is sampled (or, mid_generation, at once); not waited for

Versions: the trainer's policy after t steps is version t, and step t trains on version t; a sample's version
is the one its rollout worker reports it was written with (`Completion.policy_version`: the engine's own
label per token where it keeps one, the native engine's; else the version the worker had loaded when the
generation started), so a worker that served other weights than the driver sent is caught, not trusted.
Step s is sampled only once the workers hold version s - bound or newer: the bound holds where the samples
wait, not only where they are drawn, and each step's samples are checked against it again when taken.

With bound 0 the thread samples step s only once the loop asks for it (after step s-1's weights, its
validation and its checkpoint), with the seeds a sync run uses: the same samples, rewards and weights as
loop.mode sync. A resumed run starts from the
checkpoint's weights (version = its step), so staleness does not carry over an interruption.

The thread generates on the rollout workers and loads weights into them; the loop holds them only for
`latest_weights` (validation: after the step being sampled, with the newest weights) and, `mid_generation`
(loop.mode async), sends them each new policy at once: an engine that can (the native one) goes on with it
from its next step, others load it when their generation ends. Errors on the thread (a dead worker, a
stalled transfer, the judge's) are raised by the next `sample`.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from codefu.errors import CodefuError
from codefu.observability.metrics import StepTimer
from codefu.orchestrator.samplers import OnPolicySampler, Sampled
from codefu.types import Problem

log = logging.getLogger(__name__)

#: `_weights` when the newest policy came by broadcast: the workers keep it until `Roles.load_received`
RECEIVED = "received"


@dataclass
class Ahead:
    """One step's samples, made ahead of its training."""

    sampled: Sampled
    timer: StepTimer  # its sampling phases (generate, judge_tail, ...)
    waited_s: float  # seconds the thread waited for newer weights before sampling it (the bound)
    load_s: float  # seconds the weights took to load before it


class OffPolicySampler:
    """`inner`'s samples, made on a thread ahead of training by at most `bound` policy versions, steps up
    to `end` (the session's last)."""

    def __init__(self, inner: OnPolicySampler, bound: int, end: int, mid_generation: bool = False):
        self.inner = inner
        self.roles = inner.roles
        self.bound = bound  # loop.max_staleness in async; 1 in one_step_off
        self.end = end
        self.mid_generation = mid_generation  # new weights sent at once, loaded mid-generation if they can
        self._changed = threading.Condition()  # guards everything below; notified on every change
        self._ready: dict[int, Ahead] = {}  # sampled steps not yet taken
        self._weights: Any = None  # the newest published weights not yet loaded (None: the workers have them)
        self._received: list[list[Any]] = []  # broadcasts the workers receive and keep, not yet seen done
        self._sent: list[list[Any]] = []  # mid_generation: each policy's loads, sent, not yet seen done
        self._sent_version = 0  # mid_generation: the version of the last policy sent
        self._version = 0  # the trainer's newest version
        self._held = 0  # the version the rollout workers hold (for certain)
        self._next = 0  # the step the thread samples next
        self._asked = 0  # the step `sample` was last asked for
        self._drawn: dict[int, dict[str, Any]] = {}  # the sampling's state before each step's prompts
        self._error: BaseException | None = None
        self._stop = False
        self._workers = threading.Lock()  # the rollout workers: the thread's, or latest_weights'
        self._thread: threading.Thread | None = None

    def sample(self, step: int, timer: StepTimer) -> Sampled:
        if self._thread is None:
            self._start(step)
        with timer.phase("wait_samples"), self._changed:  # the trainer idle for want of samples
            self._asked = step
            self._changed.notify_all()
            while step not in self._ready and self._error is None:
                self._changed.wait()
            if self._error is not None:
                raise self._error
            ahead = self._ready.pop(step)
            self._drawn.pop(step, None)
            waiting = len(self._ready)
        for name, seconds in ahead.timer.seconds.items():
            timer.add(name, seconds)
        check_bound(ahead.sampled, step, self.bound)
        ahead.sampled.metrics |= {
            "async/rollout_wait_s": ahead.waited_s,  # the rollout workers idle, held back by the bound
            "async/weight_load_s": ahead.load_s,
            "async/sampled_ahead": float(waiting),
        }
        return ahead.sampled

    def sync_weights(self, version: int, changed: bool, timer: StepTimer) -> None:
        # resources.weight_transfer broadcast: the workers' side of the collective must wait for it now,
        # whenever they load it (mid_generation: at once; else kept until `_catch_up`)
        broadcast = changed and self.roles.weight_broadcast
        with timer.phase("sync"):
            weights = self.roles.publish_weights() if changed and not broadcast else None
        receives = None
        with self._changed:
            if broadcast:
                receives = self.roles.receive_weights(version, load=self.mid_generation)
            if self.mid_generation:  # loaded at the engines' next step, in the order sent (None: relabel)
                self._sent.append(receives or self.roles.rollout.push_weights(weights, version))
                self._sent_version = version
            elif receives is not None:
                self._received.append(receives)
                self._weights = RECEIVED  # an older one not loaded yet is skipped
            elif weights is not None:
                self._weights = weights  # an older one not loaded yet is skipped
            self._version = version
            self._changed.notify_all()
        if receives is not None:
            with timer.phase("sync"):
                self.roles.broadcast_weights(receives)

    @contextlib.contextmanager
    def latest_weights(self) -> Iterator[None]:
        with self._workers:
            self._catch_up()
            yield

    def state(self) -> dict[str, Any]:
        with self._changed:  # the thread records a step's state here before it draws the step's prompts
            if self._asked + 1 in self._drawn:
                return self._drawn[self._asked + 1]
            return copy.deepcopy(self.inner.state())  # nothing drawn past training yet

    def load_state(self, state: dict[str, Any], problems: list[Problem]) -> None:
        self.inner.load_state(state, problems)

    def close(self) -> None:
        with self._changed:
            self._stop = True
            self._changed.notify_all()
        # not joined: a generation under way ends when the roles' actors are killed (Roles.close)

    def _start(self, step: int) -> None:
        """The thread, from `step` on; the rollout workers hold the trainer's weights of `step` (a new run's
        model, or the checkpoint's after a resume), as the roles say."""
        if self.roles.weights_version != step:
            raise CodefuError(
                f"internal: the rollout workers hold version {self.roles.weights_version}, step {step} "
                f"trains version {step}: the weights were not synced before sampling started"
            )
        self._version = self._held = self._next = self._asked = self._sent_version = step
        if self.mid_generation and not self.roles.rollout.load_in_flight():
            log.info("loop.mode async: this engine cannot take weights mid-generation; they wait for it")
            self.mid_generation = False
        self._thread = threading.Thread(target=self._run, name="codefu-sample-ahead", daemon=True)
        self._thread.start()

    def _may_sample(self) -> bool:
        """Whether step `_next` may be sampled now: within the bound of the trainer's weights, and with
        bound 0 only once the loop asks for it (as a sync loop samples it: after validation)."""
        if self._next - self._version > self.bound:
            return False
        return self.bound > 0 or self._next <= self._asked

    def _run(self) -> None:
        try:
            while True:
                t0 = time.perf_counter()
                with self._changed:
                    while not self._stop and not self._may_sample():
                        self._changed.wait()
                    if self._stop or self._next >= self.end:
                        return  # (the session trains no step `_next`)
                waited = time.perf_counter() - t0
                with self._workers:
                    t1 = time.perf_counter()
                    self._catch_up()
                    loaded = time.perf_counter() - t1
                    step, oldest = self._next, self._held
                    if (carried := self.inner.oldest_carried_version()) is not None:
                        oldest = min(oldest, carried)  # loop.over_provision: tokens of an earlier step
                    with self._changed:
                        self._drawn[step] = copy.deepcopy(self.inner.state())
                    timer = StepTimer()
                    sampled = self.inner.sample(step, timer)
                with self._changed:
                    newest = self._version
                check_served(sampled, step, oldest, newest)
                with self._changed:
                    self._ready[step] = Ahead(sampled, timer, waited, loaded)
                    self._next = step + 1
                    self._changed.notify_all()
        except BaseException as e:  # raised to the loop by its next `sample`
            self._fail(e)

    def _catch_up(self) -> None:
        """With the workers held: they hold the newest policy when it returns. mid_generation, every policy
        sent is seen loaded; else the newest published is loaded, if they do not hold it yet."""
        if self.mid_generation:
            while True:
                with self._changed:
                    sent, self._sent, version = self._sent, [], self._sent_version
                if not sent:
                    return
                for calls in sent:  # call w of each is worker w's
                    self.roles.rollout.wait(calls, "load the weights", self.roles.weight_sync_timeout_s)
                self._held = self.roles.weights_version = version
        with self._changed:
            weights, version = self._weights, self._version
            received, self._received = self._received, []
            self._weights = None
        for calls in received:  # broadcasts sent: the newest of them is kept on the workers
            self.roles.rollout.wait(calls, "receive the weights", self.roles.weight_sync_timeout_s)
        if version != self._held:  # None weights: the workers' are the newest already, relabelled
            if weights is RECEIVED:
                self.roles.load_received(version)
            else:
                self.roles.load_rollout_weights(weights, version)
            self._held = version

    def _fail(self, error: BaseException) -> None:
        with self._changed:
            if self._stop:
                log.debug("after the sampler stopped: %r", error)
            else:
                self._error = error
            self._changed.notify_all()


def check_bound(sampled: Sampled, step: int, bound: int) -> None:
    """Every sample of `sampled` is at most `bound` versions behind step `step`'s weights, or a CodefuError
    (the thread never samples past the bound: this would be a bug, not a slow run)."""
    versions = [c.policy_version for c in sampled.completions]
    if unversioned := sum(v is None for v in versions):
        raise CodefuError(f"internal: step {step} got {unversioned} samples without a policy version")
    worst = min((v for v in versions if v is not None), default=step)
    if step - worst > bound:
        raise CodefuError(
            f"internal: step {step} got samples of version {worst}, {step - worst} versions behind; the "
            f"bound is {bound} (loop.mode one_step_off: 1; async: loop.max_staleness)"
        )


def check_served(sampled: Sampled, step: int, oldest: int, newest: int) -> None:
    """Every token of step `step`'s samples was written with weights the workers were sent while it was
    sampled: from version `oldest` (held when it started) to `newest` (the last published), by the
    workers' own stamps; else a CodefuError (a worker that served other weights than it acknowledged)."""
    served = {
        v for e in sampled.all_episodes for c in e.responses for v in (c.token_versions or [c.policy_version])
    }
    if wrong := sorted((v for v in served if v is None or not oldest <= v <= newest), key=str):
        raise CodefuError(
            f"step {step}: rollout workers wrote samples with weights {wrong} while they held versions "
            f"{oldest} to {newest}: a worker served other weights than it acknowledged"
        )
