"""Contracts between roles: problems going in, verdicts coming out.

Plain dataclasses, no behaviour beyond (de)serialisation, so every role can be built and tested
without the others.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any, Literal

Language = Literal["cpp", "python"]
LANGUAGES: tuple[Language, ...] = ("cpp", "python")


@dataclass(frozen=True)
class TestCase:
    __test__ = False  # not a pytest test class
    input: str
    output: str


@dataclass(frozen=True)
class CheckerSpec:
    """A per-problem answer checker for problems that accept several answers.

    kind="python": `source` is an import path "package.module:function"; the function is called as
    f(input: str, expected: str, actual: str) -> bool and must not raise on any `actual`.
    kind="program": `source` is the checker's source code in `language`; it is compiled once and run in
    the sandbox testlib-style as `checker input.txt output.txt answer.txt` (output = the contestant's),
    answering by testlib's exit codes (0 ok, 1 wrong answer, 2 presentation error, 3 checker failure,
    7 points; see codefu.judge.checker.interpret_checker_exit). `files` (file name -> content, e.g. the
    problem's "testlib.h") are placed beside the source when it compiles and runs.
    """

    kind: Literal["python", "program"]
    source: str
    language: Language = "cpp"
    files: dict[str, str] = field(default_factory=dict)


# Extra files of a checker program: plain names (no directories), none of the compiler's own files.
_FILE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,99}")
RESERVED_FILE_NAMES = frozenset({"main", "main.cpp", "main.py", "compile.out", "compile.err"})


def checker_files_error(files: Any) -> str | None:
    """Why `files` cannot be a checker's extra files (a dict of file name -> text), or None if it can."""
    if not isinstance(files, dict):
        return f"files must be an object of file name -> content, not {type(files).__name__}"
    for name, content in files.items():
        if not isinstance(name, str) or not _FILE_NAME.fullmatch(name) or name in RESERVED_FILE_NAMES:
            return f"file name {name!r} must be a plain name of letters, digits and _.+- (and not main.*)"
        if not isinstance(content, str):
            return f"file {name!r} must hold text, not {type(content).__name__}"
    return None


@dataclass(frozen=True)
class FunctionSpec:
    """A function-call (LeetCode-style) problem: the program defines a function instead of reading stdin.

    `entry_point` is the function's name, or the method's of a `class Solution` (the judge looks there
    first). Each test's input is a JSON array of the arguments and its output the JSON of the return
    value; codefu.judge.function_call runs and compares them. `starter_code` is the signature the
    dataset gives (for the prompt). `unwrap_singleton`: an expected one-element list `[x]` also accepts
    the value `x` (TACO/APPS store many expected values wrapped so, and their own harness accepts both).
    """

    entry_point: str
    starter_code: str = ""
    unwrap_singleton: bool = False


@dataclass
class Problem:
    """One programming problem with hidden tests.

    time_limit_s and memory_limit_bytes are the problem's own limits; the judge may scale the time.
    """

    name: str
    statement: str
    public_tests: list[TestCase]
    private_tests: list[TestCase]
    time_limit_s: float = 2.0
    memory_limit_bytes: int = 256 * 1024 * 1024
    rating: int | None = None
    preferred_language: Language = "cpp"
    checker: CheckerSpec | None = None
    function: FunctionSpec | None = None  # set: a function-call problem (tests are JSON, not stdin)
    source: str = ""  # dataset the problem came from, e.g. "code_contests"
    prompt: list[dict[str, str]] | None = None  # chat messages, when the dataset ships them
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def entry_point(self) -> str | None:
        """The function a function-call problem calls; None for stdin/stdout problems."""
        return self.function.entry_point if self.function is not None else None


class Status(StrEnum):
    ACCEPTED = "ACCEPTED"
    WRONG_ANSWER = "WRONG_ANSWER"
    TIME_LIMIT = "TIME_LIMIT"
    MEMORY_LIMIT = "MEMORY_LIMIT"
    RUNTIME_ERROR = "RUNTIME_ERROR"
    OUTPUT_LIMIT = "OUTPUT_LIMIT"
    COMPILE_ERROR = "COMPILE_ERROR"
    NO_CODE = "NO_CODE"
    SANDBOX_ERROR = "SANDBOX_ERROR"  # our infrastructure failed: never the model's fault


@dataclass
class TestResult:
    __test__ = False
    status: Status
    cpu_s: float = 0.0  # CPU time of the whole process tree
    wall_s: float = 0.0
    memory_bytes: int = 0  # peak, where the platform can measure it
    exit_code: int | None = None  # negative: killed by that signal
    message: str = ""  # truncated stderr, the reason of a limit, or the checker's message
    points: float | None = None  # fraction of the test earned, when a checker gave partial points
    output: str = ""  # the head of the program's stdout, kept on a verdict's first failing test only


@dataclass
class Verdict:
    """The judge's answer for one response to one problem."""

    status: Status
    passed: int = 0
    total: int = 0  # tests selected for this submission
    language: Language | None = None
    tests: list[TestResult] = field(default_factory=list)  # in the order run; may stop early
    first_failure: int | None = None  # index into the selected tests
    compile_output: str = ""  # truncated compiler diagnostics
    time_s: float = 0.0  # wall time spent judging this submission
    message: str = ""  # what went wrong, for SANDBOX_ERROR and friends
    reused: bool = False  # a copy of the verdict of the same program for the same problem in this batch
    score: float | None = None  # tests passed, a partially correct one counting as its points; None: passed

    @property
    def pass_ratio(self) -> float:
        return self.passed / self.total if self.total else 0.0

    @property
    def score_ratio(self) -> float:
        """Like pass_ratio, but a test a checker gave partial points counts as that fraction."""
        score = self.passed if self.score is None else self.score
        return score / self.total if self.total else 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status.value
        for t in d["tests"]:
            t["status"] = t["status"].value
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Verdict:
        d = dict(d)
        d["status"] = Status(d["status"])
        d["tests"] = [TestResult(**{**t, "status": Status(t["status"])}) for t in d.get("tests", [])]
        return cls(**d)
