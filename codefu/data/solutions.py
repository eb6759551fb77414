"""A problem's known-correct and known-incorrect programs, as datasets ship them: reference material for
the test audit (codefu.judge.audit), kept in `Problem.extra["solutions"]` and `extra["wrong_solutions"]`
(CodeContests names the second `incorrect_solutions`).

Shapes read: {"cpp": src, "python": src} (the starter set); [{"language", "source" | "solution", "flaw"}]
(problems JSONL, and what `codefu prepare --keep-solutions` writes to extra_info as JSON); CodeContests'
struct {"language": [2, 3, ...], "solution": [src, ...]}; JSON text of any of them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from codefu.types import LANGUAGES, Language, Problem

# CodeContests' solution languages: 1 Python 2, 2 C++, 3 Python 3, 4 Java; the judge runs C++ and Python 3
SOLUTION_LANGUAGES: dict[int, Language] = {2: "cpp", 3: "python"}
MAX_SOLUTION_CHARS = 64 << 10  # a longer program is not kept by `prepare --keep-solutions`


@dataclass(frozen=True)
class Solution:
    language: Language
    source: str
    flaw: str = ""  # why it is wrong, where the dataset says


def parse_solutions(value: Any) -> tuple[list[Solution], int]:
    """(the solutions the judge can run, how many were left out: another language, an empty source)."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return [], 1
    pairs: list[tuple[Any, Any, str]] = []
    if isinstance(value, dict) and isinstance(value.get("solution"), list):
        langs = value.get("language") or []
        pairs = [(lang, src, "") for lang, src in zip(langs, value["solution"], strict=False)]
    elif isinstance(value, dict):
        pairs = [(lang, src, "") for lang, src in value.items()]
    elif isinstance(value, list):
        pairs = [
            (d.get("language"), d.get("source", d.get("solution")), str(d.get("flaw") or ""))
            if isinstance(d, dict)
            else (None, None, "")
            for d in value
        ]
    out = []
    for lang, src, flaw in pairs:
        lang = SOLUTION_LANGUAGES.get(lang) if isinstance(lang, int) else lang
        if lang in LANGUAGES and isinstance(src, str) and src.strip():
            out.append(Solution(lang, src, flaw))
    return out, len(pairs) - len(out)


def solutions_of(problem: Problem) -> tuple[list[Solution], list[Solution], int]:
    """(correct, incorrect, left out) from problem.extra."""
    correct, left_c = parse_solutions(problem.extra.get("solutions"))
    wrong_value = problem.extra.get("wrong_solutions", problem.extra.get("incorrect_solutions"))
    wrong, left_w = parse_solutions(wrong_value)
    return correct, wrong, left_c + left_w


def kept_solutions(problem: Problem, keep: int) -> dict[str, list[dict[str, str]]]:
    """What `prepare --keep-solutions KEEP` writes: {"solutions": [...], "wrong_solutions": [...]}, each
    the first `keep` the judge can run of at most MAX_SOLUTION_CHARS, as [{language, source[, flaw]}];
    {} for keep 0 or a problem without any."""
    if keep <= 0:
        return {}
    correct, wrong, _ = solutions_of(problem)
    out = {}
    for key, solutions in (("solutions", correct), ("wrong_solutions", wrong)):
        short = [s for s in solutions if len(s.source) <= MAX_SOLUTION_CHARS][:keep]
        if short:
            out[key] = [
                {"language": s.language, "source": s.source, **({"flaw": s.flaw} if s.flaw else {})}
                for s in short
            ]
    return out
