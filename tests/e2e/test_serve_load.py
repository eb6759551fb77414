"""`codefu serve` under a bounded load: 64 clients at once, /run_code and /judge mixed (~1,300 requests).
Every request must get its own answer (no lost, duplicated or swapped ones), none a 5xx, the server's
memory must stay flat, and no process may outlive it. Speed is not asserted (bench/serve_load.py measures
it); the whole load has a fixed time cap instead."""

from __future__ import annotations

import random
import re

import pytest

from codefu.data.loader import load_problems
from codefu.judge.checker import outputs_match
from codefu.judge.rewards import reward_spec, select_tests
from helpers.serve_load import (
    ECHO_CPP,
    ECHO_PY,
    Call,
    echo_expected,
    fenced,
    post_all,
    problem_object,
    rss_bytes,
    solutions,
)
from helpers.served import cleanup, start_server

pytestmark = pytest.mark.slow  # ~3 minutes on 2 cores

CLIENTS = 64
JUDGE_COPIES = 20  # each of the 24 submissions (12 problems, correct and wrong) sent this many times
ECHOES = 600  # tagged /run_code programs, C++ and Python alternately
TEST_COPIES = 2  # the correct C++ programs on each of their tests, /run_code per test as verl calls it
TIME_CAP_S = 540  # the load must be over by then (each request: 60 s at most on top)


def test_64_clients_each_get_their_own_answer(codefu_easy):
    problems = load_problems(codefu_easy / "train.parquet")
    # the default --max-pending is 8 per judge CPU (16 on 2 cores): 64 clients at once would get 503s
    served = start_server("--max-tests", "10", "--max-pending", str(2 * CLIENTS))
    try:
        # warm-up: each submission judged once gives the verdict every copy of it must get (the judge is
        # deterministic on these programs); precompiled header built, the echo programs compiled
        expected: dict[tuple[int, str], tuple[str, int, int]] = {}
        for b, s in enumerate(solutions()):
            problem = problems[s["index"]]
            for kind in ("correct", "wrong"):
                body = {"response": fenced(s["language"], s[kind]), "problem": sampled(problem, "warm-up")}
                status, got, _ = served.post("/judge", body)
                assert status == 200, got
                expected[b, kind] = (got["status"], got["passed"], got["total"])
                assert kind == "wrong" or got["status"] == "ACCEPTED", (s["name"], got)
        for code, language in ((ECHO_CPP, "cpp"), (ECHO_PY, "python")):
            status, got, _ = served.post("/run_code", {"code": code, "language": language, "stdin": "1\n"})
            assert status == 200 and got["run_result"]["stdout"] == echo_expected(language, 1), got
        rss_warm = rss_bytes(served.pids())

        calls, want = workload(problems, expected)
        run = post_all(served.url, calls, clients=CLIENTS, timeout=60, deadline_s=TIME_CAP_S)
        assert run.seconds < TIME_CAP_S + 60, f"the load took {run.seconds:.0f} s"

        failures = []
        for call, answer in zip(calls, run.answers, strict=True):
            assert answer.tag == call.tag
            if answer.status != 200:
                failures.append(f"{call.tag}: HTTP {answer.status} {answer.error} {str(answer.answer)[:300]}")
            elif (problem := want[call.tag](answer.answer)) is not None:
                failures.append(f"{call.tag}: {problem}")
        latencies = sorted(a.latency_s for a in run.answers if a.status == 200)
        waited = (
            f"latency p50 {latencies[len(latencies) // 2]:.1f} s, max {latencies[-1]:.1f} s"
            if latencies
            else ""
        )
        print(f"serve load: {len(calls)} requests in {run.seconds:.0f} s, {waited}")
        assert not failures, (
            f"{len(failures)} of {len(calls)} requests answered wrongly ({waited}):\n"
            + "\n".join(failures[:20])
            + "\nthe server's and its replicas' warnings:\n"
            + served.trouble()
        )
        # the server saw each request once: its own count of answered requests is ours
        status, text, _ = served.get("/metrics")
        counted = sum(
            float(n)
            for n in re.findall(
                r'^codefu_serve_requests_total\{code="200",endpoint="(?:judge|run_code)"\} (\S+)$', text, re.M
            )
        )
        assert counted == len(expected) + 2 + len(calls), counted  # warm-up, then the load

        # Memory is flat: the RSS summed over the server's processes after the load, against after the
        # warm-up. Not equal: first use under 64 connections grows the heaps of the front and of Ray's
        # workers (Python's arenas are not given back to the OS), and how many sandboxes are alive when
        # sampled varies (a few MB each). A leak per request (a sandbox, a compiled program or a verdict
        # held for each of ~1,300 requests: >= 1 MB each) would be far over this.
        rss_end = rss_bytes(served.pids())
        assert rss_end <= 1.5 * rss_warm + (200 << 20), (rss_warm >> 20, rss_end >> 20)

        assert served.stop() == 0, served.output()[-3000:]
        assert served.left_after_stop() == [], served.output()[-2000:]
    finally:
        cleanup(served)


def workload(problems, expected):
    """The calls in a seeded shuffle, and for each tag a check of its answer (None: the right one)."""
    calls: list[Call] = []
    want = {}
    sols = solutions()
    for (b, kind), verdict in expected.items():
        s = sols[b]
        problem = problems[s["index"]]
        for c in range(JUDGE_COPIES):
            tag = f"{problem.name} #{b}.{kind}.{c}"  # the answer's "name"
            body = {"response": fenced(s["language"], s[kind]), "problem": sampled(problem, tag)}
            calls.append(Call(tag, "/judge", body))
            want[tag] = _judged(tag, verdict)
    for n in range(ECHOES):
        language, code = ("cpp", ECHO_CPP) if n % 2 else ("python", ECHO_PY)
        tag = f"echo {n}"
        calls.append(Call(tag, "/run_code", {"code": code, "language": language, "stdin": f"{n}\n"}))
        want[tag] = _printed(echo_expected(language, n))
    spec = reward_spec("codefu")
    for s in sols:
        if s["language"] != "cpp":
            continue
        problem = problems[s["index"]]
        for i, test in enumerate(select_tests(problem, spec.tests, 10, 0)):
            for c in range(TEST_COPIES):
                tag = f"{problem.name} test {i}.{c}"
                body = {
                    "code": s["correct"],
                    "language": "cpp",
                    "stdin": test.input,
                    "run_timeout": problem.time_limit_s,
                    "memory_limit_MB": problem.memory_limit_bytes >> 20,
                }
                calls.append(Call(tag, "/run_code", body))
                want[tag] = _printed(test.output)
    random.Random(0).shuffle(calls)
    return calls, want


def sampled(problem, name: str) -> dict:
    """The problem as /judge takes it, holding only the tests --max-tests 10 samples from it: the sample
    is seeded by the problem's name, which differs for every copy here, and the verdicts must not."""
    tests = select_tests(problem, reward_spec("codefu").tests, 10, 0)
    return problem_object(problem, name, tests)


def _judged(tag: str, verdict: tuple[str, int, int]):
    def check(answer) -> str | None:
        got = (answer.get("status"), answer.get("passed"), answer.get("total"))
        if answer.get("name") != tag or got != verdict:
            said = f": {answer.get('message', '')[:300]!r}" if answer.get("message") else ""
            return f"got {answer.get('name')!r} {got}, want {verdict}{said}"
        return None

    return check


def _printed(output: str):
    def check(answer) -> str | None:
        run = answer.get("run_result") or {}
        stdout = run.get("stdout")
        if answer.get("status") != "Success" or stdout is None or not outputs_match(output, stdout):
            said = {k: run.get(k) for k in ("return_code", "execution_time", "stderr")}
            return (
                f"got {answer.get('status')} {stdout!r}, want {output!r} ({answer.get('message')!r}, {said})"
            )
        return None

    return check
