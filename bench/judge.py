"""Judge benchmark: per-test sandbox overhead, and end-to-end throughput against a CodeFu-style runner.

    python bench/judge.py [--runs 200] [--variants 4] [--workers 1,2] [--overhead-only]

Writes every figure it prints, with the command, commit and machine, to --out (bench/record.py; default
docs/results/<date>-judge.json, or -judge-overhead.json with --overhead-only).

1. Overhead: one trivial compiled program run --runs times under plain `subprocess.run`, under a
   sandbox per test (bubblewrap + cgroup + rlimits; also with cgroups off, to attribute the cost), and
   under the runner: per test inside a running sandbox, and per test of a whole submission of
   --tests-per-submission tests (sandbox start and teardown included). Medians. With the system-call
   filter (the default) and without it (seccomp off), and the filter's cost per system call.
2. Throughput: real CodeFu problems (../shared/data/codefu-easy) with the correct and wrong solutions of
   tests/data/codefu_easy_solutions.json, each in --variants textual variants (distinct programs, as
   samples of a GRPO group are): our judge with 1 and all workers, and a reference runner in the style
   of the CodeFu article (g++ -O2 per submission, tests in a ProcessPoolExecutor, no sandbox, no cache).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import record  # noqa: E402
from codefu.data.loader import load_problems  # noqa: E402
from codefu.judge import Judge, JudgeConfig  # noqa: E402
from codefu.judge.checker import outputs_match  # noqa: E402
from codefu.judge.runner import open_sandbox, open_session  # noqa: E402
from codefu.judge.sandbox import Limits, Mount, Sandbox, SandboxConfig  # noqa: E402
from codefu.types import Problem, Status  # noqa: E402

SUM = '#include <cstdio>\nint main(){long long a,b;scanf("%lld %lld",&a,&b);printf("%lld\\n",a+b);}\n'


def overhead(runs: int, tests_per_submission: int) -> dict[str, float]:
    tmp = Path(tempfile.mkdtemp(prefix="codefu-bench-"))
    tmp.chmod(0o755)
    (tmp / "main.cpp").write_text(SUM)
    subprocess.run(["g++", "-O2", "-o", str(tmp / "main"), str(tmp / "main.cpp")], check=True)
    (tmp / "in").write_text("2 3\n")
    limits = Limits(cpu_s=1, wall_s=3, memory_bytes=256 << 20, file_size_bytes=1 << 20)
    argv, mounts = ["/box/main"], [Mount(tmp, "/box")]

    def check(r) -> None:
        assert r.ok and (tmp / "out").read_text() == "5\n", r

    def plain() -> None:
        with open(tmp / "in", "rb") as fin:
            subprocess.run([str(tmp / "main")], stdin=fin, capture_output=True, check=True)

    def per_test(sb: Sandbox):
        def go() -> None:
            check(sb.run(argv, limits, mounts, tmp / "out", tmp / "err", stdin=tmp / "in"))

        return go

    def in_session(session):
        def go() -> None:
            check(session.run(tmp / "in", tmp / "out", tmp / "err", limits))

        return go

    def whole_submission(sb: Sandbox):
        def go() -> None:  # start, tests_per_submission tests, close
            session = open_session(sb, argv, mounts, limits)
            for _ in range(tests_per_submission):
                check(session.run(tmp / "in", tmp / "out", tmp / "err", limits))
            session.close()

        return go

    results = {"plain subprocess": _median_ms(plain, runs)}
    for name, cfg in [
        ("sandbox per test (bwrap+cgroup+rlimits)", SandboxConfig(runner=False)),
        ("sandbox per test, cgroups off", SandboxConfig(runner=False, cgroup="off")),
        ("sandbox per test, seccomp off", SandboxConfig(runner=False, seccomp=False)),
    ]:
        sb = Sandbox(cfg)
        results[name] = _median_ms(per_test(sb), runs)
        sb.close()
    for name, cfg in [
        ("runner", SandboxConfig()),
        ("runner, cgroups off", SandboxConfig(cgroup="off")),
        ("runner, seccomp off", SandboxConfig(seccomp=False)),
    ]:
        sb = open_sandbox(cfg)
        assert sb.runner_binary is not None
        session = open_session(sb, argv, mounts, limits)
        results[f"{name}: per test in a running sandbox"] = _median_ms(in_session(session), runs)
        session.close()
        per_submission = _median_ms(whole_submission(sb), max(runs // tests_per_submission, 10))
        results[f"{name}: per test, {tests_per_submission}-test submission"] = (
            per_submission / tests_per_submission
        )
        sb.close()
    return results


GETPPID_LOOP = (
    "#include <cstdio>\n#include <ctime>\n#include <unistd.h>\n#include <sys/syscall.h>\n"
    "int main(){ timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a);"
    " for (int i = 0; i < 1000000; i++) syscall(SYS_getppid); clock_gettime(CLOCK_MONOTONIC, &b);"
    ' printf("%.2f\\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / 1e6); }\n'
)


def filter_cost(repeats: int = 7) -> dict[str, float]:
    """ns per system call (a million getppid, timed inside the sandbox) with and without the filter."""
    tmp = Path(tempfile.mkdtemp(prefix="codefu-bench-"))
    tmp.chmod(0o755)
    (tmp / "loop.cpp").write_text(GETPPID_LOOP)
    subprocess.run(["g++", "-O2", "-o", str(tmp / "loop"), str(tmp / "loop.cpp")], check=True)
    limits = Limits(cpu_s=10, wall_s=30, memory_bytes=256 << 20, file_size_bytes=1 << 20)
    results = {}
    for name, seccomp in [("filter on", True), ("filter off", False)]:
        cfg = SandboxConfig(runner=False, seccomp=seccomp)
        sb = Sandbox(cfg)
        ns = []
        for _ in range(repeats):
            r = sb.run(["/box/loop"], limits, [Mount(tmp, "/box")], tmp / "out", tmp / "err")
            assert r.ok, r
            ns.append(float((tmp / "out").read_text()))
        results[f"getppid, {name}"] = statistics.median(ns)
        sb.close()
    return results


def _median_ms(fn, runs: int) -> float:
    for _ in range(5):
        fn()
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def workload(variants: int) -> list[tuple[Problem, str, str, str]]:
    """(problem, language, source, response) for every solution x variant."""
    problems = load_problems(REPO.parent / "shared" / "data" / "codefu-easy" / "train.parquet")
    solutions = json.loads((REPO / "tests" / "data" / "codefu_easy_solutions.json").read_text())
    items = []
    for s in solutions:
        comment = "//" if s["language"] == "cpp" else "#"
        for kind in ("correct", "wrong"):
            for k in range(variants):
                source = f"{s[kind]}\n{comment} sample {k}\n"
                items.append(
                    (problems[s["index"]], s["language"], source, f"```{s['language']}\n{source}```")
                )
    return items


def judge_throughput(items, workers: int, runner: bool = True) -> dict[str, float]:
    with Judge(JudgeConfig(workers=workers, sandbox=SandboxConfig(runner=runner))) as judge:
        judge.judge(items[0][0], items[0][3])  # build the precompiled header outside the timing
        misses0 = judge.compiler.misses
        start = time.monotonic()
        verdicts = [v for _, v in judge.judge_many((p, r) for p, _, _, r in items)]
        seconds = time.monotonic() - start
        compiles = judge.compiler.misses - misses0
    assert not any(v.status is Status.SANDBOX_ERROR for v in verdicts)
    tests = sum(len(v.tests) for v in verdicts)
    accepted = sum(v.status is Status.ACCEPTED for v in verdicts)
    return _rates(len(items), tests, compiles, seconds, accepted)


# ---- the reference: CodeFu-article style, no sandbox ----------------------------------------------------


def _reference_test(args) -> bool:
    argv, stdin, expected, time_limit = args
    try:
        r = subprocess.run(argv, input=stdin.encode(), capture_output=True, timeout=time_limit)
    except subprocess.TimeoutExpired:
        return False
    return r.returncode == 0 and outputs_match(expected, r.stdout.decode(errors="replace"))


def reference_throughput(items, workers: int) -> dict[str, float]:
    tmp = Path(tempfile.mkdtemp(prefix="codefu-ref-"))
    start = time.monotonic()
    tests = accepted = 0
    with ProcessPoolExecutor(workers) as pool:
        for n, (problem, language, source, _) in enumerate(items):
            if language == "cpp":
                (tmp / f"{n}.cpp").write_text(source)
                c = subprocess.run(
                    ["g++", "-std=c++17", "-O2", "-o", str(tmp / str(n)), str(tmp / f"{n}.cpp")],
                    capture_output=True,
                )
                if c.returncode != 0:
                    continue
                argv = [str(tmp / str(n))]
            else:
                (tmp / f"{n}.py").write_text(source)
                argv = [sys.executable, str(tmp / f"{n}.py")]
            jobs = [(argv, t.input, t.output, problem.time_limit_s) for t in problem.private_tests]
            ok = list(pool.map(_reference_test, jobs))
            tests += len(ok)
            accepted += all(ok)
    seconds = time.monotonic() - start
    compiles = sum(1 for _, lang, _, _ in items if lang == "cpp")
    return _rates(len(items), tests, compiles, seconds, accepted)


def _rates(subs: int, tests: int, compiles: int, seconds: float, accepted: int) -> dict[str, float]:
    return {
        "submissions": subs,
        "accepted": accepted,
        "tests": tests,
        "compiles": compiles,
        "seconds": round(seconds, 2),
        "submissions/s": round(subs / seconds, 2),
        "tests/s": round(tests / seconds, 1),
        "compiles/s": round(compiles / seconds, 2),
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--tests-per-submission", type=int, default=20)
    ap.add_argument("--overhead-only", action="store_true")
    ap.add_argument("--skip-reference", action="store_true", help="judge throughput only")
    ap.add_argument("--per-test-sandbox", action="store_true", help="throughput of the older path too")
    ap.add_argument("--variants", type=int, default=4)
    ap.add_argument("--workers", default=f"1,{os.cpu_count()}")
    ap.add_argument("--filter-repeats", type=int, default=7, help="runs of the million-getppid program")
    record.add_out_argument(ap, "judge")
    args = ap.parse_args(argv)
    head = record.header(None if argv is None else ["bench/judge.py", *argv])
    out = record.resolve_out(args.out, "judge-overhead" if args.overhead_only else "judge")
    print(
        f"# {platform.node()}: {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d %H:%M')}"
    )
    results: dict = {}
    print("## per-run overhead (median ms)")
    print(f"# load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    results["overhead_median_ms"] = overhead(args.runs, args.tests_per_submission)
    for name, ms in results["overhead_median_ms"].items():
        print(f"{name:<50} {ms:7.2f}")
    print("## system-call filter: ns per system call (median)")
    results["filter_ns_per_call"] = filter_cost(args.filter_repeats)
    for name, ns in results["filter_ns_per_call"].items():
        print(f"{name:<50} {ns:7.1f}")
    if not args.overhead_only:
        items = workload(args.variants)
        results["problems"] = len({id(i[0]) for i in items})
        print(f"## throughput: {len(items)} submissions on {results['problems']} problems")
        rows = results["throughput"] = []
        for w in sorted({int(x) for x in args.workers.split(",")}):
            runs = [("codefu judge, runner", True)]
            if args.per_test_sandbox:
                runs.append(("codefu judge, sandbox per test", False))
            for name, runner in runs:
                rows.append({"how": name, "workers": w} | judge_throughput(items, w, runner))
                print(f"{name}, {w} worker(s): {rows[-1]}", flush=True)
            if not args.skip_reference:
                rows.append(
                    {"how": "CodeFu-style reference (no sandbox)", "workers": w}
                    | reference_throughput(items, w)
                )
                print(f"CodeFu-style reference, {w} proc(s): {rows[-1]}", flush=True)
    results["load_avg_after"] = [round(x, 2) for x in os.getloadavg()]
    params = {k: v for k, v in vars(args).items() if k != "out"}
    full = head | {"params": params, "results": results}
    record.write(out, full)
    return full


if __name__ == "__main__":
    main()
