"""Real CodeContests problems: correct solutions written for the test are accepted, subtly wrong ones
are not (tests/data/codefu_easy_solutions.json; each flaw only shows on some private tests)."""

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from codefu.data.loader import load_problems
from codefu.judge import Judge, JudgeConfig, compute_reward
from codefu.types import Status

SOLUTIONS = json.loads((Path(__file__).parents[1] / "data" / "codefu_easy_solutions.json").read_text())


@pytest.fixture(scope="module")
def problems(codefu_easy):
    return load_problems(codefu_easy / "train.parquet")


@pytest.fixture(scope="module")
def judge():
    with Judge(JudgeConfig(reward="codefu")) as j:
        yield j


def wrap(language: str, source: str) -> str:
    # the CodeFu answer format: reasoning, then the program in <code> tags
    return f"<think>Let me think.</think>\n<code>\n```{language}\n{source}\n```\n</code>"


def test_correct_accepted_and_wrong_rejected(problems, judge):
    items = []
    for s in SOLUTIONS:
        problem = problems[s["index"]]
        assert problem.name == s["name"]
        items += [(problem, wrap(s["language"], s["correct"])), (problem, wrap(s["language"], s["wrong"]))]
    verdicts = dict(judge.judge_many(items))
    for k, s in enumerate(SOLUTIONS):
        good, bad = verdicts[2 * k], verdicts[2 * k + 1]
        assert good.status is Status.ACCEPTED, (s["name"], good.status, good.message)
        assert good.passed == good.total == len(problems[s["index"]].private_tests)
        assert compute_reward(good, "codefu") == 1.0
        assert bad.status is not Status.ACCEPTED, (s["name"], s["flaw"])
        assert bad.status is not Status.SANDBOX_ERROR
        assert 0 <= compute_reward(bad, "codefu") < 1.0
        assert bad.first_failure is not None and bad.tests[bad.first_failure].status is bad.status


def test_max_tests_and_early_stop(problems):
    s = next(s for s in SOLUTIONS if s["language"] == "cpp")
    problem = problems[s["index"]]
    with Judge(JudgeConfig(reward="binary", max_tests=5, workers=1)) as j:
        good = j.judge(problem, wrap("cpp", s["correct"]))
        assert good.status is Status.ACCEPTED and good.total == 5 and good.passed == 5
        bad = j.judge(problem, wrap("cpp", s["wrong"] + "\n// " + "x"))
        # binary only needs all-pass: the judge stops after the first failure (workers=1 runs in order)
        assert bad.status is not Status.ACCEPTED
        assert len(bad.tests) == bad.first_failure + 1


def test_identical_programs_compile_once(problems, judge):
    s = SOLUTIONS[0]
    problem = problems[s["index"]]
    misses = judge.compiler.misses
    response = wrap(s["language"], s["correct"] + "\n// group member")
    # judged concurrently one by one (judge_many would run the twins once: test_judge_features)
    with ThreadPoolExecutor(8) as threads:
        verdicts = list(threads.map(lambda _: judge.judge(problem, response), range(8)))
    assert all(v.status is Status.ACCEPTED for v in verdicts)
    assert judge.compiler.misses == misses + 1
