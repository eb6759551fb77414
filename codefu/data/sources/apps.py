"""APPS, as published on the Hugging Face hub as `codeparrot/apps` (train.jsonl and test.jsonl, or parquet
with the same columns):

    problem_id     int     0.. within each split (train and test both start at 0)
    question       str     the statement, examples included
    solutions      str     JSON list of Python programs (never read)
    input_output   str     JSON {"inputs": [...], "outputs": [...], "fn_name"?: str}; may be ""
    difficulty     str     "introductory" | "interview" | "competition"
    url, starter_code

`input_output` is also TACO's (TACO grew out of APPS), so `io_tests` below reads both. A row with `fn_name`
is a function-call problem (`Problem.function`, see codefu.judge.function_call): `inputs[i]` is the list of
arguments of test i (stored as its JSON array), `outputs[i]` the return value (its JSON), and
`starter_code` the signature for the prompt. Many expected values are stored wrapped in a one-element list
(APPS' own harness accepts `output == expected or output == expected[0]`), so these problems set
`unwrap_singleton`. Function-call problems are Python-only: a C++ run (--language cpp) drops them as
`unsupported`. APPS has no limits: 2 s and 256 MiB. Its labels get nominal ratings (`RATINGS`) so that
buckets and --min-rating apply; the label itself is kept in extra_info.difficulty.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from codefu.data.raw import Malformed, RawProblem
from codefu.data.sources.jsonl import RowError
from codefu.data.sources.tables import (
    DEFAULT_MEMORY_BYTES,
    DEFAULT_TIME_LIMIT_S,
    Row,
    TableSource,
    ident,
    json_value,
    nominal_rating,
    text,
    where,
)
from codefu.types import FunctionSpec, Problem, TestCase

REQUIRED = ("question", "input_output", "difficulty")
OPTIONAL = ("problem_id", "url", "starter_code")
RATINGS: dict[str, int | None] = {"introductory": 800, "interview": 1400, "competition": 2000}


def _stdio(v: Any, column: str, i: int, what: str) -> str:
    """A test's input or output: a string, or a list of lines joined with newlines (as APPS' harness does)."""
    if isinstance(v, str):
        return v
    if isinstance(v, list) and all(isinstance(line, str) for line in v):
        return "\n".join(v)
    raise RowError(column, f"test {i}: {what} must be a string or a list of lines, not {type(v).__name__}")


def _arguments(v: Any, column: str, i: int) -> str:
    """A function-call test's input: its argument list, as a JSON array."""
    if not isinstance(v, list):
        raise RowError(column, f"test {i}: a function's arguments must be a list, not {type(v).__name__}")
    return json.dumps(v)


def io_tests(row: Row, column: str = "input_output") -> tuple[list[TestCase], str]:
    """The tests and the fn_name ("" for stdin problems) of APPS'/TACO's `input_output`. A function-call
    problem's test inputs are JSON arrays of arguments and its outputs the JSON of the return values."""
    v = json_value(row, column)
    if v is None:
        return [], ""
    if not isinstance(v, dict):
        raise RowError(column, 'must be a JSON object {"inputs": [...], "outputs": [...]}')
    fn_name = v.get("fn_name") or ""
    if not isinstance(fn_name, str) or (fn_name and not fn_name.isidentifier()):
        raise RowError(column, f"fn_name must be a Python identifier, not {fn_name!r}")
    ins, outs = v.get("inputs"), v.get("outputs")
    ins, outs = [] if ins is None else ins, [] if outs is None else outs
    if not isinstance(ins, list) or not isinstance(outs, list):
        raise RowError(column, "inputs and outputs must be lists")
    if len(ins) != len(outs):
        raise RowError(column, f"{len(ins)} inputs but {len(outs)} outputs")
    if fn_name:
        pairs = enumerate(zip(ins, outs, strict=True))
        return [TestCase(_arguments(a, column, i), json.dumps(b)) for i, (a, b) in pairs], fn_name
    return [
        TestCase(_stdio(a, column, i, "input"), _stdio(b, column, i, "output"))
        for i, (a, b) in enumerate(zip(ins, outs, strict=True))
    ], ""


def function_spec(fn_name: str, row: Row) -> FunctionSpec | None:
    """APPS'/TACO's function-call problem: `fn_name`, the starter code, and wrapped expected values."""
    if not fn_name:
        return None
    return FunctionSpec(fn_name, text(row, "starter_code"), unwrap_singleton=True)


def row_to_raw(row: Row, split: str, file: str, index: int) -> RawProblem | Malformed:
    """One APPS record (a JSONL line or a parquet row, as a dict) as a RawProblem."""
    try:
        tests, fn_name = io_tests(row)
        label = text(row, "difficulty")
        pid = ident(row, "problem_id") or f"{Path(file).stem}-{index}"
        problem = Problem(
            name=f"apps-{split}-{pid}",
            statement=text(row, "question"),
            public_tests=[],
            private_tests=tests,
            time_limit_s=DEFAULT_TIME_LIMIT_S,
            memory_limit_bytes=DEFAULT_MEMORY_BYTES,
            rating=nominal_rating(label, RATINGS, "difficulty"),
            preferred_language="python" if fn_name else "cpp",
            function=function_spec(fn_name, row),
            source="apps",
        )
    except RowError as e:
        return Malformed(file, index, e.column, str(e), split)
    return RawProblem(problem, split, f"{split}/{pid}", where(file, index), difficulty=label)


class AppsSource(TableSource):
    """Rows of APPS' train.jsonl / test.jsonl (or parquet with its columns)."""

    name = "apps"
    dataset = "codeparrot/apps"
    required = REQUIRED
    optional = OPTIONAL

    def row_to_raw(self, row: Row, split: str, file: str, index: int) -> RawProblem | Malformed:
        return row_to_raw(row, split, file, index)
