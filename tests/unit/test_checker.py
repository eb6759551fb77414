import json
import sys
from dataclasses import asdict

import pyarrow as pa
import pytest

from codefu.data.schema import SCHEMA, problem_to_row, row_to_problem
from codefu.data.sources.jsonl import RowError, parse_problem
from codefu.errors import CodefuError
from codefu.judge.checker import (
    CHECKER_MESSAGE_CHARS,
    check_python_checkers,
    double_equal,
    interpret_checker_exit,
    load_python_checker,
    outputs_match,
    python_checker_refusal,
    tokens_match,
)
from codefu.judge.rewards import compute_reward
from codefu.types import CheckerSpec, Problem, Status, TestCase, Verdict, checker_files_error
from helpers.hostile_checkers import DANGEROUS_CHECKERS


def test_whitespace_and_line_breaks_do_not_matter():
    assert outputs_match("1 2 3\n4 \n", "1\n2\t3 4")
    assert outputs_match("YES\n", "YES")
    assert not outputs_match("1 2 3", "1 2")
    assert not outputs_match("1 2", "1 2 3")
    assert outputs_match("", "  \n")


def test_integers_exact_at_any_size():
    big = "9" * 5000  # longer than Python's int() digit limit
    assert tokens_match(big, big)
    assert not tokens_match("7", "007") and not tokens_match("0", "-0") and not tokens_match("5", "+5")
    assert not tokens_match(big, "9" * 4999 + "8")
    assert not tokens_match("12345678901234567890", "12345678901234567891")  # a float would accept
    assert not tokens_match("3", "3.0")  # an integer answer must be printed as one
    assert not tokens_match("3", "three")


def test_reals_use_testlib_absolute_or_relative_error():
    # |1.0000005 - 1| = 5e-7 <= 1e-6: accepted by absolute error
    assert tokens_match("1.000000", "1.0000005")
    assert not tokens_match("1.000000", "1.000002")
    # 1e9 * (1 + 1e-6) = 1000001000: 1000000500 is inside the relative band, 1000002000 is not
    assert tokens_match("1000000000.0", "1000000500")
    assert not tokens_match("1000000000.0", "1000002000")
    assert tokens_match("0.5", "5e-1")
    assert not tokens_match("0.5", "half")
    assert double_equal(float("nan"), float("nan"), 1e-6)
    assert not double_equal(1.0, float("inf"), 1e-6)
    assert tokens_match("2.5", "2.5001", float_tol=1e-3)


def test_nan_and_inf_in_any_spelling_match_the_same_value():
    for expected, accepted in [
        ("NaN", ["nan", "NAN", "-nan", "+NaN"]),
        ("nan", ["NaN"]),
        ("inf", ["INF", "+inf", "Infinity"]),
        ("-inf", ["-INF", "-Infinity"]),
    ]:
        for actual in accepted:
            assert tokens_match(expected, actual), (expected, actual)
    assert not tokens_match("inf", "-inf") and not tokens_match("-Inf", "inf")
    assert (
        not tokens_match("nan", "inf") and not tokens_match("nan", "0") and not tokens_match("inf", "1e309")
    )
    assert not tokens_match("1.5", "nan") and not tokens_match("NaN", "nano")
    assert outputs_match("0.5 NaN\n-inf\n", "0.5000001 nan -INF")


def test_yes_no_case_folded_other_words_exact():
    assert tokens_match("YES", "yes") and tokens_match("No", "NO")
    assert not tokens_match("YES", "NO")
    assert not tokens_match("Alice", "alice")


def test_python_checker_loading():
    fn = load_python_checker("os.path:join", ["os.path:join"])
    assert callable(fn)
    with pytest.raises(ValueError, match="not of the form"):
        load_python_checker("nocolon", ["nocolon"])
    with pytest.raises(ValueError, match="cannot be loaded"):
        load_python_checker("codefu.nonexistent:f", ["codefu.nonexistent:f"])


@pytest.mark.parametrize("ref", DANGEROUS_CHECKERS)
def test_unregistered_python_checker_is_refused_before_any_import(ref):
    imported = set(sys.modules)
    with pytest.raises(ValueError, match="not registered"):
        load_python_checker(ref, ["checkers:any_divisor"])
    assert set(sys.modules) == imported
    refusal = python_checker_refusal(CheckerSpec("python", ref), [])
    assert refusal is not None and ref in refusal and '"kind": "program"' in refusal


def test_registered_and_builtin_checkers_may_run_program_checkers_always():
    assert python_checker_refusal(CheckerSpec("python", "mine:check"), ["mine:check"]) is None
    assert python_checker_refusal(CheckerSpec("python", "codefu.judge.checker:tokens_any_order"), []) is None
    assert python_checker_refusal(CheckerSpec("program", "int main() {}", "cpp"), []) is None
    assert python_checker_refusal(None, []) is None


def test_builtin_tokens_any_order():
    fn = load_python_checker("codefu.judge.checker:tokens_any_order", [])
    assert fn("", "1 2 3\n", "3 1\n2") and fn("", "0.5 x", "x 0.5000001")
    assert not fn("", "1 2 3", "1 2") and not fn("", "1 2 2", "1 1 2") and not fn("", "1", "1.0")


def test_a_dataset_naming_an_unregistered_checker_is_refused_with_its_problem_and_file():
    ok = Problem("fine", "", [], [TestCase("1", "1")])
    bad = Problem("shady", "", [], [TestCase("1", "1")], checker=CheckerSpec("python", "os:system"))
    check_python_checkers([ok], [], "data/x.jsonl")
    with pytest.raises(CodefuError, match=r"^data/x\.jsonl: problem 'shady': python checker 'os:system'"):
        check_python_checkers([ok, bad], [], "data/x.jsonl")
    check_python_checkers([ok, bad], ["os:system"], "data/x.jsonl")  # the operator's choice


def test_hostile_tokens_are_linear():
    long_bad = "1" * 1_000_000 + "x"
    assert not tokens_match("1.5", long_bad)
    assert not tokens_match("15", long_bad)
    assert not outputs_match("1.5 2", "1" * 1_000_000 + ".5e")


# ---- checker programs: testlib's exit codes -------------------------------------------------------------


def test_testlib_verdict_exit_codes():
    ok = interpret_checker_exit(0, "ok 3 numbers\n")
    assert ok.status is Status.ACCEPTED and ok.points is None and "ok 3 numbers" in ok.message
    assert interpret_checker_exit(0, "").message == ""
    wa = interpret_checker_exit(1, "wrong answer expected 3, found 4", problem="p")
    assert wa.status is Status.WRONG_ANSWER and "expected 3, found 4" in wa.message
    for pe_code in (2, 4, 8):  # _pe, _dirt, _unexpected_eof: rejected, and said to be a format problem
        pe = interpret_checker_exit(pe_code, "wrong output format Expected integer")
        assert pe.status is Status.WRONG_ANSWER and "presentation error" in pe.message
        assert "Expected integer" in pe.message


def test_testlib_points_are_the_fraction_of_the_test():
    half = interpret_checker_exit(7, "points 0.5 two of four pairs are fine")
    assert half.status is Status.WRONG_ANSWER and half.points == 0.5
    assert "partially correct" in half.message and "two of four" in half.message
    assert interpret_checker_exit(7, "0.25").points == 0.25  # without testlib's "points " prefix
    assert interpret_checker_exit(7, "points 0").points == 0.0
    full = interpret_checker_exit(7, "points 1.0000000000")
    assert full.status is Status.ACCEPTED and full.points == 1.0
    for bad in ("points", "points lots", "points 1.5", "points -0.1", "points nan", "", "0.5x"):
        out = interpret_checker_exit(7, bad, problem="perm")
        assert out.status is Status.SANDBOX_ERROR and "checker of 'perm'" in out.message, bad


def test_checker_failures_are_ours_never_a_verdict():
    cases = [
        (3, None, "FAIL answer file is broken", "failed"),
        (42, None, "\x01garbage\x7f", "exited with status 42"),
        (5, None, "", "not a testlib verdict"),  # EJUDGE's WA code: not ours to guess
        (57, None, "", "not a testlib verdict"),  # TESTSYS _pc(7): base and scale are system specific
        (139, None, "", "SIGSEGV"),
        (134, None, "", "SIGABRT"),
        (137, "cpu", "", "CPU time limit"),
        (None, "wall", "", "wall-clock time limit"),
        (137, "memory", "", "memory limit"),
        (0, "output", "", "output size limit"),  # a limit wins over the exit code
        (None, None, "", "did not report"),
    ]
    for code, limit, text, says in cases:
        out = interpret_checker_exit(code, text, limit, problem="perm")
        assert out.status is Status.SANDBOX_ERROR and out.points is None, (code, limit)
        assert out.message.startswith("checker of 'perm' ") and says in out.message, out.message


def test_checker_message_is_truncated():
    out = interpret_checker_exit(1, "wrong answer " + "x" * 10_000)
    assert out.status is Status.WRONG_ANSWER and len(out.message) <= CHECKER_MESSAGE_CHARS


# ---- checker specs: extra files, stored and read back ----------------------------------------------------


def test_checker_file_names():
    assert checker_files_error({"testlib.h": "//", "helper_2.py": "", "a+b.hpp": ""}) is None
    for bad in ({"../x.h": ""}, {"sub/x.h": ""}, {".hidden": ""}, {"main.cpp": ""}, {"main": ""}, {"": ""}):
        assert checker_files_error(bad) is not None, bad
    assert checker_files_error({"a.h": 3}) is not None
    assert checker_files_error(["testlib.h"]) is not None


SPEC = CheckerSpec("program", '#include "testlib.h"\nint main() {}\n', "cpp", {"testlib.h": "#pragma once\n"})


def test_checker_files_round_trip_through_parquet_rows_and_jsonl():
    problem = Problem("p", "statement", [], [TestCase("1\n", "1\n")], checker=SPEC)
    row = problem_to_row(problem, "train", 0, "easy", "p")
    assert json.loads(row["extra_info"]["checker"])["files"] == SPEC.files
    table = pa.Table.from_pylist([row], schema=SCHEMA)  # the published schema still holds it
    assert row_to_problem(table.to_pylist()[0], "x").checker == SPEC
    obj = {"statement": "s", "tests": [{"input": "1", "output": "1"}], "checker": asdict(SPEC)}
    assert parse_problem(obj, "x").checker == SPEC


def test_checkers_stored_before_files_existed_still_read():
    old = json.dumps({"kind": "program", "source": "int main() {}", "language": "cpp"})
    row = problem_to_row(Problem("p", "s", [], [TestCase("1", "1")]), "train", 0, "easy", "p")
    row["extra_info"]["checker"] = old
    assert row_to_problem(row, "x").checker == CheckerSpec("program", "int main() {}", "cpp", {})
    plain = Problem("p", "s", [], [], checker=CheckerSpec("program", "x"))
    no_files = problem_to_row(plain, "t", 0, "e", "p")
    assert "files" not in json.loads(no_files["extra_info"]["checker"])  # rows look as they did
    assert parse_problem({"statement": "s", "checker": {"kind": "python", "source": "m:f"}}, "x").checker == (
        CheckerSpec("python", "m:f")
    )


def test_bad_checker_files_are_rejected_when_read():
    bad = {"kind": "program", "source": "x", "files": {"../a": ""}}
    with pytest.raises(RowError, match="file name"):
        parse_problem({"statement": "s", "checker": bad}, "x")
    row = problem_to_row(Problem("p", "s", [], [TestCase("1", "1")]), "train", 0, "easy", "p")
    row["extra_info"]["checker"] = json.dumps({"kind": "program", "source": "x", "files": {"a/b": ""}})
    with pytest.raises(ValueError, match="file name"):
        row_to_problem(row, "x")


def test_score_ratio_counts_partial_points_and_defaults_to_the_pass_ratio():
    assert Verdict(Status.WRONG_ANSWER, passed=2, total=4).score_ratio == 0.5  # no score: passed
    v = Verdict(Status.WRONG_ANSWER, passed=2, total=4, score=2.5)
    assert v.pass_ratio == 0.5 and v.score_ratio == 0.625
    assert compute_reward(v, "codefu") == 0.625 and compute_reward(v, "binary") == 0.0
    assert compute_reward(v, "codefu_stage1") == pytest.approx(0.625**1.5)
    assert Verdict.from_dict(v.to_dict()) == v
    old = v.to_dict()
    del old["score"]  # verdicts saved before scores existed
    assert Verdict.from_dict(old).score_ratio == 0.5
