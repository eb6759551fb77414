"""Contracts between roles: problems going in, verdicts coming out.

Plain dataclasses, no behaviour beyond (de)serialisation, so every role can be built and tested
without the others.
"""

from __future__ import annotations

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
    kind="program": `source` is the checker's source code in `language`; it is compiled and run in the
    sandbox testlib-style as `checker input.txt output.txt answer.txt` (output = the contestant's) and
    accepts with exit status 0.
    """

    kind: Literal["python", "program"]
    source: str
    language: Language = "cpp"


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
    source: str = ""  # dataset the problem came from, e.g. "code_contests"
    prompt: list[dict[str, str]] | None = None  # chat messages, when the dataset ships them
    extra: dict[str, Any] = field(default_factory=dict)


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
    message: str = ""  # truncated stderr or the reason of a limit


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

    @property
    def pass_ratio(self) -> float:
        return self.passed / self.total if self.total else 0.0

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
