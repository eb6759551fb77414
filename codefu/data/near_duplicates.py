"""Near-duplicate problems: pairs whose reference solutions or statements are almost the same.

A held-out problem that is a near-copy of a training problem (is-odd beside is-even, first-letter beside
last-letter) measures recall, not generalisation: on the earlier starter split such held-out problems
passed 2.0-4.8x as often as the others in five of six evaluations (tools/starter/near_copy_evidence.py).
Splits therefore keep each family of near-copies on one side: `families` joins problems linked by either
test below, and tools/starter/split.py assigns whole families.

Two problems are near-copies when
- their reference solutions differ by at most `max_token_edits` tokens (edit distance over the code's
  tokens: names, numbers, strings, operators; comments and layout ignored), or
- their statements, with the examples cut off, numbers folded to 0 and case folded, match by at least
  `min_statement_ratio` (difflib's ratio over words).

Pairwise and quadratic: meant for sets of hundreds of problems (the starter set: ~1 s for 130).
"""

from __future__ import annotations

import difflib
import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

MAX_TOKEN_EDITS = 3
"""Solutions this close are one small change apart (n * n / n * 10, s[0] / s[-1], x > 0 / x % 2 == 0).
At 3, the starter set's families stay small (the largest: 12 one-integer expressions); at 4, unrelated
one-liners such as print(len(input())) and print(input().count('a')) start to join."""
MIN_STATEMENT_RATIO = 0.9
"""Statements this alike differ in a word or two (odd / even, first / last, maximum / minimum); the
closest pairs below it on the starter set (0.87-0.89) share only the input-format boilerplate."""

_COMMENT = {"python": r"#[^\n]*", "cpp": r"//[^\n]*|/\*.*?\*/"}
_TOKEN = (
    r"[A-Za-z_]\w*|\d+(?:\.\d+)?|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])*'"
    r"|==|!=|<=|>=|//|\*\*|->|<<|>>|\+=|-=|\*=|/=|&&|\|\||::|\S"
)


def code_tokens(source: str, language: str = "python") -> list[str]:
    """The source's tokens without comments or whitespace (a lexer good enough to compare programs)."""
    if language not in _COMMENT:
        raise ValueError(f"code_tokens: language must be one of {sorted(_COMMENT)}, got {language!r}")
    pattern = re.compile(f"(?P<comment>{_COMMENT[language]})|{_TOKEN}", re.DOTALL)
    return [m.group(0) for m in pattern.finditer(source) if m.lastgroup != "comment"]


def token_edits(a: Sequence[str], b: Sequence[str], bound: int) -> int:
    """Levenshtein distance between two token lists, or bound + 1 once it must exceed `bound`."""
    if abs(len(a) - len(b)) > bound:
        return bound + 1
    previous = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        current = [i]
        for j, y in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (x != y)))
        if min(current) > bound:
            return bound + 1
        previous = current
    return min(previous[-1], bound + 1)


def statement_words(statement: str) -> list[str]:
    """The statement before its examples, lower-cased, numbers folded to 0, as words and symbols."""
    text = re.split(r"^#+\s*Examples?\b", statement, maxsplit=1, flags=re.MULTILINE | re.IGNORECASE)[0]
    return ["0" if w.isdigit() else w for w in re.findall(r"[a-z]+|\d+|[^\sa-z\d]", text.lower())]


def statement_ratio(a: Sequence[str], b: Sequence[str]) -> float:
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


@dataclass(frozen=True)
class NearDuplicate:
    a: str
    b: str
    token_edits: int | None
    """The solutions' edit distance when it is within the bound, else None."""
    statement_ratio: float


def near_duplicate_pairs(
    solutions: Mapping[str, str],
    statements: Mapping[str, str],
    *,
    language: str = "python",
    max_token_edits: int = MAX_TOKEN_EDITS,
    min_statement_ratio: float = MIN_STATEMENT_RATIO,
) -> list[NearDuplicate]:
    """Every pair of problems (by name, in the mapping's order) that is a near-copy by either test."""
    if set(solutions) != set(statements):
        missing = sorted(set(solutions) ^ set(statements))
        raise ValueError(f"near_duplicate_pairs: solutions and statements name different problems: {missing}")
    tokens = {name: code_tokens(src, language) for name, src in solutions.items()}
    words = {name: statement_words(text) for name, text in statements.items()}
    pairs = []
    for a, b in itertools.combinations(solutions, 2):
        edits = token_edits(tokens[a], tokens[b], max_token_edits)
        ratio = statement_ratio(words[a], words[b])
        if edits <= max_token_edits or ratio >= min_statement_ratio:
            pairs.append(NearDuplicate(a, b, edits if edits <= max_token_edits else None, round(ratio, 3)))
    return pairs


def families(names: Sequence[str], pairs: Sequence[NearDuplicate]) -> list[list[str]]:
    """The connected groups of near-copies (a problem with none is a family of one), each in the order of
    `names`, ordered by their first member."""
    parent = {n: n for n in names}

    def root(n: str) -> str:
        while parent[n] != n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for p in pairs:
        parent[root(p.a)] = root(p.b)
    groups: dict[str, list[str]] = {}
    for n in names:
        groups.setdefault(root(n), []).append(n)
    return list(groups.values())


def cross_split_pairs(
    split: Mapping[str, Sequence[str]], pairs: Sequence[NearDuplicate]
) -> list[NearDuplicate]:
    """The near-copy pairs whose problems sit in different splits."""
    where = {name: part for part, names in split.items() for name in names}
    return [p for p in pairs if p.a in where and p.b in where and where[p.a] != where[p.b]]
