"""LiveCodeBench code generation, as published on the Hugging Face hub as
`livecodebench/code_generation_lite` (test.jsonl, test2.jsonl, ... one file per release increment; all
are the "test" split):

    question_title, question_content (the statement), question_id, contest_id
    platform            "leetcode" | "codeforces" | "atcoder"
    contest_date        ISO date-time, "2023-08-21T00:00:00"
    difficulty          "easy" | "medium" | "hard"
    public_test_cases   JSON list of {"input", "output", "testtype": "stdin" | "functional"}
    private_test_cases  the same as JSON text, or (the published files) base64 of zlib of a pickled JSON
                        string
    metadata            JSON object, {"func_name": ...} for functional problems
    starter_code

LiveCodeBench exists to be cut by date (problems published after a model's training data), so the contest
date is kept as the row's date: `--after` drops earlier ones, and it is written to extra_info.date.
Functional (LeetCode) problems call a method: skipped as `unsupported` (no harness yet). The private tests
are unpickled with an unpickler that refuses every global, so a crafted file cannot run code; a payload
that does not decode to a JSON string is a malformed row. LiveCodeBench has no limits: 2 s and 256 MiB.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import zlib
from pathlib import Path
from typing import Any

from codefu.data.raw import Malformed, RawProblem, Unsupported
from codefu.data.sources.jsonl import RowError
from codefu.data.sources.tables import (
    DEFAULT_MEMORY_BYTES,
    DEFAULT_TIME_LIMIT_S,
    Row,
    TableSource,
    case_list,
    ident,
    iso_date,
    json_value,
    nominal_rating,
    text,
    where,
)
from codefu.types import Problem, TestCase

REQUIRED = ("question_content", "public_test_cases", "private_test_cases", "contest_date")
OPTIONAL = ("question_title", "question_id", "platform", "contest_id", "difficulty", "metadata",
            "starter_code")  # fmt: skip
RATINGS: dict[str, int | None] = {"easy": 800, "medium": 1400, "hard": 2000}
MAX_DECODED_BYTES = 1 << 30  # a zlib bomb stops here (the largest published payloads are far smaller)


class _StringsOnly(pickle.Unpickler):
    """The payload is a pickled str: refusing every global means loading it can construct nothing else."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing {module}.{name}: only a pickled string is expected")


def decode_private_tests(value: str) -> Any:
    """JSON text, or base64 -> zlib -> pickle -> JSON text: the decoded JSON. Raises ValueError."""
    if value[:64].lstrip().startswith("["):
        return json.loads(value)
    try:
        z = zlib.decompressobj()
        data = z.decompress(base64.b64decode(value, validate=True), MAX_DECODED_BYTES)
        if z.unconsumed_tail:
            raise ValueError(f"more than {MAX_DECODED_BYTES} bytes once decompressed")
        if not z.eof:
            raise ValueError("the zlib stream is truncated")
        loaded = _StringsOnly(io.BytesIO(data)).load()
    except ValueError:
        raise
    except Exception as e:  # garbage given to zlib or the unpickler can raise nearly anything
        raise ValueError(f"{type(e).__name__}: {e}") from None
    if not isinstance(loaded, str):
        raise ValueError(f"the pickle holds a {type(loaded).__name__}, not a JSON string")
    return json.loads(loaded)


def _private(row: Row) -> Any:
    v = text(row, "private_test_cases")
    if not v:
        return []
    try:
        return decode_private_tests(v)
    except ValueError as e:  # JSONDecodeError and binascii.Error are ValueErrors too
        raise RowError(
            "private_test_cases", f"cannot decode (JSON, or base64 -> zlib -> pickle -> JSON): {e}"
        ) from None


def _cases(v: Any, column: str) -> list[TestCase] | None:
    """stdin tests; None when any test is functional."""
    if v is None:
        return []
    if not isinstance(v, list):
        raise RowError(column, 'must be a list of {"input", "output", "testtype"}')
    if any(isinstance(t, dict) and t.get("testtype") == "functional" for t in v):
        return None
    return case_list(v, column)


def _functional(row: Row) -> Unsupported:
    meta = json_value(row, "metadata")
    func = meta.get("func_name", "?") if isinstance(meta, dict) else "?"
    return Unsupported("functional tests", f"functional tests (func_name={func}): not supported yet")


def row_to_raw(row: Row, split: str, file: str, index: int) -> RawProblem | Malformed:
    """One LiveCodeBench record (a JSONL line, as a dict) as a RawProblem."""
    try:
        public = _cases(json_value(row, "public_test_cases"), "public_test_cases")
        private = _cases(_private(row), "private_test_cases")
        label = text(row, "difficulty")
        qid = ident(row, "question_id") or f"{Path(file).stem}-{index}"
        problem = Problem(
            name=text(row, "question_title") or qid,
            statement=text(row, "question_content"),
            public_tests=public or [],
            private_tests=private or [],
            time_limit_s=DEFAULT_TIME_LIMIT_S,
            memory_limit_bytes=DEFAULT_MEMORY_BYTES,
            rating=nominal_rating(label, RATINGS, "difficulty"),
            source="livecodebench",
        )
        day = iso_date(row.get("contest_date"), "contest_date")
        if not day:
            raise RowError("contest_date", "missing")
        unsupported = _functional(row) if public is None or private is None else None
    except RowError as e:
        return Malformed(file, index, e.column, str(e), split)
    return RawProblem(
        problem, split, qid, where(file, index), date=day, difficulty=label, unsupported=unsupported
    )


class LiveCodeBenchSource(TableSource):
    """Rows of LiveCodeBench's test*.jsonl files."""

    name = "livecodebench"
    dataset = "livecodebench/code_generation_lite"
    required = REQUIRED
    optional = OPTIONAL

    def row_to_raw(self, row: Row, split: str, file: str, index: int) -> RawProblem | Malformed:
        return row_to_raw(row, split, file, index)
