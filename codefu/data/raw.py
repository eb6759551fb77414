"""What a source yields to the pipeline: a problem read from one row, or the reason a row was unreadable."""

from __future__ import annotations

from dataclasses import dataclass, field

from codefu.types import Problem, TestCase


@dataclass(frozen=True)
class Unsupported:
    """Why the judge cannot run a readable row's problem yet (no function-call harness, no interactor):
    dropped as `unsupported`, counted per `kind`; `message` carries the row's specifics for the report."""

    kind: str  # "function-call problem", "interactive problem", ...: what the report counts
    message: str  # "function-call problem (fn_name=add): not supported yet"


@dataclass
class RawProblem:
    """One source row, read but not yet filtered.

    `problem.time_limit_s` / `memory_limit_bytes` are 0 when the source has no value (the `bad_limits`
    filter drops them); `problem.rating` is None when the source has none (or CodeContests' 0).
    """

    problem: Problem
    split: str  # "train", "valid", "test", ... as the source names it
    source_id: str  # stable id within the source (CodeContests: the problem name)
    where: str  # "FILE, row N" for messages
    generated_tests: list[TestCase] = field(default_factory=list)
    input_file: str = ""  # set when the problem reads a named file instead of stdin
    output_file: str = ""
    date: str = ""  # contest date, YYYY-MM-DD, when the source has one (the `--after` cut uses it)
    difficulty: str = ""  # the source's own difficulty label ("MEDIUM_HARD", "interview", ...), if any
    unsupported: Unsupported | None = None  # set: read fine, but the judge cannot run it yet


@dataclass
class Malformed:
    """A row the source could not read; dropped as `malformed`, or an error under --strict."""

    file: str
    row: int | str  # row number in the file, or a range like "1000-1999" for a bad row group
    column: str
    message: str
    split: str = ""
    rows: int = 1  # how many input rows this stands for (a corrupt row group: all of its rows)

    def __str__(self) -> str:
        return f"{self.file}, row {self.row}, column {self.column!r}: {self.message}"
