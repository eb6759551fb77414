"""Filters: small named functions, each returning the reason it drops a problem (or None to keep it).

Applied in `FILTERS` order; the first reason wins and is what the report counts. Two steps need more
than one row and live beside the functions: `select_hidden_tests` (which tests the judge runs) and
`Deduplicator` (statements seen before).
"""

from __future__ import annotations

import hashlib
import re
import sys
import unicodedata
from collections.abc import Callable

from codefu.data.config import PrepareConfig
from codefu.data.raw import RawProblem, Unsupported
from codefu.types import TestCase

# Every reason a row can be dropped, in the order the report lists them.
REASONS = (
    "malformed",
    "unsupported",
    "too_old",
    "undated",
    "bad_description",
    "file_io",
    "bad_limits",
    "missing_rating",
    "rating_too_low",
    "no_private_tests",
    "multiple_answers",
    "tests_too_large",
    "no_bucket",
    "duplicate",
)

Filter = Callable[[RawProblem, PrepareConfig], "str | None"]


def unsupported_because(raw: RawProblem, cfg: PrepareConfig) -> Unsupported | None:
    """Why the judge cannot run this problem in this run: the source's reason (interactive problems, ...),
    or a function-call problem when the prompt asks for C++ (the harness is Python-only)."""
    if raw.unsupported is not None:
        return raw.unsupported
    f = raw.problem.function
    if f is not None and cfg.language != "python":
        kind = "function-call problem"
        message = f"{kind} (fn_name={f.entry_point}): judged in Python only (--language python)"
        return Unsupported(kind, message)
    return None


def unsupported(raw: RawProblem, cfg: PrepareConfig) -> str | None:
    """Read fine, but the judge cannot run it (interactive problems; function calls outside Python)."""
    return "unsupported" if unsupported_because(raw, cfg) is not None else None


def date_cut(raw: RawProblem, cfg: PrepareConfig) -> str | None:
    """With `after`: dated before it, or undated (a problem that cannot be placed after the cut)."""
    if not cfg.after:
        return None
    if not raw.date:
        return "undated"
    return "too_old" if raw.date < cfg.after else None


def bad_description(raw: RawProblem, cfg: PrepareConfig) -> str | None:
    """Empty, too short, too long, or with U+FFFD (text lost in an encoding round trip)."""
    text = raw.problem.statement.strip()
    if not cfg.min_description_chars <= len(text) <= cfg.max_description_chars or "\ufffd" in text:
        return "bad_description"
    return None


def file_io(raw: RawProblem, cfg: PrepareConfig) -> str | None:
    """The problem reads or writes a named file instead of stdin/stdout."""
    return "file_io" if raw.input_file.strip() or raw.output_file.strip() else None


def bad_limits(raw: RawProblem, cfg: PrepareConfig) -> str | None:
    """A missing, zero or absurd time or memory limit."""
    p = raw.problem
    time_ok = 0 < p.time_limit_s <= cfg.max_time_limit_s
    memory_ok = cfg.min_memory_bytes <= p.memory_limit_bytes <= cfg.max_memory_bytes
    return None if time_ok and memory_ok else "bad_limits"


def rating(raw: RawProblem, cfg: PrepareConfig) -> str | None:
    """No rating (unless keep_unrated), or a rating below min_rating."""
    r = raw.problem.rating
    if r is None:
        return None if cfg.keep_unrated else "missing_rating"
    return "rating_too_low" if r < cfg.min_rating else None


def no_private_tests(raw: RawProblem, cfg: PrepareConfig) -> str | None:
    """Nothing hidden to judge with (public tests alone are in the statement, so not hidden)."""
    return None if raw.problem.private_tests else "no_private_tests"


MULTIPLE_ANSWERS = re.compile(
    r"if there (?:are|is|exist|exists) (?:multiple|several|many|more than one|a lot of)\b[^.]{0,60}?"
    r"\b(?:answers?|solutions?|ways|possibilities|variants|options|optimal|correct|possible)"
    r"|\b(?:print|output|display) any\b(?! (?:letter|character|case|number of|order\b))"
    r"|\b(?:find|choose) any(?: one)?(?: of them| valid| correct| such| suitable| possible| optimal)"
    r"|\bany (?:valid|correct|possible|optimal) (?:answer|solution|output)"
    r"|\byou (?:may|can|are allowed to) (?:print|output) any",
    re.IGNORECASE,
)


def multiple_answers(raw: RawProblem, cfg: PrepareConfig) -> str | None:
    """The statement accepts several answers: exact comparison cannot judge it without a checker."""
    if raw.problem.checker is not None:
        return None
    return "multiple_answers" if MULTIPLE_ANSWERS.search(raw.problem.statement) else None


FILTERS: tuple[Filter, ...] = (
    unsupported,
    date_cut,
    bad_description,
    file_io,
    bad_limits,
    rating,
    no_private_tests,
    multiple_answers,
)


def first_reason(raw: RawProblem, cfg: PrepareConfig) -> str | None:
    for f in FILTERS:
        reason = f(raw, cfg)
        if reason:
            return reason
    return None


def _size(t: TestCase) -> int:
    return len(t.input.encode()) + len(t.output.encode())


TRUNCATED_MIN_CHARS = 400


def is_truncated(t: TestCase) -> bool:
    """CodeContests cut some long tests to ~500 characters and appended "..." (no final newline); no
    program can produce such an output. Seen in 6 of CodeFu's 808 training problems."""
    return any(len(s) >= TRUNCATED_MIN_CHARS and s.endswith("...") for s in (t.input, t.output))


def select_hidden_tests(raw: RawProblem, cfg: PrepareConfig) -> list[TestCase] | None:
    """Private tests, then generated ones when asked, without tests over `max_test_bytes`, truncated
    ones or repeats, capped at `max_tests`. None (drop as `tests_too_large`) when a public test is over
    the cap or no hidden test is left."""
    if any(_size(t) > cfg.max_test_bytes for t in raw.problem.public_tests):
        return None
    pool = raw.problem.private_tests + (raw.generated_tests if cfg.include_generated else [])
    seen: set[TestCase] = set()
    chosen: list[TestCase] = []
    for t in pool:
        if _size(t) <= cfg.max_test_bytes and t not in seen and not is_truncated(t):
            seen.add(t)
            chosen.append(t)
            if len(chosen) == cfg.max_tests:
                break
    return chosen or None


def normalize_statement(text: str) -> str:
    """Lower case, NFKC, letters and digits only: the same statement re-typeset compares equal."""
    text = unicodedata.normalize("NFKC", text).lower()
    return "".join(ch for ch in text if ch.isalnum())


class Deduplicator:
    """Remembers a 16-byte digest per kept statement and the source that kept it (one shared string per
    source name), so a duplicate's report names where the statement was kept."""

    def __init__(self) -> None:
        self._seen: dict[bytes, str] = {}

    def __call__(self, raw: RawProblem) -> str | None:
        return "duplicate" if self.kept_by(raw) is not None else None

    def kept_by(self, raw: RawProblem) -> str | None:
        """The source that kept this statement before, or None (and it is remembered as kept now)."""
        key = hashlib.blake2b(normalize_statement(raw.problem.statement).encode(), digest_size=16).digest()
        if key in self._seen:
            return self._seen[key]
        self._seen[key] = sys.intern(raw.problem.source)
        return None
