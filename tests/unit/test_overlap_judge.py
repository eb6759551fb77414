"""`judged_as_they_finish`: completions reach the judge in the order the engine finishes them; the step
gets them back in (prompt, sample) order, each with its own score, and the phases generate / judge_tail."""

from __future__ import annotations

import contextlib
import threading
from dataclasses import replace

import pytest

from codefu.judge.judge import JudgeConfig
from codefu.observability import metrics
from codefu.observability.metrics import StepTimer
from codefu.orchestrator.episodes import EpisodePlan
from codefu.orchestrator.samplers import (
    episodes_as_they_finish,
    judged_as_they_finish,
    turn_judged_while_decoding,
)
from codefu.orchestrator.scoring import JudgeScorer
from codefu.rollout.follow_ups import LocalConversations, follow_ups_in_batches
from codefu.rollout.types import Completion, SamplingParams
from codefu.types import Problem, Status, TestResult, Verdict

PROBLEMS = [Problem("p0", "", [], []), Problem("p1", "", [], [])]


def completion(prompt: int, sample: int, text: str) -> Completion:
    tokens = [3, 4, 5][: 1 + sample]
    return Completion(
        prompt_index=prompt,
        sample_index=sample,
        prompt_ids=[1, 2],
        token_ids=tokens,
        text=text,
        logprobs=[-0.5] * len(tokens),
        finish_reason="stop",
    )


class StreamingRoles:
    """Stands in for Roles: streams `batches` (lists of completions, in finish order), each after the judge
    has taken everything before it, then optionally fails."""

    def __init__(self, batches, error: Exception | None = None):
        self.batches, self.error = batches, error
        self.phases = 0
        self.taken = threading.Semaphore(0)

    @contextlib.contextmanager
    def generating(self):
        self.phases += 1
        yield

    def generate_stream(self, prompts, sampling):
        for k, batch in enumerate(self.batches):
            if k > 0:
                assert self.taken.acquire(timeout=30), "the judge did not take the previous batch"
            yield batch
        if self.error is not None:
            raise self.error


class PassIfSaysOk:
    """A judge: ACCEPTED when the response is "ok"; tells the stream it took each item (as it arrives)."""

    def __init__(self, roles: StreamingRoles):
        self.roles, self.seen = roles, []
        self.judge_config = JudgeConfig()

    def judge_many(self, items):
        for i, (problem, response) in enumerate(items):
            self.seen.append((problem.name, response))
            self.roles.taken.release()
            status = Status.ACCEPTED if response == "ok" else Status.WRONG_ANSWER
            yield i, Verdict(status, tests=[TestResult(status)])


def test_scores_follow_their_completions_back_into_order():
    batches = [
        [completion(1, 1, "ok")],
        [completion(0, 2, "no"), completion(1, 0, "no")],
        [completion(0, 0, "ok"), completion(0, 1, "no"), completion(1, 2, "ok")],
    ]
    roles = StreamingRoles(batches)
    judge = PassIfSaysOk(roles)
    timer = StepTimer()
    completions, scores = judged_as_they_finish(
        PROBLEMS,
        [[1, 2], [1, 2]],
        SamplingParams(n=3),
        roles,
        JudgeScorer(judge, "binary").score_stream,
        timer,
    )
    assert [(c.prompt_index, c.sample_index) for c in completions] == [
        (p, s) for p in range(2) for s in range(3)
    ]
    assert (
        [s.passed for s in scores]
        == [c.text == "ok" for c in completions]
        == [True, False, False, False, True, True]
    )
    assert [name for name, _ in judge.seen] == ["p1", "p0", "p1", "p0", "p0", "p1"]  # in finish order
    assert set(timer.seconds) == {"generate", "judge_tail"} and roles.phases == 1


def test_an_engine_error_mid_stream_is_raised_not_hidden():
    roles = StreamingRoles([[completion(0, 0, "ok")]], error=RuntimeError("CUDA error: out of memory"))
    with pytest.raises(RuntimeError, match="out of memory"):
        judged_as_they_finish(
            PROBLEMS[:1],
            [[1, 2]],
            SamplingParams(n=1),
            roles,
            JudgeScorer(PassIfSaysOk(roles), "binary").score_stream,
            StepTimer(),
        )


def test_a_self_repair_turn_checks_the_public_tests_while_decoding():
    """The loop's self-repair Turn: each program goes to the public-test check as it finishes; the checks
    come back aligned with the completions."""
    batches = [[completion(1, 0, "no")], [completion(0, 0, "ok")]]
    roles = StreamingRoles(batches)
    judge = PassIfSaysOk(roles)
    timer = StepTimer()
    turn = turn_judged_while_decoding(roles, JudgeScorer(judge, "binary"), timer)
    completions, checks = turn([[1, 2], [1, 2]], SamplingParams(n=1), PROBLEMS)
    assert [(c.prompt_index, c.text) for c in completions] == [(0, "ok"), (1, "no")]
    assert [fb.passed for fb in checks] == [True, False]
    assert [name for name, _ in judge.seen] == ["p1", "p0"]
    assert set(timer.seconds) == {"generate", "judge_tail"}


class RepairingEngine:
    """An engine taking follow-ups (batch by batch): prompt 0 writes "no", prompt 1 "ok"; a later turn
    writes "fixed" or "still no" by its conversation's length (each sample's first reply differs). It
    writes the later turns only once `scored` is set: the hidden-test scoring of the episodes that ended
    at turn 1 must have begun while the others still run."""

    def __init__(self, scored: threading.Event):
        self.scored = scored

    def generate_stream(self, prompts, sampling, follow_ups=None):
        def once(prompts, sampling):
            out = []
            for i, p in enumerate(prompts):
                for j in range(sampling.n):
                    if len(p) == 2:  # a first turn
                        out.append(completion(i, j, "no" if i == 0 else "ok"))
                    else:
                        assert self.scored.wait(timeout=10), "no episode was scored before the last turns"
                        text = "fixed" if len(p) % 2 else "still no"
                        out.append(replace(completion(i, j, text), prompt_ids=p))
            yield out

        yield from (
            once(prompts, sampling)
            if follow_ups is None
            else follow_ups_in_batches(once, prompts, sampling, follow_ups)
        )


class ConversingRoles:
    def __init__(self, engine):
        self.engine, self.phases = engine, 0

    @contextlib.contextmanager
    def conversations(self, prompts, sampling):
        self.phases += 1
        conversations = LocalConversations(self.engine, prompts, sampling)
        try:
            yield conversations
        finally:
            conversations.close()


class AcceptOkAndFixed:
    """ACCEPTED for "ok" and "fixed"; sets `scored` at the first hidden-test item (a problem of PROBLEMS
    itself; the public checks get copies); `fail_scoring`: the hidden-test scoring fails."""

    judge_config = JudgeConfig()

    def __init__(self, fail_scoring: bool = False):
        self.scored, self.fail_scoring = threading.Event(), fail_scoring

    def judge_many(self, items):
        for i, (problem, response) in enumerate(items):
            if any(problem is p for p in PROBLEMS):
                if self.fail_scoring:
                    raise RuntimeError("the judge's node went away")
                self.scored.set()
            status = Status.ACCEPTED if response in ("ok", "fixed") else Status.WRONG_ANSWER
            yield i, Verdict(status, tests=[TestResult(status)])


def test_async_turns_score_each_episode_as_it_ends_and_give_the_scores_in_episode_order():
    judge, timer = AcceptOkAndFixed(), StepTimer()
    roles = ConversingRoles(RepairingEngine(judge.scored))
    plan = EpisodePlan(turns=2, follow_up=lambda text, reply: [9])
    episodes, scores = episodes_as_they_finish(
        PROBLEMS, [[1, 2], [1, 2]], SamplingParams(n=3), plan, roles, JudgeScorer(judge, "binary"), timer
    )
    assert [(e.prompt_index, e.sample_index) for e in episodes] == [
        (p, s) for p in range(2) for s in range(3)
    ]
    assert [e.turns for e in episodes] == [2, 2, 2, 1, 1, 1]
    finals = [e.final.text for e in episodes]
    assert finals[:3] != ["fixed"] * 3 and "fixed" in finals  # the second turns differ
    assert [s.passed for s in scores] == [t in ("ok", "fixed") for t in finals]
    assert set(timer.seconds) == {"generate", "judge_tail"} and roles.phases == 1


def test_async_turns_raise_a_failing_hidden_test_scoring():
    judge = AcceptOkAndFixed(fail_scoring=True)
    roles = ConversingRoles(RepairingEngine(threading.Event()))
    roles.engine.scored.set()  # nothing waits for the scoring here
    plan = EpisodePlan(turns=2, follow_up=lambda text, reply: [9])
    with pytest.raises(RuntimeError, match="went away"):
        episodes_as_they_finish(
            PROBLEMS,
            [[1, 2], [1, 2]],
            SamplingParams(n=3),
            plan,
            roles,
            JudgeScorer(judge, "binary"),
            StepTimer(),
        )


class OneSecondEach:
    """A judge taking one second of `clock` per submission, pulling each as it arrives."""

    def __init__(self, clock: list[float], fail_at: int | None = None):
        self.clock, self.fail_at = clock, fail_at
        self.judge_config = JudgeConfig()

    def judge_many(self, items):
        for i, _ in enumerate(items):
            if i == self.fail_at:
                raise RuntimeError("judge worker gone")
            self.clock[0] += 1.0
            yield i, Verdict(Status.ACCEPTED, tests=[TestResult(Status.ACCEPTED)])


def test_the_scorer_counts_the_judges_busy_time_not_the_wait_for_completions(monkeypatch):
    clock = [0.0]
    monkeypatch.setattr(metrics.time, "perf_counter", lambda: clock[0])

    def decoded_slowly(n: int):  # 10 s of decoding before each completion
        for _ in range(n):
            clock[0] += 10.0
            yield PROBLEMS[0], "ok"

    scorer = JudgeScorer(OneSecondEach(clock), "binary")
    assert scorer.busy_s == 0.0
    assert [s.passed for s in scorer.score_stream(decoded_slowly(3))] == [True] * 3
    assert clock[0] == 33.0 and scorer.busy_s == 3.0  # 3 of the 33 s
    scorer.score(PROBLEMS, ["ok", "ok"])  # a list: both outstanding from the start
    assert scorer.busy_s == 5.0
    assert len(list(scorer.check_public_each(decoded_slowly(1)))) == 1
    assert scorer.busy_s == 6.0

    failing = JudgeScorer(OneSecondEach(clock, fail_at=1), "binary")
    with pytest.raises(RuntimeError, match="judge worker gone"):
        failing.score_stream(decoded_slowly(3))
    stopped = failing.busy_s
    clock[0] += 100.0
    assert failing.busy_s == stopped  # the unanswered submission does not keep the clock running
