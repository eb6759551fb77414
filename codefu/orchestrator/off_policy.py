"""Sampling ahead of training (loop.mode one_step_off and async): while the trainer updates on step t, a
thread of the driver already samples steps t+1, t+2, ... with the newest weights the rollout workers have,
never more than `max_staleness` policy versions behind the weights that will train on them.

    sampler = OffPolicySampler(SingleTurnSampler(...), max_staleness=1)
    sampled = sampler.sample(step, timer)               # waits only if the step is not sampled yet
    sampler.sync_weights(step + 1, changed=True, timer)  # the trainer's new weights, loaded before the
                                                         # next step is sampled, not waited for here

Versions: the trainer's policy after t steps is version t, and step t trains on version t; a sample's version
is the one its rollout worker reports it was written with (`Completion.policy_version`, stamped by the
worker itself, so an engine that kept older weights than it was sent is caught, not trusted). Step s is
sampled only once the workers hold version s - max_staleness or newer: the bound holds where the samples
wait, not only where they are drawn, and each step's samples are checked against it again when taken.

With max_staleness 0 the thread samples step s only after step s-1's weights are in, with the seeds a sync
run uses: the same samples, rewards and weights as loop.mode sync. A resumed run starts from the
checkpoint's weights (version = its step), so staleness does not carry over an interruption.

The rollout workers are the thread's alone but for `latest_weights` (validation): it waits for the step
being sampled, loads the newest weights if they are not in yet, and holds the workers meanwhile. Errors on
the thread (a dead worker, a stalled transfer, the judge's) are raised by the next `sample`.
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

log = logging.getLogger(__name__)


@dataclass
class Ahead:
    """One step's samples, made ahead of its training."""

    sampled: Sampled
    version: int  # the weights' version the rollout workers held while sampling it
    timer: StepTimer  # its sampling phases (generate, judge_tail, ...)
    waited_s: float  # seconds the thread waited for newer weights before sampling it (the bound)
    load_s: float  # seconds the weights took to load before it


class OffPolicySampler:
    """`inner`'s samples, made on a thread ahead of training by at most `max_staleness` versions."""

    def __init__(self, inner: OnPolicySampler, max_staleness: int, in_flight: bool = False):
        self.inner = inner
        self.roles = inner.roles
        self.max_staleness = max_staleness
        self.in_flight = in_flight  # new weights go to the workers at once, also mid-generation (if they can)
        self._pushes: list[Any] = []  # in flight: weight loads sent and not yet seen done
        self._pushed = 0  # in flight: the version of the last weights sent
        self._changed = threading.Condition()  # guards everything below; notified on every change
        self._ready: dict[int, Ahead] = {}  # sampled steps not yet taken
        self._weights: Any = None  # the newest published weights not yet loaded (None: the workers have them)
        self._version = 0  # the trainer's newest version
        self._held = 0  # the version the rollout workers hold
        self._next = 0  # the step the thread samples next
        self._to_train = 0  # the step `sample` gives next
        self._drawn: dict[int, dict[str, Any]] = {}  # the loader's state before each step's prompts
        self._error: BaseException | None = None
        self._stop = False
        self._workers = threading.Lock()  # the rollout workers: the thread's, or latest_weights'
        self._thread: threading.Thread | None = None

    def sample(self, step: int, timer: StepTimer) -> Sampled:
        if self._thread is None:
            self._start(step)
        with timer.phase("wait_samples"), self._changed:  # the trainer idle for want of samples
            while step not in self._ready and self._error is None:
                self._changed.wait()
            if self._error is not None:
                raise self._error
            ahead = self._ready.pop(step)
            self._drawn.pop(step, None)
            self._to_train = step + 1
        for name, seconds in ahead.timer.seconds.items():
            timer.add(name, seconds)
        check_bound(ahead, step, self.max_staleness)
        ahead.sampled.metrics |= {
            "async/rollout_wait_s": ahead.waited_s,  # the rollout workers idle, held back by the bound
            "async/weight_load_s": ahead.load_s,
            "async/sampled_ahead": float(len(self._ready)),
        }
        return ahead.sampled

    def sync_weights(self, version: int, changed: bool, timer: StepTimer) -> None:
        with timer.phase("sync"):
            weights = self.roles.publish_weights() if changed else None
        with self._changed:
            if self.in_flight:  # loaded at the engines' next step, in the order sent (None: relabelled)
                self._pushes += self.roles.rollout.push_weights(weights, version)
                self._pushed = version
            elif weights is not None:
                self._weights = weights  # an older one not loaded yet is skipped
            self._version = version
            self._changed.notify_all()

    @contextlib.contextmanager
    def latest_weights(self) -> Iterator[None]:
        with self._workers:
            self._catch_up()
            yield

    def loader_state(self) -> dict[str, Any]:
        with self._changed:  # the thread records a step's state here before it draws the step's prompts
            if self._to_train in self._drawn:
                return self._drawn[self._to_train]
            return copy.deepcopy(self.inner.loader.state_dict())  # nothing drawn past training yet

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
        self._version = self._held = self._next = self._to_train = self._pushed = step
        if self.in_flight and not self.roles.rollout.accept_weights_in_flight():
            log.info("loop.mode async: this engine cannot take weights mid-generation; they wait for it")
            self.in_flight = False
        self._thread = threading.Thread(target=self._run, name="codefu-sample-ahead", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while True:
                t0 = time.perf_counter()
                with self._changed:  # the bound: wait for weights no more than max_staleness behind
                    while not self._stop and self._next - self._version > self.max_staleness:
                        self._changed.wait()
                    if self._stop or self._next >= self.inner.cfg.loop.steps:
                        return  # (the run has no step `_next` to train)
                waited = time.perf_counter() - t0
                with self._workers:
                    t1 = time.perf_counter()
                    self._catch_up()
                    loaded = time.perf_counter() - t1
                    step, oldest = self._next, self._held
                    with self._changed:
                        self._drawn[step] = copy.deepcopy(self.inner.loader.state_dict())
                    timer = StepTimer()
                    sampled = self.inner.sample(step, timer)
                with self._changed:
                    newest = self._version
                check_served(sampled, oldest, newest)
                with self._changed:
                    self._ready[step] = Ahead(sampled, oldest, timer, waited, loaded)
                    self._next = step + 1
                    self._changed.notify_all()
        except BaseException as e:  # raised to the loop by its next `sample`
            self._fail(e)

    def _catch_up(self) -> None:
        """The rollout workers take the newest weights, if they do not hold them yet (with the workers
        held); in flight, the weights sent are seen loaded."""
        while True:
            with self._changed:
                pushes, self._pushes, pushed = self._pushes, [], self._pushed
            if not pushes:
                break
            self.roles.rollout.wait(pushes, "load the weights", self.roles.weight_sync_timeout_s)
            self._held = self.roles.weights_version = pushed
        with self._changed:
            weights, version = self._weights, self._version
            self._weights = None
        if version != self._held:  # None weights: the workers' are the newest already, relabelled
            self.roles.load_rollout_weights(weights, version)
            self._held = version

    def _fail(self, error: BaseException) -> None:
        with self._changed:
            if not self._stop:
                self._error = error
            self._changed.notify_all()


def check_bound(ahead: Ahead, step: int, max_staleness: int) -> None:
    """Every sample of `ahead` is at most `max_staleness` versions behind step `step`'s weights, or a
    CodefuError (the thread never samples past the bound: this would be a bug, not a slow run)."""
    versions = [c.policy_version for c in ahead.sampled.completions]
    worst = min((v for v in versions if v is not None), default=step)
    if step - worst > max_staleness or any(v is None for v in versions):
        raise CodefuError(
            f"internal: step {step} got samples of version {worst}, beyond loop.max_staleness "
            f"{max_staleness} (or unversioned)"
        )


def check_served(sampled: Sampled, oldest: int, newest: int) -> None:
    """Every token of `sampled` was written with weights the workers were sent while it was sampled: from
    version `oldest` (held when it started) to `newest` (the last published), by each worker's own stamp;
    else a CodefuError (an engine that acknowledged weights it did not load)."""
    served = {
        v for e in sampled.all_episodes for c in e.responses for v in (c.token_versions or [c.policy_version])
    }
    if wrong := sorted((v for v in served if v is None or not oldest <= v <= newest), key=str):
        raise CodefuError(
            f"rollout workers wrote samples with weights {wrong} while they held versions {oldest} to "
            f"{newest}: an engine did not load the weights it acknowledged"
        )
