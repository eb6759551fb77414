"""Codeforces problems with their official tests and generated checkers, as published on the Hugging Face
hub as `open-r1/codeforces` (data/train-NNNNN-of-NNNNN.parquet, data/test-...):

    id ("1000/A"), contest_id, index, title
    description, input_format, output_format, interaction_format (non-null: interactive), note
    examples, official_tests   list of {input, output}
    rating (int or null), tags, time_limit (seconds), memory_limit (MB)
    generated_checker          C++ source of a testlib checker, or null
    executable                 false: open-r1 found the problem not runnable from what it has
    input_mode                 "stdio" | "file" (reads input.txt, writes output.txt)
    contest_start              seconds since the epoch (the row's date)
    (aliases, contest_name, contest_type, contest_start_year, editorial, testset_size,
    official_tests_complete, generated_tests: not read)

Its point over CodeContests is the checkers: a problem with several right answers keeps its
`generated_checker` as `CheckerSpec(kind="program", language="cpp")`, written to extra_info.checker, so the
`multiple_answers` filter lets it through and the judge can run the checker. Interactive problems and those
marked not executable are skipped as `unsupported`. The statement is laid out as CodeContests' are:
description, Input, Output, Examples, Note.
"""

from __future__ import annotations

from codefu.data.raw import Malformed, RawProblem, Unsupported
from codefu.data.sources.jsonl import RowError
from codefu.data.sources.tables import (
    Row,
    TableSource,
    case_list,
    number,
    text,
    unix_date,
    where,
)
from codefu.types import CheckerSpec, Problem, TestCase

REQUIRED = ("id", "title", "description", "examples", "official_tests", "rating", "time_limit",
            "memory_limit")  # fmt: skip
OPTIONAL = ("input_format", "output_format", "interaction_format", "note", "generated_checker", "executable",
            "input_mode", "contest_start")  # fmt: skip


def statement(row: Row, examples: list[TestCase]) -> str:
    """Description, then Input, Output, Examples and Note sections, each present only when non-empty."""
    parts = [text(row, "description")]
    for title, column in (("Input", "input_format"), ("Output", "output_format")):
        if body := text(row, column):
            parts += [title, body]
    if examples:
        parts.append("Examples" if len(examples) > 1 else "Example")
        for t in examples:
            parts += ["Input", t.input, "Output", t.output]
    if note := text(row, "note"):
        parts += ["Note", note]
    return "\n\n".join(p.strip("\n") for p in parts)


def _checker(row: Row) -> CheckerSpec | None:
    source = text(row, "generated_checker")
    return CheckerSpec(kind="program", source=source, language="cpp") if source.strip() else None


def _unsupported(row: Row) -> Unsupported | None:
    interaction = row.get("interaction_format")
    if interaction is not None:
        text(row, "interaction_format")  # a wrong type is malformed, not interactive
        kind = "interactive problem"
        return Unsupported(kind, f"{kind} (interaction_format set): not supported yet")
    executable = row.get("executable")
    if executable is not None and not isinstance(executable, bool):
        raise RowError("executable", f"must be a boolean, not {executable!r}")
    if executable is False:
        return Unsupported("not executable", "open-r1 marks the problem not executable (executable=false)")
    return None


def row_to_raw(row: Row, split: str, file: str, index: int) -> RawProblem | Malformed:
    """One open-r1/codeforces record (a parquet row, as a dict) as a RawProblem."""
    try:
        pid, title = text(row, "id"), text(row, "title")
        if not pid:
            raise RowError("id", "missing")
        examples = case_list(row.get("examples"), "examples")
        problem = Problem(
            name=f"{pid}. {title}" if title else pid,
            statement=statement(row, examples),
            public_tests=examples,
            private_tests=case_list(row.get("official_tests"), "official_tests"),
            time_limit_s=number(row, "time_limit"),
            memory_limit_bytes=int(number(row, "memory_limit") * (1 << 20)),
            rating=int(number(row, "rating")) or None,
            checker=_checker(row),
            source="codeforces",
        )
        day = unix_date(row.get("contest_start"), "contest_start")
        unsupported = _unsupported(row)
        file_io = text(row, "input_mode") == "file"
    except RowError as e:
        return Malformed(file, index, e.column, str(e), split)
    return RawProblem(
        problem,
        split,
        pid,
        where(file, index),
        input_file="input.txt" if file_io else "",
        output_file="output.txt" if file_io else "",
        date=day,
        unsupported=unsupported,
    )


class CodeforcesSource(TableSource):
    """Rows of open-r1/codeforces' parquet files."""

    name = "codeforces"
    dataset = "open-r1/codeforces"
    required = REQUIRED
    optional = OPTIONAL

    def row_to_raw(self, row: Row, split: str, file: str, index: int) -> RawProblem | Malformed:
        return row_to_raw(row, split, file, index)
