"""`codefu serve` against hostile request bodies: the whole fuzz corpus of helpers.serve_fuzz (broken JSON,
deep nesting, huge and non-finite numbers, wrong types everywhere, out-of-range limits, dangerous python
checkers, odd files) posted to both endpoints of ONE real server with a token. No body may get a 5xx, none
may make a python checker run in the judge's process (each would write a marker or delete a folder on
the host), and the service answers normal requests right afterwards. (Misbehaving HTTP clients are
tests/e2e/test_serve_hostile_clients.py's.)"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from helpers import serve_fuzz
from helpers.served import cleanup, start_server

pytestmark = pytest.mark.slow

TOKEN = "fuzz-token"
CLIENTS = 8
ENDPOINTS = ("run_code", "judge")


@pytest.fixture(scope="module")
def server():
    served = start_server(token=TOKEN)
    yield served
    cleanup(served)


def test_the_fuzz_corpus_gets_no_5xx_and_runs_no_checker_on_the_host(server, tmp_path):
    markers = tmp_path / "markers"
    markers.mkdir()
    victim = Path(serve_fuzz.victim_dir(str(markers)))
    victim.mkdir()
    (victim / "file").write_text("keep")
    corpus = serve_fuzz.corpus(str(markers))
    jobs = [(case, endpoint) for case in corpus for endpoint in ENDPOINTS]

    def post(job):
        case, endpoint = job
        status, answer, _ = server.post(f"/{endpoint}", case.body)
        return case, endpoint, status, answer

    started = time.monotonic()
    with ThreadPoolExecutor(CLIENTS) as pool:
        answers = list(pool.map(post, jobs))
    took = time.monotonic() - started

    failures = []
    for case, endpoint, status, answer in answers:
        own = endpoint == case.endpoint
        if status >= 500:
            failures.append(("5xx", case, endpoint, status, answer))
        elif own and case.expect == "ok" and status != 200:
            failures.append(("not answered", case, endpoint, status, answer))
        elif own and case.expect == "refused" and not 400 <= status < 500:
            failures.append(("not refused", case, endpoint, status, answer))
        elif own and case.status is not None and status != case.status:
            failures.append((f"not {case.status}", case, endpoint, status, answer))
    report = "\n".join(
        f"{why}: /{endpoint} {case.name} -> {status} {str(answer)[:300]}\n    body: {case.head(200)}"
        for why, case, endpoint, status, answer in failures[:30]
    )
    assert not failures, (
        f"{len(failures)} of {len(jobs)} answers ({took:.0f} s):\n{report}\n{server.trouble()}"
    )
    # a python checker that ran would have left a marker, or deleted the victim folder's file
    assert sorted(p.name for p in markers.iterdir()) == ["victim"], list(markers.iterdir())
    assert (victim / "file").read_text() == "keep"
    assert server.proc.poll() is None, "the server died"


def test_the_service_still_answers_right_after_the_corpus(server):
    # run after the corpus (file order); alone it shows the same on a fresh server
    assert server.get("/health")[0] == 200
    status, ready, _ = server.get("/ready")
    assert status == 200 and ready["ready"] is True, ready
    status, answer, _ = server.post("/run_code", {**serve_fuzz.run_code_body(), "stdin": "20 22\n"})
    assert status == 200 and answer["status"] == "Success", answer
    assert answer["run_result"]["stdout"] == "42\n", answer
    status, verdict, _ = server.post("/judge", serve_fuzz.judge_problem_body())
    assert status == 200 and verdict["status"] == "ACCEPTED" and verdict["passed"] == 1, verdict
    wrong = {**serve_fuzz.judge_problem_body(), "response": serve_fuzz.RESPONSE.replace("a + b", "a - b")}
    status, verdict, _ = server.post("/judge", wrong)
    assert status == 200 and verdict["status"] == "WRONG_ANSWER", verdict
    status, verdict, _ = server.post("/judge", serve_fuzz.judge_ground_truth_body(as_text=True))
    assert status == 200 and verdict["status"] == "ACCEPTED", verdict
    # the token is still required
    status, _, _ = server.post("/run_code", serve_fuzz.run_code_body(), token=None)
    assert status == 401
