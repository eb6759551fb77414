"""`judged_as_they_finish`: completions reach the judge in the order the engine finishes them; the step
gets them back in (prompt, sample) order, each with its own score, and the phases generate / judge_tail."""

from __future__ import annotations

import contextlib
import threading

import pytest

from codefu.judge.judge import JudgeConfig
from codefu.observability.metrics import StepTimer
from codefu.orchestrator.loop import judged_as_they_finish, turn_judged_while_decoding
from codefu.orchestrator.roles import JudgeScorer
from codefu.rollout.types import Completion, SamplingParams
from codefu.types import Problem, Status, TestResult, Verdict

PROBLEMS = [Problem("p0", "", [], []), Problem("p1", "", [], [])]


def completion(prompt: int, sample: int, text: str) -> Completion:
    tokens = [3, 4, 5][: 1 + sample]
    return Completion(prompt_index=prompt, sample_index=sample, prompt_ids=[1, 2], token_ids=tokens, text=text,
                      logprobs=[-0.5] * len(tokens), finish_reason="stop")


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
    batches = [[completion(1, 1, "ok")], [completion(0, 2, "no"), completion(1, 0, "no")],
               [completion(0, 0, "ok"), completion(0, 1, "no"), completion(1, 2, "ok")]]
    roles = StreamingRoles(batches)
    judge = PassIfSaysOk(roles)
    timer = StepTimer()
    completions, scores = judged_as_they_finish(
        PROBLEMS, [[1, 2], [1, 2]], SamplingParams(n=3), roles, JudgeScorer(judge, "binary").score_stream, timer
    )
    assert [(c.prompt_index, c.sample_index) for c in completions] == [(p, s) for p in range(2) for s in range(3)]
    assert [s.passed for s in scores] == [c.text == "ok" for c in completions] == [
        True, False, False, False, True, True]
    assert [name for name, _ in judge.seen] == ["p1", "p0", "p1", "p0", "p0", "p1"]  # in finish order
    assert set(timer.seconds) == {"generate", "judge_tail"} and roles.phases == 1


def test_an_engine_error_mid_stream_is_raised_not_hidden():
    roles = StreamingRoles([[completion(0, 0, "ok")]], error=RuntimeError("CUDA error: out of memory"))
    with pytest.raises(RuntimeError, match="out of memory"):
        judged_as_they_finish(PROBLEMS[:1], [[1, 2]], SamplingParams(n=1), roles,
                              JudgeScorer(PassIfSaysOk(roles), "binary").score_stream, StepTimer())


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
