"""No `python` checker named by data runs unless the operator registered it: through the judge itself,
verl's compute_score, a dataset given to `codefu judge`, and training's data loading. Each refusal comes
before the checker's module is imported, and the timeit payload (which would write a marker file from
the judge's process) never runs."""

from __future__ import annotations

import json

import pytest

from codefu.cli import main
from codefu.data.schema import problem_to_row
from codefu.judge.judge import Judge, JudgeConfig
from codefu.judge.verl_reward import compute_score
from codefu.types import CheckerSpec, Problem, Status, TestCase
from helpers.hostile_checkers import DANGEROUS_CHECKERS, marker_test

PRINTS_ONE = "```python\nprint(1)\n```"


def hostile_problem(ref: str, marker) -> Problem:
    test = TestCase(**marker_test(marker))
    return Problem("p", "s", [], [test], checker=CheckerSpec("python", ref))


@pytest.fixture(scope="module")
def judge():
    with Judge(JudgeConfig(workers=1)) as j:
        yield j


@pytest.mark.parametrize("ref", DANGEROUS_CHECKERS)
def test_the_judge_refuses_an_unregistered_checker_and_runs_nothing(judge, tmp_path, ref):
    marker = tmp_path / "pwned"
    v = judge.judge(hostile_problem(ref, marker), PRINTS_ONE)
    assert v.status is Status.SANDBOX_ERROR and "not registered" in v.message and ref in v.message
    assert v.tests == []  # the program did not run either: the problem is refused whole
    assert not marker.exists()


def test_a_registered_checker_runs(tmp_path):
    # the operator's choice, shown with the payload: registered, timeit runs it (in the judge's process)
    marker = tmp_path / "ran"
    with Judge(JudgeConfig(workers=1, python_checkers=["timeit:timeit"])) as j:
        j.judge(hostile_problem("timeit:timeit", marker), PRINTS_ONE)
    assert marker.exists()


def test_compute_score_refuses_a_row_naming_an_unregistered_checker(tmp_path):
    marker = tmp_path / "pwned"
    row = problem_to_row(hostile_problem("timeit:timeit", marker), "train", 0, "easy", "p")
    gt, extra = row["reward_model"]["ground_truth"], row["extra_info"]
    with pytest.raises(ValueError, match="python checker 'timeit:timeit' is not registered"):
        compute_score(row["data_source"], PRINTS_ONE, gt, extra)
    assert not marker.exists()
    plain = problem_to_row(Problem("q", "s", [], [TestCase("", "1")]), "train", 0, "easy", "q")
    extra = {**plain["extra_info"], "checker": json.dumps({"kind": "python", "source": "os:system"})}
    with pytest.raises(ValueError, match="'os:system' is not registered"):
        compute_score(plain["data_source"], PRINTS_ONE, plain["reward_model"]["ground_truth"], extra)


def test_codefu_judge_refuses_the_dataset_at_load(tmp_path, capsys):
    marker = tmp_path / "pwned"
    problem = hostile_problem("timeit:timeit", marker)
    dataset = tmp_path / "shady.jsonl"
    test = marker_test(marker)
    row = {
        "name": problem.name,
        "statement": "s",
        "tests": [test],
        "checker": {"kind": "python", "source": "timeit:timeit"},
    }
    dataset.write_text(json.dumps(row) + "\n")
    responses = tmp_path / "r.jsonl"
    responses.write_text(json.dumps({"index": 0, "response": PRINTS_ONE}) + "\n")
    out = tmp_path / "v.jsonl"
    code = main(["judge", "--dataset", str(dataset), "--responses", str(responses), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "problem 'p': python checker 'timeit:timeit' is not registered" in err
    assert str(dataset) in err and not out.exists() and not marker.exists()


def test_training_refuses_the_dataset_at_load(tmp_path):
    from codefu.errors import CodefuError
    from codefu.orchestrator.cli import _load
    from codefu.orchestrator.config import RunConfig

    dataset = tmp_path / "shady.jsonl"
    row = {"name": "p", "statement": "s", "tests": [{"input": "", "output": "1"}]}
    row["checker"] = {"kind": "python", "source": "builtins:exec"}
    dataset.write_text(json.dumps(row) + "\n")
    with pytest.raises(
        CodefuError, match=r"^data\.train: .*shady\.jsonl: problem 'p': python checker 'builtins:exec'"
    ):
        _load(RunConfig(), str(dataset), "data.train")
    cfg = RunConfig()
    cfg.judge.python_checkers = ["builtins:exec"]
    assert [p.name for p in _load(cfg, str(dataset), "data.train")] == ["p"]
