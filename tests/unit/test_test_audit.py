"""The test audit's pure parts (codefu.judge.input_mutations, codefu.judge.audit): mutations that keep an input's shape, the greedy
choice of generated tests, and the report's words and counts."""

import random

from codefu.judge.audit import AugmentStats, ProblemAudit, SolutionRun, disagreement, killed, summary
from codefu.judge.input_mutations import (
    candidate_inputs,
    choose_tests,
    counted_lists,
    is_int,
    mutate,
    observe,
    protected,
    split_lines,
)
from codefu.types import Status, TestResult, Verdict


def test_counts_are_found_and_protected():
    lines = split_lines("3 7\n1 2 3\n")
    assert counted_lists(lines) == {(0, 0): 1}
    assert protected(lines) == {(0, 0)}
    # t test cases, one per line
    assert (0, 0) in protected(split_lines("2\n5\n6\n"))
    assert counted_lists(split_lines("10\n")) == {}


def test_mutations_keep_the_shape():
    inputs = ["3\n1 5 9\n", "5\n2 2 8 1 4\n", "1\n7\n"]
    shape = observe(inputs)
    assert (shape.low, shape.high) == (1, 9)
    rng = random.Random(0)
    made = [m for _ in range(300) if (m := mutate(rng.choice(inputs), shape, rng)) is not None]
    assert len(made) > 100
    for text in made:
        lines = split_lines(text)
        assert len(lines) == 2 and int(lines[0][0]) == len(lines[1])  # the count follows the list
        assert all(1 <= int(t) <= 9 for t in lines[1])  # values within the observed range
        assert 1 <= int(lines[0][0]) <= 5  # sizes within the observed counts
    kinds = {tuple(split_lines(t)[1]) for t in made}
    assert ("9", "9", "9") in kinds or ("1", "1", "1") in kinds or any(len(set(k)) == 1 for k in kinds)


def test_words_keep_their_alphabet():
    rng = random.Random(1)
    shape = observe(["abcde\n"])
    made = {m for _ in range(200) if (m := mutate("abcde\n", shape, rng)) is not None}
    assert len(made) > 10
    for m in made:  # lowercase words of the same length, or the word repeated on its line
        words = m.split()
        assert all(w.islower() and w.isalpha() and len(w) == 5 for w in words) and len(words) <= 2
    assert any(sorted(m.strip()) == list("abcde") for m in made)  # a shuffle
    assert any("z" in m for m in made)  # an edge of the alphabet
    # a line of words: a word repeated or dropped; a counted list keeps its count
    made = {m for _ in range(200) if (m := mutate("2\nab cd\n", observe(["2\nab cd\n"]), rng))}
    assert all(int(split_lines(m)[0][0]) == len(split_lines(m)[1]) for m in made)
    # n, then n lines: lines copied or dropped with n
    shape = observe(["3\na\nb\nc\n", "1\nd\n"])
    made = {m for _ in range(200) if (m := mutate("3\na\nb\nc\n", shape, rng))}
    assert any(len(split_lines(m)) != 4 for m in made)
    assert all(int(split_lines(m)[0][0]) == len(split_lines(m)) - 1 for m in made)


def test_candidates_are_seeded_new_and_distinct():
    inputs = ["3\n1 5 9\n", "2\n4 4\n"]
    a = candidate_inputs(inputs, 10, random.Random(7), set(inputs))
    b = candidate_inputs(inputs, 10, random.Random(7), set(inputs))
    assert a == b and len(a) == len(set(a)) == 10
    assert not set(a) & set(inputs)
    assert candidate_inputs([], 5, random.Random(0), set()) == []
    # nothing to mutate: as many as can be found, no endless loop
    assert candidate_inputs(["7\n"], 5, random.Random(0), {"7\n"}) == []


def test_is_int():
    assert is_int("-12") and is_int("0") and not is_int("1.5") and not is_int("1" * 19)


def test_choose_tests_kills_survivors_first():
    kills = [frozenset(), frozenset({0}), frozenset({1, 2}), frozenset({2}), frozenset({0, 1, 2})]
    # survivors 1 and 2: test 2 or 4 kills both; 4 also kills 0: more in all
    assert choose_tests(kills, {1, 2}, 1) == [4]
    assert choose_tests(kills, {1, 2}, 3) == [4, 2, 1]
    assert choose_tests(kills, set(), 2) == [4, 2]
    assert choose_tests([], {0}, 3) == []


def verdict(*statuses: Status, total: int | None = None) -> Verdict:
    tests = [TestResult(s) for s in statuses]
    ok = all(s is Status.ACCEPTED for s in statuses)
    return Verdict(
        Status.ACCEPTED if ok else statuses[0], total=len(tests) if total is None else total, tests=tests
    )


def test_a_test_is_kept_only_when_every_correct_solution_agrees():
    a, w = Status.ACCEPTED, Status.WRONG_ANSWER
    good = [verdict(a, a, w), verdict(a, Status.TIME_LIMIT, a)]
    assert disagreement(good, 0) is None
    assert "limit" in disagreement(good, 1)
    assert "differs from the reference" in disagreement(good, 2)
    assert "sandbox" in disagreement([verdict(a, total=3)], 0)  # a verdict cut short: nothing verified
    assert killed(verdict(a, w), 1) and not killed(verdict(a, w), 0)
    assert not killed(verdict(a, total=2), 0)


def run(index: int, status: str, flaw: str = "", failures: dict | None = None) -> SolutionRun:
    return SolutionRun(index, "cpp", status, 3 if status == "ACCEPTED" else 1, 3, failures or {}, flaw)


def test_report_names_survivors_and_why():
    a = ProblemAudit("p", "starter", 3)
    a.correct = [run(0, "ACCEPTED"), run(1, "WRONG_ANSWER", failures={"WRONG_ANSWER": 2})]
    a.incorrect = [run(0, "ACCEPTED", "32-bit overflow"), run(1, "ACCEPTED"), run(2, "COMPILE_ERROR")]
    a.augment = AugmentStats(candidates=24, verified=20, added=2, survivors_after=[1])
    flags = a.flags()
    assert flags[0].startswith("correct solution 1 (cpp) fails: 2 x WRONG_ANSWER wrong answer")
    assert (
        "incorrect solution 0 (cpp) passes all 3 tests: 32-bit overflow; killed by a generated test" in flags
    )
    assert "incorrect solution 1 (cpp) passes all 3 tests; still passes the generated tests" in flags
    skipped = ProblemAudit("q", "starter", 0, skipped="no tests")
    s = summary([a, skipped])["starter"]
    assert (s["problems"], s["audited"], s["skipped"]) == (2, 1, {"no tests": 1})
    assert (s["broken"], s["weak"], s["incorrect"], s["incorrect_passing"]) == (1, 1, 3, 2)
    assert (s["incorrect_not_compiling"], s["tests_added"], s["incorrect_passing_after"]) == (1, 2, 1)
    assert s["correct_failures"] == {"WRONG_ANSWER": 2}
