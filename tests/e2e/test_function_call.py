"""Function-call problems in the real sandbox: the harness calls the function (top-level or a method of
`class Solution`), the judge compares the returned JSON outside; right answers pass, wrong ones, crashes
and timeouts get their status, and hostile programs that attack the harness never pass a wrong answer
nor break the judge."""

from __future__ import annotations

import json

import pytest

from codefu.judge import Judge, JudgeConfig
from codefu.types import FunctionSpec, Problem, Status, TestCase

ADD = [TestCase("[1, 2]", "3"), TestCase("[10, -4]", "6"), TestCase("[0, 0]", "0")]
WRONG_ADD = [TestCase("[1, 2]", "4")]  # the expected value a hostile program must not get accepted for


def py(body: str) -> str:
    return f"```python\n{body}\n```"


def problem(tests: list[TestCase], entry: str = "add", time_limit_s: float = 1.0, **kw) -> Problem:
    spec = FunctionSpec(entry, **kw)
    return Problem("fn", "", [], tests, time_limit_s, 128 << 20, preferred_language="python", function=spec)


@pytest.fixture(scope="module")
def judge():
    with Judge(JudgeConfig(workers=2, output_limit_bytes=1 << 20)) as j:
        yield j


def verdict(judge: Judge, body: str, tests: list[TestCase] = ADD, entry: str = "add", **kw):
    return judge.judge(problem(tests, entry, **kw), py(body))


# ---- both directions --------------------------------------------------------------------------------


def test_top_level_function_and_solution_method_are_accepted(judge):
    v = verdict(
        judge, "def add(a, b):\n    print('debug', a, b)  # prints do not spoil the result\n    return a + b"
    )
    assert v.status is Status.ACCEPTED and v.passed == 3, v
    method = "class Solution:\n    def add(self, a: int, b: int) -> int:\n        return a + b"
    assert verdict(judge, method).status is Status.ACCEPTED  # List/typing names and no `import` needed


def test_leetcode_names_are_in_scope_and_main_blocks_do_not_run(judge):
    body = """\
class Solution:
    def top(self, nums: List[int], k: int) -> List[int]:
        return [x for x, _ in Counter(nums).most_common(k)] + [heappop(sorted(nums))] + [pow(2, 10, 7)]

if __name__ == "__main__":
    print(Solution().top(list(map(int, input().split())), 1))
"""
    tests = [TestCase("[[3, 1, 3, 2, 3], 1]", "[3, 1, 2]")]
    assert verdict(judge, body, tests, "top").status is Status.ACCEPTED


def test_wrong_value_exception_and_timeout_are_rejected(judge):
    wrong = verdict(judge, "def add(a, b):\n    return a - b")
    assert wrong.status is Status.WRONG_ANSWER and wrong.first_failure == 0
    crash = verdict(judge, "def add(a, b):\n    return a / 0")
    assert crash.status is Status.RUNTIME_ERROR and "ZeroDivisionError" in crash.message
    slow = verdict(judge, "def add(a, b):\n    while True:\n        pass", time_limit_s=0.5)
    assert slow.status is Status.TIME_LIMIT
    missing = verdict(judge, "def plus(a, b):\n    return a + b")
    assert missing.status is Status.RUNTIME_ERROR and "no function 'add'" in missing.message


def test_cpp_is_refused_for_a_function_call_problem(judge):
    v = judge.judge(problem(ADD), "```cpp\nint add(int a, int b) { return a + b; }\n```")
    assert v.status is Status.COMPILE_ERROR and "Python" in v.compile_output


def test_floats_within_tolerance_tuples_sets_and_wrapped_outputs(judge):
    floats = [TestCase("[1, 3]", "0.333333333"), TestCase("[2, 3]", "[0.6666667, 2]")]
    body = "def f(a, b):\n    return a / b if a == 1 else (a / b, 2)"  # a tuple equals the list
    assert verdict(judge, body, floats, "f").status is Status.ACCEPTED
    assert (
        verdict(judge, "def f(a, b):\n    return a / b + 1e-3", floats[:1], "f").status is Status.WRONG_ANSWER
    )
    sets = [TestCase("[[3, 1, 3, 2]]", "[1, 2, 3]")]
    assert verdict(judge, "def f(xs):\n    return set(xs)", sets, "f").status is Status.ACCEPTED
    wrapped = [TestCase("[2]", "[4]")]  # TACO stores many expected values wrapped in a list
    square = "def f(x):\n    return x * x"
    assert verdict(judge, square, wrapped, "f", unwrap_singleton=True).status is Status.ACCEPTED
    assert verdict(judge, square, wrapped, "f").status is Status.WRONG_ANSWER


def test_unserializable_return_value_is_a_wrong_answer(judge):
    v = verdict(judge, "def add(a, b):\n    return object()")
    assert v.status is Status.WRONG_ANSWER and "cannot be written as JSON" in v.message


# ---- hostile programs: the expected value is 4 for add(1, 2), the right answer 3 ---------------------

HOSTILE = {
    # (a) a fake result printed before returning the real (wrong) one
    "fake-print": "def add(a, b):\n    print(4)\n    print('0' * 32)\n    print(4)\n    return 3",
    # (b) monkeypatching json.dumps, sys.stdout and builtins to forge the output
    "patch-json": "import json\njson.dumps = lambda *a, **k: '4'\ndef add(a, b):\n    return 3",
    "patch-stdout": "import sys, io\nsys.stdout = io.StringIO()\nsys.__stdout__.write('4\\n')\ndef add(a, b):\n    return 3",
    "patch-builtins": "import builtins\nbuiltins.print = lambda *a, **k: None\nbuiltins.repr = lambda o: '4'\ndef add(a, b):\n    return 3",
    # (c) leaving before the harness writes anything
    "os-exit": "import os\ndef add(a, b):\n    print(4, flush=True)\n    os._exit(0)",
    "sys-exit": "import sys\ndef add(a, b):\n    print(4)\n    sys.exit(0)",
    "exit-at-import": "import sys\nprint(4)\nsys.exit(0)",
    # (e) an entry point that is not callable
    "not-callable": "add = 4",
    "solution-attribute": "class Solution:\n    add = 4",
    # (f) infinite recursion
    "recursion": "def add(a, b):\n    return add(a, b)",
    "deep-recursion": "import sys\nsys.setrecursionlimit(10**9)\ndef add(a, b):\n    return add(a, b) + 1",
    # (g) a huge return value (over the 1 MiB output limit) and a deeply nested one
    "huge": "def add(a, b):\n    return [4] * (10 ** 6)",
    "long": "def add(a, b):\n    return [4] * (10 ** 5)",  # under the output limit, over the judge's cap
    "deep": "def add(a, b):\n    x = 4\n    for _ in range(100000):\n        x = [x]\n    return x",
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_program_never_passes_a_wrong_answer(judge, name):
    v = verdict(judge, HOSTILE[name], WRONG_ADD)
    assert v.status is not Status.ACCEPTED and v.status is not Status.SANDBOX_ERROR, v
    if name in ("os-exit", "sys-exit", "exit-at-import", "not-callable", "solution-attribute", "recursion"):
        assert v.status is Status.RUNTIME_ERROR, v
    if name == "huge":
        assert v.status in (Status.OUTPUT_LIMIT, Status.MEMORY_LIMIT, Status.TIME_LIMIT), v
    if name == "long":
        assert v.status is Status.WRONG_ANSWER and "far longer" in v.message, v
    assert verdict(judge, "def add(a, b):\n    return a + b").status is Status.ACCEPTED  # still serving


def test_forged_result_frames_count_as_the_value_they_carry(judge):
    """In-process, a program can write on the harness's channel itself. A frame under a guessed nonce is
    ignored; one written after rewinding the channel (so that its nonce is the first line) is judged as
    the value it carries: the verdict of returning that value, which it could have done anyway."""
    guessed = "import os\ndef add(a, b):\n    os.write(3, b'0' * 32 + b'\\n4\\n')\n    return 3"
    assert verdict(judge, guessed, WRONG_ADD).status is Status.WRONG_ANSWER
    frame = "b'0' * 32 + b'\\n' + b'0' * 32 + b'\\n' + VALUE + b'\\n'"
    rewind = f"import os\ndef add(a, b):\n    os.lseek(3, 0, 0)\n    os.write(3, {frame})\n    os._exit(0)"
    assert verdict(judge, rewind.replace("VALUE", "b'4'"), WRONG_ADD).status is Status.ACCEPTED  # = return 4
    assert verdict(judge, rewind.replace("VALUE", "b'5'"), WRONG_ADD).status is Status.WRONG_ANSWER


def test_the_expected_value_never_enters_the_sandbox(judge):
    """(d) The program searches every file it can read (its stdin, the harness, /tmp, /proc, its
    environment) for the expected value, a marker it knows the shape of, and returns it if found."""
    marker = "expected-7f3a9c"
    body = """\
import os, re, sys
def f(x):
    seen = [repr(sys.argv), repr(dict(os.environ)), repr(x)]
    for top in ('/tmp', '/box', '/codefu-harness', '/proc/self', '/proc/1', '/proc/self/fd', '/dev'):
        for name in os.listdir(top):
            path = os.path.join(top, name)
            try:
                if os.path.isfile(path) or top.endswith('/fd'):
                    with open(path, 'rb') as fh:
                        seen.append(fh.read(1 << 20).decode('latin-1'))
            except OSError:
                pass
    found = re.search(r'expected-[0-9a-f]{6}', '\\n'.join(seen))
    return found.group(0) if found else 'nothing'
"""
    leak = verdict(judge, body, [TestCase(json.dumps([marker]), json.dumps(marker))], "f")
    assert leak.status is Status.ACCEPTED  # control: the marker is found when it is an argument
    v = verdict(judge, body, [TestCase('["arg"]', json.dumps(marker))], "f")
    assert v.status is Status.WRONG_ANSWER, v  # would be ACCEPTED had it found the expected value


def test_a_sandbox_per_test_runs_the_harness_the_same_way():
    config = JudgeConfig(workers=1)
    config.sandbox.runner = False
    with Judge(config) as j:
        assert verdict(j, "def add(a, b):\n    return a + b").status is Status.ACCEPTED
        assert verdict(j, HOSTILE["fake-print"], WRONG_ADD).status is Status.WRONG_ANSWER
