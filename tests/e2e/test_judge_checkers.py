"""Special-judge checkers the testlib way, in the real sandbox: a problem with many valid answers judged by a
C++ checker built on a testlib-shaped header shipped with the problem (`CheckerSpec.files`) and by a Python
checker program; testlib's exit codes (ok, wrong answer, presentation error, points); and checkers that
fail (crash, loop, allocate, print garbage, _fail), which are the judge's error, never the contestant's."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from codefu.judge import Judge, JudgeConfig, compute_reward
from codefu.judge.languages import CompileConfig
from codefu.types import CheckerSpec, Problem, Status, TestCase

MINI_TESTLIB = (Path(__file__).parents[1] / "data" / "checkers" / "mini_testlib.h").read_text()

# "Print any permutation of 1..n whose adjacent elements differ by more than 1" (n >= 4). The expected
# outputs are one answer among many.
TESTS = [TestCase("4\n", "3 1 4 2\n"), TestCase("5\n", "1 3 5 2 4\n"), TestCase("6\n", "1 3 5 2 4 6\n")]

# A checker written the testlib way: a non-number is a presentation error (readInt), a number out of range or
# a repeat a wrong answer, trailing output a presentation error (quitf(_ok) checks the output is over), and a
# permutation with some adjacent pairs too close gets the fraction of good pairs as points.
CPP_CHECKER = textwrap.dedent("""\
    #include "testlib.h"
    #include <vector>
    int main(int argc, char* argv[]) {
        registerTestlibCmd(argc, argv);
        int n = inf.readInt(1, 1000000, "n");
        ensuref(ans.readInt(1, n) >= 1, "the jury's answer is broken");
        std::vector<int> p(n), seen(n + 1);
        for (int i = 0; i < n; i++) {
            p[i] = ouf.readInt(1, n, "p_i");
            if (seen[p[i]]++) quitf(_wa, "%d appears twice", p[i]);
        }
        int good = 0;
        for (int i = 0; i + 1 < n; i++) good += std::abs(p[i] - p[i + 1]) > 1;
        if (good == n - 1) quitf(_ok, "n=%d", n);
        if (good == 0) quitf(_wa, "every adjacent pair differs by at most 1");
        quitp(double(good) / (n - 1), "%d of %d adjacent pairs differ by more than 1", good, n - 1);
    }
""")

# The same rules as a Python checker program: testlib's exit codes, its messages on stderr.
PY_CHECKER = textwrap.dedent("""\
    import sys

    def verdict(code, message):
        sys.stderr.write(message + "\\n")
        sys.exit(code)

    n = int(open(sys.argv[1]).read().split()[0])
    tokens = open(sys.argv[2]).read().split()
    if len(tokens) != n or not all(t.isdigit() for t in tokens):
        verdict(2, f"wrong output format expected {n} numbers")
    p = [int(t) for t in tokens]
    if sorted(p) != list(range(1, n + 1)):
        verdict(1, "wrong answer not a permutation")
    good = sum(abs(a - b) > 1 for a, b in zip(p, p[1:]))
    if good == n - 1:
        verdict(0, "ok")
    if good == 0:
        verdict(1, "wrong answer every adjacent pair differs by at most 1")
    verdict(7, f"points {good / (n - 1)} {good} of {n - 1} pairs are fine")
""")

CHECKERS = {
    "cpp-testlib": CheckerSpec("program", CPP_CHECKER, "cpp", {"testlib.h": MINI_TESTLIB}),
    "python": CheckerSpec("program", PY_CHECKER, "python"),
}


def cpp(body: str) -> str:
    return f'```cpp\n#include <cstdio>\nint main() {{ int n; scanf("%d", &n); {body} }}\n```'


def py(body: str) -> str:
    return f"```python\nn = int(input())\n{body}\n```"


EVENS_THEN_ODDS = cpp(
    'for (int i = 2; i <= n; i += 2) printf("%d ", i); for (int i = 1; i <= n; i += 2) printf("%d ", i);'
)
ODDS_DOWN_THEN_EVENS_DOWN = py(
    "d = range(n, 0, -1)\nprint(*[i for i in d if i % 2], *[i for i in d if i % 2 < 1])"
)
SORTED = py("print(*range(1, n + 1))")  # a permutation, every pair too close
REPEATS = py("print(*[2] * n)")
COMMAS = py("print(','.join(str(i) for i in [*range(2, n + 1, 2), *range(1, n + 1, 2)]))")
ODDS_THEN_EVENS = py("print(*range(1, n + 1, 2), *range(2, n + 1, 2))")  # n=4: 1 3 2 4, one bad pair of 3


def problem(checker: CheckerSpec, name: str = "perm") -> Problem:
    return Problem(name, "", [], TESTS, time_limit_s=0.5, memory_limit_bytes=64 << 20, checker=checker)


@pytest.fixture(scope="module")
def judge():
    # small checker limits keep the looping and allocating checkers quick; a sandbox error stops a submission
    config = JudgeConfig(workers=2, checker_time_s=1.0, checker_memory_bytes=128 << 20)
    config.compile = CompileConfig(time_s=30)
    with Judge(config) as j:
        yield j


@pytest.mark.parametrize("kind", CHECKERS)
def test_any_valid_answer_is_accepted_and_wrong_ones_are_not(judge, kind):
    p = problem(CHECKERS[kind])
    for response in (EVENS_THEN_ODDS, ODDS_DOWN_THEN_EVENS_DOWN):  # two answers, neither the expected one
        v = judge.judge(p, response)
        assert v.status is Status.ACCEPTED and v.passed == 3 and v.score == 3, v
    for response in (SORTED, REPEATS):
        v = judge.judge(p, response)
        assert v.status is Status.WRONG_ANSWER and v.passed == 0 and v.score == 0, v
        assert "wrong answer" in v.message and v.tests[0].message.startswith("checker: ")
        assert compute_reward(v, "codefu") == 0.0


@pytest.mark.parametrize("kind", CHECKERS)
def test_presentation_error_is_a_wrong_answer_that_says_so(judge, kind):
    v = judge.judge(problem(CHECKERS[kind]), COMMAS)
    assert v.status is Status.WRONG_ANSWER and v.passed == 0
    assert "presentation error" in v.message and "wrong output format" in v.message


@pytest.mark.parametrize("kind", CHECKERS)
def test_partial_points_count_as_their_fraction_of_the_test(judge, kind):
    v = judge.judge(problem(CHECKERS[kind]), ODDS_THEN_EVENS)  # n=4: 2/3 of the pairs; n=5, n=6: right
    assert v.status is Status.WRONG_ANSWER and v.passed == 2 and v.first_failure == 0
    first = v.tests[0]
    assert first.status is Status.WRONG_ANSWER and first.points == pytest.approx(2 / 3)
    assert "partially correct" in first.message and "2 of 3" in first.message
    assert v.score == pytest.approx(2 + 2 / 3)
    assert compute_reward(v, "codefu") == pytest.approx((2 + 2 / 3) / 3)  # the pass ratio, partial included
    assert compute_reward(v, "binary") == 0.0


def test_checker_compiles_once_for_many_tests_and_submissions(judge, monkeypatch):
    spec = CheckerSpec("program", CPP_CHECKER + "// compile-once\n", "cpp", {"testlib.h": MINI_TESTLIB})
    builds: list[str] = []
    build = judge.compiler._build

    def counting_build(program, key, files, time_s):
        builds.append(program.source)
        return build(program, key, files, time_s)

    monkeypatch.setattr(judge.compiler, "_build", counting_build)
    p = problem(spec)
    items = [(p, r) for r in (EVENS_THEN_ODDS, ODDS_DOWN_THEN_EVENS_DOWN, SORTED, ODDS_THEN_EVENS)] * 2
    verdicts = dict(judge.judge_many(items))
    assert len(verdicts) == 8 and verdicts[0].status is Status.ACCEPTED
    assert builds.count(spec.source) == 1  # 4 programs x 3 tests ran it; it was compiled once
    # the extra files are part of the cache key: another testlib.h is another checker
    other = CheckerSpec("program", spec.source, "cpp", {"testlib.h": MINI_TESTLIB + "// v2\n"})
    assert judge.judge(problem(other), EVENS_THEN_ODDS).status is Status.ACCEPTED
    assert builds.count(spec.source) == 2


def test_checker_that_does_not_find_its_header_is_our_error(judge):
    v = judge.judge(problem(CheckerSpec("program", CPP_CHECKER, "cpp")), EVENS_THEN_ODDS)  # no testlib.h
    assert v.status is Status.SANDBOX_ERROR and compute_reward(v, "codefu") is None
    assert "checker of 'perm' does not compile" in v.message and "testlib.h" in v.message


BROKEN = {
    # name: (checker, what the message says)
    "crashes": (CheckerSpec("program", "int main() { volatile int* p = nullptr; return *p; }"), "SIGSEGV"),
    "loops": (CheckerSpec("program", "int main() { for (volatile int i = 0;; i = i + 1) {} }"), "time limit"),
    "allocates-4GiB": (
        CheckerSpec(
            "program",
            "#include <cstdlib>\nint main() { size_t n = size_t(4) << 30;"
            " volatile char* p = (char*)malloc(n); if (!p) return 77;"
            " for (size_t i = 0; i < n; i += 4096) p[i] = 1; return 1; }",
        ),
        "checker of 'perm'",  # the memory limit (an OOM kill), or malloc refused: an unknown status
    ),
    "garbage-exit-42": (
        CheckerSpec("program", '#include <cstdio>\nint main() { printf("\\x01\\xffjunk"); return 42; }'),
        "exited with status 42",
    ),
    "testlib-fail": (
        CheckerSpec(
            "program",
            '#include "testlib.h"\nint main(int c, char* v[]) { registerTestlibCmd(c, v);'
            ' quitf(_fail, "jury answer %d is broken", ans.readInt()); }',
            "cpp",
            {"testlib.h": MINI_TESTLIB},
        ),
        "failed (exit 3",
    ),
    "points-without-a-number": (CheckerSpec("program", "import sys\nsys.exit(7)\n", "python"), "exit 7"),
    "python-raises": (CheckerSpec("program", "print(1 // 0)\n", "python"), "ZeroDivisionError"),
    "python-sleeps": (CheckerSpec("program", "import time\ntime.sleep(60)\n", "python"), "wall-clock"),
}


@pytest.mark.parametrize("name", BROKEN)
def test_a_failing_checker_is_our_error_never_a_verdict_against_the_contestant(judge, name):
    checker, says = BROKEN[name]
    v = judge.judge(problem(checker), EVENS_THEN_ODDS)
    assert v.status is Status.SANDBOX_ERROR, v
    assert compute_reward(v, "codefu") is None  # left out of rewards and baselines
    assert v.message.startswith("checker of 'perm'") and says in v.message, v.message
    assert v.tests and all(t.status is Status.SANDBOX_ERROR for t in v.tests)  # the answer is right
    assert len(v.tests) <= judge.workers  # no test is started after the first failure of ours


def test_judge_keeps_serving_after_checker_failures(judge):
    """A checker that breaks on one test only: that verdict is ours, and the next submissions are judged."""
    breaks_on_5 = "import sys\nif open(sys.argv[1]).read().strip() == '5':\n    sys.exit(42)\n"
    flaky = CheckerSpec("program", PY_CHECKER.replace("import sys\n", breaks_on_5, 1), "python")
    v = judge.judge(problem(flaky), EVENS_THEN_ODDS)
    assert v.status is Status.SANDBOX_ERROR and "exited with status 42" in v.message
    assert judge.judge(problem(CHECKERS["python"]), EVENS_THEN_ODDS).status is Status.ACCEPTED
