"""Load on a `codefu serve`: many HTTP clients at once, every answer kept beside its request so that it
can be checked against it, and the server's processes and memory (shared by tests/e2e/test_serve_load.py
and bench/serve_load.py).

Requests are tagged so that an answer shows which request it answers: a /judge submission sends its
problem under a name of its own (the answer's "name" echoes it); a tagged /run_code program prints a
function of a number it reads from stdin.
"""

from __future__ import annotations

import http.client
import json
import os
import threading
import time
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codefu.types import Problem, TestCase

REPO = Path(__file__).resolve().parents[2]
SOLUTIONS_PATH = REPO / "tests" / "data" / "codefu_easy_solutions.json"

# /run_code programs whose answer names their request: stdin holds the request's number n
ECHO_CPP = '#include <cstdio>\nint main(){long long n; scanf("%lld",&n); printf("%lld\\n", 3*n+1);}\n'
ECHO_PY = "n = int(input())\nprint(7 * n + 2)\n"


def echo_expected(language: str, n: int) -> str:
    return f"{3 * n + 1}\n" if language == "cpp" else f"{7 * n + 2}\n"


def solutions() -> list[dict[str, Any]]:
    """The correct and wrong programs of 12 codefu-easy problems: {index, name, language, correct, wrong}."""
    return json.loads(SOLUTIONS_PATH.read_text())


def fenced(language: str, source: str) -> str:
    """A model's response holding `source` as its code block."""
    return f"```{language}\n{source}\n```"


def problem_object(problem: Problem, name: str, tests: Sequence[TestCase] | None = None) -> dict[str, Any]:
    """`problem` in the problems-JSONL schema /judge takes (its statement left out: judging does not read
    it), named `name`; `tests` replace its hidden tests when given (then it has no public ones)."""
    public = [] if tests is not None else problem.public_tests
    private = problem.private_tests if tests is None else tests
    return {
        "name": name,
        "statement": "",
        "public_tests": [{"input": t.input, "output": t.output} for t in public],
        "tests": [{"input": t.input, "output": t.output} for t in private],
        "time_limit_s": problem.time_limit_s,
        "memory_limit_bytes": problem.memory_limit_bytes,
        "language": problem.preferred_language,
    }


# ---- many clients at once ---------------------------------------------------------------------------


@dataclass
class Call:
    tag: str  # unique among the calls of a run
    path: str  # "/judge" or "/run_code"
    body: dict[str, Any]


@dataclass
class Answer:
    tag: str
    path: str
    status: int | None = None  # HTTP status; None: no answer (`error` says why)
    answer: Any = None
    latency_s: float = 0.0
    error: str = ""


@dataclass
class LoadRun:
    answers: list[Answer]
    seconds: float
    clients: int
    connections: int  # TCP connections opened (keep-alive: about one per client)
    client_cpu_s: float = field(default=0.0)  # this process's CPU time during the run (the clients')


def post_all(
    url: str,
    calls: Sequence[Call],
    clients: int = 64,
    keep_alive: bool = True,
    timeout: float = 600.0,
    deadline_s: float | None = None,
) -> LoadRun:
    """Send every call once (no retries) from `clients` threads, each taking the next call as soon as its
    previous one is answered; with `keep_alive` each thread keeps one connection, without it every call
    opens its own (as a `requests.post` without a session does). Answers come back in the calls' order.
    `timeout` bounds each socket operation; after `deadline_s` no call starts (those left are answered
    with the error "not sent"), so the whole run takes at most about deadline_s + timeout."""
    parsed = urllib.parse.urlparse(url)
    host, port = parsed.hostname, parsed.port
    answers: list[Answer | None] = [None] * len(calls)
    lock = threading.Lock()
    state = {"next": 0, "connections": 0}

    def take() -> int | None:
        with lock:
            i = state["next"]
            if i >= len(calls) or (deadline is not None and time.monotonic() > deadline):
                return None
            state["next"] = i + 1
            return i

    def connect() -> http.client.HTTPConnection:
        with lock:
            state["connections"] += 1
        return http.client.HTTPConnection(host, port, timeout=timeout)

    def client() -> None:
        conn = None
        try:
            while (i := take()) is not None:
                call = calls[i]
                if conn is None:
                    conn = connect()
                data = json.dumps(call.body).encode()
                headers = {"Content-Type": "application/json"}
                if not keep_alive:
                    headers["Connection"] = "close"
                got = Answer(call.tag, call.path)
                start = time.monotonic()
                try:
                    conn.request("POST", call.path, data, headers)
                    response = conn.getresponse()
                    raw = response.read()
                    got.latency_s = time.monotonic() - start
                    got.status = response.status
                    try:
                        got.answer = json.loads(raw)
                    except ValueError:
                        got.answer = raw.decode(errors="replace")[:1000]
                    if response.will_close or not keep_alive:
                        conn.close()
                        conn = None
                except (OSError, http.client.HTTPException) as e:
                    got.latency_s = time.monotonic() - start
                    got.error = f"{type(e).__name__}: {e}"
                    conn.close()
                    conn = None
                answers[i] = got
        finally:
            if conn is not None:
                conn.close()

    cpu0 = time.process_time()
    start = time.monotonic()
    deadline = None if deadline_s is None else start + deadline_s
    threads = [
        threading.Thread(target=client, name=f"load-client-{k}", daemon=True)
        for k in range(min(clients, len(calls)))
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.monotonic() - start
    for i, a in enumerate(answers):
        if a is None:
            answers[i] = Answer(calls[i].tag, calls[i].path, error="not sent: past the deadline")
    done: list[Answer] = [a for a in answers if a is not None]
    return LoadRun(done, seconds, len(threads), state["connections"], time.process_time() - cpu0)


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by linear interpolation between the closest ranks."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = (len(ordered) - 1) * q / 100
    lo = int(k)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


# ---- the server's processes --------------------------------------------------------------------------


def rss_bytes(pids: Sequence[int]) -> int:
    """The sum of the processes' resident memory (VmRSS; shared pages count once per process)."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
                    break
        except (OSError, ValueError, IndexError):
            continue
    return total


def cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU time the processes have used so far (children reaped by them included)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
        except (OSError, ValueError, IndexError):
            continue
    return total / ticks
