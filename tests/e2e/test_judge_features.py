"""Judge behaviour beyond the happy path: per-problem checkers, the no-cgroup fallback, refusing to
start without bubblewrap, verdict fields."""

import logging
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from codefu.errors import SandboxUnavailable
from codefu.judge import Judge, JudgeConfig
from codefu.judge.extract import Program
from codefu.judge.sandbox import Limits, SandboxConfig
from codefu.types import CheckerSpec, Problem, Status, TestCase, Verdict
from helpers.arriving import judge_while_arriving

sys.path.insert(0, str(Path(__file__).parent))

TESTS = [TestCase("12\n", "2\n"), TestCase("35\n", "5\n"), TestCase("49\n", "7\n")]
LARGEST_DIVISOR = "```python\nn = int(input())\nprint(max(d for d in range(2, n) if n % d == 0))\n```"
NOT_A_DIVISOR = "```python\nn = int(input())\nprint(n - 1)\n```"

CPP_CHECKER = textwrap.dedent("""\
    #include <fstream>
    int main(int argc, char** argv) {
        std::ifstream in(argv[1]), out(argv[2]);
        long long n, d;
        if (!(in >> n) || !(out >> d)) return 1;
        return (1 < d && d < n && n % d == 0) ? 0 : 1;
    }
""")


@pytest.fixture(scope="module")
def judge():
    with Judge(JudgeConfig(workers=2, python_checkers=["checkers:any_divisor"])) as j:
        yield j


def test_exact_comparison_rejects_another_valid_answer(judge):
    v = judge.judge(Problem("div", "", [], TESTS), LARGEST_DIVISOR)
    assert v.status is Status.WRONG_ANSWER  # 12 -> 6, but the expected output says 2


@pytest.mark.parametrize(
    "checker",
    [CheckerSpec("python", "checkers:any_divisor"), CheckerSpec("program", CPP_CHECKER, "cpp")],
    ids=["python", "program"],
)
def test_problem_checker_accepts_any_valid_answer(judge, checker):
    problem = Problem("div", "", [], TESTS, checker=checker)
    assert judge.judge(problem, LARGEST_DIVISOR).status is Status.ACCEPTED
    v = judge.judge(problem, NOT_A_DIVISOR)
    assert v.status is Status.WRONG_ANSWER and v.passed == 0


def test_broken_checker_is_our_error_not_the_models(judge):
    problem = Problem("div", "", [], TESTS, checker=CheckerSpec("program", "int main( {", "cpp"))
    v = judge.judge(problem, LARGEST_DIVISOR)
    assert v.status is Status.SANDBOX_ERROR
    assert "checker" in v.tests[0].message


def test_verdict_fields_and_round_trip(judge):
    v = judge.judge(Problem("div", "", [], TESTS, time_limit_s=1.5), NOT_A_DIVISOR)
    assert v.language == "python" and v.total == 3 and len(v.tests) == 3
    assert v.first_failure == 0 and v.time_s > 0
    assert all(t.cpu_s > 0 and t.wall_s > 0 and t.memory_bytes > 0 and t.exit_code == 0 for t in v.tests)
    assert Verdict.from_dict(v.to_dict()) == v


def test_time_scale_applies_to_the_limit():
    busy = "```python\nimport time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass\nprint(2)\n```"
    problem = Problem("busy", "", [], [TestCase("12\n", "2\n")], time_limit_s=0.5)
    with Judge(JudgeConfig(workers=1)) as j:
        assert j.judge(problem, busy).status is Status.TIME_LIMIT
    with Judge(JudgeConfig(workers=1, time_scale=3.0)) as j:
        assert j.judge(problem, busy).status is Status.ACCEPTED


def test_without_cgroups_limits_still_hold_and_weakness_is_logged(caplog):
    caplog.set_level(logging.WARNING)
    with Judge(JudgeConfig(workers=1, sandbox=SandboxConfig(cgroup="off"))) as j:
        assert j.sandbox.cgroups is None
        assert any("no cgroup" in r.message for r in caplog.records)
        problem = Problem("div", "", [], TESTS[:1], time_limit_s=0.5, memory_limit_bytes=128 << 20)
        assert j.judge(problem, LARGEST_DIVISOR).status is Status.WRONG_ANSWER
        loop = j.judge(problem, "```cpp\nint main(){ volatile long x = 0; for(;;) x++; }\n```")
        assert loop.status is Status.TIME_LIMIT
        bomb = j.judge(problem, "```python\na = bytearray(10**9)\n```")
        assert bomb.status in (Status.RUNTIME_ERROR, Status.MEMORY_LIMIT)  # RLIMIT_AS: MemoryError


def test_refuses_to_start_without_bubblewrap(tmp_path):
    code = "from codefu.judge import Judge\nJudge()"
    env = {**os.environ, "PATH": str(tmp_path)}  # no bwrap on this PATH
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode != 0
    assert "bubblewrap (bwrap) is not installed" in r.stderr and "apt-get install bubblewrap" in r.stderr


def test_unsafe_mode_is_explicit_and_works(caplog):
    caplog.set_level(logging.WARNING)
    with Judge(JudgeConfig(workers=1, sandbox=SandboxConfig(kind="none"))) as j:
        assert any("WITHOUT isolation" in r.message for r in caplog.records)
        cpp = '```cpp\n#include <cstdio>\nint main(){int n; scanf("%d",&n); printf("%d\\n", n/6);}\n```'
        assert j.judge(Problem("div", "", [], TESTS[:1]), cpp).status is Status.ACCEPTED


def test_identical_programs_in_a_batch_are_judged_once(judge):
    problem = Problem("div", "", [], TESTS)
    same_problem_again = Problem("div", "", [], TESTS)  # another object: its own submissions
    in_prose = f"It prints n - 1.\n{NOT_A_DIVISOR}\nDone."  # the same program, other words around it
    items = [
        (problem, NOT_A_DIVISOR),
        (problem, in_prose),
        (problem, LARGEST_DIVISOR),
        (same_problem_again, NOT_A_DIVISOR),
        (problem, "no code"),
        (problem, "still no code"),
    ]
    verdicts = dict(judge.judge_many(items))
    assert [verdicts[i].reused for i in range(len(items))] == [False, True, False, False, False, True]
    assert verdicts[1].status is verdicts[0].status is Status.WRONG_ANSWER
    assert verdicts[1].tests == verdicts[0].tests and verdicts[1].tests is not verdicts[0].tests
    assert verdicts[5].status is Status.NO_CODE
    with Judge(JudgeConfig(workers=2, judge_identical_once=False)) as each:
        again = dict(each.judge_many(items))
    assert not any(v.reused for v in again.values())
    assert [again[i].status for i in range(len(items))] == [verdicts[i].status for i in range(len(items))]


def test_a_work_dir_the_sandbox_user_cannot_enter_is_a_clear_error():
    # a 0700 $TMPDIR (mkdtemp's mode): as root, the sandbox runs as nobody, which cannot reach the binds
    base = Path(tempfile.mkdtemp(prefix="cfw-", dir="/tmp"))  # pytest's tmp_path is 0700 itself
    try:
        base.chmod(0o755)
        private = base / "private"
        private.mkdir(mode=0o700)
        config = JudgeConfig(work_dir=str(private / "judge"), workers=1)
        if os.geteuid() == 0:
            with pytest.raises(SandboxUnavailable, match=r"cannot enter: use a \$TMPDIR or judge.work_dir"):
                Judge(config)
            private.chmod(0o711)  # traversable: the same folder works
        with Judge(config) as judge:
            problem = Problem("ab", "", [], [TestCase("1 2\n", "3\n")])
            response = "```python\nprint(sum(map(int, input().split())))\n```"
            assert judge.judge(problem, response).status is Status.ACCEPTED
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_submissions_are_judged_as_they_arrive():
    """The loop hands the judge completions as the engine finishes them: each is judged at once, with
    twins (the same program again) reusing a verdict judged before they arrived."""
    double = Problem("double", "", [], [TestCase(f"{i}\n", f"{2 * i}\n") for i in range(4)], time_limit_s=2)
    right = "```python\nprint(2 * int(input()))\n```"
    wrong = "```python\nprint(2 * int(input()) + 1)\n```"
    with Judge(JudgeConfig(workers=2, python_checkers=["checkers:any_divisor"])) as j:
        verdicts = judge_while_arriving(j.judge_many, double, [right, wrong, "Again:\n" + right])
    assert [verdicts[i].status for i in range(3)] == [Status.ACCEPTED, Status.WRONG_ANSWER, Status.ACCEPTED]
    assert [verdicts[i].reused for i in range(3)] == [False, False, True]


DOUBLING_CPP = (
    "#include <bits/stdc++.h>\nint main() { long long n; std::cin >> n; std::cout << 2 * n << '\\n'; }"
)


def test_a_compile_over_its_time_limit_is_not_cached():
    """Over its limit, a compiler says more about the load at the time and the caller's limit than about
    the program: the next call (here with the default limit) compiles again instead of failing too."""
    limits = Limits(2, 7, 256 << 20, 1 << 20)
    with Judge(JudgeConfig(workers=1)) as judge:
        tight = judge.run_once(Program("cpp", DOUBLING_CPP), "21\n", limits, compile_time_s=0.01)
        assert not tight.compiled and tight.compile_over_limit, tight
        again = judge.run_once(Program("cpp", DOUBLING_CPP), "21\n", limits)
        assert again.compiled and again.stdout == "42\n", again
        assert judge.compiler.misses == 2
        # a plain compile error is the program's: cached
        broken = Program("cpp", "int main( {")
        assert not judge.run_once(broken, "", limits).compiled
        assert not judge.run_once(broken, "", limits).compiled and judge.compiler.misses == 3


def test_a_program_dropped_from_the_cache_while_in_use_does_not_take_its_rebuild_with_it():
    """A cache entry evicted while a run still uses it is removed when that run ends, which can be after
    the same program was built again: the rebuild has a folder of its own."""
    config = JudgeConfig(workers=1)
    config.compile.cache_entries = 1
    with Judge(config) as judge:
        compiler = judge.compiler
        first, other = Program("cpp", DOUBLING_CPP), Program("cpp", DOUBLING_CPP + "\n// another")
        with compiler.compiled(first) as old:
            with compiler.compiled(other):  # evicts `first`, still in use
                pass
            with compiler.compiled(first) as rebuilt:  # `other` evicted, `first` built again
                assert rebuilt.directory != old.directory
        # the old build's folder went with its last user; the rebuild's stays until it is evicted
        assert not old.directory.exists() and (rebuilt.directory / "main").exists()
        assert compiler.misses == 3
