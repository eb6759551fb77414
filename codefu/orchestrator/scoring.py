"""Scores and feedback from the judge: all the loop, self-repair episodes and evaluation know of it.

`Scorer` is the contract: a sample's `Score` on the hidden tests, a self-repair turn's `Feedback` on the
public tests, each for a list, for a stream that may wait for each item, and one by one as they are done.
`BaseScorer` derives the rest from `score_stream` and `check_public_each`; `JudgeScorer` asks the
sandboxed judge (a local `Judge`, or the `RayJudgePool` over the cluster's CPUs).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

from codefu.judge.judge import Judge
from codefu.judge.pool import PoolConfig, RayJudgePool
from codefu.judge.rewards import compute_reward, select_tests
from codefu.observability.metrics import BusyClock
from codefu.observability.progress import phase_bar
from codefu.observability.prometheus import set_judge_load
from codefu.orchestrator.config import RunConfig
from codefu.types import Problem, Status, TestCase, Verdict


@dataclass
class Score:
    reward: float | None  # None: the judge failed (SANDBOX_ERROR); left out of baselines and the loss
    passed: bool
    status: str
    reused: bool = False  # the verdict of an identical program in the same batch (see Verdict.reused)


@dataclass
class Feedback:
    """A program run on its problem's PUBLIC tests (the statement's examples): everything a self-repair
    feedback turn may show (codefu.orchestrator.episodes.feedback_message writes it out)."""

    passed: bool
    status: str  # a Status value; SANDBOX_ERROR: our failure, no feedback is given
    compile_output: str = ""  # the compiler's message, on COMPILE_ERROR only
    test: TestCase | None = None  # the first failing example
    example: int = 0  # its position among the examples run, from 1
    examples: int = 0  # examples run
    output: str = ""  # what the program printed on it (its head: codefu.judge.judge.OUTPUT_CHARS)
    message: str = ""  # its stderr, or the limit it hit


class Scorer(Protocol):
    busy_s: float
    """Seconds since the scorer was made in which its judge had a submission awaiting a verdict (each
    second once, however many calls overlap): the loop's judge throughput, which holds with judging
    overlapped with decoding. 0.0 for a scorer with no judge to wait for."""

    def score(self, problems: list[Problem], responses: list[str]) -> list[Score]: ...

    def score_stream(self, items: Iterable[tuple[Problem, str]]) -> list[Score]:
        """Scores of (problem, response) pairs in the order they come. `items` may wait for each response
        (completions still being decoded): a scorer may start judging the first before the last is in."""
        ...

    def check_public(self, problems: list[Problem], responses: list[str]) -> list[Feedback]:
        """Each response run on its problem's public tests only (self-repair's feedback)."""
        ...

    def check_public_stream(self, items: Iterable[tuple[Problem, str]]) -> list[Feedback]:
        """`check_public` of (problem, response) pairs in the order they come; `items` may wait for each
        (as for `score_stream`)."""
        ...

    def check_public_each(self, items: Iterable[tuple[Problem, str]]) -> Iterator[tuple[int, Feedback]]:
        """`check_public_stream`, each check given (with its item's position) as soon as it is done: the
        next self-repair turn of that episode can start while the others are checked."""
        ...

    def close(self) -> None: ...


class BaseScorer(ABC):
    """A `Scorer` from two methods, `score_stream` and `check_public_each`: the list forms and
    `check_public_stream` follow from them (a list goes on as one, so a judge takes it without a thread);
    `busy_s` is 0.0 (scored in place: no judge to wait for) and `close` does nothing, unless overridden."""

    busy_s = 0.0

    def score(self, problems: list[Problem], responses: list[str]) -> list[Score]:
        return self.score_stream(list(zip(problems, responses, strict=True)))

    @abstractmethod
    def score_stream(self, items: Iterable[tuple[Problem, str]]) -> list[Score]: ...

    def check_public(self, problems: list[Problem], responses: list[str]) -> list[Feedback]:
        return self.check_public_stream(list(zip(problems, responses, strict=True)))

    def check_public_stream(self, items: Iterable[tuple[Problem, str]]) -> list[Feedback]:
        checks = dict(self.check_public_each(items))
        return [checks[i] for i in range(len(checks))]

    @abstractmethod
    def check_public_each(self, items: Iterable[tuple[Problem, str]]) -> Iterator[tuple[int, Feedback]]: ...

    def close(self) -> None:  # noqa: B027 - not abstract: most scorers hold nothing to release
        pass


def public_only(problem: Problem) -> Problem:
    """A copy of `problem` whose only tests are its public ones (as the tests every reward selects): what
    the judge gets for feedback, so no hidden test can reach a feedback turn whatever it reports."""
    return replace(problem, public_tests=[], private_tests=list(problem.public_tests))


def feedback_of(verdict: Verdict, tests: list[TestCase]) -> Feedback:
    """The feedback of a verdict on `tests` (the tests it judged, in order)."""
    fb = Feedback(verdict.status is Status.ACCEPTED, verdict.status.value, examples=len(verdict.tests))
    if verdict.status is Status.COMPILE_ERROR:
        fb.compile_output = verdict.compile_output
    i = verdict.first_failure
    if i is not None and verdict.status is not Status.SANDBOX_ERROR:
        fb.test, fb.example = tests[i], i + 1
        fb.output, fb.message = verdict.tests[i].output, verdict.tests[i].message
    return fb


class JudgeScorer(BaseScorer):
    """Rewards from the sandboxed judge: a local `Judge` or the `RayJudgePool` over the cluster's CPUs."""

    def __init__(self, judge: Judge | RayJudgePool, reward: str, progress: str | None = None):
        self.judge, self.reward = judge, reward
        self.progress = progress  # the judging's progress label (a bar, or lines: phase_bar); None: none
        self._busy = BusyClock()

    @classmethod
    def on_cluster(cls, cfg: RunConfig) -> JudgeScorer:
        res = cfg.resources
        pool = PoolConfig(cpus_per_node=res.judge_cpus, instance_group=res.judge_instance_group)
        # cfg.judge.reward is algo.reward (RunConfig.DERIVED)
        # the backlog goes to the run's Prometheus gauges: codefu_judge_queue_depth, codefu_judge_in_flight
        return cls(RayJudgePool(cfg.judge, pool, on_load=set_judge_load), cfg.algo.reward)

    @property
    def busy_s(self) -> float:
        return self._busy.seconds

    def _judge_many(self, items: Iterable[tuple[Problem, str]]) -> Iterator[tuple[int, Verdict]]:
        """The judge's `judge_many`, on the busy clock from each item's arrival to its verdict."""
        handed, answered = 0, 0

        def counted(stream: Iterable[tuple[Problem, str]]) -> Iterator[tuple[Problem, str]]:
            nonlocal handed  # pulled on the judge's arrivals thread
            for item in stream:
                self._busy.begin()
                handed += 1
                yield item

        if isinstance(items, Sequence):  # all there at once: the judge takes a list without a thread
            self._busy.begin(len(items))
            handed = len(items)
        try:
            for answer in self.judge.judge_many(items if isinstance(items, Sequence) else counted(items)):
                self._busy.end()
                answered += 1
                yield answer
        finally:  # a call ended early (an error, a consumer gone): its unanswered ones stop the clock
            self._busy.end(handed - answered)

    def score_stream(self, items: Iterable[tuple[Problem, str]]) -> list[Score]:
        """Each response goes to the judge as it comes (see Scorer.score_stream)."""
        verdicts = self._judge_many(items)
        if self.progress is None:
            by_position = dict(verdicts)
        else:
            total = len(items) if isinstance(items, Sequence) else None
            with phase_bar(self.progress, total, "program", lines=True) as bar:
                by_position = {}
                for i, verdict in verdicts:
                    by_position[i] = verdict
                    bar.update()
        return [
            Score(compute_reward(v, self.reward), v.status is Status.ACCEPTED, v.status.value, v.reused)
            for v in (by_position[i] for i in range(len(by_position)))
        ]

    def check_public_each(self, items: Iterable[tuple[Problem, str]]) -> Iterator[tuple[int, Feedback]]:
        """The judge runs each program on a copy of its problem holding the public tests alone
        (`public_only`): the feedback can only ever show those. Each goes to the judge as it comes."""
        copies: dict[int, Problem] = {}  # one copy per problem: judge_identical_once tells them apart by id
        owners: list[Problem] = []  # in arrival order (appended on the judge's arrivals thread)

        def public_copies() -> Iterator[tuple[Problem, str]]:
            for problem, response in items:
                owners.append(copies.setdefault(id(problem), public_only(problem)))
                yield owners[-1], response

        lazy = not isinstance(items, Sequence)
        config = self.judge.config if isinstance(self.judge, Judge) else self.judge.judge_config
        for i, verdict in self._judge_many(public_copies() if lazy else list(public_copies())):
            # the tests the judge ran, in its order (a cut by judge.max_tests too); every reward's
            # selection is the same here, the copy holding private tests only
            yield i, feedback_of(verdict, select_tests(owners[i], "private", config.max_tests, config.seed))

    def close(self) -> None:
        self.judge.close()
