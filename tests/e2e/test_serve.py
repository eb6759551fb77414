"""`codefu serve` as other frameworks use it: a real server process, a real HTTP client, and verl's own
SandboxFusion client (its published code, unchanged, from the verl wheel scripts/setup.sh installs in
.clients/verl) pointed at our /run_code. Verdicts are compared with `codefu judge` on the same inputs."""

from __future__ import annotations

import base64
import importlib.util
import json
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from helpers import syscall_attacks
from helpers.served import cleanup, start_server

REPO = Path(__file__).resolve().parents[2]
VERL = REPO / ".clients" / "verl" / "verl" / "utils" / "reward_score" / "sandbox_fusion"
SOLUTIONS = json.loads((REPO / "tests" / "data" / "codefu_easy_solutions.json").read_text())

AB_CPP = '#include <cstdio>\nint main(){long long a,b;scanf("%lld %lld",&a,&b);printf("%lld\\n",a+b);}'
AB_PY = "a, b = map(int, input().split())\nprint(a + b)"
SPIN_CPP = "int main(){ volatile unsigned long x = 0; for(;;) x++; }"
AB_TESTS = {"inputs": ["1 2\n", "10 20\n", "-5 5\n"], "outputs": ["3\n", "30\n", "0\n"]}


@pytest.fixture(scope="module")
def server(codefu_easy):
    served = start_server("--dataset", str(codefu_easy / "train.parquet"), "--max-tests", "10")
    yield served
    cleanup(served)


@pytest.fixture(scope="module")
def verl_client():
    """verl's sandbox_fusion package (compute_score, and check_correctness in .utils), loaded from its
    wheel by path: verl's top-level package needs its training stack, the client needs only requests."""
    assert VERL.is_dir(), f"{VERL} is missing: run scripts/setup.sh (it installs verl's client there)"
    spec = importlib.util.spec_from_file_location(
        "verl_sandbox_fusion", VERL / "__init__.py", submodule_search_locations=[str(VERL)]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["verl_sandbox_fusion"] = module
    spec.loader.exec_module(module)
    return module


def run_code(server, code: str, language: str = "cpp", **fields):
    return server.post("/run_code", {"code": code, "language": language, **fields})


# ---- /run_code, SandboxFusion's API -----------------------------------------------------------------


def test_verl_client_gets_each_outcome_as_against_sandbox_fusion(server, verl_client):
    url = server.url + "/run_code"
    check = verl_client.utils.check_correctness
    wrong = AB_CPP.replace("a+b", "a-b")
    cases = {
        "accepted": (AB_CPP, "cpp", [True, True, True]),
        "accepted python": (AB_PY, "python", [True, True, True]),
        "wrong answer": (wrong, "cpp", [False, False, False]),  # a-b: -1, -10, -10
        "compile error": ("int main( {", "cpp", [-4, -4, -4]),
        "runtime error": ("int main(){ return 3; }", "cpp", [-2, -2, -2]),
        "python runtime error": ("print(1/0)", "python", [-2, -2, -2]),
        "time limit": (SPIN_CPP, "cpp", [-3, -3, -3]),
    }
    for name, (code, language, expected) in cases.items():
        results, metadata = check(url, AB_TESTS, code, timeout=1, memory_limit_mb=256, language=language)
        assert results == expected, (name, metadata)
    # the memory limit: killed by the cgroup, which SandboxFusion's clients read as a runtime error
    hog = '#include <vector>\n#include <cstdio>\nint main(){ std::vector<char> v(400<<20, 1); printf("%d", v[7]); }'
    results, metadata = check(
        url, {"inputs": [""], "outputs": ["1"]}, hog, timeout=5, memory_limit_mb=64, language="cpp"
    )
    assert results == [-2], metadata
    # and verl's compute_score, which extracts the code from a Markdown block (Python only)
    score, _ = verl_client.compute_score(url, None, 256, f"```python\n{AB_PY}\n```", json.dumps(AB_TESTS))
    assert score == 1.0


def test_run_code_answers_in_sandbox_fusion_schema(server):
    status, answer, headers = run_code(server, AB_CPP, stdin="40 2\n", run_timeout=2, memory_limit_MB=128)
    assert status == 200 and answer["status"] == "Success", answer
    assert answer["run_result"]["stdout"] == "42\n" and answer["run_result"]["return_code"] == 0
    assert answer["compile_result"]["status"] == "Finished" and answer["compile_result"]["return_code"] == 0
    assert set(answer) >= {"status", "message", "compile_result", "run_result", "files"}
    assert headers.get("x-codefu-node")
    # compile errors carry the compiler's diagnostics; Python has no compile step in SandboxFusion
    _, answer, _ = run_code(server, "int main( {")
    assert answer["status"] == "Failed" and answer["run_result"] is None
    assert "error" in answer["compile_result"]["stderr"] and answer["compile_result"]["return_code"] != 0
    _, answer, _ = run_code(server, "print(input()", "python")
    assert answer["compile_result"] is None and "SyntaxError" in answer["run_result"]["stderr"]
    # a CPU-time limit, not a wall-clock one: a program that sleeps is stopped by the wall clock (3x + 1 s)
    _, answer, _ = run_code(server, SPIN_CPP, run_timeout=1)
    assert answer["run_result"]["status"] == "TimeLimitExceeded" and answer["status"] == "Failed"
    # files arrive base64-encoded beside the program, which runs in their folder
    data = base64.b64encode(b"7 8\n").decode()
    _, answer, _ = run_code(
        server, "print(sum(map(int, open('in.txt').read().split())))", "python", files={"in.txt": data}
    )
    assert answer["status"] == "Success" and answer["run_result"]["stdout"] == "15\n", answer


def test_repeated_calls_compile_once(server):
    code = AB_CPP + "\n// repeated-calls-compile-once"
    # every build has a folder of its own in the judge's work dir (in the server's $TMPDIR): count them
    builds = Path(server.tmp).glob("codefu-judge-*/run-*/programs/*/main.cpp")
    source = code.encode()
    before = sum(f.read_bytes() == source for f in builds)
    for i in range(5):
        _, answer, _ = run_code(server, code, stdin=f"{i} {i}\n")
        assert answer["run_result"]["stdout"] == f"{2 * i}\n"
    builds = Path(server.tmp).glob("codefu-judge-*/run-*/programs/*/main.cpp")
    assert before == 0 and sum(f.read_bytes() == source for f in builds) == 1


@pytest.mark.parametrize("family", syscall_attacks.FAMILIES)
def test_attack_suite_is_blocked_through_the_service(server, family):
    _, answer, _ = run_code(server, syscall_attacks.SOURCE, stdin=family, run_timeout=5)
    assert answer["run_result"]["stdout"].strip() == "blocked", answer


def test_hostile_programs_stay_in_the_sandbox(server, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    secret.chmod(0o644)
    reads = (
        f"try:\n    print(open({str(secret)!r}).read())\nexcept OSError as e:\n    print('denied', e.errno)"
    )
    _, answer, _ = run_code(server, reads, "python")
    assert "host secret" not in answer["run_result"]["stdout"], answer
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    port = listener.getsockname()[1]
    connect = f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), 2)\n    print('connected')\nexcept OSError:\n    print('unreachable')"
    _, answer, _ = run_code(server, connect, "python")
    listener.close()
    assert answer["run_result"]["stdout"] == "unreachable\n", answer
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    _, answer, _ = run_code(server, bomb, "python", run_timeout=2)
    assert answer["status"] == "Failed", answer
    status, _, _ = server.get("/health")
    assert status == 200


# ---- /judge, the same verdicts as `codefu judge` ----------------------------------------------------


def test_judge_endpoint_matches_the_judge_cli(server, codefu_easy, tmp_path):
    cpp = next(s for s in SOLUTIONS if s["language"] == "cpp")
    python = next(s for s in SOLUTIONS if s["language"] == "python")
    rows = [
        {"index": cpp["index"], "response": f"```cpp\n{cpp['correct']}\n```"},
        {"index": cpp["index"], "response": f"```cpp\n{cpp['wrong']}\n```"},
        {"name": python["name"], "response": f"```python\n{python['correct']}\n```"},
        {"index": cpp["index"], "response": "```cpp\nint main(){ return 1; }\n```"},
        {"index": cpp["index"], "response": f"```cpp\n{SPIN_CPP}\n```"},
        {"index": 0, "response": "I give up."},
        {"index": 0, "response": "```cpp\nint main( {\n```"},
    ]
    responses = tmp_path / "responses.jsonl"
    responses.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "verdicts.jsonl"
    cli = subprocess.run(
        [
            sys.executable,
            "-m",
            "codefu",
            "judge",
            "--dataset",
            str(codefu_easy / "train.parquet"),
            "--responses",
            str(responses),
            "--out",
            str(out),
            "--max-tests",
            "10",
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert cli.returncode == 0, cli.stderr
    expected = [json.loads(line) for line in out.read_text().splitlines()]
    kinds = set()
    for row, want in zip(rows, expected, strict=True):
        status, got, _ = server.post("/judge", row)
        assert status == 200, got
        kinds.add(got["status"])
        for key in ("name", "status", "passed", "total", "reward", "first_failure", "language", "score"):
            assert got[key] == want[key], (key, row, got, want)
        assert [t["status"] for t in got["tests"]] == [t["status"] for t in want["tests"]]
    assert kinds == {"ACCEPTED", "WRONG_ANSWER", "RUNTIME_ERROR", "TIME_LIMIT", "NO_CODE", "COMPILE_ERROR"}


def test_judge_takes_a_problem_or_a_verl_ground_truth(server):
    tests = [{"input": "2 3\n", "output": "5\n"}, {"input": "4 4\n", "output": "8\n"}]
    answer_ok = f"```python\n{AB_PY}\n```"
    _, got, _ = server.post(
        "/judge", {"response": answer_ok, "problem": {"name": "ab", "statement": "add", "tests": tests}}
    )
    assert got["status"] == "ACCEPTED" and got["passed"] == 2 and got["reward"] == 1.0, got
    ground_truth = json.dumps({"name": "ab", "private_tests": {"input": ["1 1\n"], "output": ["2\n"]}})
    _, got, _ = server.post(
        "/judge",
        {
            "response": answer_ok,
            "ground_truth": ground_truth,
            "extra_info": {"language": "python"},
            "data_source": "mine",
        },
    )
    assert got["status"] == "ACCEPTED" and got["total"] == 1, got


# ---- safety: bad input, limits, disconnects --------------------------------------------------------


@pytest.mark.parametrize(
    "path,body,code,words",
    [
        ("/run_code", b"{not json", 400, "not valid JSON"),
        ("/run_code", b"[1, 2]", 400, "expected a JSON object"),
        ("/run_code", {"language": "cpp"}, 400, "code: expected a string"),
        ("/run_code", {"code": "x", "language": "cobol"}, 400, "language: 'cobol' is not supported"),
        ("/run_code", {"code": "x", "language": "cpp", "run_timeout": 1e6}, 400, "run_timeout"),
        ("/run_code", {"code": "x", "language": "cpp", "run_timeout": "soon"}, 400, "run_timeout"),
        ("/run_code", {"code": "x", "language": "cpp", "memory_limit_MB": 1 << 20}, 400, "memory_limit_MB"),
        ("/run_code", {"code": "x" * (300 << 10), "language": "cpp"}, 413, "code"),
        ("/run_code", {"code": "x", "language": "cpp", "files": {"../up": "eA=="}}, 400, "file name"),
        ("/run_code", {"code": "x", "language": "cpp", "files": {"a": "not base64!"}}, 400, "base64"),
        ("/run_code", {"code": "x", "language": "cpp", "fetch_files": ["a"]}, 400, "fetch_files"),
        ("/judge", {"index": 0}, 400, "response"),
        ("/judge", {"response": "x"}, 400, "one of name, index"),
        ("/judge", {"response": "x", "index": 10**9}, 404, "index"),
        ("/judge", {"response": "x", "name": "no such problem"}, 404, "no problem named"),
        ("/judge", {"response": "x", "index": 0, "reward": "binary"}, 400, "reward"),
        ("/judge", {"response": "x", "problem": {"name": "p", "tests": "nope"}}, 400, "problem"),
        ("/judge", {"response": "x", "ground_truth": "{]"}, 400, "ground_truth"),
    ],
)
def test_bad_requests_get_a_4xx_naming_the_field(server, path, body, code, words):
    status, answer, _ = server.post(path, body)
    assert status == code and words in answer["error"], answer


def test_oversized_bodies_are_refused_before_they_are_read(server):
    # the headers announce 65 MiB; the answer comes before a byte of the body is sent
    url = urllib.parse.urlparse(server.url)
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        sock.sendall(
            b"POST /run_code HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {65 << 20}\r\n\r\n".encode()
        )
        reply = b""
        while b"}" not in reply and (chunk := sock.recv(4096)):
            reply += chunk
        reply = reply.decode()
    assert reply.startswith("HTTP/1.1 413") and "over this service's limit" in reply, reply
    status, _, _ = server.get("/health")
    assert status == 200


def test_a_client_that_disconnects_leaves_no_sandbox_behind(server):
    # 40 tests of a second each: judging it all would take 20 s on 2 cores; the client leaves after 2 s
    slow = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.0:\n    pass\nprint(2)"
    problem = {
        "name": "slow",
        "statement": "",
        "time_limit_s": 5,
        "tests": [{"input": f"{i}\n", "output": "2\n"} for i in range(40)],
    }
    body = json.dumps({"response": f"```python\n{slow}\n```", "problem": problem}).encode()
    url = urllib.parse.urlparse(server.url)
    sock = socket.create_connection((url.hostname, url.port))
    sock.sendall(
        b"POST /judge HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    deadline = time.monotonic() + 60
    while not server.running_programs():
        assert time.monotonic() < deadline, "the judge never started the program"
        time.sleep(0.1)
    time.sleep(2)
    left_at = time.monotonic()
    sock.close()
    while server.running_programs():
        # the tests already running end within their limits (5 s); judging all 40 would take 20 s more
        assert time.monotonic() - left_at < 10, server.running_programs()
        time.sleep(0.2)
    status, _, _ = server.get("/health")
    assert status == 200


def test_metrics_count_requests_and_outcomes(server):
    run_code(server, AB_CPP, stdin="1 1\n")
    status, text, _ = server.get("/metrics")
    assert status == 200
    assert 'codefu_serve_requests_total{code="200",endpoint="run_code"}' in text
    assert 'codefu_serve_outcomes_total{endpoint="run_code",outcome="Success"}' in text
    assert "codefu_serve_request_seconds_bucket" in text and "codefu_serve_in_flight" in text
    status, ready, _ = server.get("/ready")
    assert status == 200 and ready["ready"] is True and ready["replicas"] >= 1


def test_token_backpressure_and_a_clean_stop():
    served = start_server("--max-pending", "2", token="s3cret")
    try:
        assert served.post("/run_code", {"code": "print(1)", "language": "python"}, token=None)[0] == 401
        assert served.post("/run_code", {"code": "print(1)", "language": "python"}, token="wrong")[0] == 401
        assert served.get("/metrics", token=None)[0] == 401
        assert served.get("/health", token=None)[0] == 200  # liveness needs no token
        assert served.post("/run_code", {"code": "print(1)", "language": "python"})[1]["status"] == "Success"
        # 8 clients at once, each 1.5 s of CPU, beside 12 idle connections (keep-alives, slow clients):
        # the service holds 2 and turns the others away at once, with its own 503 (JSON, Retry-After),
        # not the HTTP server's bare one for too many connections
        spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.5:\n    pass"
        url = urllib.parse.urlparse(served.url)
        idle = [socket.create_connection((url.hostname, url.port), timeout=30) for _ in range(12)]
        try:
            with ThreadPoolExecutor(8) as pool:
                answers = list(
                    pool.map(
                        lambda _: served.post("/run_code", {"code": spin, "language": "python"}), range(8)
                    )
                )
        finally:
            for sock in idle:
                sock.close()
        codes = Counter(status for status, _, _ in answers)
        assert codes[200] >= 2 and codes[503] >= 1 and set(codes) <= {200, 503}, codes
        for status, answer, headers in answers:
            if status == 503:
                assert headers.get("retry-after") == "1" and "busy" in answer["error"]
            else:
                assert answer["status"] == "Success", answer
        assert any(served.processes())  # Ray and sandboxes, before the stop
        assert served.stop(signal.SIGTERM) == 0, served.output()
        assert served.left_after_stop() == [], served.output()[-2000:]
    finally:
        cleanup(served)


def test_compute_score_through_the_service_equals_in_process(server):
    from codefu.data.schema import problem_to_row
    from codefu.data.starter import load_starter_problems
    from codefu.judge.verl_reward import compute_score

    problem = next(p for p in load_starter_problems() if p.name == "square-number")
    row = problem_to_row(problem, "train", 0, "easy", problem.name)
    args = (row["data_source"], None, row["reward_model"]["ground_truth"], row["extra_info"])
    wrong = problem.extra["wrong_solutions"][0]
    for response in (
        f"```python\n{problem.extra['solutions']['python']}\n```",
        f"```{wrong['language']}\n{wrong['source']}\n```",
        "no code",
        "```cpp\nint main( {\n```",
    ):
        call = (args[0], response, *args[2:])
        # the module's service judges 10 tests at most (--max-tests 10)
        assert compute_score(*call, url=server.url) == compute_score(*call, max_tests=10), response
    with pytest.raises(ValueError, match="reward"):
        compute_score(*call, url=server.url, reward="binary")  # the service judges with codefu's
    with pytest.raises(RuntimeError, match="cannot reach the judge service"):
        compute_score(*call, url="http://127.0.0.1:9")


def test_sigint_stops_the_server_cleanly_too():
    served = start_server("--replicas", "1")
    try:
        assert (
            served.post("/run_code", {"code": "print(6 * 7)", "language": "python"})[1]["run_result"][
                "stdout"
            ]
            == "42\n"
        )
        assert served.stop(signal.SIGINT) == 0, served.output()[-2000:]
        assert served.left_after_stop() == [], served.output()[-2000:]
    finally:
        cleanup(served)
