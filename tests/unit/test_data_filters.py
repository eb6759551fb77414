"""Filters one by one, hidden-test selection, duplicates and bucket edges (no files involved)."""

from __future__ import annotations

import pytest

from codefu.data import filters as F
from codefu.data.config import Bucket, PrepareConfig, parse_buckets, rating_bucket
from codefu.data.prepare import bucket_of
from codefu.data.raw import RawProblem
from codefu.errors import CodefuError
from codefu.types import CheckerSpec, Problem
from codefu.types import TestCase as Case

STATEMENT = "Given two integers a and b, print their sum. Input: one line. Output: one integer."


def raw(**kw) -> RawProblem:
    generated = kw.pop("generated", [])
    files = {k: kw.pop(k) for k in ("input_file", "output_file") if k in kw}
    p = Problem(
        name=kw.pop("name", "1_A. Sum"),
        statement=kw.pop("statement", STATEMENT),
        public_tests=kw.pop("public_tests", [Case("1 2\n", "3\n")]),
        private_tests=kw.pop("private_tests", [Case("2 2\n", "4\n")]),
        time_limit_s=kw.pop("time_limit_s", 2.0),
        memory_limit_bytes=kw.pop("memory_limit_bytes", 256_000_000),
        rating=kw.pop("rating", 800),
        checker=kw.pop("checker", None),
    )
    assert not kw, kw
    return RawProblem(p, "train", p.name, "x, row 0", generated, **files)


CFG = PrepareConfig()


def test_a_clean_problem_passes_every_filter():
    assert F.first_reason(raw(), CFG) is None


@pytest.mark.parametrize(
    "problem, reason",
    [
        (raw(statement=""), "bad_description"),
        (raw(statement="   \n "), "bad_description"),
        (raw(statement="too short"), "bad_description"),
        (raw(statement=STATEMENT + "\ufffd"), "bad_description"),
        (raw(statement=STATEMENT * 2000), "bad_description"),
        (raw(input_file="input.txt"), "file_io"),
        (raw(output_file="output.txt"), "file_io"),
        (raw(time_limit_s=0.0), "bad_limits"),
        (raw(time_limit_s=61.0), "bad_limits"),
        (raw(memory_limit_bytes=0), "bad_limits"),
        (raw(memory_limit_bytes=17 << 30), "bad_limits"),
        (raw(rating=None), "missing_rating"),
        (raw(rating=799), "rating_too_low"),
        (raw(private_tests=[]), "no_private_tests"),
        (raw(statement=STATEMENT + " If there are multiple answers, print any of them."), "multiple_answers"),
    ],
)
def test_each_filter_names_its_reason(problem, reason):
    assert F.first_reason(problem, CFG) == reason


def test_limits_at_the_edges_are_kept():
    assert F.bad_limits(raw(time_limit_s=60.0, memory_limit_bytes=1 << 20), CFG) is None
    assert F.bad_limits(raw(time_limit_s=0.5, memory_limit_bytes=16 << 30), CFG) is None


def test_rating_edges_and_unrated_switch():
    assert F.rating(raw(rating=800), CFG) is None
    assert F.rating(raw(rating=None), PrepareConfig(keep_unrated=True)) is None
    assert F.rating(raw(rating=900), PrepareConfig(min_rating=1000)) == "rating_too_low"


@pytest.mark.parametrize(
    "sentence",
    [
        "If there are multiple answers, print any of them.",
        "If there are several solutions, output any.",
        "If there are many possible answers, you may print any.",
        "Print any valid answer.",
        "Output any good permutation of length n.",
        "If there exist multiple optimal solutions, print any of them.",
    ],
)
def test_multiple_answer_phrases(sentence):
    assert F.multiple_answers(raw(statement=f"{STATEMENT} {sentence}"), CFG) == "multiple_answers"


@pytest.mark.parametrize(
    "sentence",
    [
        "You may print every letter in any case you want.",
        "You can perform the operation any number of times.",
        "Choose any two adjacent cells and swap them.",
        "It is guaranteed that the answer is unique.",
    ],
)
def test_single_answer_phrases_are_not_flagged(sentence):
    assert F.multiple_answers(raw(statement=f"{STATEMENT} {sentence}"), CFG) is None


def test_a_checker_keeps_a_multiple_answer_problem():
    text = STATEMENT + " If there are multiple answers, print any of them."
    assert F.multiple_answers(raw(statement=text, checker=CheckerSpec("python", "m:f")), CFG) is None


def tc(i: int, size: int = 4) -> Case:
    return Case(f"{i}".ljust(size, " "), f"{i}\n")


def test_hidden_tests_private_then_generated_capped_and_deduplicated():
    r = raw(private_tests=[tc(1), tc(2), tc(1)], generated=[tc(3), tc(4), tc(5)])
    assert F.select_hidden_tests(r, CFG) == [tc(1), tc(2)]
    with_gen = PrepareConfig(include_generated=True, max_tests=4)
    assert F.select_hidden_tests(r, with_gen) == [tc(1), tc(2), tc(3), tc(4)]


def test_oversized_tests_are_left_out_or_drop_the_problem():
    cfg = PrepareConfig(max_test_bytes=100)
    r = raw(private_tests=[tc(1, 200), tc(2)])
    assert F.select_hidden_tests(r, cfg) == [tc(2)]
    assert F.select_hidden_tests(raw(private_tests=[tc(1, 200)]), cfg) is None
    assert F.select_hidden_tests(raw(public_tests=[tc(9, 200)]), cfg) is None


def test_truncated_codecontests_tests_are_left_out():
    cut = Case("3\n", "abc" * 170 + "...")  # as in CodeContests: ~500 characters, then "...", no newline
    grid = Case("2\n..\n...", "...")  # short answers made of dots are real
    assert F.is_truncated(cut) and not F.is_truncated(grid)
    assert not F.is_truncated(Case("3\n", "abc" * 170 + "...\n"))
    assert F.select_hidden_tests(raw(private_tests=[cut, grid, tc(2)]), CFG) == [grid, tc(2)]
    assert F.select_hidden_tests(raw(private_tests=[cut]), CFG) is None


def test_duplicates_by_normalized_statement():
    dedupe = F.Deduplicator()
    assert dedupe(raw(statement=STATEMENT)) is None
    retyped = "  " + STATEMENT.upper().replace(" ", "\n\n").replace(".", " . ")
    assert dedupe(raw(statement=retyped)) == "duplicate"
    assert dedupe(raw(statement=STATEMENT + " Also print a newline.")) is None


@pytest.mark.parametrize(
    "rating, bucket",
    [
        (800, "easy"), (1000, "easy"), (1050, None), (1100, "hard"), (2200, "hard"),
        (2250, None), (2300, "expert"), (3500, "expert"), (3600, None), (None, None),
    ],
)  # fmt: skip
def test_default_bucket_edges(rating, bucket):
    assert bucket_of(rating, CFG) == bucket


def test_rating_bucket_gives_every_rating_the_bucket_at_or_above_it():
    # codefu eval's rule for a dataset without buckets, from the same edges: gaps go up, the ends stay
    ratings = (500, 800, 1000, 1001, 1099, 1100, 2200, 2201, 2300, 3500, 4000)
    names = [rating_bucket(r) for r in ratings]
    assert names == ["easy"] * 3 + ["hard"] * 4 + ["expert"] * 4


def test_bucket_selection_and_custom_ranges():
    assert [b.name for b in parse_buckets("hard,easy")] == ["hard", "easy"]
    custom = parse_buckets("easy,mid", ["mid=1100-1600", "easy=800-900"])
    assert custom == (Bucket("easy", 800, 900), Bucket("mid", 1100, 1600))
    assert bucket_of(None, PrepareConfig(keep_unrated=True)) == "unrated"
    with pytest.raises(CodefuError, match="unknown bucket 'medium'"):
        parse_buckets("easy,medium")
    with pytest.raises(CodefuError, match="NAME=LO-HI"):
        parse_buckets(None, ["mid:1100"])
    with pytest.raises(CodefuError, match="above upper bound"):
        PrepareConfig(buckets=(Bucket("x", 2000, 1000),))
