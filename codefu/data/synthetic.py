"""Synthetic CodeContests-schema parquet, for tests and `bench/prepare.py` (nothing is downloaded).

`CC_SCHEMA` is the schema of the Hugging Face parquet shards of `deepmind/code_contests`; `cc_row()`
makes one plausible row (overridable field by field); `synth_rows()` makes many with realistic test sizes.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

_TESTS = pa.struct([("input", pa.list_(pa.string())), ("output", pa.list_(pa.string()))])
_SOLUTIONS = pa.struct([("language", pa.list_(pa.int64())), ("solution", pa.list_(pa.string()))])
CC_SCHEMA = pa.schema(
    [
        ("name", pa.string()),
        ("description", pa.string()),
        ("public_tests", _TESTS),
        ("private_tests", _TESTS),
        ("generated_tests", _TESTS),
        ("source", pa.int64()),
        ("difficulty", pa.int64()),
        ("solutions", _SOLUTIONS),
        ("incorrect_solutions", _SOLUTIONS),
        ("cf_contest_id", pa.int64()),
        ("cf_index", pa.string()),
        ("cf_points", pa.float32()),
        ("cf_rating", pa.int64()),
        ("cf_tags", pa.list_(pa.string())),
        ("is_description_translated", pa.bool_()),
        ("untranslated_description", pa.string()),
        ("time_limit", pa.struct([("seconds", pa.int64()), ("nanos", pa.int64())])),
        ("memory_limit_bytes", pa.int64()),
        ("input_file", pa.string()),
        ("output_file", pa.string()),
    ]
)


def cc_tests(pairs: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    pairs = list(pairs)
    return {"input": [a for a, _ in pairs], "output": [b for _, b in pairs]}


def cc_row(i: int = 0, **overrides: Any) -> dict[str, Any]:
    """A valid, keepable CodeContests row (rating 800, two private tests); override any field."""
    row: dict[str, Any] = {
        "name": f"{1000 + i}_A. Problem {i}",
        "description": f"Problem {i}. Given two integers a and b, print their sum times {i}.\n\nInput\n\n"
        "One line with a and b.\n\nOutput\n\nPrint one integer.",
        "public_tests": cc_tests([("1 2\n", f"{3 * i}\n")]),
        "private_tests": cc_tests([("2 3\n", f"{5 * i}\n"), ("0 0\n", "0\n")]),
        "generated_tests": cc_tests([("4 4\n", f"{8 * i}\n")]),
        "source": 2,
        "difficulty": 7,
        "solutions": {"language": [2], "solution": ["int main(){}"]},
        "incorrect_solutions": {"language": [], "solution": []},
        "cf_contest_id": 1000 + i,
        "cf_index": "A",
        "cf_points": 500.0,
        "cf_rating": 800,
        "cf_tags": ["math"],
        "is_description_translated": False,
        "untranslated_description": "",
        "time_limit": {"seconds": 2, "nanos": 0},
        "memory_limit_bytes": 256_000_000,
        "input_file": "",
        "output_file": "",
    }
    row.update(overrides)
    return row


def write_cc_parquet(path: Path, rows: Iterable[dict[str, Any]], row_group_size: int = 64) -> Path:
    """Write rows with CC_SCHEMA, `row_group_size` rows per row group, streaming."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with pq.ParquetWriter(path, CC_SCHEMA) as w:
        chunk: list[dict[str, Any]] = []
        for row in rows:
            chunk.append(row)
            if len(chunk) == row_group_size:
                w.write_table(pa.Table.from_pylist(chunk, schema=CC_SCHEMA))
                chunk = []
        if chunk:
            w.write_table(pa.Table.from_pylist(chunk, schema=CC_SCHEMA))
    return path


def _numbers(rng: random.Random, nbytes: int) -> str:
    count = max(1, nbytes // 7)
    return f"{count}\n" + " ".join(str(rng.randrange(10**6)) for _ in range(count)) + "\n"


def synth_rows(n: int, seed: int = 0, start: int = 0) -> Iterator[dict[str, Any]]:
    """`n` rows shaped like CodeContests: 25 % unrated, ratings 800-3500, 1-3 public tests, a median
    of ~20 private and ~90 generated tests, 99 % of them tiny and 1 % of 10-500 KB (drawn from a pool
    of 32 inputs, so making many is fast), and five 1.5 KB solutions that prepare never reads."""
    rng = random.Random(seed)
    pool = [_numbers(rng, rng.randint(10_000, 500_000)) for _ in range(32)]

    def some(k: int) -> dict[str, list[str]]:
        inputs = [
            rng.choice(pool) if rng.random() < 0.01 else _numbers(rng, rng.randint(5, 400)) for _ in range(k)
        ]
        return cc_tests((x, f"{rng.randrange(10**9)}\n") for x in inputs)

    for i in range(start, start + n):
        rating = 0 if rng.random() < 0.25 else rng.choice(range(800, 3600, 100))
        yield cc_row(
            i,
            description=f"Problem {i} ({rng.random():.12f}). "
            + "Some words of a statement. " * rng.randint(20, 120),
            public_tests=some(rng.randint(1, 3)),
            private_tests=some(int(rng.lognormvariate(3.0, 0.8))),
            generated_tests=some(int(rng.lognormvariate(4.5, 0.6))),
            solutions={"language": [2] * 5, "solution": ["#include <bits/stdc++.h>\n" * 60] * 5},
            cf_rating=rating,
            time_limit={"seconds": rng.choice([1, 2, 3]), "nanos": rng.choice([0, 0, 500_000_000])},
        )
