"""The function-call harness: runs INSIDE the sandbox, in the same interpreter as the contestant's code.

    python3 -B fn_harness.py /box/main.py ENTRY_POINT  < arguments.json  > result channel

It is trusted text but runs beside hostile code, so it guarantees nothing the program could not undo:
what it does is make the honest path unambiguous and keep accidents (debug prints, `if __name__ ==
"__main__":` blocks) from spoiling a result. The verdict is decided outside, by
codefu.judge.function_call, from the JSON value that comes out, and the expected value never enters the
sandbox; so whatever the program forges, it can only "return" a value it could have returned anyway.

Protocol, in order, before any of the contestant's code exists in the process:

1. draw a nonce (16 random bytes, hex) and move the judge's stdout to a private descriptor; fd 1 becomes
   a copy of stderr, so whatever the program prints lands in stderr;
2. write `NONCE\\n` on the private descriptor (the judge reads the nonce from the first line);
3. read all of stdin: a JSON array of the arguments (the program then sees an empty stdin).

Then load the program as module `solution` (LeetCode's usual names already in scope: typing's, and
collections, heapq, bisect, itertools, functools and math, starred, without shadowing builtins), find
`Solution().ENTRY_POINT` (a fresh instance) or else a top-level `ENTRY_POINT`, call it with the arguments,
and write `NONCE\\nJSON\\n` (compact, ASCII-only JSON) on the private descriptor, then `_exit(0)` at once
(no atexit handlers, no waiting for the program's threads).

A return value JSON has no type for is converted: tuples (and other iterables: generators, deques,
ranges, dict views, numpy arrays) become lists, sets become sorted lists (in iteration order when their
items do not sort), numbers.Integral becomes int and other real numbers float; dict keys that are
numbers, bools or None become strings, as `json` does. Anything else is reported as `NONCE\\n!MESSAGE\\n`
(the judge's WRONG_ANSWER). An exception anywhere in the program (SystemExit included) prints its
traceback to stderr and exits with status 1 (RUNTIME_ERROR); bad arguments (our data) exit with 2.

Kept runnable on older Pythons than the project's (the sandbox's /usr/bin/python3): no new syntax.
"""

import os
import sys

PRELUDE = """\
from typing import *
from collections import *
from heapq import *
from bisect import *
from itertools import *
from functools import *
from math import *
import bisect, collections, functools, heapq, itertools, math, operator, re, string
"""


def main() -> None:
    import builtins
    import json
    import numbers
    import types
    from collections.abc import Iterable

    write, exit_now, dup, dup2 = os.write, os._exit, os.dup, os.dup2
    dumps = json.dumps

    def write_all(fd: int, data: bytes) -> None:
        view = memoryview(data)
        while view:
            view = view[write(fd, view) :]

    def fail(status: int, message: str) -> None:
        try:
            write_all(2, (message + "\n").encode("utf-8", "replace"))
        finally:
            exit_now(status)

    if len(sys.argv) != 3:
        fail(2, "codefu harness: usage: fn_harness.py PROGRAM ENTRY_POINT")
    path, entry = sys.argv[1], sys.argv[2]

    nonce = os.urandom(16).hex()
    channel = dup(1)
    dup2(2, 1)
    write_all(channel, (nonce + "\n").encode())

    chunks = []
    while True:
        chunk = os.read(0, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    if hasattr(sys, "set_int_max_str_digits"):  # big integers in arguments and results are fine here
        sys.set_int_max_str_digits(0)
    try:
        args = json.loads(b"".join(chunks).decode("utf-8"))
    except ValueError as e:
        fail(2, f"codefu harness: the arguments are not JSON: {e}")
    if not isinstance(args, list):
        fail(2, f"codefu harness: the arguments must be a JSON array, not {type(args).__name__}")

    def default(o: object) -> object:
        if isinstance(o, (set, frozenset)):
            items = list(o)
            try:
                items.sort()
            except Exception:  # noqa: BLE001 - unorderable items keep iteration order
                pass
            return items
        if isinstance(o, numbers.Integral):
            return int(o)  # type: ignore[call-overload]
        if isinstance(o, numbers.Real):
            return float(o)
        tolist = getattr(type(o), "tolist", None)  # numpy arrays and scalars
        if tolist is not None:
            return o.tolist()  # type: ignore[attr-defined]
        if isinstance(o, Iterable) and not isinstance(o, (str, bytes, bytearray, memoryview)):
            return list(o)
        if hasattr(type(o), "__index__"):
            return o.__index__()  # type: ignore[attr-defined]
        if hasattr(type(o), "__float__"):  # decimal.Decimal
            return float(o)  # type: ignore[arg-type]
        raise TypeError(f"a {type(o).__name__} is not JSON-serializable")

    try:
        with open(path, "rb") as f:
            source = f.read()
        module = types.ModuleType("solution")
        module.__file__ = path
        sys.modules["solution"] = module
        sys.argv = [path]
        sys.path[0] = os.path.dirname(path)
        namespace = module.__dict__
        exec(PRELUDE, namespace)
        for name in [n for n in namespace if not n.startswith("__") and hasattr(builtins, n)]:
            del namespace[name]  # math.pow must not hide pow(a, b, mod)
        exec(compile(source, path, "exec"), namespace)
        solution = namespace.get("Solution")
        if isinstance(solution, type) and hasattr(solution, entry):
            function = getattr(solution(), entry)
        elif entry in namespace:
            function = namespace[entry]
        else:
            raise NameError(f"the program defines no function {entry!r} (nor a class Solution with it)")
        if not callable(function):
            raise TypeError(f"{entry!r} is not callable (its type is {type(function).__name__})")
        value = function(*args)
    except BaseException as e:  # noqa: BLE001 - whatever the program raised is its runtime error
        try:  # the program's frames only (none for the harness's own NameError and TypeError above)
            import traceback  # here: most programs never need it, and it costs milliseconds to import

            text = "".join(traceback.format_exception(type(e), e, e.__traceback__.tb_next))
        except BaseException:  # noqa: BLE001 - a hostile exception whose str() raises
            text = f"an exception ({type(e).__name__}) the harness could not format"
        fail(1, text)

    try:
        payload = dumps(value, ensure_ascii=True, allow_nan=True, separators=(",", ":"), default=default)
    except BaseException as e:  # noqa: BLE001 - not serializable, circular, too deep...
        try:
            reason = f"{type(e).__name__}: {e}"
        except BaseException:  # noqa: BLE001
            reason = "not JSON-serializable"
        payload = "!the return value cannot be written as JSON (" + reason.replace("\n", " ")[:300] + ")"
    try:
        write_all(channel, (nonce + "\n" + payload + "\n").encode("ascii", "replace"))
    except OSError as e:  # over the output limit (EFBIG), or the program closed the channel
        fail(1, f"codefu harness: cannot write the return value: {e}")
    exit_now(0)


if __name__ == "__main__":
    main()
