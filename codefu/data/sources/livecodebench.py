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
Functional (LeetCode) problems call a method: function-call problems (`Problem.function`, Python-only; see
codefu.judge.function_call) named by metadata.func_name, whose test input holds one JSON argument per line
(stored as one JSON array) and output the JSON of the return value; a problem mixing functional and stdin
tests is malformed. The private tests
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

from codefu.data.raw import Malformed, RawProblem
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
from codefu.types import FunctionSpec, Problem, TestCase

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


def _cases(v: Any, column: str) -> tuple[list[TestCase], set[str]]:
    """The tests, and which test types ("stdin", "functional") they have."""
    if v is None:
        return [], set()
    if not isinstance(v, list):
        raise RowError(column, 'must be a list of {"input", "output", "testtype"}')
    tests = case_list(v, column)
    kinds = {"functional" if t.get("testtype") == "functional" else "stdin" for t in v}
    if "functional" in kinds:
        tests = [_functional_case(t, column, i) for i, t in enumerate(tests)]
    return tests, kinds


def _functional_case(t: TestCase, column: str, i: int) -> TestCase:
    """One JSON argument per input line -> a JSON array of them; the output must be JSON too."""
    try:
        args = [json.loads(line) for line in t.input.split("\n") if line.strip()]
        json.loads(t.output)
    except json.JSONDecodeError as e:
        raise RowError(column, f"functional test {i}: not JSON ({e.msg})") from None
    return TestCase(json.dumps(args), t.output.strip())


def _function(row: Row) -> FunctionSpec:
    meta = json_value(row, "metadata")
    func = meta.get("func_name") if isinstance(meta, dict) else None
    if not isinstance(func, str) or not func.isidentifier():
        raise RowError("metadata", f"functional tests need func_name, a Python identifier (not {func!r})")
    return FunctionSpec(func, text(row, "starter_code"))


def row_to_raw(row: Row, split: str, file: str, index: int) -> RawProblem | Malformed:
    """One LiveCodeBench record (a JSONL line, as a dict) as a RawProblem."""
    try:
        public, public_kinds = _cases(json_value(row, "public_test_cases"), "public_test_cases")
        private, private_kinds = _cases(_private(row), "private_test_cases")
        kinds = public_kinds | private_kinds
        if len(kinds) > 1:
            raise RowError("private_test_cases", "mixes functional and stdin tests")
        function = _function(row) if kinds == {"functional"} else None
        label = text(row, "difficulty")
        qid = ident(row, "question_id") or f"{Path(file).stem}-{index}"
        problem = Problem(
            name=text(row, "question_title") or qid,
            statement=text(row, "question_content"),
            public_tests=public,
            private_tests=private,
            time_limit_s=DEFAULT_TIME_LIMIT_S,
            memory_limit_bytes=DEFAULT_MEMORY_BYTES,
            rating=nominal_rating(label, RATINGS, "difficulty"),
            preferred_language="python" if function else "cpp",
            function=function,
            source="livecodebench",
        )
        day = iso_date(row.get("contest_date"), "contest_date")
        if not day:
            raise RowError("contest_date", "missing")
    except RowError as e:
        return Malformed(file, index, e.column, str(e), split)
    return RawProblem(problem, split, qid, where(file, index), date=day, difficulty=label)


class LiveCodeBenchSource(TableSource):
    """Rows of LiveCodeBench's test*.jsonl files."""

    name = "livecodebench"
    dataset = "livecodebench/code_generation_lite"
    required = REQUIRED
    optional = OPTIONAL

    def row_to_raw(self, row: Row, split: str, file: str, index: int) -> RawProblem | Malformed:
        return row_to_raw(row, split, file, index)
