import pytest

from codefu.judge.checker import double_equal, load_python_checker, outputs_match, tokens_match


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
    assert not tokens_match("nan", "inf") and not tokens_match("nan", "0") and not tokens_match("inf", "1e309")
    assert not tokens_match("1.5", "nan") and not tokens_match("NaN", "nano")
    assert outputs_match("0.5 NaN\n-inf\n", "0.5000001 nan -INF")


def test_yes_no_case_folded_other_words_exact():
    assert tokens_match("YES", "yes") and tokens_match("No", "NO")
    assert not tokens_match("YES", "NO")
    assert not tokens_match("Alice", "alice")


def test_python_checker_loading():
    fn = load_python_checker("os.path:join")
    assert callable(fn)
    with pytest.raises(ValueError, match="not of the form"):
        load_python_checker("nocolon")
    with pytest.raises(ValueError, match="cannot be loaded"):
        load_python_checker("codefu.nonexistent:f")


def test_hostile_tokens_are_linear():
    long_bad = "1" * 1_000_000 + "x"
    assert not tokens_match("1.5", long_bad)
    assert not tokens_match("15", long_bad)
    assert not outputs_match("1.5 2", "1" * 1_000_000 + ".5e")
