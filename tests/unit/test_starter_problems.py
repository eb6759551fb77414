"""Shape of the starter problem set (codefu/data/starter/problems.jsonl). Fast: nothing is compiled.

The judge-based check that runs every reference and wrong solution lives elsewhere; tools/starter/
validate.py does the same with plain subprocess.
"""

from __future__ import annotations

import json
import re

import pytest

from codefu.data.loader import load_problems
from codefu.data.starter import load_starter_problems, load_starter_records, starter_path
from codefu.types import Problem, TestCase

MAX_TEST_BYTES = 200 * 1024
MAX_SET_BYTES = 4 * 1024 * 1024
LARGE_TEST_BYTES = 1000  # a private test at least this big (input + output) counts as large ...
LARGE_NUMBER_DIGITS = 9  # ... and so does one holding a number near the limits of a scalar problem
LEVELS = (1, 2, 3, 4, 5)  # the ladder's levels 1-4 and the middle level 5 (extra.level)
MIN_PER_LEVEL = 5


@pytest.fixture(scope="module")
def records() -> list[dict]:
    return load_starter_records()


@pytest.fixture(scope="module")
def problems() -> list[Problem]:
    return load_starter_problems()


def _size(t: dict) -> int:
    return len(t["input"].encode()) + len(t["output"].encode())


def test_file_exists_and_is_small():
    path = starter_path()
    assert path.is_file()
    assert path.stat().st_size <= MAX_SET_BYTES


def test_count_and_unique_names(records):
    assert len(records) >= 40
    names = [r["name"] for r in records]
    assert len(set(names)) == len(names)
    for n in names:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", n), n
    assert [(a, b) for a in names for b in names if a != b and b.startswith(a)] == []  # prefix-free


def test_every_line_is_json(records):
    text = starter_path().read_text(encoding="utf-8")
    lines = [s for s in text.splitlines() if s.strip()]
    assert len(lines) == len(records)
    for s in lines:
        assert isinstance(json.loads(s), dict)


def test_fields(records):
    keys = {
        "name",
        "statement",
        "rating",
        "time_limit_s",
        "memory_limit_bytes",
        "public_tests",
        "private_tests",
        "solutions",
        "wrong_solutions",
    }
    for r in records:
        assert keys <= set(r) <= keys | {"extra"}, r["name"]
        assert r["rating"] == 800
        assert r["time_limit_s"] in (1.0, 2.0)
        assert r["memory_limit_bytes"] == 256 * 1024 * 1024


def test_statement_sections(records):
    for r in records:
        st = r["statement"]
        for section in ("## Input", "## Output", "## Constraints", "## Example"):
            assert section in st, (r["name"], section)
        # every public test is shown in the statement
        for t in r["public_tests"]:
            assert t["input"].strip() in st, r["name"]
            assert t["output"].strip() in st, r["name"]


def test_tests(records):
    for r in records:
        assert 1 <= len(r["public_tests"]) <= 2, r["name"]
        assert len(r["private_tests"]) >= 10, r["name"]
        for t in r["public_tests"] + r["private_tests"]:
            assert set(t) == {"input", "output"}, r["name"]
            assert isinstance(t["input"], str) and isinstance(t["output"], str)
            assert t["input"].endswith("\n"), r["name"]
            assert t["output"].split(), (r["name"], "empty expected output")
            assert _size(t) <= MAX_TEST_BYTES, r["name"]


def _is_large(t: dict) -> bool:
    if _size(t) >= LARGE_TEST_BYTES:
        return True
    tokens = (t["input"] + " " + t["output"]).split()
    return any(len(x.lstrip("-")) >= LARGE_NUMBER_DIGITS and x.lstrip("-").isdigit() for x in tokens)


def test_has_large_test(records):
    for r in records:
        assert any(_is_large(t) for t in r["private_tests"]), r["name"]


def test_solutions(records):
    for r in records:
        sol = r["solutions"]
        assert set(sol) == {"cpp", "python"}, r["name"]
        assert "int main" in sol["cpp"], r["name"]
        assert "print" in sol["python"], r["name"]
        assert r["wrong_solutions"], r["name"]
        for w in r["wrong_solutions"]:
            assert w["language"] in ("cpp", "python"), r["name"]
            assert w["source"].strip() and w["source"] not in sol.values(), r["name"]
            assert w["flaw"].strip() and "\n" not in w["flaw"], r["name"]


def test_loader(problems, records):
    assert len(problems) == len(records)
    for p, r in zip(problems, records, strict=True):
        assert isinstance(p, Problem)
        assert p.name == r["name"]
        assert p.source == "starter"
        assert p.preferred_language == "python"
        assert p.rating == 800
        assert all(isinstance(t, TestCase) for t in p.public_tests + p.private_tests)
        assert len(p.private_tests) == len(r["private_tests"])
        assert set(p.extra["solutions"]) == {"cpp", "python"}
        assert p.extra["wrong_solutions"] == r["wrong_solutions"]
        assert p.extra.get("level") == r.get("extra", {}).get("level")


def _level(r: dict) -> int | None:
    return r.get("extra", {}).get("level")


def test_levels(records):
    """The original problems have no level; the ladder (levels 1-4) and the middle level (5) follow them."""
    for r in records:
        if "extra" in r:
            assert set(r["extra"]) == {"level"}, r["name"]
            assert type(r["extra"]["level"]) is int and r["extra"]["level"] in LEVELS, r["name"]
    levels = [_level(r) for r in records]
    first = next(i for i, lv in enumerate(levels) if lv is not None)
    assert first >= 40 and None not in levels[first:]  # the ladder is appended after the original set
    for lv in LEVELS:
        assert levels.count(lv) >= MIN_PER_LEVEL, lv


def test_jsonl_loader_reads_the_file(records):
    """The file is also valid problems-JSONL (load_problems rejects unknown fields), level included."""
    problems = load_problems(starter_path())
    assert [p.name for p in problems] == [r["name"] for r in records]
    for p, r in zip(problems, records, strict=True):
        assert p.extra.get("level") == _level(r)
        assert len(p.public_tests) == len(r["public_tests"]) and len(p.private_tests) == len(
            r["private_tests"]
        )
