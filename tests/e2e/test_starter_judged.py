"""Every starter problem through the real judge: both reference solutions accepted on every test, every
wrong solution rejected. The hidden tests must be strong enough to tell them apart."""

import pytest

from codefu.data.starter import load_starter_problems
from codefu.judge import Judge, JudgeConfig
from codefu.types import Status

pytestmark = pytest.mark.slow  # every starter problem's solutions through the judge: minutes on 2 cores


@pytest.fixture(scope="module")
def verdicts():
    problems = load_starter_problems()
    items, labels = [], []
    for p in problems:
        for language, source in p.extra["solutions"].items():
            items.append((p, f"```{language}\n{source}\n```"))
            labels.append((p.name, f"reference {language}", True))
        for k, wrong in enumerate(p.extra["wrong_solutions"]):
            items.append((p, f"```{wrong['language']}\n{wrong['source']}\n```"))
            labels.append((p.name, f"wrong #{k} ({wrong['flaw']})", False))
    with Judge(JudgeConfig(reward="codefu", early_stop=True)) as judge:
        results = dict(judge.judge_many(items))
    return [(labels[i], results[i]) for i in range(len(items))]


def test_references_accepted(verdicts):
    failed = [
        (label, v.status.value, v.message[:200])
        for label, v in verdicts
        if label[2] and v.status is not Status.ACCEPTED
    ]
    assert failed == []


def test_wrong_solutions_rejected(verdicts):
    accepted = [label for label, v in verdicts if not label[2] and v.status is Status.ACCEPTED]
    assert accepted == []
    assert not [label for label, v in verdicts if v.status is Status.SANDBOX_ERROR]
