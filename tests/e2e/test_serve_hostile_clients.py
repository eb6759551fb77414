"""`codefu serve` against clients that misbehave at the HTTP level, as a hostile or broken client would: uploads
that stall, large bodies many at once, clients that leave while their program runs, a stop in the middle of
all that. Each test runs a real server and a real client on loopback (the bodies' own contents are
tests/e2e/test_serve_hostile.py's)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from helpers.served import SPIN_PY, cleanup, reply_of, spin_judge_body, start_server

pytestmark = pytest.mark.slow

BODY_IDLE_S = 10  # codefu.serve.app.ServiceSettings.body_idle_s


@pytest.fixture(scope="module")
def server():
    served = start_server("--max-pending", "4")
    yield served
    cleanup(served)


def wait_for_program(server, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not server.running_programs():
        assert time.monotonic() < deadline, "the program never started"
        time.sleep(0.1)


def test_stalled_uploads_starve_no_one_and_time_out(server):
    # twice --max-pending uploads that announce a body and stop sending: a normal request still passes
    stalled = [server.upload("/run_code", 1000, b'{"code": "print(1)", ') for _ in range(8)]
    opened = time.monotonic()
    try:
        status, answer, _ = server.post("/run_code", {"code": "print(6 * 7)", "language": "python"})
        assert status == 200 and answer["run_result"]["stdout"] == "42\n", answer
        for sock in stalled:  # each answered 408 once its body has been idle for the allowed gap
            reply = reply_of(sock, BODY_IDLE_S + 20)
            assert reply.startswith("HTTP/1.1 408") and "did not arrive in time" in reply, reply
        assert time.monotonic() - opened < BODY_IDLE_S + 20
    finally:
        for sock in stalled:
            sock.close()
    assert server.get("/health")[0] == 200


def test_large_bodies_at_once_keep_the_service_answering(server):
    # 8 clients each send 20 MB of stdin; the front reads and parses them a few at a time, off the loop
    big = json.dumps({"code": "import sys\nprint(len(sys.stdin.read()))", "language": "python"})
    body = big[:-1] + ', "stdin": "' + "x" * (20 << 20) + '"}'
    health: list[float] = []
    done = threading.Event()

    def watch_health() -> None:
        while not done.is_set():
            start = time.monotonic()
            assert server.get("/health")[0] == 200
            health.append(time.monotonic() - start)
            time.sleep(0.2)

    watcher = threading.Thread(target=watch_health)
    watcher.start()
    try:
        with ThreadPoolExecutor(8) as pool:
            answers = list(pool.map(lambda _: server.post("/run_code", body.encode(), timeout=300), range(8)))
    finally:
        done.set()
        watcher.join()
    for status, answer, _ in answers:
        assert status in (200, 503), (status, answer)
        if status == 200:
            assert answer["run_result"]["stdout"] == f"{20 << 20}\n", answer["message"]
    assert sum(status == 200 for status, _, _ in answers) >= 4
    assert health, "/health was never answered while the bodies were read"


@pytest.mark.parametrize("endpoint", ["run_code", "judge"])
def test_a_client_that_leaves_has_its_program_killed_at_once(server, endpoint):
    if endpoint == "run_code":
        raw = json.dumps({"code": SPIN_PY, "language": "python", "run_timeout": 30}).encode()
    else:
        raw = spin_judge_body(30)
    sock = server.upload(f"/{endpoint}", len(raw), raw)
    wait_for_program(server)
    left_at = time.monotonic()
    sock.close()
    while server.running_programs():  # 30 s of CPU allowed: only the cancellation stops it this soon
        assert time.monotonic() - left_at < 5, server.running_programs()
        time.sleep(0.1)
    assert server.get("/health")[0] == 200


def test_inline_problem_limits_bind_to_the_service_limits(server):
    problem = {"name": "p", "statement": "", "tests": [{"input": "", "output": "1"}]}
    for field, value in [("time_limit_s", 1e6), ("memory_limit_bytes", 1e15), ("time_limit_s", -1)]:
        status, answer, _ = server.post(
            "/judge", {"response": "print(1)", "problem": {**problem, field: value}}
        )
        assert status == 400 and field in answer["error"], (field, value, status, answer)


def test_sigterm_mid_work_stops_within_30_s_and_leaves_nothing():
    served = start_server()
    try:
        # a program that would run for a minute, a stalled upload, an idle keep-alive connection
        body = spin_judge_body(60)
        running = served.upload("/judge", len(body), body)
        stalled = served.upload("/run_code", 1000, b"{")
        idle = served.upload("/run_code", 0)
        wait_for_program(served)
        judge_dir = Path(served.tmp) / f"codefu-judge-{os.geteuid()}"
        assert list(judge_dir.glob("run-*")), "the replica's run folder"
        stopping = time.monotonic()
        assert served.stop(signal.SIGTERM) == 0, served.output()[-3000:]
        took = time.monotonic() - stopping
        assert took < 30, f"{took:.1f} s to stop"
        assert served.left_after_stop(timeout=5) == [], served.output()[-2000:]
        assert list(judge_dir.glob("run-*")) == [], "a run folder outlived the service"
        for sock in (running, stalled, idle):
            sock.close()
    finally:
        cleanup(served)


def test_a_private_tmpdir_is_a_clear_error_before_anything_starts():
    if os.geteuid() != 0:
        pytest.skip("the sandbox's user differs from ours only when we are root")
    with tempfile.TemporaryDirectory(prefix="cfs-private-", dir="/tmp") as tmp:
        os.chmod(tmp, 0o700)  # as `mktemp -d` makes it
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"} | {"TMPDIR": tmp}
        argv = [sys.executable, "-m", "codefu", "serve", "--port", "0"]
        r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and "cannot enter" in r.stderr, r.stderr[-2000:]
    assert r.stderr.strip().count("\n") == 0, r.stderr  # one line


def test_the_services_ray_refuses_a_peer_without_its_token(server, tmp_path):
    # Ray's own ports listen on every interface (docs/serve.md, "Threat model"): its token is the guard
    ports = list((Path(server.tmp) / "ray" / "session_latest").glob("gcs_server_port_*"))
    assert ports, "the service's Ray session has no GCS port file"
    address = f"127.0.0.1:{ports[0].read_text().strip()}"
    probe = "import sys, ray\ntry:\n    ray.init(address=sys.argv[1])\nexcept Exception as e:\n    sys.exit(f'refused: {e}')"
    base = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_MODE")}
    stranger = base | {"HOME": str(tmp_path), "RAY_AUTH_MODE": "disabled"}  # no token, asks for no auth
    argv = [sys.executable, "-c", probe, address]
    r = subprocess.run(argv, env=stranger, capture_output=True, text=True, timeout=180)
    assert r.returncode != 0, r.stdout[-2000:] + r.stderr[-2000:]
    operator = base | {"RAY_AUTH_MODE": "token"}  # the operator's own token (~/.ray/auth_token) gets in
    r = subprocess.run(argv, env=operator, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
