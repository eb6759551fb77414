"""`codefu serve` under hostile clients: the figures of issue #41's goals, on a real server on loopback.

    python bench/serve_hostile.py          # writes docs/results/<date>-serve-hostile.json (bench/record.py)

(a) front memory: the HTTP front's VmRSS (the `codefu serve` process alone: Ray's and the replicas'
    processes are not the front) idle, then sampled every 50 ms while --uploads clients each send a
    --upload-mb body at once (valid /run_code requests whose stdin is the bulk), and after; /health is
    asked every 200 ms meanwhile and its slowest answer kept. Goal: peak within 2x idle.
(b) stalled uploads: --max-pending connections send headers and a few bytes of body, then nothing; a
    normal /run_code is timed while they are open, and each stalled one must get its 408. Goal: the
    normal request answered.
(c) the fuzz corpus (tests/helpers/serve_fuzz.py) posted to both endpoints: answers counted by status,
    files written outside the sandbox by the dangerous-checker bodies counted. Goal: zero 5xx, zero files.
(d) stop: SIGTERM while a program spins, an upload stalls and a keep-alive connection idles: seconds to
    exit, processes and judge run folders left. Goal: within 30 s, nothing left.

Run it alone on the machine: other work slows the front and moves the memory figures.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from bench import record  # noqa: E402
from helpers.serve_load import rss_bytes  # noqa: E402
from helpers.served import Served, cleanup, reply_of, spin_judge_body, start_server  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    record.add_out_argument(p, "serve-hostile")
    p.add_argument("--uploads", type=int, default=12, help="(a) concurrent large uploads")
    p.add_argument("--upload-mb", type=int, default=60, help="(a) size of each upload")
    p.add_argument("--max-pending", type=int, default=16, help="serve --max-pending; (b) stalls as many")
    args = p.parse_args()
    out = record.resolve_out(args.out, "serve-hostile")
    result: dict[str, Any] = record.header() | {"params": {k: v for k, v in vars(args).items() if k != "out"}}
    result["machine"]["uptime_before"] = _sh("uptime")
    token = "bench-token"
    served = start_server("--max-pending", str(args.max_pending), token=token)
    try:
        served.post("/run_code", {"code": "print(1)", "language": "python"})  # warm: compile, sandbox
        result["memory"] = front_memory(served, args.uploads, args.upload_mb)
        result["stalled_uploads"] = stalled_uploads(served, args.max_pending)
        result["fuzz"] = fuzz(served)
    finally:
        cleanup(served)
    result["stop"] = stop_mid_work()
    result["machine"]["uptime_after"] = _sh("uptime")
    record.write(out, result)
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=1))


def front_memory(served: Served, uploads: int, upload_mb: int) -> dict[str, Any]:
    front = served.proc.pid
    idle = rss_bytes([front])
    head = json.dumps({"code": "import sys\nprint(len(sys.stdin.read()))", "language": "python"})[:-1]
    body = (head + ', "stdin": "' + "x" * (upload_mb << 20) + '"}').encode()
    samples: list[int] = []
    health: list[float] = []
    done = threading.Event()

    def watch() -> None:
        last_health = 0.0
        while not done.is_set():
            samples.append(rss_bytes([front]))
            if time.monotonic() - last_health > 0.2:
                start = time.monotonic()
                served.get("/health")
                health.append(time.monotonic() - start)
                last_health = time.monotonic()
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    start = time.monotonic()
    try:
        with ThreadPoolExecutor(uploads) as pool:
            answers = list(pool.map(lambda _: served.post("/run_code", body, timeout=600), range(uploads)))
    finally:
        done.set()
        watcher.join()
    took = time.monotonic() - start
    time.sleep(2)
    after = rss_bytes([front])
    codes = Counter(str(status) for status, _, _ in answers)
    right = sum(
        status == 200 and a["run_result"]["stdout"] == f"{upload_mb << 20}\n" for status, a, _ in answers
    )
    return {
        "uploads": uploads,
        "upload_mb": upload_mb,
        "front_idle_mb": round(idle / 2**20, 1),
        "front_peak_mb": round(max(samples) / 2**20, 1),
        "front_after_mb": round(after / 2**20, 1),
        "peak_over_idle": round(max(samples) / idle, 2),
        "answers": dict(codes),
        "right_answers": right,
        "seconds": round(took, 2),
        "health_answers": len(health),
        "health_slowest_s": round(max(health), 3),
    }


def stalled_uploads(served: Served, count: int) -> dict[str, Any]:
    stalled = [served.upload("/run_code", 1000, b'{"code": ') for _ in range(count)]
    try:
        start = time.monotonic()
        status, answer, _ = served.post("/run_code", {"code": "print(6 * 7)", "language": "python"})
        normal_s = time.monotonic() - start
        replies = [reply_of(sock, 60).split("\r\n", 1)[0] for sock in stalled]
    finally:
        for sock in stalled:
            sock.close()
    return {
        "stalled": count,
        "normal_request_status": status,
        "normal_request_right": status == 200 and answer["run_result"]["stdout"] == "42\n",
        "normal_request_s": round(normal_s, 3),
        "stalled_replies": dict(Counter(replies)),
    }


def fuzz(served: Served) -> dict[str, Any]:
    from helpers.serve_fuzz import corpus  # the generator tests/unit's fuzz test runs in process

    marker_dir = Path(served.tmp) / "fuzz-markers"
    marker_dir.mkdir(exist_ok=True)
    cases = corpus(str(marker_dir))
    codes: Counter[str] = Counter()
    server_errors: list[str] = []

    def post(case) -> None:
        status, answer, _ = served.post(f"/{case.endpoint}", case.body, timeout=120)
        codes[str(status)] += 1
        if status >= 500 and status != 503:
            server_errors.append(f"/{case.endpoint} {case.name}: {status} {str(answer)[:200]}")

    start = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(post, cases))
    return {
        "cases": len(cases),
        "answers": dict(codes),
        "server_errors": server_errors[:20],
        "files_written_outside_the_sandbox": len(list(marker_dir.iterdir())),
        "health_after": served.get("/health")[0],
        "seconds": round(time.monotonic() - start, 1),
    }


def stop_mid_work() -> dict[str, Any]:
    served = start_server()
    try:
        body = spin_judge_body(60)
        socks = [served.upload("/judge", len(body), body), served.upload("/run_code", 1000, b"{")]
        socks.append(served.upload("/run_code", 0))
        deadline = time.monotonic() + 60
        while not served.running_programs() and time.monotonic() < deadline:
            time.sleep(0.1)
        program_running = bool(served.running_programs())
        start = time.monotonic()
        code = served.stop(signal.SIGTERM, timeout=120)
        took = time.monotonic() - start
        left = served.left_after_stop(timeout=5)
        run_dirs = list((Path(served.tmp) / f"codefu-judge-{os.geteuid()}").glob("run-*"))
        for sock in socks:
            sock.close()
        return {
            "program_running_at_sigterm": program_running,
            "exit_code": code,
            "seconds_to_exit": round(took, 2),
            "processes_left": len(left),
            "run_folders_left": len(run_dirs),
        }
    finally:
        cleanup(served)


def _sh(command: str) -> str:
    return subprocess.run(command, shell=True, capture_output=True, text=True, cwd=REPO).stdout.strip()


if __name__ == "__main__":
    main()
