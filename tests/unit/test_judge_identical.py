"""`judge_identical_once`: which submissions reach the judge, and what every position gets back."""

import threading

from codefu.judge.judge import judge_identical_once
from codefu.types import Problem, Status, TestCase, TestResult, Verdict

A = Problem("a", "", [], [TestCase("1\n", "1\n")], preferred_language="python")
B = Problem("b", "", [], [TestCase("1\n", "1\n")], preferred_language="python")
ECHO = "```python\nprint(input())\n```"
OTHER = "```python\nprint(2)\n```"


def recording_judge(seen: list):
    """Judges in reverse order of submission (as a pool may finish), recording what it was given."""

    def judge_many(items):
        items = list(items)  # an iterable: it may arrive over time
        seen.extend(items)
        for i in reversed(range(len(items))):
            yield (
                i,
                Verdict(Status.WRONG_ANSWER, tests=[TestResult(Status.WRONG_ANSWER)], message=items[i][1]),
            )

    return judge_many


def test_only_distinct_programs_per_problem_reach_the_judge():
    seen: list = []
    items = [(A, ECHO), (A, "Here:\n" + ECHO), (B, ECHO), (A, OTHER), (A, ECHO), (A, "no code"), (A, "none")]
    verdicts = dict(judge_identical_once(items, recording_judge(seen)))
    assert seen == [(A, ECHO), (B, ECHO), (A, OTHER), (A, "no code")]
    assert sorted(verdicts) == list(range(len(items)))
    assert [verdicts[i].reused for i in range(len(items))] == [False, True, False, False, True, False, True]
    # a twin carries its first's verdict (here: the response the judge saw), in its own copy
    assert verdicts[4].message == verdicts[1].message == ECHO and verdicts[6].message == "no code"
    assert verdicts[4].tests == verdicts[0].tests and verdicts[4].tests is not verdicts[0].tests
    assert verdicts[4].time_s == 0.0


def test_empty_batch():
    assert list(judge_identical_once([], recording_judge([]))) == []


def test_twins_arriving_after_their_first_was_judged_get_its_verdict_at_once():
    """Items arrive over time (completions as the engine finishes them): a judge that answers each one as
    it comes has judged the first of a pair before its twin arrives; the twin still gets a copy, and at
    once: the next item may only come after it (a self-repair episode waits on its check), so waiting
    for the next verdict or the end of the input would never end."""
    seen: list = []

    def judge_as_they_come(items):
        for i, (problem, response) in enumerate(items):
            seen.append((problem, response))
            yield i, Verdict(Status.ACCEPTED, tests=[TestResult(Status.ACCEPTED)], message=response)

    given: dict[int, threading.Event] = {i: threading.Event() for i in range(5)}

    def arriving():
        # each item after the verdict of the one before it: the twins (2 and 4) come after their firsts'
        for k, item in enumerate(
            [(A, ECHO), (A, OTHER), (A, "Again:\n" + ECHO), (B, ECHO), (A, OTHER + "\n")]
        ):
            if k > 0:
                assert given[k - 1].wait(timeout=10), f"no verdict for item {k - 1} before item {k} came"
            yield item

    out = []
    for position, verdict in judge_identical_once(arriving(), judge_as_they_come):
        given[position].set()
        out.append((position, verdict))
    verdicts = dict(out)
    assert seen == [(A, ECHO), (A, OTHER), (B, ECHO)]
    assert [i for i, _ in out] == [0, 1, 2, 3, 4]
    assert [verdicts[i].reused for i in range(5)] == [False, False, True, False, True]
    assert verdicts[2].message == ECHO and verdicts[4].message == OTHER
