"""Rewards: pure functions of a verdict, selectable by name.

`SANDBOX_ERROR` is the judge's own failure, never the model's: `compute_reward` returns None for it
and the trainer leaves such samples out of rewards and group baselines.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from codefu.errors import CodefuError
from codefu.types import Problem, Status, TestCase, Verdict

TestSet = Literal["private", "public+private"]


def codefu_reward(v: Verdict) -> float:
    """The CodeFu blog: -1 no code, -0.5 compile error, 0 time limit, else the fraction of tests passed.

    "Time limit" is the submission's verdict, i.e. its first failing test timed out. A test a problem's
    checker gave partial points (testlib's quitp) counts as that fraction (`Verdict.score_ratio`, equal to
    the pass ratio when no checker gives points).
    """
    if v.status is Status.NO_CODE:
        return -1.0
    if v.status is Status.COMPILE_ERROR:
        return -0.5
    if v.status is Status.TIME_LIMIT:
        return 0.0
    return v.score_ratio


def all_pass_reward(v: Verdict) -> float:
    """1 when every selected test passes, else 0 (what CodeFu's published reward code computes: the
    pass fraction, then 0 unless it is 1; DeepCoder's binary reward)."""
    return 1.0 if v.status is Status.ACCEPTED else 0.0


def codefu_stage1_reward(v: Verdict) -> float:
    """The CodeFu-7B model card, stage 1: -1 no code, 0 compile error or time limit, else ratio^1.5 (the
    ratio counting partially correct tests by their points, as in `codefu_reward`)."""
    if v.status is Status.NO_CODE:
        return -1.0
    if v.status in (Status.COMPILE_ERROR, Status.TIME_LIMIT):
        return 0.0
    return v.score_ratio**1.5


@dataclass(frozen=True)
class RewardSpec:
    fn: Callable[[Verdict], float]
    tests: TestSet  # which of the problem's tests the reward is computed over
    all_or_nothing: bool  # only "all passed?" matters, so judging may stop at the first failure


REWARDS: dict[str, RewardSpec] = {
    "codefu": RewardSpec(codefu_reward, "private", all_or_nothing=False),
    "codefu_code": RewardSpec(all_pass_reward, "private", all_or_nothing=True),
    "codefu_stage1": RewardSpec(codefu_stage1_reward, "public+private", all_or_nothing=False),
    "binary": RewardSpec(all_pass_reward, "public+private", all_or_nothing=True),
}


def reward_spec(name: str) -> RewardSpec:
    try:
        return REWARDS[name]
    except KeyError:
        raise ValueError(f"unknown reward {name!r}; choose one of {', '.join(REWARDS)}") from None


def compute_reward(verdict: Verdict, name: str) -> float | None:
    if verdict.status is Status.SANDBOX_ERROR:
        return None
    return reward_spec(name).fn(verdict)


def select_tests(problem: Problem, which: TestSet, max_tests: int | None, seed: int) -> list[TestCase]:
    """At most `max_tests` tests, the same ones for the same (problem, seed), in their original order.

    The largest inputs are always kept (up to a quarter of the budget, at least one), so that a too-slow
    program meets its time limit; the rest is a seeded sample.
    """
    tests = list(problem.private_tests)
    if which == "public+private":
        tests = list(problem.public_tests) + tests
    if max_tests is None or len(tests) <= max_tests:
        return tests
    if max_tests <= 0:
        return []
    by_size = sorted(range(len(tests)), key=lambda i: (-len(tests[i].input), i))
    chosen = set(by_size[: max(1, max_tests // 4)])
    digest = hashlib.sha256(f"{problem.name}\0{seed}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "little"))
    rest = [i for i in range(len(tests)) if i not in chosen]
    chosen.update(rng.sample(rest, max_tests - len(chosen)))
    return [tests[i] for i in sorted(chosen)]


def untested_problems(problems: Sequence[Problem], reward: str) -> list[str]:
    """The names of the problems without any of the tests `reward` is computed over."""
    which = reward_spec(reward).tests
    return [p.name for p in problems if not select_tests(p, which, None, 0)]


def check_tested(problems: Sequence[Problem], reward: str, source: str) -> None:
    """CodefuError naming `source` (a dataset as the user gave it) and its first problem without any of
    the tests `reward` is computed over: the judge could only answer SANDBOX_ERROR for it, every time."""
    which = reward_spec(reward).tests
    if untested := untested_problems(problems, reward):
        more = f" (and {len(untested) - 1} more)" if len(untested) > 1 else ""
        raise CodefuError(
            f"{source}: problem {untested[0]!r}{more} has no {which} tests to judge with (reward {reward})"
        )
