"""The starter set's recorded split: complete, disjoint, balanced, and no near-copy across splits."""

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from codefu.data.near_duplicates import (
    code_tokens,
    cross_split_pairs,
    families,
    near_duplicate_pairs,
    statement_words,
    token_edits,
)
from codefu.data.starter import load_starter_records, starter_split

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def records():
    return load_starter_records()


@pytest.fixture(scope="module")
def pairs(records):
    return near_duplicate_pairs(
        {r["name"]: r["solutions"]["python"] for r in records}, {r["name"]: r["statement"] for r in records}
    )


def test_split_covers_every_problem_once_in_three_parts(records):
    split = starter_split()
    assert list(split) == ["train", "validation", "test"]
    names = [n for part in split.values() for n in part]
    assert Counter(names).most_common(1)[0][1] == 1
    assert set(names) == {r["name"] for r in records}
    shares = {part: len(v) / len(names) for part, v in split.items()}
    assert 0.2 <= shares["test"] <= 0.32 and 0.12 <= shares["validation"] <= 0.22


def test_no_near_copy_crosses_splits(pairs):
    # fails when a new problem is a near-copy of one in another split: rerun tools/starter/split.py
    crossing = cross_split_pairs(starter_split(), pairs)
    assert not crossing, f"near-copies in different splits (rerun tools/starter/split.py): {crossing}"


def test_the_recorded_file_is_what_the_tool_writes(records):
    sys.path.insert(0, str(ROOT / "tools" / "starter"))
    try:
        import split as split_tool
    finally:
        sys.path.pop(0)
    assert split_tool.split(records, seed=0) == starter_split()


def test_every_evaluation_split_holds_levels_and_small_families(records, pairs):
    split = starter_split()
    level = {r["name"]: r.get("extra", {}).get("level", 0) for r in records}
    for part in ("validation", "test"):
        assert len({level[n] for n in split[part]}) >= 4, part
    names = [r["name"] for r in records]
    where = {n: part for part, ns in split.items() for n in ns}
    for family in families(names, pairs):
        if len(family) > 3:
            assert {where[n] for n in family} == {"train"}, family


def test_the_near_copies_the_review_found_are_caught(pairs):
    linked = {frozenset((p.a, p.b)) for p in pairs}
    for a, b in [
        ("is-odd", "is-even"),
        ("first-letter", "last-letter"),
        ("double-number", "square-number"),
        ("uppercase-word", "lowercase-word"),
        ("max-of-two", "min-of-two"),
    ]:
        assert frozenset((a, b)) in linked, (a, b)
    # different ideas are not linked
    for a, b in [
        ("factorial", "sum-1-to-n"),
        ("is-prime", "count-divisors"),
        ("reverse-string", "count-vowels"),
    ]:
        assert frozenset((a, b)) not in linked, (a, b)


def test_token_distance_ignores_layout_and_comments_and_is_bounded():
    a = code_tokens("n = int(input())  # read\nprint(n * n)\n")
    b = code_tokens("n=int( input() )\n\n\nprint(n*n)")
    assert a == b and token_edits(a, b, 3) == 0
    c = code_tokens("n = int(input())\nprint(n * 10)\n")
    assert token_edits(a, c, 3) == 1
    assert token_edits(a, code_tokens("import sys\nprint(sum(map(int, sys.stdin.read().split())))"), 3) == 4
    assert code_tokens('s = "# not a comment"', "python") == ["s", "=", '"# not a comment"']
    assert code_tokens("int a = b / c; // half\n/* x */ a++;", "cpp") == [
        "int",
        "a",
        "=",
        "b",
        "/",
        "c",
        ";",
        "a",
        "+",
        "+",
        ";",
    ]
    with pytest.raises(ValueError, match="language must be one of"):
        code_tokens("x", "rust")


def test_statement_words_drop_examples_and_fold_numbers():
    words = statement_words("# T\n\nPrint 42 if n is odd.\n\n## Examples\n\nInput: 3\n")
    assert words == ["#", "t", "print", "0", "if", "n", "is", "odd", "."]


def test_split_tool_pairs_lists_and_writes_nothing(tmp_path):
    before = (ROOT / "codefu" / "data" / "starter" / "split.json").read_bytes()
    out = subprocess.run(
        [sys.executable, "tools/starter/split.py", "--pairs"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "is-odd" in out and "token edits" in out
    assert (ROOT / "codefu" / "data" / "starter" / "split.json").read_bytes() == before
    json.loads(before)
