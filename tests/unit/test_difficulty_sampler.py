"""The difficulty-aware sampler: pass-rate records, set-aside problems, retries, metrics and exact resume."""

from __future__ import annotations

import json

import pytest

from codefu.config import load_config
from codefu.data.difficulty import DifficultyConfig, PassRateRecord
from codefu.data.loader import ProblemLoader
from codefu.errors import CodefuError
from codefu.orchestrator.config import RunConfig, check_run_config
from codefu.types import Problem
from codefu.types import TestCase as Case


def _problems(n: int) -> list[Problem]:
    return [Problem(f"p{i}", "s", [], [Case("", "")]) for i in range(n)]


def test_record_sets_aside_after_a_full_window_of_zero_or_full_pass_rates():
    r = PassRateRecord(DifficultyConfig(enabled=True, window=2, retry_after=3))
    r.record({"hard": (0, 4), "easy": (4, 4), "mixed": (0, 4), "edge": (4, 4)}, epoch=0)
    assert all(r.eligible(n, 1) for n in ("hard", "easy", "mixed", "edge"))  # window not full yet
    r.record({"hard": (0, 4), "easy": (8, 8), "mixed": (1, 4), "edge": (0, 4)}, epoch=1)
    # 0%,0% and 100%,100% sit out epochs 2..4; 0%,25% and 100%,0% (mixed over the window) stay
    for epoch in (2, 3, 4):
        assert not r.eligible("hard", epoch) and not r.eligible("easy", epoch)
    assert r.eligible("hard", 5) and r.eligible("easy", 5)
    assert r.eligible("mixed", 2) and r.eligible("edge", 2)
    assert r.counts(["hard", "easy", "mixed", "edge"], 2) == {"active": 2, "too_hard": 1, "solved": 1}
    assert r.counts(["hard", "easy", "mixed", "edge"], 5) == {"active": 4, "too_hard": 0, "solved": 0}


def test_a_retried_problem_is_decided_by_its_rolling_window():
    r = PassRateRecord(DifficultyConfig(enabled=True, window=2, retry_after=1))
    r.record({"a": (0, 4), "b": (0, 4)}, 0)
    r.record({"a": (0, 4), "b": (0, 4)}, 1)
    assert not r.eligible("a", 2) and r.eligible("a", 3)
    r.record({"a": (0, 4), "b": (1, 4)}, 3)  # the retry: a fails again, b passes once
    assert not r.eligible("a", 4) and r.eligible("b", 4)
    r.record({"b": (0, 2)}, 4)  # window (0.25, 0): mixed, stays active
    assert r.eligible("b", 5)
    r.record({"a": (2, 0)}, 9)  # nothing judged: no evidence, no change
    assert r.history["a"] == [0.0, 0.0]


def test_window_of_one_and_bad_settings():
    r = PassRateRecord(DifficultyConfig(enabled=True, window=1, retry_after=1))
    r.record({"x": (0, 3)}, 0)
    assert not r.eligible("x", 1) and r.eligible("x", 2)
    with pytest.raises(CodefuError, match=r"data.difficulty.window must be >= 1"):
        PassRateRecord(DifficultyConfig(window=0))
    with pytest.raises(CodefuError, match=r"data.difficulty.retry_after must be >= 1"):
        check_run_config(load_config(RunConfig, None, ["data.difficulty.retry_after=0"]))


def test_loader_skips_set_aside_problems_and_brings_them_back():
    record = PassRateRecord(DifficultyConfig(enabled=True, window=1, retry_after=2))
    loader = ProblemLoader(_problems(6), seed=0, difficulty=record)
    epoch0 = loader.next_batch(6)
    assert len({p.name for p in epoch0}) == 6
    assert loader.epoch == 1  # the batch ended the epoch; the results still count as epoch 0's visits
    loader.record({"p0": (0, 4), "p1": (4, 4), "p2": (2, 4)})
    # p0 (0%) and p1 (100%) sit out epochs 1 and 2
    names = [p.name for p in loader.next_batch(4)]
    assert sorted(names) == ["p2", "p3", "p4", "p5"]
    assert loader.difficulty_metrics() == {
        "data/problems_active": 4.0,
        "data/problems_too_hard": 1.0,
        "data/problems_solved": 1.0,
    }
    assert sorted(p.name for p in loader.next_batch(4)) == ["p2", "p3", "p4", "p5"]
    assert sorted(p.name for p in loader.next_batch(6)) == [f"p{i}" for i in range(6)]  # epoch 3: retried


def test_loader_visits_everything_when_all_are_set_aside():
    record = PassRateRecord(DifficultyConfig(enabled=True, window=1, retry_after=5))
    loader = ProblemLoader(_problems(3), seed=0, difficulty=record)
    loader.record({"p0": (0, 1), "p1": (0, 1), "p2": (1, 1)})
    loader.next_batch(3)  # the rest of epoch 0
    assert sorted(p.name for p in loader.next_batch(3)) == ["p0", "p1", "p2"]  # never stalls


def test_loader_without_a_record_has_no_metrics_and_ignores_results():
    loader = ProblemLoader(_problems(3), seed=0)
    loader.record({"p0": (0, 4)})
    assert loader.difficulty_metrics() == {} and "difficulty" not in loader.state_dict()


def _run(loader: ProblemLoader, steps: int, outcome) -> list[str]:
    seen = []
    for _ in range(steps):
        batch = loader.next_batch(3)
        seen += [p.name for p in batch]
        loader.record({p.name: outcome(p.name) for p in batch})
    return seen


def test_resume_skips_exactly_what_the_uninterrupted_run_skips():
    def outcome(name: str) -> tuple[int, int]:  # p0-p2 never pass, p3 always, the others sometimes
        i = int(name[1:])
        return (0, 4) if i < 3 else (4, 4) if i == 3 else (1 + i % 3, 4)

    cfg = DifficultyConfig(enabled=True, window=2, retry_after=2)
    reference = ProblemLoader(_problems(9), seed=5, difficulty=PassRateRecord(cfg))
    expected = _run(reference, 20, outcome)
    assert all(expected.count(f"p{i}") < reference.epoch - 1 for i in range(4))  # they sat out epochs
    assert all(expected.count(f"p{i}") >= reference.epoch for i in range(4, 9))

    first = ProblemLoader(_problems(9), seed=5, difficulty=PassRateRecord(cfg))
    seen = _run(first, 8, outcome)
    state = json.loads(json.dumps(first.state_dict()))  # survives a checkpoint file
    resumed = ProblemLoader(_problems(9), seed=5, difficulty=PassRateRecord(cfg))
    resumed.load_state_dict(state)
    seen += _run(resumed, 12, outcome)
    assert seen == expected
