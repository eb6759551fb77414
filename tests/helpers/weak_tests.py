"""Problems made to have weak tests, for the test audit's tests: each keeps only the tests that every one
of its known-incorrect solutions passes, so they all survive the problem's own tests (and augmentation
has something to kill)."""

import json
from dataclasses import replace
from pathlib import Path

from codefu.data.solutions import solutions_of
from codefu.judge.audit import as_response
from codefu.types import Problem, Status

SOLUTIONS = Path(__file__).resolve().parents[1] / "data" / "codefu_easy_solutions.json"


def weakened(problems: list[Problem], judge) -> list[Problem]:
    """`problems` with only the tests all their incorrect solutions pass (the judge must run every test:
    codefu.judge.audit.audit_judge_config); a problem left with none, or without an incorrect solution,
    is left out."""
    items, owners = [], []
    for k, p in enumerate(problems):
        for s in solutions_of(p)[1]:
            items.append((p, as_response(s)))
            owners.append(k)
    passed: dict[int, set[int]] = {}
    for i, v in judge.judge_many(items):
        ok = {t for t, r in enumerate(v.tests) if r.status is Status.ACCEPTED and len(v.tests) == v.total}
        passed[owners[i]] = passed.get(owners[i], ok) & ok
    out = []
    for k, p in enumerate(problems):
        keep = passed.get(k, set())
        n_public = len(p.public_tests)
        public = [t for i, t in enumerate(p.public_tests) if i in keep]
        private = [t for i, t in enumerate(p.private_tests) if i + n_public in keep]
        if public or private:
            out.append(replace(p, public_tests=public, private_tests=private))
    return out


def codefu_easy_with_solutions(codefu_easy: Path) -> list[Problem]:
    """The CodeContests problems of tests/data/codefu_easy_solutions.json, each with its correct and its
    incorrect solution in extra, as problems JSONL and a CodeContests row would give them."""
    from codefu.data.loader import load_problems

    problems = load_problems(codefu_easy / "train.parquet")
    out = []
    for s in json.loads(SOLUTIONS.read_text()):
        p = problems[s["index"]]
        assert p.name == s["name"]
        extra = {
            **p.extra,
            "solutions": [{"language": s["language"], "source": s["correct"]}],
            "wrong_solutions": [{"language": s["language"], "source": s["wrong"], "flaw": s["flaw"]}],
        }
        out.append(replace(p, extra=extra))
    return out


def thinned(problems: list[Problem], keep: int, seed: int) -> list[Problem]:
    """`problems` with their public tests and `keep` of their private tests (a seeded sample, in order):
    most tests dropped, as weak datasets have them."""
    import random

    out = []
    for p in problems:
        rng = random.Random(f"{seed}:{p.name}")
        chosen = sorted(rng.sample(range(len(p.private_tests)), min(keep, len(p.private_tests))))
        out.append(replace(p, private_tests=[p.private_tests[i] for i in chosen]))
    return out
