"""Submissions that arrive while the judge works (completions still being decoded): a judge's `judge_many`
must return a verdict before the last one has arrived."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator

from codefu.types import Problem, Verdict

JudgeMany = Callable[[Iterable[tuple[Problem, str]]], Iterator[tuple[int, Verdict]]]


def judge_while_arriving(judge_many: JudgeMany, problem: Problem, programs: list[str]) -> dict[int, Verdict]:
    """Give `programs` one at a time, each only after the judge has returned a verdict (up to 60 s): a judge
    that waited for the end of its input would get an error from the input instead (no verdict in 60 s).
    Returns the verdicts by position."""
    verdicts: dict[int, Verdict] = {}
    answered = threading.Semaphore(0)

    def arriving() -> Iterator[tuple[Problem, str]]:
        for k, program in enumerate(programs):
            if k > 0 and not answered.acquire(timeout=60):
                raise AssertionError(f"no verdict within 60 s while submission {k + 1} waited to arrive")
            yield problem, program

    for position, verdict in judge_many(arriving()):
        verdicts[position] = verdict
        answered.release()
    return verdicts
