"""Is a program's output correct? Competitive-programming semantics.

The default rule compares whitespace-separated tokens, so line breaks, trailing blanks and a missing
final newline never matter (CodeContests expected outputs carry trailing blanks on inner lines). Per
token pair, where `expected` decides the kind:

- integer tokens (`-?digits`) must be the very same token, at any size: a float tolerance would
  accept wrong 64-bit answers, and `3.0`, `+3` or `003` are not the answer `3` (Codeforces' default
  token checker `wcmp` compares the strings, and a reward should not teach sloppy formatting);
- a real-number expected token accepts any real within absolute or relative error `float_tol`
  (1e-6 by default): testlib's `doubleCompare`, as used by its `rcmp6` checker;
- `nan`, `inf`, `-inf` (any case; `infinity`, a sign on `nan`) accept the same non-finite value written
  any of those ways, as a contest judge's default validator does (testlib reads them as doubles: any NaN
  equals NaN, infinities compare by sign), so `nan` against a reference `NaN` is right;
- `yes`/`no` (any case) compare case-insensitively, as Codeforces accepts for yes/no problems;
- anything else must match exactly.

A problem can bring its own checker (`Problem.checker`) for statements with several valid answers: a
Python function, or a checker program speaking testlib's exit codes (`interpret_checker_exit`).
"""

from __future__ import annotations

import importlib
import math
import re
import signal
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass

from codefu.errors import CodefuError
from codefu.types import CheckerSpec, Problem, Status

_INT = re.compile(r"[+-]?\d+")
# unambiguous, so a hostile million-digit token fails in linear time
_REAL = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_YES_NO = {"yes", "no"}
_NON_FINITE = re.compile(r"[+-]?(?:nan|inf|infinity)", re.IGNORECASE)


def double_equal(expected: float, actual: float, tol: float) -> bool:
    """testlib's doubleCompare: absolute or relative error at most `tol` (plus 1e-15 of slack)."""
    if math.isnan(expected) or math.isnan(actual):
        return math.isnan(expected) and math.isnan(actual)
    if math.isinf(expected) or math.isinf(actual):
        return expected == actual
    if abs(actual - expected) <= tol + 1e-15:
        return True
    lo, hi = sorted((expected * (1 - tol), expected * (1 + tol)))
    return lo - 1e-15 <= actual <= hi + 1e-15


def tokens_match(expected: str, actual: str, float_tol: float = 1e-6) -> bool:
    if expected == actual:
        return True
    if _INT.fullmatch(expected):
        return False  # integers match only exactly, and equal strings returned above
    if _REAL.fullmatch(expected):
        if not _REAL.fullmatch(actual):
            return False
        try:
            return double_equal(float(expected), float(actual), float_tol)
        except OverflowError:
            return False
    if _NON_FINITE.fullmatch(expected):
        return bool(_NON_FINITE.fullmatch(actual)) and double_equal(float(expected), float(actual), float_tol)
    if expected.lower() in _YES_NO:
        return expected.lower() == actual.lower()
    return False


def outputs_match(expected: str, actual: str, float_tol: float = 1e-6) -> bool:
    exp, act = expected.split(), actual.split()
    return len(exp) == len(act) and all(tokens_match(e, a, float_tol) for e, a in zip(exp, act, strict=True))


PythonChecker = Callable[[str, str, str], bool]  # (input, expected, actual) -> accepted


def tokens_any_order(input: str, expected: str, actual: str) -> bool:
    """A built-in checker: the same tokens as the expected output in any order (a set of answers that
    may be printed in any order), each compared as the default rule does."""
    exp, act = sorted(expected.split()), sorted(actual.split())
    return len(exp) == len(act) and all(tokens_match(e, a) for e, a in zip(exp, act, strict=True))


# A `python` checker is code in the judge's own process, outside the sandbox: it runs only when the
# operator named it. A dataset row or an HTTP request only ever *names* one, and a name such as
# "timeit:timeit" or "os:system" would run the test's strings as code; an untrusted checker is a
# `program` checker (any language, Python included), which runs in the sandbox.
BUILTIN_PYTHON_CHECKERS: frozenset[str] = frozenset({"codefu.judge.checker:tokens_any_order"})


def python_checker_refusal(checker: CheckerSpec | None, registered: Collection[str]) -> str | None:
    """Why a problem's checker may not run in this process, or None when it may: a `python` checker runs
    only if it is built in (BUILTIN_PYTHON_CHECKERS) or `registered` by the operator."""
    if checker is None or checker.kind != "python":
        return None
    if checker.source in BUILTIN_PYTHON_CHECKERS or checker.source in registered:
        return None
    return (
        f"python checker {checker.source!r} is not registered: a python checker runs outside the sandbox, "
        "so only the operator's (judge.python_checkers, --python-checker) and codefu's built-ins run; "
        'a checker from data belongs in {"kind": "program", "language": "python", "source": <its code>}, '
        "which runs in the sandbox"
    )


def check_python_checkers(problems: Iterable[Problem], registered: Collection[str], where: str) -> None:
    """A CodefuError naming `where` (the file or key the problems came from) and the first problem whose
    python checker may not run here: a dataset is refused when it is loaded, not judged as errors."""
    for problem in problems:
        if (refusal := python_checker_refusal(problem.checker, registered)) is not None:
            raise CodefuError(f"{where}: problem {problem.name!r}: {refusal}")


def load_python_checker(ref: str, registered: Collection[str]) -> PythonChecker:
    """Import "package.module:function", a built-in or one of `registered`; raises ValueError naming the
    reference when it may not run or cannot be loaded."""
    refusal = python_checker_refusal(CheckerSpec("python", ref), registered)
    if refusal is not None:
        raise ValueError(refusal)
    module, _, name = ref.partition(":")
    if not module or not name:
        raise ValueError(f"python checker {ref!r} is not of the form 'package.module:function'")
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"python checker {ref!r} cannot be loaded: {e}") from e
    if not callable(fn):
        raise ValueError(f"python checker {ref!r} is not callable")
    return fn


# ---- checker programs (testlib's protocol) -----------------------------------------------------------

# testlib.h's default exit codes (without EJUDGE, CONTESTER or TESTSYS defined)
EXIT_OK, EXIT_WA, EXIT_PE, EXIT_FAIL, EXIT_DIRT, EXIT_POINTS, EXIT_UNEXPECTED_EOF = 0, 1, 2, 3, 4, 7, 8
CHECKER_MESSAGE_CHARS = 500
# testlib's quitp writes "points <value> <message>"; the "points " prefix is optional here
_POINTS = re.compile(r"(?:points\s+)?([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)(?:\s|$)", re.IGNORECASE)


@dataclass(frozen=True)
class CheckerOutcome:
    """What a checker said about one output: ACCEPTED, WRONG_ANSWER (points set for a partially correct
    one), or SANDBOX_ERROR when the checker itself failed (never the contestant's fault)."""

    status: Status
    message: str = ""
    points: float | None = None  # fraction of the test earned, when the checker gave points


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def interpret_checker_exit(
    exit_code: int | None, text: str, limit: str | None = None, problem: str = ""
) -> CheckerOutcome:
    """A checker program's run -> outcome, by testlib's exit codes.

    `text` is what the checker wrote (testlib: stderr, e.g. "wrong answer expected 3, found 4"),
    `limit` the sandbox limit that stopped it, if one did. The rules:

    - 0 (_ok) ACCEPTED; 1 (_wa) WRONG_ANSWER;
    - 2 (_pe), 4 (_dirt) and 8 (_unexpected_eof, with ENABLE_UNEXPECTED_EOF) WRONG_ANSWER, the message
      saying presentation error: a contest judge reports PE, but it is a rejected answer all the same;
    - 7 (_points, testlib's quitp): the first number of the message (after testlib's "points " prefix)
      is the fraction of the test earned, in [0, 1]: 1 is ACCEPTED, less is WRONG_ANSWER with `points`;
      a missing or out-of-range number is the checker's failure;
    - 3 (_fail), any other code (testlib's `_pc(n)` exits PC_BASE_EXIT_CODE + n, whose base and scale
      depend on the judging system, so they are not read), a signal, a limit: SANDBOX_ERROR, with a
      message naming the problem and what the checker did.
    """
    text = text.strip()
    said = f": {text}" if text else ""
    who = f"checker of {problem!r}" if problem else "checker"

    def ours(what: str) -> CheckerOutcome:
        return CheckerOutcome(Status.SANDBOX_ERROR, f"{who} {what}{said}"[:CHECKER_MESSAGE_CHARS])

    if limit is not None:
        reason = {"cpu": "CPU time", "wall": "wall-clock time", "memory": "memory", "output": "output size"}
        return ours(f"exceeded its {reason.get(limit, limit)} limit")
    if exit_code is None:
        return ours("did not report an exit status")
    if exit_code == EXIT_OK:
        return CheckerOutcome(Status.ACCEPTED, f"checker: {text}"[:CHECKER_MESSAGE_CHARS] if text else "")
    if exit_code == EXIT_WA:
        message = f"checker: {text or 'wrong answer'}"
        return CheckerOutcome(Status.WRONG_ANSWER, message[:CHECKER_MESSAGE_CHARS])
    if exit_code in (EXIT_PE, EXIT_DIRT, EXIT_UNEXPECTED_EOF):
        message = f"checker: presentation error (exit {exit_code}), judged as wrong answer{said}"
        return CheckerOutcome(Status.WRONG_ANSWER, message[:CHECKER_MESSAGE_CHARS])
    if exit_code == EXIT_FAIL:
        return ours("failed (exit 3, testlib's _fail)")
    if exit_code == EXIT_POINTS:
        m = _POINTS.match(text)
        points = float(m.group(1)) if m else math.nan
        if not 0 <= points <= 1:  # NaN too
            return ours("gave points (exit 7) without a fraction in [0, 1] first in its message")
        if points == 1:
            return CheckerOutcome(Status.ACCEPTED, f"checker: {text}"[:CHECKER_MESSAGE_CHARS], 1.0)
        message = f"checker: partially correct ({points:g} of the test){said}"
        return CheckerOutcome(Status.WRONG_ANSWER, message[:CHECKER_MESSAGE_CHARS], points)
    if exit_code > 128:  # the sandbox reports a signal N as 128 + N
        return ours(f"crashed (exit {exit_code}: killed by {_signal_name(exit_code - 128)})")
    return ours(f"exited with status {exit_code}, which is not a testlib verdict")
