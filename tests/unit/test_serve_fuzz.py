"""The service's request parsers against thousands of malformed and hostile bodies (helpers.serve_fuzz):
each parses or is refused with a 4xx naming the field, never any other exception (a 500), and a python
checker the operator did not register is refused (403) however the problem is sent."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from codefu.judge.checker import load_python_checker
from codefu.serve.protocol import (
    BadRequest,
    ServiceLimits,
    parse_json,
    parse_judge,
    parse_run_code,
)
from codefu.types import Problem, TestCase
from helpers import serve_fuzz

LIMITS = ServiceLimits()
DATASET = [Problem(f"p{i}", "", [], [TestCase("1\n", "1\n")]) for i in range(3)]
CORPUS = serve_fuzz.corpus("/nonexistent/codefu-fuzz")


def parse(body: bytes, endpoint: str, python_checkers: tuple[str, ...] = ()) -> BadRequest | None:
    """None when `body` parses on `endpoint`, the BadRequest when it is refused; anything else raises."""
    try:
        value = parse_json(body)
        if endpoint == "run_code":
            parse_run_code(value, LIMITS)
        else:
            parse_judge(value, DATASET, "codefu", LIMITS, python_checkers)
    except BadRequest as e:
        return e
    return None


def test_the_corpus_is_large_varied_and_the_same_every_time():
    assert len(CORPUS) >= 1000
    assert [c.body for c in serve_fuzz.corpus("/nonexistent/codefu-fuzz")] == [c.body for c in CORPUS]
    assert {c.expect for c in CORPUS} == {"ok", "refused", "any"}
    assert {c.endpoint for c in CORPUS} == {"run_code", "judge"}
    assert sum(c.dangerous for c in CORPUS) >= 5 * len(serve_fuzz.DANGEROUS_CHECKERS)


def test_every_body_parses_or_is_refused_with_a_4xx_on_both_endpoints():
    failures = []
    for case in CORPUS:
        for endpoint in ("run_code", "judge"):
            try:
                refused = parse(case.body, endpoint)
            except Exception as e:  # noqa: BLE001 - what the service would answer 500
                failures.append(f"{endpoint} {case.name}: {type(e).__name__}: {e}\n    body: {case.head()}")
                continue
            if refused is not None and not 400 <= refused.status < 500:
                failures.append(f"{endpoint} {case.name}: status {refused.status}\n    body: {case.head()}")
    assert not failures, f"{len(failures)} bodies:\n" + "\n".join(failures[:30])


def test_each_body_gets_the_answer_it_was_written_for():
    wrong = []
    for case in CORPUS:
        if case.expect == "any":
            continue
        refused = parse(case.body, case.endpoint)
        got = "ok" if refused is None else "refused"
        if got != case.expect or (case.status is not None and refused and refused.status != case.status):
            detail = f"{refused.status} {refused}" if refused else "parsed"
            wrong.append(
                f"{case.name}: expected {case.expect} {case.status or ''}, got {detail}\n    body: {case.head()}"
            )
    assert not wrong, f"{len(wrong)} bodies:\n" + "\n".join(wrong[:30])


def test_unregistered_python_checkers_are_refused_and_registered_ones_parse():
    dangerous = [c for c in CORPUS if c.dangerous]
    for case in dangerous:
        refused = parse(case.body, "judge")
        assert refused is not None and refused.status == 403, (case.name, refused)
        assert "checker" in str(refused) and "not registered" in str(refused), refused
    # the operator's registration is what decides: the same bodies parse once their checker is registered
    for case in dangerous:
        assert parse(case.body, "judge", serve_fuzz.DANGEROUS_CHECKERS) is None, case.name


@pytest.mark.parametrize("source", serve_fuzz.HARMFUL_CHECKERS)
def test_the_dangerous_bodies_would_do_harm_if_their_checker_ran(tmp_path, source):
    # so that the real-server test's "no marker, the victim kept" means something: the checker loaded
    # and called as the judge calls one (input, expected, actual = the response's output), here in a
    # temporary folder, writes its marker or deletes the victim
    victim = Path(serve_fuzz.victim_dir(str(tmp_path)))
    victim.mkdir()
    (victim / "file").write_text("keep")
    marker = Path(serve_fuzz.marker(str(tmp_path), source))
    test_input, expected = serve_fuzz.dangerous_test(source, str(tmp_path))
    body = next(c for c in serve_fuzz.corpus(str(tmp_path)) if c.dangerous and source in c.name).body
    problem = parse_judge(parse_json(body), None, "codefu", LIMITS, [source]).problem
    assert problem.checker.source == source and problem.private_tests[0].input == test_input
    checker = load_python_checker(source, [source])
    with contextlib.suppress(Exception):  # some raise once the harm is done (timeit: after its setup)
        checker(test_input, expected, str(marker))
    assert marker.is_symlink() or marker.exists() or not (victim / "file").exists()


@pytest.mark.parametrize(
    "endpoint,body,status,words",
    [
        ("run_code", b'{"code": "x", "language": "cpp", "memory_limit_MB": NaN}', 400, "NaN is not JSON"),
        (
            "run_code",
            b'{"code": "x", "language": "cpp", "run_timeout": Infinity}',
            400,
            "Infinity is not JSON",
        ),
        ("run_code", b'{"code": "x", "language": "cpp", "run_timeout": 1e400}', 400, "out of range"),
        ("run_code", {"code": "x", "language": "cpp", "memory_limit_MB": 0.5}, 400, "memory_limit_MB"),
        ("run_code", {"code": "x", "language": "cpp", "memory_limit_MB": True}, 400, "memory_limit_MB"),
        ("run_code", {"code": "x", "language": "cpp", "run_timeout": 10**400}, 400, "run_timeout"),
        ("run_code", b"[" * 100_000, 400, "nests deeper"),
        ("run_code", b'{"a": ' + b"1" * 5000 + b"}", 400, "not valid JSON"),
        ("run_code", b'{"code": "\\ud800", "language": "cpp"}', 400, "surrogate"),
        ("run_code", b'{"code": "x", "language": "cpp"}\xff', 400, "UTF-8"),
        ("judge", serve_fuzz.judge_problem_body(time_limit_s=1e6), 400, "problem.time_limit_s"),
        ("judge", serve_fuzz.judge_problem_body(time_limit_s=-1), 400, "problem.time_limit_s"),
        (
            "judge",
            serve_fuzz.judge_problem_body(memory_limit_bytes=10**15),
            400,
            "problem.memory_limit_bytes",
        ),
        ("judge", serve_fuzz.judge_problem_body(memory_limit_bytes=1000), 400, "problem.memory_limit_bytes"),
        ("judge", serve_fuzz.judge_problem_body(time_limit_s=10**400), 400, "problem.time_limit_s"),
        ("judge", serve_fuzz.judge_problem_body(public_tests=[], tests=[]), 400, "no tests"),
        ("judge", serve_fuzz.judge_problem_body(tests=[]), 400, "private tests"),  # codefu judges those
        (
            "judge",
            serve_fuzz.judge_problem_body(checker={"kind": "python", "source": "os:system"}),
            403,
            "problem.checker",
        ),
        (
            "judge",
            serve_fuzz.judge_problem_body(checker={"kind": "program", "source": "x", "language": "rust"}),
            400,
            "problem.checker.language",
        ),
        (
            "judge",
            {
                **serve_fuzz.judge_ground_truth_body(),
                "extra_info": {"checker": {"kind": "python", "source": "timeit:timeit"}},
            },
            403,
            "extra_info.checker",
        ),
    ],
)
def test_refusals_name_the_field(endpoint, body, status, words):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    refused = parse(raw, endpoint)
    assert refused is not None and refused.status == status and words in str(refused), refused


def test_ground_truth_limits_bind_in_both_of_its_spellings():
    for as_text in (False, True):
        body = serve_fuzz.judge_ground_truth_body(as_text)
        where = ("ground_truth", "~text") if as_text else ("ground_truth",)
        for key, value in [("time_limit", {"seconds": 61, "nanos": 0}), ("memory_limit_bytes", 1e15)]:
            raw = serve_fuzz.dumps(serve_fuzz._with(body, (*where, key), value)).encode()
            refused = parse(raw, "judge")
            assert refused is not None and f"ground_truth.{key}" in str(refused), (as_text, key, refused)


def test_a_dataset_problem_is_the_operators_and_is_not_clamped():
    dataset = [Problem("slow", "", [], [TestCase("1\n", "1\n")], time_limit_s=1e6, memory_limit_bytes=10**15)]
    request = parse_judge({"response": "x", "index": 0}, dataset, "codefu", LIMITS)
    assert request.problem.time_limit_s == 1e6


def test_memory_limit_mb_keeps_fractions_and_defaults_when_not_positive():
    def memory(mb) -> int:
        return parse_run_code(
            {"code": "x", "language": "cpp", "memory_limit_MB": mb}, LIMITS
        ).limits.memory_bytes

    assert memory(1.5) == 3 << 19
    assert memory(-1) == memory(0) == memory(None) == LIMITS.default_memory_mb << 20
