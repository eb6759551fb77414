"""codefu's judge as verl's custom reward function (`codefu.judge.verl_reward.compute_score`): called as
verl calls it, on a row as `codefu prepare` writes it, in the real sandbox."""

from __future__ import annotations

import json

import pytest

from codefu.data.schema import problem_to_row
from codefu.data.starter import load_starter_problems
from codefu.judge.verl_reward import compute_score


@pytest.fixture(scope="module")
def row():
    problem = next(p for p in load_starter_problems() if p.name == "square-number")
    return problem, problem_to_row(problem, "train", 0, "easy", problem.name)


def fenced(language: str, source: str) -> str:
    return f"Here is my solution.\n```{language}\n{source}\n```\n"


def call(row, response: str, **kwargs):
    gt, extra = row["reward_model"]["ground_truth"], row["extra_info"]
    return compute_score(row["data_source"], response, gt, extra, **kwargs)


def test_verdicts_and_rewards_as_codefu_train_gives_them(row):
    problem, r = row
    right = call(r, fenced("python", problem.extra["solutions"]["python"]))
    assert right == {"score": 1.0, "acc": True, "status": "ACCEPTED", "passed": right["total"],
                     "total": right["total"], "judge_error": False}  # fmt: skip
    assert right["total"] == len(problem.private_tests)  # the judge's default: the hidden tests
    wrong = problem.extra["wrong_solutions"][0]
    out = call(r, fenced(wrong["language"], wrong["source"]))
    assert not out["acc"] and out["status"] == "WRONG_ANSWER" and 0 <= out["score"] < 1
    assert out["score"] == pytest.approx(out["passed"] / out["total"])  # the codefu reward: pass ratio
    assert call(r, fenced(wrong["language"], wrong["source"]), reward="binary")["score"] == 0.0
    assert call(r, fenced(wrong["language"], wrong["source"]), max_tests=2)["total"] == 2


@pytest.mark.parametrize(
    "response,status,score",
    [
        ("I do not know.", "NO_CODE", -1.0),
        (fenced("cpp", "int main( {"), "COMPILE_ERROR", -0.5),
        ("\x00" * 1000 + "```python\nprint(", "NO_CODE", -1.0),  # an unclosed fence holds no program
    ],
    ids=["prose", "broken-cpp", "nul-bytes-unclosed"],
)
def test_any_response_gets_a_verdict(row, response, status, score):
    out = call(row[1], response)
    assert (out["status"], out["score"], out["judge_error"]) == (status, score, False)


def test_ground_truth_as_a_json_string_and_bad_ground_truths(row):
    problem, r = row
    as_text = json.dumps(r["reward_model"]["ground_truth"])
    assert compute_score("code_contests", fenced("python", problem.extra["solutions"]["python"]), as_text)[
        "acc"
    ]
    with pytest.raises(ValueError, match="has no tests"):
        compute_score("mine", "x", {"name": "empty"})
    with pytest.raises(ValueError, match="ground_truth of 'mine' is not a problem"):
        compute_score("mine", "x", "{not json")
