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

A problem can bring its own checker (`Problem.checker`) for statements with several valid answers.
"""

from __future__ import annotations

import importlib
import math
import re
from collections.abc import Callable

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


def load_python_checker(ref: str) -> PythonChecker:
    """Import "package.module:function"; raises ValueError naming the reference when it cannot."""
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
