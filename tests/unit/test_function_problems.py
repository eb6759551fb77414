"""Function-call problems without the sandbox: the pure comparison of JSON values, reading the harness's
framed result, the harness's conversions (run directly with this Python), the parquet round trip of
`Problem.function`, and the function-call prompt."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from codefu.data.schema import SCHEMA, function_from_json, problem_to_row, row_to_problem
from codefu.data.templates import _build, load_template
from codefu.errors import CodefuError
from codefu.judge.function_call import (
    HARNESS_SOURCE,
    BigInt,
    check_output,
    harnessed,
    max_result_bytes,
    parse_json,
    results_match,
    split_result,
    values_equal,
)
from codefu.judge.languages import Compiled
from codefu.judge.sandbox import Mount
from codefu.types import FunctionSpec, Problem, Status, TestCase

NONCE = b"0123456789abcdef" * 2


# ---- comparison ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expected", "actual"),
    [
        ('[1, [2, 3], {"a": null}]', '[1,[2,3],{"a":null}]'),
        ("0.333333333", "0.3333333333333333"),  # float within 1e-6
        ("1e9", "1000000000.5"),  # relative error
        ("3", "3.0"),  # an int accepts the float that is exactly it, as Python's ==
        ('[true, "x"]', '[true, "x"]'),
        ("NaN", "NaN"),
        ("Infinity", "Infinity"),
        ("1" * 5000, "1" * 5000),  # past Python's int-conversion limit: compared as digits
        ('{"b": 1, "a": [2.5]}', '{"a": [2.5000001], "b": 1}'),
    ],
)
def test_equal_values(expected, actual):
    assert values_equal(parse_json(expected), parse_json(actual))


@pytest.mark.parametrize(
    ("expected", "actual"),
    [
        ("3", "4"),
        ("3", "3.5"),
        ("3", "3.0000001"),  # an integer answer is exact
        ("0.5", "0.501"),
        ("1", "true"),  # booleans are not numbers
        ("false", "0"),
        ("null", "0"),
        ('"3"', "3"),
        ("[1, 2]", "[2, 1]"),
        ("[1, 2]", "[1, 2, 3]"),
        ('{"a": 1}', '{"a": 1, "b": 2}'),
        ('{"a": 1}', '[["a", 1]]'),
        ("1e308", "Infinity"),
        ("1" * 5000, "1" * 4999 + "2"),
        ("1" * 5000, "1e300"),
        ("NaN", "0"),
    ],
)
def test_unequal_values(expected, actual):
    assert not values_equal(parse_json(expected), parse_json(actual))


def test_tuples_are_lists_and_nesting_is_not_recursion():
    assert values_equal([1, [2, 3]], (1, (2, 3)))
    deep_e, deep_a = [], []
    for _ in range(100_000):  # far deeper than Python's recursion limit
        deep_e, deep_a = [deep_e], [deep_a]
    assert values_equal(deep_e, deep_a)
    assert values_equal(parse_json("1" * 5000), BigInt("1" * 5000))


def test_tolerance_is_the_judges():
    assert not values_equal(0.5, 0.5001)
    assert values_equal(0.5, 0.5001, float_tol=1e-3)


def test_taco_singleton_unwrapping_is_one_element_only():
    assert results_match([4], 4, unwrap_singleton=True)
    assert results_match([4], [4], unwrap_singleton=True)
    assert results_match([[1, 2]], [1, 2], unwrap_singleton=True)
    assert not results_match([4], 4)  # LiveCodeBench and hand-made problems: exact
    assert not results_match([3, 5], 3, unwrap_singleton=True)  # APPS' harness would accept this
    assert not results_match([], None, unwrap_singleton=True)


def test_bad_json_raises_value_error():
    for text in ("", "[1,", "{'a': 1}", "[" * 100_000 + "]" * 100_000):
        with pytest.raises(ValueError):
            parse_json(text)


# ---- the framed result ----------------------------------------------------------------------------------


def frame(payload: bytes, before: bytes = b"") -> bytes:
    return NONCE + b"\n" + before + NONCE + b"\n" + payload + b"\n"


def test_the_result_is_what_follows_the_last_nonce_line():
    assert split_result(frame(b"[1]")) == (b"[1]\n", "")
    forged = frame(b"5", before=b"00000000000000000000000000000000\n4\n")  # another nonce: ignored
    assert split_result(forged) == (b"5\n", "")
    payload, why = split_result(NONCE + b"\n")
    assert payload is None and "exited before" in why
    payload, why = split_result(b"4\n")
    assert payload is None and "overwritten" in why


def check(tmp_path: Path, data: bytes, expected: str = "3", **spec) -> tuple[Status, str]:
    out = tmp_path / "out"
    out.write_bytes(data)
    return check_output(TestCase("[1, 2]", expected), out, FunctionSpec("add", **spec), 1e-6)


def test_check_output_statuses(tmp_path):
    assert check(tmp_path, frame(b"3")) == (Status.ACCEPTED, "")
    assert check(tmp_path, frame(b"4")) == (Status.WRONG_ANSWER, "")
    assert check(tmp_path, frame(b"[3]"), "[[3]]")[0] is Status.WRONG_ANSWER
    assert check(tmp_path, frame(b"[3]"), "[[3]]", unwrap_singleton=True)[0] is Status.ACCEPTED
    assert check(tmp_path, frame(b"3"), "[3]", unwrap_singleton=True)[0] is Status.ACCEPTED
    status, message = check(tmp_path, frame(b"3 junk"))
    assert status is Status.WRONG_ANSWER and "not JSON" in message
    status, message = check(tmp_path, frame(b"!the return value cannot be written as JSON (TypeError)"))
    assert status is Status.WRONG_ANSWER and "TypeError" in message
    assert check(tmp_path, NONCE + b"\n")[0] is Status.RUNTIME_ERROR
    huge = frame(b"[" + b"3," * max_result_bytes("3") + b"3]")
    status, message = check(tmp_path, huge)
    assert status is Status.WRONG_ANSWER and "far longer" in message
    with pytest.raises(ValueError):  # a broken expected value is the data's fault: the judge's error
        check(tmp_path, frame(b"3"), expected="[1,")


# ---- the harness, run directly (no sandbox: conversions and protocol only) --------------------------------


def harness(tmp_path: Path, source: str, args: list, entry: str = "f") -> tuple[int, bytes, str]:
    program = tmp_path / "main.py"
    program.write_text(source)
    r = subprocess.run(
        [sys.executable, "-B", str(HARNESS_SOURCE), str(program), entry],
        input=json.dumps(args).encode(),
        capture_output=True,
        timeout=60,
    )
    payload, _ = split_result(r.stdout)
    return r.returncode, payload or b"", r.stderr.decode()


def test_harness_converts_return_values(tmp_path):
    body = """\
from decimal import Decimal
from fractions import Fraction
def f(kind):
    return {
        "set": {3, 1, 2}, "tuple": (1, (2, 3)), "generator": (i * i for i in range(3)),
        "decimal": Decimal("1.5"), "fraction": Fraction(1, 4), "int_keys": {1: "a"},
        "mixed_set": {1, "a"}, "deque": deque([1, 2]), "nan": float("nan"),
    }[kind]
"""
    expected = {"set": [1, 2, 3], "tuple": [1, [2, 3]], "generator": [0, 1, 4], "decimal": 1.5,
                "fraction": 0.25, "int_keys": {"1": "a"}, "deque": [1, 2]}  # fmt: skip
    for kind, value in expected.items():
        code, payload, err = harness(tmp_path, body, [kind])
        assert code == 0 and json.loads(payload) == value, (kind, err)
    code, payload, _ = harness(tmp_path, body, ["mixed_set"])
    assert sorted(json.loads(payload), key=str) == [1, "a"]
    assert values_equal(float("nan"), parse_json(harness(tmp_path, body, ["nan"])[1]))


def test_harness_protocol(tmp_path):
    code, payload, err = harness(tmp_path, "def f():\n    return object()", [])
    assert code == 0 and payload.startswith(b"!") and b"object" in payload
    code, payload, err = harness(
        tmp_path, "class Solution:\n    def f(self, a: List[int]) -> int:\n        return sum(a)", [[1, 2]]
    )
    assert code == 0 and payload == b"3\n"
    code, _, err = harness(tmp_path, "print('x')\ndef f():\n    raise KeyError('boom')", [])
    assert code == 1 and "KeyError: 'boom'" in err and err.startswith("x\n")  # prints go to stderr
    assert "fn_harness" not in err  # the program's frames only
    code, _, err = harness(tmp_path, "def f(a):\n    return a", {"not": "a list"})  # type: ignore[arg-type]
    assert code == 2 and "JSON array" in err


# ---- problem data --------------------------------------------------------------------------------------


def test_function_spec_round_trips_through_the_parquet_schema():
    spec = FunctionSpec("maxProfit", "class Solution:\n    def maxProfit(self, p):\n", unwrap_singleton=True)
    p = Problem("p", "s", [], [TestCase("[[1, 2]]", "1")], preferred_language="python", function=spec)
    row = problem_to_row(p, "train", 0, "b", "id")
    (back,) = pa.Table.from_pylist([row], schema=SCHEMA).to_pylist()
    loaded = row_to_problem(back, "x")
    assert loaded.function == spec and loaded.entry_point == "maxProfit" and "function" not in loaded.extra
    plain = row_to_problem(pa.Table.from_pylist([problem_to_row(Problem("q", "s", [], []), "t", 0, "b", "q")],
                                                schema=SCHEMA).to_pylist()[0], "x")  # fmt: skip
    assert plain.function is None and plain.entry_point is None
    old = dict(back, extra_info={k: v for k, v in back["extra_info"].items() if k != "function"})
    assert row_to_problem(old, "x").function is None  # rows written before the column existed
    with pytest.raises(ValueError, match="identifier"):
        function_from_json('{"entry_point": "os.system"}')


def test_harnessed_command_runs_the_program_under_the_harness(tmp_path):
    compiled = Compiled("python", True, ["/usr/bin/python3", "-B", "/box/main.py"], [Mount(tmp_path, "/box")])
    run = harnessed(compiled, tmp_path / "h", FunctionSpec("solve"))
    assert run.run_argv == [
        "/usr/bin/python3",
        "-B",
        "/codefu-harness/fn_harness.py",
        "/box/main.py",
        "solve",
    ]
    assert run.mounts == [Mount(tmp_path, "/box"), Mount(tmp_path / "h", "/codefu-harness")]
    with pytest.raises(ValueError):
        harnessed(Compiled("cpp", True, ["/box/main"]), tmp_path, FunctionSpec("solve"))


def test_function_prompts(tmp_path):
    python = load_template("python")
    text = python.render_function("Return the sum.", "n", "add", "def add(a, b):\n    ", 0)[0]["content"]
    assert "`add`" in text and "```python\ndef add(a, b):\n```" in text and "Return the sum." in text
    own = _build({"messages": [{"role": "user", "content": "{statement}"}],
                  "function_messages": [{"role": "user", "content": "{entry_point}: {statement}"}]},
                 tmp_path / "t.yaml", "")  # fmt: skip
    assert own.render_function("S", "n", "f", "")[0]["content"] == "f: S"
    assert own.render("S", "n")[0]["content"] == "S"
    with pytest.raises(CodefuError, match="function_messages"):
        _build({"messages": [{"role": "user", "content": "{statement}"}],
                "function_messages": [{"role": "user", "content": "no statement"}]}, tmp_path / "t.yaml", "")  # fmt: skip
