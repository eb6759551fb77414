"""Function-call (LeetCode-style) problems: run the program's function in the sandbox, compare outside.

A problem with `Problem.function` set gives a function name instead of stdin/stdout: each test's input is
a JSON array of the arguments and its output the JSON of the expected return value. Python solutions
only: the program runs under `fn_harness.py` (see its docstring for the protocol), through the same
compiled program, limits, runner and cgroups as a stdin program, one interpreter per test (Python's
startup, json and typing: some tens of milliseconds a test).

The judge (this module, outside the sandbox) reads what the harness wrote on the program's stdout: the
first line is the nonce; the result is what follows the LAST `NONCE` line. Verdicts, after the usual
limits and exit status (an exception in the program exits non-zero: RUNTIME_ERROR):

- no result line (the program exited, `os._exit(0)` say, before its function returned): RUNTIME_ERROR;
- a result that is not JSON, a value the harness could not write as JSON, or a result far longer than
  the expected one could be when equal (`max_result_bytes`; not even parsed): WRONG_ANSWER;
- else `results_match(expected, actual)`: ACCEPTED or WRONG_ANSWER.

Comparison (`values_equal`), on JSON values:

- lists compare item by item (a returned tuple arrives as a list, so tuples equal lists); objects by the
  same keys with equal values; strings, booleans and null exactly; a boolean never equals a number;
- integers exactly, at any size (past Python's 4300-digit conversion limit as digit strings);
- when the expected number is a float: within absolute or relative error `float_tol` (testlib's
  doubleCompare, as for stdin tokens; NaN equals NaN, infinities by sign); an expected integer accepts a
  float only when it is exactly that integer (3.0 for 3, as Python's == does);
- TACO/APPS (`FunctionSpec.unwrap_singleton`): an expected one-element list `[x]` also accepts `x`. Their
  harness compares `output == expected or output == expected[0]` for any non-empty list because many
  expected values were stored wrapped; only one-element lists here, so `[3, 5]` never accepts `3`. The
  price: for a function that really returns a one-element list `[x]`, a bare `x` is accepted too.

Threat model: the contestant's code shares the harness's process, so it can do anything the harness can
(print a fake result, patch json or sys.stdout, find the private descriptor, read the nonce from memory,
exit early). What it cannot do is see the expected value: it never enters the sandbox (tests carry only
the arguments in), and it is compared here. Any bytes the program forges on the channel are judged as
the JSON value they decode to, a value it could have returned, so forging gains nothing over returning;
the nonce and the private descriptor only keep honest programs' prints and early `exit` calls from
passing for (or spoiling) a result. Parsing here is bounded: a size cap before parsing, digit strings for
huge integers (no quadratic int conversion), RecursionError from deep nesting caught, and an iterative
comparison.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

from codefu.judge.checker import double_equal
from codefu.judge.extract import Program
from codefu.judge.languages import Compiled
from codefu.judge.sandbox import Mount
from codefu.types import FunctionSpec, Status, TestCase

HARNESS_SOURCE = Path(__file__).with_name("fn_harness.py")
HARNESS_DIR = "/codefu-harness"  # where the harness appears inside the sandbox (read-only)
HARNESS_NAME = "fn_harness.py"
_NONCE = re.compile(rb"[0-9a-f]{32}")
_INT_DIGITS = 4000  # below Python's 4300-digit int() limit; longer integers stay digit strings


class BigInt(str):
    """An integer too long for int() under Python's digit limit, kept as its digits (compared as text)."""


def install_harness(run_dir: Path) -> Path:
    """Copy the harness into a folder of the judge's own that the sandbox user can read; returns it."""
    directory = run_dir / "harness"
    directory.mkdir(exist_ok=True)
    directory.chmod(0o755)
    target = directory / HARNESS_NAME
    shutil.copyfile(HARNESS_SOURCE, target)
    target.chmod(0o644)
    return directory


def language_error(program: Program) -> str | None:
    """Why `program` cannot solve a function-call problem, or None."""
    if program.language != "python":
        return "function-call problems are judged for Python solutions only (no C++ harness yet)"
    return None


def harnessed(compiled: Compiled, harness_dir: Path, spec: FunctionSpec) -> Compiled:
    """The compiled Python program run under the harness: `python -B HARNESS /box/main.py ENTRY`."""
    if compiled.language != "python" or not compiled.run_argv:
        raise ValueError("only Python programs run under the function-call harness")
    *interpreter, script = compiled.run_argv
    argv = [*interpreter, f"{HARNESS_DIR}/{HARNESS_NAME}", script, spec.entry_point]
    return replace(compiled, run_argv=argv, mounts=[*compiled.mounts, Mount(harness_dir, HARNESS_DIR)])


# ---- parsing and comparing ------------------------------------------------------------------------------


def _parse_int(digits: str) -> int | BigInt:
    return int(digits) if len(digits) <= _INT_DIGITS else BigInt(digits)


def parse_json(text: str | bytes) -> Any:
    """A JSON value (NaN and Infinity allowed, as Python writes them); raises ValueError on bad or too
    deeply nested JSON."""
    try:
        return json.loads(text, parse_int=_parse_int)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


@functools.lru_cache(maxsize=256)  # expected values of the tests in flight, parsed once
def _expected(text: str) -> Any:
    return parse_json(text)


def _number(v: Any) -> bool:
    return isinstance(v, int | float | BigInt) and not isinstance(v, bool)


def _numbers_equal(e: Any, a: Any, tol: float) -> bool:
    if isinstance(e, BigInt) or isinstance(a, BigInt):
        return isinstance(e, BigInt) and isinstance(a, BigInt) and str(e) == str(a)
    if isinstance(e, float):
        try:
            return double_equal(e, float(a), tol)
        except OverflowError:  # an int too large for a float
            return False
    if isinstance(a, float) and not math.isfinite(a):
        return False
    return e == a  # int against int, or an int against a float that is exactly it


def values_equal(expected: Any, actual: Any, float_tol: float = 1e-6) -> bool:
    """Deep equality of two JSON values (as `parse_json` gives them) under the rules in the module
    docstring; tuples count as lists. Iterative, so any nesting depth is fine."""
    stack = [(expected, actual)]
    while stack:
        e, a = stack.pop()
        if _number(e) or _number(a):
            if not (_number(e) and _number(a) and _numbers_equal(e, a, float_tol)):
                return False
        elif isinstance(e, list | tuple):
            if not isinstance(a, list | tuple) or len(e) != len(a):
                return False
            stack.extend(zip(e, a, strict=True))
        elif isinstance(e, dict):
            if not isinstance(a, dict) or e.keys() != a.keys():
                return False
            stack.extend((e[k], a[k]) for k in e)
        elif isinstance(e, bool | str) or e is None:
            if type(e) is not type(a) or e != a:
                return False
        else:
            raise TypeError(f"not a JSON value: {type(e).__name__}")
    return True


def results_match(
    expected: Any, actual: Any, float_tol: float = 1e-6, unwrap_singleton: bool = False
) -> bool:
    """`values_equal`, and with `unwrap_singleton` an expected `[x]` also accepts `x` (TACO/APPS)."""
    if values_equal(expected, actual, float_tol):
        return True
    return (
        unwrap_singleton
        and isinstance(expected, list)
        and len(expected) == 1
        and values_equal(expected[0], actual, float_tol)
    )


def max_result_bytes(expected: str) -> int:
    """The longest result that could still equal `expected`: a number may be written 24 characters long
    where the expected has 1 ("0" against "-1.2345678901234567e-308" within the tolerance), an escape
    takes 6 for a byte: 32x, plus room for small answers."""
    return 32 * len(expected.encode("utf-8", errors="replace")) + (64 << 10)


def split_result(data: bytes) -> tuple[bytes | None, str]:
    """The result the harness framed in `data` (the program's stdout), or None and why not."""
    head, newline, rest = data.partition(b"\n")
    if not newline or not _NONCE.fullmatch(head):
        return None, "no result: the harness's output channel was overwritten"
    marker = b"\n" + head + b"\n"
    body = b"\n" + rest
    at = body.rfind(marker)
    if at < 0:
        return None, "no return value: the program exited before its function returned"
    return body[at + len(marker) :], ""


def check_output(test: TestCase, output: Path, spec: FunctionSpec, float_tol: float) -> tuple[Status, str]:
    """The verdict on one test whose program exited cleanly within its limits, and a message (or "")."""
    cap = max_result_bytes(test.output) + 128  # and the two nonce lines
    if os.path.getsize(output) > cap:
        return Status.WRONG_ANSWER, "the return value is far longer than the expected one"
    with open(output, "rb") as f:
        data = f.read(cap + 1)
    payload, problem = split_result(data)
    if payload is None:
        return Status.RUNTIME_ERROR, problem
    if payload.startswith(b"!"):
        return Status.WRONG_ANSWER, payload[1:300].decode("utf-8", errors="replace").strip()
    expected = _expected(test.output)  # ValueError: the problem's data is broken (our error)
    try:
        actual = parse_json(payload.decode("utf-8", errors="replace"))
    except ValueError as e:
        return Status.WRONG_ANSWER, f"the result is not JSON: {e}"[:300]
    if results_match(expected, actual, float_tol, spec.unwrap_singleton):
        return Status.ACCEPTED, ""
    return Status.WRONG_ANSWER, ""
