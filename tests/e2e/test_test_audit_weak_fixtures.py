"""The test audit on real problems, in the real sandbox: problems made to have weak tests (only the tests
their incorrect solutions pass) are audited, their survivors named, tests generated; a second audit of the
augmented problems checks that no correct solution fails an added test and that at least half of the
incorrect solutions that passed before now fail."""

import json
import random

import pytest

from codefu.cli import main
from codefu.data.loader import load_problems
from codefu.data.sources.jsonl import problem_to_object
from codefu.data.starter import load_starter_problems
from codefu.judge import Judge
from codefu.judge.audit import AuditConfig, audit_judge_config, audit_problems
from helpers.weak_tests import codefu_easy_with_solutions, weakened

# 40-45 s each on 2 cores (a default-tier run of the audit on the pool: tests/ray/test_test_audit_pool.py)
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def judge():
    with Judge(audit_judge_config()) as j:
        yield j


def passing_share(audits) -> float:
    incorrect = [r for a in audits for r in a.incorrect]
    return sum(r.status == "ACCEPTED" for r in incorrect) / len(incorrect)


def test_starter_problems_with_weak_tests_get_tests_that_kill_their_wrong_solutions(judge):
    every = load_starter_problems()
    sample = [every[i] for i in sorted(random.Random(0).sample(range(len(every)), 30))]
    problems = weakened(sample, judge)  # those with a test every incorrect solution passes
    assert len(problems) >= 15
    config = AuditConfig(augment_tests=4, candidates=16, rounds=2, time_budget_s=60, seed=0)
    results = audit_problems(problems, judge, config, parallel=2)
    audits = [a for a, _ in results]
    before = passing_share(audits)
    assert before == 1.0  # the fixture: every incorrect solution passes every test it kept
    for a in audits:
        assert not a.broken and not a.skipped
        assert all(f"passes all {a.tests} tests" in f for f in a.flags() if f.startswith("incorrect"))
        assert a.augment is not None and a.augment.added <= 4
    augmented = [p for _, p in results]
    added = [p.extra.get("generated_tests", 0) for p in augmented]
    assert sum(added) > 0
    # the augmented problems, audited again: correct solutions pass every added test, and the incorrect
    # ones the report said were killed are
    again = [a for a, _ in audit_problems(augmented, judge, AuditConfig(), parallel=2)]
    assert all(not a.broken for a in again), [a.flags() for a in again]
    after = passing_share(again)
    assert after <= 0.5 * before, (before, after, [a.flags() for a in again])
    for a, b in zip(audits, again, strict=True):
        assert [r.index for r in b.survivors] == a.augment.survivors_after


def test_codecontests_problems_through_the_command(codefu_easy, judge, tmp_path):
    problems = weakened(codefu_easy_with_solutions(codefu_easy), judge)
    assert len(problems) >= 8
    dataset = tmp_path / "weak.jsonl"
    dataset.write_text("".join(json.dumps(problem_to_object(p)) + "\n" for p in problems))
    report, out = tmp_path / "audit.json", tmp_path / "augmented.jsonl"
    argv = ["audit-tests", str(dataset), "--out", str(report), "--augment-tests", "4", "--seed", "1"]
    assert main([*argv, "--dataset-out", str(out), "--rounds", "2", "--time-budget-s", "60"]) == 0
    first = json.loads(report.read_text())
    s = first["summary"]["code_contests"]
    assert s["audited"] == len(problems) and s["incorrect_passing"] == s["incorrect"] == len(problems)
    assert s["broken"] == 0 and first["timing"]["problems_per_minute"] > 0
    named = [f for p in first["problems"] for f in p["flags"] if f.startswith("incorrect solution 0")]
    assert len(named) == len(problems)  # every survivor named, with its flaw
    assert len(load_problems(out)) == len(problems)
    # audit the augmented dataset: no correct solution fails, and the survivors are those the report said
    assert main(["audit-tests", str(out), "--out", str(tmp_path / "again.json")]) == 0
    again = json.loads((tmp_path / "again.json").read_text())["summary"]["code_contests"]
    assert again["correct_failing"] == 0
    assert again["incorrect_passing"] == s["incorrect_passing_after"]
    assert again["incorrect_passing"] <= 0.5 * s["incorrect_passing"], first["problems"]
