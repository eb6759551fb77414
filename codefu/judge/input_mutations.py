"""New test inputs from a problem's own, by mutations that keep their shape (pure functions of a seeded
`random.Random`), and the greedy choice of the ones that kill the most surviving wrong programs: the
test audit's generator (codefu.judge.audit runs and verifies what this proposes).

An input is read as lines of whitespace-separated tokens. `observe` records what the inputs show: the
range of the integers, the lengths of lists, the alphabet of words; a mutation moves one integer within or
to the edge of its range, resizes a list whose length a count in front of it gives (and the count with it),
reorders, duplicates or pushes a list to its extremes, or changes a word within its alphabet. Counts
(`protected`) are never moved alone.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

MAX_INT_DIGITS = 18  # longer digit runs are not numbers a mutation should move (ids, big-number strings)
_INT = re.compile(rf"-?\d{{1,{MAX_INT_DIGITS}}}")


def split_lines(text: str) -> list[list[str]]:
    """Input text as lines of whitespace-separated tokens (trailing blank lines dropped)."""
    lines = [line.split() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def join_lines(lines: list[list[str]]) -> str:
    return "".join(" ".join(line) + "\n" for line in lines)


def is_int(token: str) -> bool:
    return _INT.fullmatch(token) is not None


def slot_of(lines: list[list[str]], i: int, j: int) -> tuple[int, int]:
    """Where a token's range is kept: its (line, column) on short lines (parameters), its line on lines
    of more than 3 tokens (lists, whose length varies from input to input)."""
    return (i, j if len(lines[i]) <= 3 else -1)


@dataclass
class Shape:
    """What the existing inputs of a problem say about their integers: the range of each slot and of all."""

    ranges: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)
    low: int = 0
    high: int = 0

    def range_of(self, slot: tuple[int, int]) -> tuple[int, int]:
        return self.ranges.get(slot, (self.low, self.high))


def observe(inputs: list[str]) -> Shape:
    shape, seen = Shape(), []
    for text in inputs:
        lines = split_lines(text)
        for i, line in enumerate(lines):
            for j, tok in enumerate(line):
                if is_int(tok):
                    v, slot = int(tok), slot_of(lines, i, j)
                    lo, hi = shape.ranges.get(slot, (v, v))
                    shape.ranges[slot] = (min(lo, v), max(hi, v))
                    seen.append(v)
    if seen:
        shape.low, shape.high = min(seen), max(seen)
    return shape


def counted_lists(lines: list[list[str]]) -> dict[tuple[int, int], int]:
    """{(line, column) of a count: the line it counts}: an integer k, first on its line, whose next line
    holds exactly k tokens (n, then a1..an): a mutation keeps the two consistent."""
    out = {}
    for i in range(len(lines) - 1):
        if lines[i] and is_int(lines[i][0]) and int(lines[i][0]) == len(lines[i + 1]) >= 1:
            out[(i, 0)] = i + 1
    return out


def protected(lines: list[list[str]]) -> set[tuple[int, int]]:
    """Tokens no value mutation touches: counts of lists, and a lone integer on the first line that
    matches the number of lines after it (t test cases, or n lines of a list)."""
    keep = set(counted_lists(lines))
    if lines and len(lines[0]) == 1 and is_int(lines[0][0]) and int(lines[0][0]) == len(lines) - 1:
        keep.add((0, 0))
    return keep


def _pick_value(rng: random.Random, lo: int, hi: int) -> int:
    """An edge of [lo, hi] (or one step inside it) half the time, else anywhere in it."""
    if rng.random() < 0.5:
        return rng.choice([lo, hi, min(lo + 1, hi), max(hi - 1, lo)])
    return rng.randint(lo, hi)


def _list_lines(lines: list[list[str]]) -> list[int]:
    return [i for i, line in enumerate(lines) if len(line) >= 2]


def _value(lines: list[list[str]], shape: Shape, rng: random.Random) -> bool:
    """An integer (not a count) moved within the range seen at its place, or to an edge of it."""
    keep = protected(lines)
    ints = [(i, j) for i, line in enumerate(lines) for j, t in enumerate(line) if is_int(t)]
    if not (movable := [p for p in ints if p not in keep]):
        return False
    i, j = rng.choice(movable)
    lines[i][j] = str(_pick_value(rng, *shape.range_of(slot_of(lines, i, j))))
    return True


def _resize(lines: list[list[str]], shape: Shape, rng: random.Random) -> bool:
    """A counted list (n, then n tokens) or n lines after a leading n: a new n within the counts seen,
    the list remade from values in its range (or its own tokens), lines copied or dropped."""
    if counts := counted_lists(lines):
        (i, j), target = rng.choice(sorted(counts.items()))
        lo, hi = shape.range_of(slot_of(lines, i, j))
        n = _pick_value(rng, max(lo, 1), max(hi, 1))
        old = lines[target]
        if all(is_int(t) for t in old):
            vlo, vhi = shape.range_of(slot_of(lines, target, 0))
            lines[target] = [str(_pick_value(rng, vlo, vhi)) for _ in range(n)]
        else:
            lines[target] = [rng.choice(old) for _ in range(n)]
        lines[i][j] = str(n)
        return True
    if (0, 0) in protected(lines) and len(lines) > 1:  # n, then n lines
        lo, hi = shape.range_of((0, 0))
        body = lines[1:]
        n = _pick_value(rng, max(lo, 1), max(hi, 1))
        lines[1:] = [list(rng.choice(body)) for _ in range(n)]
        lines[0] = [str(n)]
        return True
    return False


def _list(lines: list[list[str]], shape: Shape, rng: random.Random) -> bool:
    """A line of 2+ tokens sorted, reversed or shuffled; made of duplicates; or all at an extreme."""
    if not (rows := _list_lines(lines)):
        return False
    i = rng.choice(rows)
    line = lines[i]
    how = rng.choice(["sort", "desc", "reverse", "shuffle", "same", "repeat", "extreme"])
    numeric = all(is_int(t) for t in line)
    if how in ("sort", "desc"):
        line.sort(key=(lambda t: int(t)) if numeric else None, reverse=how == "desc")
    elif how == "reverse":
        line.reverse()
    elif how == "shuffle":
        rng.shuffle(line)
    elif how == "same":
        lines[i] = [rng.choice(line)] * len(line)
    elif how == "repeat":
        k = rng.randrange(len(line))
        line[k] = line[(k + 1) % len(line)]
    elif numeric:
        lines[i] = [str(rng.choice(shape.range_of(slot_of(lines, i, 0))))] * len(line)
    else:
        return False
    return True


def _char_edges(c: str) -> list[str]:
    """The edges of a character's class (a/z, A/Z, 0/9), or the character itself (punctuation)."""
    for lo, hi in (("a", "z"), ("A", "Z"), ("0", "9")):
        if lo <= c <= hi:
            return [lo, hi]
    return [c]


def _word(lines: list[list[str]], shape: Shape, rng: random.Random) -> bool:
    """A word (a token that is not an integer) changed within its alphabet: the characters of one class
    (lowercase, uppercase, digits, or one punctuation mark) shuffled among their places, one set to another
    of its class or to an edge of its class (a/z, A/Z, 0/9); or, on a line of words no count refers to, a
    word repeated or dropped."""
    words = [(i, j) for i, line in enumerate(lines) for j, t in enumerate(line) if not is_int(t)]
    if not words:
        return False
    i, j = rng.choice(words)
    chars = list(lines[i][j])
    how = rng.choice(["shuffle", "copy", "edge", "line"])
    k = rng.randrange(len(chars))
    if how == "shuffle":  # among the places of one class: "10:00" stays dd:dd
        places = [at for at, c in enumerate(chars) if _char_edges(c) == _char_edges(chars[k])]
        picked = [chars[at] for at in places]
        rng.shuffle(picked)
        for at, c in zip(places, picked, strict=True):
            chars[at] = c
    elif how == "copy":  # another of its characters of the same class (a letter for a letter, ...)
        chars[k] = rng.choice([c for c in chars if _char_edges(c) == _char_edges(chars[k])])
    elif how == "edge":
        chars[k] = rng.choice(_char_edges(chars[k]))
    elif i not in counted_lists(lines).values() and not any(is_int(t) for t in lines[i]):
        if len(lines[i]) > 1 and rng.random() < 0.5:
            del lines[i][j]
        else:
            lines[i].insert(j, lines[i][j])
        return True
    else:
        return False
    lines[i][j] = "".join(chars)
    return True


MUTATIONS = (_value, _value, _resize, _list, _word)


def mutate(text: str, shape: Shape, rng: random.Random) -> str | None:
    """One shape-keeping mutation of an input (a kind drawn from MUTATIONS), or None where the kind drawn
    does not apply or changes nothing."""
    lines = split_lines(text)
    if not rng.choice(MUTATIONS)(lines, shape, rng):
        return None
    out = join_lines(lines)
    return out if out != join_lines(split_lines(text)) else None


def candidate_inputs(inputs: list[str], count: int, rng: random.Random, exclude: set[str]) -> list[str]:
    """Up to `count` new distinct inputs, each one to three mutations of an existing input (tries 20 x
    `count` at most); none of `exclude` (inputs the problem has, or was already offered)."""
    if not inputs:
        return []
    shape, out, seen = observe(inputs), [], set(exclude)
    for _ in range(20 * count):
        if len(out) >= count:
            break
        text: str | None = rng.choice(inputs)
        for _ in range(rng.randint(1, 3)):
            text = mutate(text, shape, rng) or text
        assert text is not None
        key = join_lines(split_lines(text))
        if key not in seen:
            seen.add(key)
            out.append(text)
    return out


def choose_tests(kills: list[frozenset[int]], survivors: set[int], n: int) -> list[int]:
    """Indices of at most `n` verified candidates, greedily: each next one kills the most incorrect
    solutions that every test chosen so far still lets through (starting from `survivors`, those that
    pass the problem's own tests), then the most incorrect solutions in all, then the earliest."""
    left, chosen = set(survivors), []
    remaining = list(range(len(kills)))
    while remaining and len(chosen) < n:
        best = max(remaining, key=lambda i: (len(kills[i] & left), len(kills[i]), -i))
        chosen.append(best)
        remaining.remove(best)
        left -= kills[best]
    return chosen
