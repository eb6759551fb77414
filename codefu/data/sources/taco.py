"""TACO, as published on the Hugging Face hub as `BAAI/TACO`: arrow files as `datasets.save_to_disk` wrote
them (train/data-0000N-of-00009.arrow, test/data-00000-of-00001.arrow) or the parquet conversion
(ALL/train-0000N-of-00009.parquet, ALL/test-...). Every column is a string:

    question        the statement, examples included
    solutions       JSON list of Python programs (never read: most of the bytes)
    starter_code    "" for stdin problems
    input_output    JSON {"inputs": [...], "outputs": [...], "fn_name"?: str}, as APPS' (`apps.io_tests`)
    difficulty      EASY | MEDIUM | MEDIUM_HARD | HARD | VERY_HARD | UNKNOWN_DIFFICULTY
    time_limit      "1 second", "2.5 seconds", or null;  memory_limit  "256 megabytes", or null
    date            "2020-10-04", or null
    name, url, source (the site), raw_tags, tags, skill_types, picture_num, Expected Time Complexity,
    Expected Auxiliary Space (not read)

A row with `fn_name` is a function-call problem, read as APPS' are (`apps.io_tests`: JSON argument arrays
in, JSON return values out, `unwrap_singleton` for the wrapped expected values; Python-only). Missing limits
get 2 s / 256 MiB (most limitless rows are function-call ones); a limit that cannot be read is malformed.
Labels get nominal ratings (`RATINGS`, on the Codeforces scale, one per default bucket range) so that
buckets and --min-rating apply; UNKNOWN_DIFFICULTY is unrated (--keep-unrated keeps it), and the label is
kept in extra_info.difficulty.
"""

from __future__ import annotations

import re
from pathlib import Path

from codefu.data.raw import Malformed, RawProblem
from codefu.data.sources.apps import function_spec, io_tests
from codefu.data.sources.jsonl import RowError
from codefu.data.sources.tables import (
    DEFAULT_MEMORY_BYTES,
    DEFAULT_TIME_LIMIT_S,
    Row,
    TableSource,
    iso_date,
    nominal_rating,
    text,
    where,
)
from codefu.types import Problem

REQUIRED = ("question", "input_output", "difficulty")
OPTIONAL = ("name", "url", "starter_code", "time_limit", "memory_limit", "date")
RATINGS: dict[str, int | None] = {
    "EASY": 800,
    "MEDIUM": 1200,
    "MEDIUM_HARD": 1600,
    "HARD": 2000,
    "VERY_HARD": 2400,
    "UNKNOWN_DIFFICULTY": None,
}
SECONDS = {"": 1.0, "s": 1.0, "sec": 1.0, "second": 1.0, "seconds": 1.0, "ms": 1e-3, "millisecond": 1e-3,
           "milliseconds": 1e-3}  # fmt: skip
BYTES = {"": 1 << 20, "mb": 1 << 20, "mib": 1 << 20, "megabyte": 1 << 20, "megabytes": 1 << 20, "kb": 1 << 10,
         "kilobytes": 1 << 10, "gb": 1 << 30, "gigabyte": 1 << 30, "gigabytes": 1 << 30}  # fmt: skip
_AMOUNT = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*")


def amount(row: Row, column: str, units: dict[str, float | int], default: float) -> float:
    """A limit like "2 seconds" or "256 megabytes" in the base unit of `units`; `default` when null, ""
    or "None"."""
    v = text(row, column)
    if v.strip().lower() in ("", "none", "null"):
        return default
    m = _AMOUNT.fullmatch(v)
    if not m or m.group(2).lower() not in units:
        raise RowError(column, f"cannot read {v!r} (a number and one of: {', '.join(u for u in units if u)})")
    return float(m.group(1)) * units[m.group(2).lower()]


def row_to_raw(row: Row, split: str, file: str, index: int) -> RawProblem | Malformed:
    """One TACO record (an arrow or parquet row, as a dict) as a RawProblem."""
    try:
        tests, fn_name = io_tests(row)
        label = text(row, "difficulty")
        url, name = text(row, "url"), text(row, "name")
        problem = Problem(
            name=name or url or f"{Path(file).stem}-{index}",
            statement=text(row, "question"),
            public_tests=[],
            private_tests=tests,
            time_limit_s=amount(row, "time_limit", SECONDS, DEFAULT_TIME_LIMIT_S),
            memory_limit_bytes=int(amount(row, "memory_limit", BYTES, DEFAULT_MEMORY_BYTES)),
            rating=nominal_rating(label, RATINGS, "difficulty"),
            preferred_language="python" if fn_name else "cpp",
            function=function_spec(fn_name, row),
            source="taco",
        )
        day = iso_date(row.get("date"), "date")
    except RowError as e:
        return Malformed(file, index, e.column, str(e), split)
    return RawProblem(problem, split, url or problem.name, where(file, index), date=day, difficulty=label)


class TacoSource(TableSource):
    """Rows of TACO's arrow or parquet files."""

    name = "taco"
    dataset = "BAAI/TACO"
    required = REQUIRED
    optional = OPTIONAL

    def row_to_raw(self, row: Row, split: str, file: str, index: int) -> RawProblem | Malformed:
        return row_to_raw(row, split, file, index)
