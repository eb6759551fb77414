"""verl's own SandboxFusion client against `codefu serve`, timed against the in-process judge (issue #41).

    python bench/serve_verl_client.py            # writes docs/results/<today>-serve-verl-client.json
    python bench/serve_verl_client.py --rounds 1 --py-spy /tmp/prof   # and profile the server

What it measures. A real `codefu serve` (started as the tests start one: tests/helpers/served.py) judges
C++ programs through verl's SandboxFusion client, its published code unchanged (the verl wheel
scripts/setup.sh unpacks in .clients/verl, loaded by path as tests/e2e/test_serve.py loads it):
`check_correctness(url, {"inputs", "outputs"}, code, timeout, memory_limit_mb, "cpp", semaphore)`, which
sends one /run_code request per test case, a new connection each (`requests.post`), from its own thread
pool (max(32, 5 x cores) threads), all through the semaphore verl's trainer shares between reward workers
(`multiprocessing.Manager().Semaphore(max_concurrent)`, --concurrency, verl's default 64). verl's
`compute_score` is not called: it sends no language, so C++ would run as Python; check_correctness is
what it calls. Programs are judged one after the other, as in docs/benchmarks.md's (a) rows.

Against it, codefu's in-process `Judge` (as many workers as the server's replica, judge_identical_once
off, as the service) runs `Judge.judge` of each program on a problem holding those same tests.

Workload: the 7 C++ problems of tests/data/codefu_easy_solutions.json (real codefu-easy problems,
../shared/data/codefu-easy/train.parquet), each with its correct and its wrong program, --max-tests of
its private tests (the judge's own sample); each round judges the 14 programs twice: new sources (a
round's tag in a comment: one compile per program on each side) and the same sources again (compiles
cached on both sides). Defaults (3 rounds, 10 tests) give 840 test cases, as bench/serve_load.py's (a).
Each phase runs in-process first, then served, so that other load on the machine falls on both alike.

Every test's pass/fail must agree (verl's True against the judge's ACCEPTED); a disagreement is listed
with the served program's stdout checked by the judge's own comparison, which tells a difference of
checkers (verl compares output exactly, less trailing newlines; the judge compares tokens) from a
difference in what ran. CPU time is counted per role (the HTTP front, the Serve replica, the sandboxes,
Ray's daemons, the client) to show where a /run_code call's cost goes; --serial-calls adds single
calls one at a time (served /run_code against in-process `Judge.run_once`) for the bare per-call latency.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from bench import record  # noqa: E402
from codefu.data.loader import load_problems  # noqa: E402
from codefu.data.sources.jsonl import parse_problem  # noqa: E402
from codefu.judge import Judge, JudgeConfig  # noqa: E402
from codefu.judge.checker import outputs_match  # noqa: E402
from codefu.judge.extract import Program  # noqa: E402
from codefu.judge.rewards import reward_spec, select_tests  # noqa: E402
from codefu.judge.sandbox import Limits  # noqa: E402
from codefu.types import Problem, Status  # noqa: E402
from helpers.serve_load import fenced, percentile, problem_object, solutions  # noqa: E402
from helpers.served import Served, cleanup, start_server  # noqa: E402

DATASET = REPO.parent / "shared" / "data" / "codefu-easy" / "train.parquet"
VERL = REPO / ".clients" / "verl" / "verl" / "utils" / "reward_score" / "sandbox_fusion"
KINDS = ("compiles included", "compiles cached")

# verl's result codes: True passed, False wrong answer, -1 API or sandbox error, -2 runtime error,
# -3 time limit, -4 compile error; what each of the judge's outcomes reads as through /run_code
VERL_CODE = {
    Status.ACCEPTED: True,
    Status.WRONG_ANSWER: False,
    Status.RUNTIME_ERROR: -2,
    Status.MEMORY_LIMIT: -2,  # killed by the cgroup: a runtime error to SandboxFusion's clients
    Status.TIME_LIMIT: -3,
    Status.COMPILE_ERROR: -4,
    Status.OUTPUT_LIMIT: -1,
    Status.SANDBOX_ERROR: -1,
}


@dataclass
class Item:
    """One program to judge: its problem holding the selected tests, and the C++ source."""

    problem: Problem
    kind: str  # "correct" or "wrong"
    source: str

    @property
    def label(self) -> str:
        return f"{self.problem.name} ({self.kind})"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    record.add_out_argument(p, "serve-verl-client")
    p.add_argument("--rounds", type=int, default=3, help="rounds, each: new sources, then the same again")
    p.add_argument("--max-tests", type=int, default=10, help="private tests per problem (the judge's sample)")
    p.add_argument("--concurrency", type=int, default=64, help="verl's sandbox_fusion.max_concurrent")
    p.add_argument("--timeout", type=float, default=10, help="verl's timeout: compile_timeout = run_timeout")
    p.add_argument("--max-pending", type=int, default=0, help="serve --max-pending (0: the server's default)")
    p.add_argument(
        "--workers", type=int, default=os.cpu_count() or 1, help="in-process judge sandboxes (the server's)"
    )
    p.add_argument(
        "--semaphore",
        choices=("manager", "thread"),
        default="manager",
        help="verl's trainer shares a multiprocessing.Manager semaphore (an IPC per acquire and release); "
        "'thread': a threading.Semaphore, to see that cost",
    )
    p.add_argument("--serial-calls", type=int, default=100, help="single calls one at a time (0: none)")
    p.add_argument(
        "--py-spy",
        type=Path,
        default=None,
        help="record the front and the replica (py-spy, collapsed stacks) in every served phase into DIR; "
        "py-spy takes CPU from the same cores: such a run's timings are not the benchmark's",
    )
    p.add_argument("--serve-flag", action="append", default=[], help="one more flag for codefu serve")
    args = p.parse_args()

    out = record.resolve_out(args.out, "serve-verl-client")
    head = record.header()
    machine = machine_info(head["machine"])
    print(f"{head['date']}; {machine['cores']} cores, kernel {machine['kernel']}, ray {machine['ray']}")
    print(f"before: {machine['uptime_before']}", flush=True)
    verl = verl_client()
    problems = load_problems(DATASET)
    cpp = [s for s in solutions() if s["language"] == "cpp"]
    manager = multiprocessing.Manager() if args.semaphore == "manager" else None  # before any thread
    judge = Judge(JudgeConfig(reward="codefu", seed=0, workers=args.workers, judge_identical_once=False))
    flags = [*(["--max-pending", str(args.max_pending)] if args.max_pending else []), *args.serve_flag]
    served = start_server(*flags)
    semaphore = manager.Semaphore(args.concurrency) if manager else threading.Semaphore(args.concurrency)
    client_pids = [os.getpid()] + ([manager._process.pid] if manager else [])  # type: ignore[attr-defined]
    result: dict[str, Any] = head | {
        "params": {k: str(v) for k, v in vars(args).items() if k != "out"},
        "machine": machine,
        "serve_flags": flags,
        "verl_client": str(VERL.relative_to(REPO)),
    }
    phases: list[dict[str, Any]] = []
    try:
        warm_up(verl, judge, served, problems, cpp, semaphore, args)
        for r in range(args.rounds):
            sources = programs(problems, cpp, args.max_tests, f"round {r}")
            for kind in KINDS:
                phase = f"r{r} {kind}"
                tests = sum(len(it.problem.private_tests) for it in sources)

                def judge_here(items: list[Item] = sources) -> list[list[Status]]:
                    return [
                        [t.status for t in judge.judge(it.problem, fenced("cpp", it.source)).tests]
                        for it in items
                    ]

                def judge_served(items: list[Item] = sources) -> list[tuple[list[Any], list[dict]]]:
                    return [verl_check(verl, served.url, it, semaphore, args.timeout) for it in items]

                want, t_in, cpu_in = timed(judge_here, served, client_pids)
                spies = start_py_spy(args.py_spy, served, phase) if args.py_spy else []
                got, t_http, cpu_http = timed(judge_served, served, client_pids)
                stop_py_spy(spies)
                checked = compare(sources, want, got)
                phases.append(
                    {
                        "round": r,
                        "kind": kind,
                        "programs": len(sources),
                        "tests": tests,
                        "in_process_s": round(t_in, 3),
                        "served_s": round(t_http, 3),
                        "ratio": round(t_http / t_in, 3),
                        "cpu_s_in_process_phase": cpu_in,
                        "cpu_s_served_phase": cpu_http,
                        **checked,
                    }
                )
                print(
                    f"{phase}: {tests} tests: in-process {t_in:.2f} s, verl's client {t_http:.2f} s "
                    f"({t_http / t_in:.2f}x); api errors {checked['api_errors']}, pass/fail mismatches "
                    f"{len(checked['mismatches'])}",
                    flush=True,
                )
        if args.serial_calls:
            result["serial_calls"] = serial_calls(judge, served, problems, cpp, args.serial_calls)
            s = result["serial_calls"]
            print(
                f"serial: {args.serial_calls} calls, p50 run_once {s['in_process_ms']['p50']:.2f} ms, "
                f"/run_code {s['served_ms']['p50']:.2f} ms (requests.post, new connection each)",
                flush=True,
            )
        result["server_request_counts"] = served_request_counts(served)
        code = served.stop()
        result["stop"] = {"exit_code": code, "processes_left": served.left_after_stop()}
    finally:
        cleanup(served)
        judge.close()
        if manager is not None:
            manager.shutdown()
    machine["uptime_after"] = _sh("uptime")
    result["summary"] = summarize(phases)
    result["phases"] = phases
    record.write(out, result)
    print(f"after: {machine['uptime_after']}")
    print(markdown(result))


# ---- the two sides -----------------------------------------------------------------------------------


def verl_client() -> ModuleType:
    """verl's sandbox_fusion package, loaded from its wheel by path (verl's top-level package needs its
    training stack; the client needs only `requests`)."""
    if not VERL.is_dir():
        raise SystemExit(f"{VERL} is missing: run scripts/setup.sh (it installs verl's client there)")
    spec = importlib.util.spec_from_file_location(
        "verl_sandbox_fusion", VERL / "__init__.py", submodule_search_locations=[str(VERL)]
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["verl_sandbox_fusion"] = module
    spec.loader.exec_module(module)
    return module


def verl_check(verl: ModuleType, url: str, item: Item, semaphore: Any, timeout: float):
    """verl's check_correctness of one program on its tests: (results, metadata), one per test."""
    tests = item.problem.private_tests
    in_outs = {"inputs": [t.input for t in tests], "outputs": [t.output for t in tests]}
    return verl.utils.check_correctness(
        sandbox_fusion_url=url + "/run_code",
        in_outs=in_outs,
        generation=item.source,
        timeout=timeout,
        memory_limit_mb=item.problem.memory_limit_bytes >> 20,
        language="cpp",
        concurrent_semaphore=semaphore,
    )


def programs(problems: list[Problem], cpp: list[dict], max_tests: int, tag: str) -> list[Item]:
    """The correct and wrong program of each C++ problem, textually new (a comment), on its test sample."""
    spec = reward_spec("codefu")
    out = []
    for s in cpp:
        full = problems[s["index"]]
        tests = select_tests(full, spec.tests, max_tests, 0)
        problem = parse_problem(problem_object(full, full.name, tests), full.name)
        for kind in ("correct", "wrong"):
            out.append(Item(problem, kind, f"{s[kind]}\n// {tag} {kind}\n"))
    return out


def warm_up(verl, judge: Judge, served: Served, problems, cpp, semaphore, args) -> None:
    """Precompiled headers built and sandboxes started on both sides, verl's client imported and its
    connection path used, before any timing."""
    item = programs(problems, cpp[:1], 3, "warm-up")[0]
    verdict = judge.judge(item.problem, fenced("cpp", item.source))
    assert verdict.status is Status.ACCEPTED, verdict
    results, metadata = verl_check(verl, served.url, item, semaphore, args.timeout)
    assert results == [True] * len(results), metadata


def compare(items: list[Item], want: list[list[Status]], got: list[tuple[list[Any], list[dict]]]):
    """Each test's pass/fail (verl's True against the judge's ACCEPTED), and its outcome class."""
    mismatches: list[dict[str, Any]] = []
    outcome_differences: list[dict[str, Any]] = []
    api_errors = 0
    verl_results: dict[str, int] = {}
    for item, statuses, (results, metadata) in zip(items, want, got, strict=True):
        if len(statuses) != len(results):
            mismatches.append(
                {"program": item.label, "error": f"{len(statuses)} tests in-process, {len(results)} served"}
            )
            continue
        for i, (status, res, meta) in enumerate(zip(statuses, results, metadata, strict=True)):
            verl_results[repr(res)] = verl_results.get(repr(res), 0) + 1
            if res == -1:
                api_errors += 1
            if (res is True) != (status is Status.ACCEPTED):
                stdout = (meta or {}).get("stdout")
                expected = item.problem.private_tests[i].output
                mismatches.append(
                    {
                        "program": item.label,
                        "test": i,
                        "in_process": status.name,
                        "verl": res,
                        "verl_status": (meta or {}).get("status"),
                        "api_error": (meta or {}).get("api_request_error"),
                        # True: the service ran it as the judge did; verl's exact comparison differs
                        "served_stdout_passes_judge_check": None
                        if stdout is None
                        else outputs_match(expected, stdout),
                    }
                )
            elif VERL_CODE.get(status) != res:
                outcome_differences.append(
                    {"program": item.label, "test": i, "in_process": status.name, "verl": res}
                )
    return {
        "api_errors": api_errors,
        "verl_results": verl_results,
        "mismatches": mismatches,
        "outcome_differences": outcome_differences[:20],
    }


def serial_calls(judge: Judge, served: Served, problems, cpp, n: int) -> dict[str, Any]:
    """One call at a time on a compiled program and one input: in-process `Judge.run_once` against a
    /run_code request as verl sends it (requests.post, a new connection each): the bare cost of a call."""
    import requests

    item = programs(problems, cpp[:1], 1, "serial")[0]
    problem = item.problem
    test = problem.private_tests[0]
    mb = problem.memory_limit_bytes >> 20
    limits = Limits(problem.time_limit_s, problem.time_limit_s * 3 + 1, mb << 20, 16 << 20)
    body = json.dumps(
        {
            "compile_timeout": 10,
            "run_timeout": problem.time_limit_s,
            "code": item.source,
            "stdin": test.input,
            "memory_limit_MB": mb,
            "language": "cpp",
            "files": {},
            "fetch_files": [],
        }
    )
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    program = Program("cpp", item.source)
    for _ in range(3):  # compiled, sandboxes warm on both sides
        judge.run_once(program, test.input, limits, 10)
        requests.post(served.url + "/run_code", headers=headers, data=body, timeout=30).raise_for_status()
    here, there = [], []
    cpu0 = time.process_time()
    for _ in range(n):
        start = time.perf_counter()
        judge.run_once(program, test.input, limits, 10)
        here.append((time.perf_counter() - start) * 1000)
    cpu_here = time.process_time() - cpu0
    cpu0, server0 = time.process_time(), role_cpu(served, [])
    for _ in range(n):
        start = time.perf_counter()
        answer = requests.post(served.url + "/run_code", headers=headers, data=body, timeout=30).json()
        there.append((time.perf_counter() - start) * 1000)
        assert answer["status"] == "Success", answer
    client = time.process_time() - cpu0
    server = delta(server0, role_cpu(served, []))
    return {
        "calls": n,
        "in_process_ms": {f"p{q}": round(percentile(here, q), 3) for q in (50, 90, 99)},
        "served_ms": {f"p{q}": round(percentile(there, q), 3) for q in (50, 90, 99)},
        "in_process_cpu_ms_per_call_judge_process": round(cpu_here / n * 1000, 3),
        "served_cpu_ms_per_call": {k: round(v / n * 1000, 3) for k, v in server.items()}
        | {"client (requests)": round(client / n * 1000, 3)},
    }


# ---- timing and CPU per role ----------------------------------------------------------------------------


def timed(fn: Callable[[], Any], served: Served, client_pids: Sequence[int]) -> tuple[Any, float, dict]:
    """fn()'s value, its seconds, and the CPU seconds every role used meanwhile."""
    before, busy = role_cpu(served, client_pids), machine_busy_s()
    start = time.monotonic()
    out = fn()
    seconds = time.monotonic() - start
    cpu = delta(before, role_cpu(served, client_pids))
    cpu["machine: all processes (other users' included)"] = round(machine_busy_s() - busy, 3)
    return out, seconds, cpu


def machine_busy_s() -> float:
    """CPU seconds the whole machine has been busy (/proc/stat: all but idle and iowait). It sees what
    the per-process counts miss (a compiler in bwrap is reaped outside the judge's tree), and also
    every other user's load."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def delta(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]]) -> dict[str, float]:
    """CPU seconds by role between two snapshots (a process that ended counts in its parent's reaped
    children if that parent waited for it; bwrap's sandboxes mostly do not show there)."""
    out: dict[str, float] = {}
    for pid, (role, cpu) in after.items():
        out[role] = out.get(role, 0.0) + cpu - before.get(pid, (role, 0.0))[1]
    return {k: round(v, 3) for k, v in sorted(out.items())}


def role_cpu(served: Served, client_pids: Sequence[int]) -> dict[int, tuple[str, float]]:
    """pid -> (role, CPU seconds so far) for the server's processes and this process's own tree (the
    client, or the in-process judge and its sandboxes); a process's reaped children count apart."""
    ticks = os.sysconf("SC_CLK_TCK")
    server = set(served.pids())
    mine = set(descendants(os.getpid())) - server
    out: dict[int, tuple[str, float]] = {}
    for pid in server | mine | set(client_pids):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        own, reaped = (int(stat[11]) + int(stat[12])) / ticks, (int(stat[13]) + int(stat[14])) / ticks
        if pid in server:
            role = server_role(pid, served.proc.pid, cmd)
        elif pid == os.getpid():
            role = "bench process (client threads / in-process judge)"
        elif pid in client_pids:
            role = "client: verl's semaphore manager"
        else:
            role = "in-process judge: sandboxes"
        out[pid] = (role, own)
        out[-pid] = (f"{role}: reaped children", reaped)
    return out


def server_role(pid: int, front: int, cmd: str) -> str:
    if pid == front:
        return "server: front (uvicorn, Serve handle)"
    if "ServeReplica" in cmd:
        return "server: replica (Serve actor, Judge)"
    if "ServeController" in cmd:
        return "server: Serve controller"
    if "bwrap" in cmd or "codefu-runner" in cmd or cmd.startswith("/box"):
        return "server: sandboxes"
    return "server: Ray daemons and other"


def descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                ppid = int(Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(name))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def start_py_spy(directory: Path, served: Served, phase: str) -> list[subprocess.Popen]:
    """py-spy recording the front and the replica (collapsed stacks, one file each), until stopped."""
    directory.mkdir(parents=True, exist_ok=True)
    targets = {"front": served.proc.pid}
    for pid in served.pids():
        try:
            if b"ServeReplica" in Path(f"/proc/{pid}/cmdline").read_bytes():
                targets["replica"] = pid
        except OSError:
            continue
    spies = []
    for name, pid in targets.items():
        out = directory / f"{phase.replace(' ', '-')}-{name}.txt"
        argv = ["py-spy", "record", "--pid", str(pid), "--format", "raw", "--rate", "100", "--nonblocking"]
        argv += ["-o", str(out)]
        spies.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    time.sleep(1.0)  # attached
    return spies


def stop_py_spy(spies: list[subprocess.Popen]) -> None:
    for spy in spies:
        spy.send_signal(signal.SIGINT)  # py-spy writes its file on Ctrl-C
    for spy in spies:
        try:
            spy.wait(timeout=60)
        except subprocess.TimeoutExpired:
            spy.kill()


# ---- the record -------------------------------------------------------------------------------------------


def machine_info(machine: dict[str, Any]) -> dict[str, Any]:
    """bench/record.py's machine, with Ray's version and the load before the run."""
    import ray

    return machine | {"ray": ray.__version__, "uptime_before": _sh("uptime")}


def served_request_counts(served: Served) -> dict[str, float]:
    """The server's own count of requests by endpoint and status code (its /metrics)."""
    _, text, _ = served.get("/metrics")
    counts = {}
    for line in text.splitlines():
        if line.startswith("codefu_serve_requests_total{"):
            labels, value = line.rsplit(" ", 1)
            counts[labels.removeprefix("codefu_serve_requests_total")] = float(value)
    return counts


def summarize(phases: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind in (*KINDS, "all"):
        rows = [p for p in phases if kind in ("all", p["kind"])]
        if not rows:
            continue
        t_in = sum(p["in_process_s"] for p in rows)
        t_http = sum(p["served_s"] for p in rows)
        tests = sum(p["tests"] for p in rows)
        cpu: dict[str, float] = {}
        cpu_in: dict[str, float] = {}
        for p in rows:
            for role, s in p["cpu_s_served_phase"].items():
                cpu[role] = cpu.get(role, 0.0) + s
            for role, s in p["cpu_s_in_process_phase"].items():
                cpu_in[role] = cpu_in.get(role, 0.0) + s
        out[kind] = {
            "tests": tests,
            "in_process_s": round(t_in, 2),
            "served_s": round(t_http, 2),
            "ratio": round(t_http / t_in, 3),
            "ratio_per_round": [p["ratio"] for p in rows],
            "api_errors": sum(p["api_errors"] for p in rows),
            "mismatches": sum(len(p["mismatches"]) for p in rows),
            "served_cpu_ms_per_test": {k: round(v / tests * 1000, 2) for k, v in cpu.items() if v > 0},
            "in_process_cpu_ms_per_test": {k: round(v / tests * 1000, 2) for k, v in cpu_in.items() if v > 0},
        }
    if "all" in out:
        out["all"] |= {"goal": "<= 1.5", "met": out["all"]["ratio"] <= 1.5}
    return out


def markdown(result: dict[str, Any]) -> str:
    s = result["summary"]
    lines = [
        "| verl's client, one /run_code per test | tests | in-process `Judge.judge` | served | ratio "
        "| API errors | pass/fail differing |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for kind in (*KINDS, "all"):
        if kind in s:
            k = s[kind]
            ratio = f"{k['ratio']:.2f}x"
            if kind == "all":
                ratio = f"**{ratio}** (goal <= 1.5: {'met' if k['met'] else 'NOT met'})"
            lines.append(
                f"| {kind} | {k['tests']} | {k['in_process_s']:.2f} s | {k['served_s']:.2f} s | {ratio} "
                f"| {k['api_errors']} | {k['mismatches']} |"
            )
    if "all" in s:
        lines += ["", "CPU ms per test case in the served phases, by role:"]
        lines += [f"- {role}: {ms}" for role, ms in s["all"]["served_cpu_ms_per_test"].items()]
    return "\n".join(lines)


def _sh(command: str) -> str:
    return subprocess.run(command, shell=True, capture_output=True, text=True).stdout.strip()


if __name__ == "__main__":
    main()
