"""`codefu serve` under load on loopback, against the in-process judge doing the same work.

    python bench/serve_load.py             # writes docs/results/<date>-serve-load.json (bench/record.py)

Workload: 12 real codefu-easy problems (../shared/data/codefu-easy/train.parquet) with the correct and
wrong C++/Python programs of tests/data/codefu_easy_solutions.json, --max-tests tests each.

(a) /run_code as verl's SandboxFusion client calls it: one HTTP request per (program, test input), a new
    connection each (verl's `requests.post`), the tests of one program at once (its thread pool), the
    programs one after the other; the server compiles each program once (compile cache). Against it, the
    in-process `Judge.judge` of each program on a problem holding those same tests (compiled once, tests
    over the judge's sandboxes). The C++ programs only, each round twice: new sources (a round's tag in
    a comment: compiles included) and the same sources again (compiles cached on both sides).
(b) /judge from --clients concurrent clients (threads, one keep-alive connection each) against
    `Judge.judge_many` on the same submissions: every program in --variants textual variants (distinct
    programs, compiled once each), each sent --copies times, shuffled. Every submission names its problem
    uniquely (the answer's "name" echoes it) and its verdict must equal the in-process one: no lost,
    duplicated or swapped answers.

The rounds alternate in-process and served phases (the server idles during the in-process ones; its CPU
time then is reported) so that other load on the machine falls on both alike. The server's memory (VmRSS
summed over all its processes, sandboxes included) is sampled after every phase. Goals (issue #16): (a)
served within 1.5x of in-process; (b) served >= 77% of in-process submissions/s, 0 errors.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from bench import record  # noqa: E402
from codefu.data.loader import load_problems  # noqa: E402
from codefu.data.sources.jsonl import parse_problem  # noqa: E402
from codefu.judge import Judge, JudgeConfig  # noqa: E402
from codefu.judge.checker import outputs_match  # noqa: E402
from codefu.judge.rewards import reward_spec, select_tests  # noqa: E402
from codefu.types import Problem, Status  # noqa: E402
from helpers.serve_load import (  # noqa: E402
    Call,
    LoadRun,
    cpu_seconds,
    fenced,
    percentile,
    post_all,
    problem_object,
    rss_bytes,
    solutions,
)
from helpers.served import Served, cleanup, start_server  # noqa: E402

DATASET = REPO.parent / "shared" / "data" / "codefu-easy" / "train.parquet"
VERL_THREADS = max(32, (os.cpu_count() or 1) * 5)  # verl's check_correctness pool per program


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    record.add_out_argument(p, "serve-load")
    p.add_argument("--max-tests", type=int, default=10, help="tests per problem (serve --max-tests)")
    p.add_argument("--rounds", type=int, default=3, help="rounds of (a) then (b), each with new sources")
    p.add_argument("--clients", type=int, default=64, help="concurrent /judge clients in (b)")
    p.add_argument("--variants", type=int, default=2, help="(b): distinct variants of each program a round")
    p.add_argument("--copies", type=int, default=8, help="(b): times each variant is submitted a round")
    p.add_argument(
        "--max-pending",
        type=int,
        default=128,
        help="serve --max-pending (its default, 8 per judge CPU, is 16 on 2 cores: fewer than "
        "--clients, which would be answered 503)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=os.cpu_count() or 1,
        help="in-process judge sandboxes (the server takes one per CPU of its node)",
    )
    p.add_argument("--skip-run-code", action="store_true", help="(b) only")
    args = p.parse_args()

    out = record.resolve_out(args.out, "serve-load")
    head = record.header()
    machine = head["machine"] | {"uptime_before": _sh("uptime")}
    print(f"{head['date']}; {machine['cores']} cores, kernel {machine['kernel']}")
    print(f"before: {machine['uptime_before']}", flush=True)

    problems = load_problems(DATASET)
    sols = solutions()
    spec = reward_spec("codefu")
    judge = Judge(
        JudgeConfig(
            reward="codefu",
            max_tests=args.max_tests,
            seed=0,
            workers=args.workers,
            judge_identical_once=False,
        )
    )
    served = start_server("--max-tests", str(args.max_tests), "--max-pending", str(args.max_pending))
    result: dict[str, Any] = head | {
        "machine": machine,
        "params": {k: v for k, v in vars(args).items() if k != "out"},
    }
    try:
        memory: list[dict[str, Any]] = []
        idle: list[dict[str, float]] = []

        def sample(phase: str) -> None:
            pids = served.pids()
            rss_mb = round(rss_bytes(pids) / 2**20, 1)
            memory.append({"phase": phase, "rss_mb": rss_mb, "processes": len(pids)})

        def in_process(phase: str, fn, *fn_args):
            """fn(*fn_args) with the server idle beside it; the server's CPU time meanwhile is recorded."""
            cpu0 = cpu_seconds(served.pids())
            start = time.monotonic()
            out = fn(*fn_args)
            seconds = time.monotonic() - start
            idle.append(
                {"phase": phase, "seconds": seconds, "server_cpu_s": cpu_seconds(served.pids()) - cpu0}
            )
            return out, seconds

        warm_up(judge, served, problems, sols)
        sample("after warm-up")
        run_code_rounds: list[dict[str, Any]] = []
        judge_rounds: list[dict[str, Any]] = []
        for r in range(args.rounds):
            if not args.skip_run_code:
                programs = run_code_programs(problems, sols, spec, args.max_tests, f"a{r}")
                for kind in ("compiles included", "compiles cached"):
                    want, t_in = in_process(f"a{r} {kind}", judge_each, judge, programs)
                    cpu0 = cpu_seconds(served.pids())
                    got = run_code_served(served, programs)
                    got["server_cpu_s"] = cpu_seconds(served.pids()) - cpu0
                    mismatches = [
                        (pr.name, [t.status.name for t in v.tests], statuses)
                        for (pr, _, _), v, statuses in zip(programs, want, got.pop("statuses"), strict=True)
                        if [t.status.name for t in v.tests] != statuses
                    ]
                    run_code_rounds.append(
                        {
                            "round": r,
                            "kind": kind,
                            "in_process_s": t_in,
                            **got,
                            "verdict_mismatches": mismatches,
                        }
                    )
                    print(
                        f"(a) round {r} {kind}: in-process {t_in:.2f} s, /run_code {got['seconds']:.2f} s "
                        f"({got['requests']} requests, {got['errors']} errors, "
                        f"{len(mismatches)} mismatches)",
                        flush=True,
                    )
                    sample(f"a{r} {kind}")
            items = judge_workload(problems, sols, r, args.variants, args.copies)
            pairs = [(it["problem"], it["body"]["response"]) for it in items]
            verdicts, t_in = in_process(f"b{r}", judge_all, judge, pairs)
            expected = {it["tag"]: verdicts[i] for i, it in enumerate(items)}
            cpu0 = cpu_seconds(served.pids())
            run = post_all(served.url, [Call(it["tag"], "/judge", it["body"]) for it in items], args.clients)
            server_cpu = cpu_seconds(served.pids()) - cpu0
            checked = check_judge_answers(run, expected)
            judge_rounds.append(
                {
                    "round": r,
                    "submissions": len(items),
                    "in_process_s": t_in,
                    "served_s": run.seconds,
                    "server_cpu_s": server_cpu,
                    "client_cpu_s": run.client_cpu_s,
                    "connections": run.connections,
                    "latencies_s": [a.latency_s for a in run.answers if a.status == 200],
                    **checked,
                }
            )
            print(
                f"(b) round {r}: {len(items)} submissions: in-process {t_in:.2f} s "
                f"({len(items) / t_in:.2f}/s), served {run.seconds:.2f} s "
                f"({len(items) / run.seconds:.2f}/s); errors {checked['errors']}, "
                f"mismatches {len(checked['mismatches'])}",
                flush=True,
            )
            sample(f"b{r}")
        result["server_metrics"] = served_request_counts(served)
        result["server_processes"] = len(served.pids())
        code = served.stop()
        result["stop"] = {"exit_code": code, "processes_left": served.left_after_stop()}
    finally:
        cleanup(served)
        judge.close()
    machine["uptime_after"] = _sh("uptime")
    result.update(summarize(run_code_rounds, judge_rounds, memory, idle))
    result["run_code_rounds"] = run_code_rounds
    result["judge_rounds"] = [{k: v for k, v in r.items() if k != "latencies_s"} for r in judge_rounds]
    result["memory"] = memory
    result["server_idle_during_in_process"] = idle
    record.write(out, result)
    print(f"after: {machine['uptime_after']}")
    print(markdown(result))


# ---- the workload ------------------------------------------------------------------------------------


def variant(language: str, source: str, tag: str) -> str:
    """The same program, textually distinct (a comment): compiled anew, judged the same."""
    return f"{source}\n{'//' if language == 'cpp' else '#'} {tag}\n"


def run_code_programs(problems: list[Problem], sols: list[dict], spec, max_tests: int, tag: str):
    """(problem holding the selected tests, response, source) for each C++ program, correct and wrong."""
    out = []
    for s in sols:
        if s["language"] != "cpp":
            continue
        full = problems[s["index"]]
        tests = select_tests(full, spec.tests, max_tests, 0)
        problem = parse_problem(problem_object(full, full.name, tests), full.name)
        for kind in ("correct", "wrong"):
            source = variant("cpp", s[kind], f"{tag} {kind}")
            out.append((problem, fenced("cpp", source), source))
    return out


def judge_workload(problems: list[Problem], sols: list[dict], r: int, variants: int, copies: int):
    """Round r's /judge submissions, each naming its problem uniquely, in a seeded shuffle."""
    items = []
    for b, s in enumerate(sols):
        full = problems[s["index"]]
        for kind in ("correct", "wrong"):
            for v in range(variants):
                source = variant(s["language"], s[kind], f"b{r} {kind} {v}")
                for c in range(copies):
                    tag = f"{full.name} #{r}.{b}.{kind}.{v}.{c}"
                    obj = problem_object(full, tag)
                    items.append(
                        {
                            "tag": tag,
                            "problem": parse_problem(obj, tag),
                            "body": {"response": fenced(s["language"], source), "problem": obj},
                        }
                    )
    random.Random(r).shuffle(items)
    return items


def judge_each(judge: Judge, programs) -> list:
    return [judge.judge(problem, response) for problem, response, _ in programs]


def judge_all(judge: Judge, pairs) -> dict:
    return dict(judge.judge_many(pairs))


def warm_up(judge: Judge, served: Served, problems: list[Problem], sols: list[dict]) -> None:
    """Precompiled headers built and sandboxes started on both sides before any timing."""
    for s in sols[:1] + [s for s in sols if s["language"] == "python"][:1]:
        problem = problems[s["index"]]
        response = fenced(s["language"], variant(s["language"], s["correct"], "warm-up"))
        assert judge.judge(problem, response).status is Status.ACCEPTED
        status, answer, _ = served.post(
            "/judge", {"response": response, "problem": problem_object(problem, problem.name)}
        )
        assert status == 200 and answer["status"] == "ACCEPTED", answer
    status, answer, _ = served.post("/run_code", {"code": "print(1)", "language": "python"})
    assert status == 200 and answer["status"] == "Success", answer


# ---- (a) /run_code per test, as verl's client ----------------------------------------------------------


def run_code_served(served: Served, programs) -> dict[str, Any]:
    """Each program's tests as /run_code calls (verl's payload), all at once, the programs in turn; each
    test's outcome as the judge names it."""
    statuses, latencies, errors, requests = [], [], 0, 0
    start = time.monotonic()
    for problem, _, source in programs:
        tests = problem.private_tests
        mb = problem.memory_limit_bytes >> 20
        calls = [
            Call(
                f"{problem.name} {i}",
                "/run_code",
                {
                    "compile_timeout": 10,
                    "run_timeout": problem.time_limit_s,
                    "code": source,
                    "stdin": t.input,
                    "memory_limit_MB": mb,
                    "language": "cpp",
                    "files": {},
                    "fetch_files": [],
                },
            )
            for i, t in enumerate(tests)
        ]
        run = post_all(served.url, calls, clients=VERL_THREADS, keep_alive=False)
        requests += len(calls)
        outcome = []
        for test, a in zip(tests, run.answers, strict=True):
            if a.status != 200:
                errors += 1
                outcome.append(f"HTTP {a.status or a.error}")
                continue
            latencies.append(a.latency_s)
            outcome.append(run_code_status(a.answer, test.output))
        statuses.append(outcome)
    seconds = time.monotonic() - start
    return {
        "seconds": seconds,
        "requests": requests,
        "errors": errors,
        "statuses": statuses,
        "latency_p50_s": percentile(latencies, 50),
        "latency_p99_s": percentile(latencies, 99),
    }


def run_code_status(answer: dict[str, Any], expected: str) -> str:
    """A /run_code answer read as verl reads it, named as the judge names a test's outcome."""
    if answer["status"] == "SandboxError":
        return Status.SANDBOX_ERROR.name
    run = answer.get("run_result")
    if run is None:
        return Status.COMPILE_ERROR.name
    if run["status"] == "TimeLimitExceeded":
        return Status.TIME_LIMIT.name
    if answer["status"] != "Success":
        return Status.MEMORY_LIMIT.name if "memory" in answer["message"] else Status.RUNTIME_ERROR.name
    return Status.ACCEPTED.name if outputs_match(expected, run["stdout"]) else Status.WRONG_ANSWER.name


# ---- (b) /judge from many clients ----------------------------------------------------------------------


def check_judge_answers(run: LoadRun, expected: dict) -> dict[str, Any]:
    """Every submission answered once (its own name), with the in-process judge's verdict."""
    errors: list[str] = []
    mismatches: list[str] = []
    seen: dict[str, int] = {}
    for a in run.answers:
        seen[a.tag] = seen.get(a.tag, 0) + 1
        if a.status != 200:
            errors.append(f"{a.tag}: HTTP {a.status} {a.error} {str(a.answer)[:200]}")
            continue
        want = expected[a.tag]
        got = (a.answer.get("name"), a.answer.get("status"), a.answer.get("passed"), a.answer.get("total"))
        if got != (a.tag, want.status.name, want.passed, want.total):
            mine = (want.status.name, want.passed, want.total)
            mismatches.append(f"{a.tag}: served {got}, in-process {mine}")
    duplicated = sorted(t for t, n in seen.items() if n > 1)
    lost = sorted(set(expected) - set(seen))
    verdicts: dict[str, int] = {}
    for v in expected.values():
        verdicts[v.status.name] = verdicts.get(v.status.name, 0) + 1
    return {
        "errors": len(errors),
        "error_examples": errors[:5],
        "mismatches": mismatches[:20],
        "duplicated": duplicated,
        "lost": lost,
        "verdicts": verdicts,
    }


def served_request_counts(served: Served) -> dict[str, float]:
    """The server's own count of requests by endpoint and status code (its /metrics)."""
    status, text, _ = served.get("/metrics")
    counts = {}
    for m in re.finditer(r'^codefu_serve_requests_total\{code="(\d+)",endpoint="(\w+)"\} (\S+)$', text, re.M):
        counts[f"{m.group(2)} {m.group(1)}"] = float(m.group(3))
    return counts


# ---- the summary ---------------------------------------------------------------------------------------


def summarize(run_code_rounds, judge_rounds, memory, idle) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if run_code_rounds:
        a: dict[str, Any] = {}
        for kind in ("compiles included", "compiles cached"):
            rows = [r for r in run_code_rounds if r["kind"] == kind]
            t_in = sum(r["in_process_s"] for r in rows)
            t_http = sum(r["seconds"] for r in rows)
            a[kind] = {
                "in_process_s": round(t_in, 2),
                "run_code_s": round(t_http, 2),
                "ratio": round(t_http / t_in, 3),
                "requests": sum(r["requests"] for r in rows),
                "errors": sum(r["errors"] for r in rows),
                "verdict_mismatches": sum(len(r["verdict_mismatches"]) for r in rows),
                "ratio_per_round": [round(r["seconds"] / r["in_process_s"], 3) for r in rows],
            }
        rows = run_code_rounds
        t_in, t_http = sum(r["in_process_s"] for r in rows), sum(r["seconds"] for r in rows)
        a["all"] = {
            "in_process_s": round(t_in, 2),
            "run_code_s": round(t_http, 2),
            "ratio": round(t_http / t_in, 3),
            "goal": "<= 1.5",
            "met": t_http / t_in <= 1.5,
        }
        out["run_code_vs_in_process"] = a
    if judge_rounds:
        n = sum(r["submissions"] for r in judge_rounds)
        t_in = sum(r["in_process_s"] for r in judge_rounds)
        t_http = sum(r["served_s"] for r in judge_rounds)
        latencies = [x for r in judge_rounds for x in r["latencies_s"]]
        rate_in, rate_http = n / t_in, n / t_http
        out["judge_vs_in_process"] = {
            "submissions": n,
            "in_process_per_s": round(rate_in, 3),
            "served_per_s": round(rate_http, 3),
            "ratio": round(rate_http / rate_in, 3),
            "ratio_per_round": [round(r["in_process_s"] / r["served_s"], 3) for r in judge_rounds],
            "goal": ">= 0.77",
            "met": rate_http / rate_in >= 0.77,
            "latency_s": {f"p{q}": round(percentile(latencies, q), 3) for q in (50, 90, 99)}
            | {"max": round(max(latencies), 3) if latencies else None},
            "errors": sum(r["errors"] for r in judge_rounds),
            "mismatches": sum(len(r["mismatches"]) for r in judge_rounds),
            "duplicated": sum(len(r["duplicated"]) for r in judge_rounds),
            "lost": sum(len(r["lost"]) for r in judge_rounds),
            "server_cpu_s_per_submission": round(sum(r["server_cpu_s"] for r in judge_rounds) / n, 4),
            "client_cpu_s_per_submission": round(sum(r["client_cpu_s"] for r in judge_rounds) / n, 4),
        }
    total = sum(r["requests"] for r in run_code_rounds) + sum(r["submissions"] for r in judge_rounds)
    out["total_requests"] = total
    rss = [m["rss_mb"] for m in memory]
    out["server_rss_mb"] = {
        "start": rss[0],
        "middle": rss[len(rss) // 2],
        "end": rss[-1],
        "min": min(rss),
        "max": max(rss),
    }
    out["server_idle_cpu_share"] = round(
        sum(i["server_cpu_s"] for i in idle) / max(sum(i["seconds"] for i in idle), 1e-9), 4
    )  # cores the idle server used while the in-process judge ran
    return out


def markdown(result: dict[str, Any]) -> str:
    lines = []
    a = result.get("run_code_vs_in_process")
    if a:
        lines += [
            "| (a) C++ tests, one /run_code each | in-process `Judge.judge` | /run_code (verl-style) "
            "| ratio | requests | errors | verdicts differing |",
            "|---|---:|---:|---:|---:|---:|---:|",
        ]
        for kind in ("compiles included", "compiles cached"):
            k = a[kind]
            lines.append(
                f"| {kind} | {k['in_process_s']:.2f} s | {k['run_code_s']:.2f} s "
                f"| {k['ratio']:.2f}x | {k['requests']} | {k['errors']} "
                f"| {k['verdict_mismatches']} |"
            )
        k = a["all"]
        lines.append(
            f"| **all** | {k['in_process_s']:.2f} s | {k['run_code_s']:.2f} s "
            f"| **{k['ratio']:.2f}x** (goal <= 1.5: {'met' if k['met'] else 'NOT met'}) | | | |"
        )
        lines.append("")
    b = result.get("judge_vs_in_process")
    if b:
        lat = b["latency_s"]
        met = "met" if b["met"] else "NOT met"
        lines += [
            "| (b) /judge, concurrent clients | submissions | in-process /s | served /s | ratio "
            "| p50 | p90 | p99 | errors | lost | duplicated | mismatched |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            f"| all rounds | {b['submissions']} | {b['in_process_per_s']:.2f} "
            f"| {b['served_per_s']:.2f} | **{b['ratio']:.0%}** (goal >= 77%: {met}) "
            f"| {lat['p50']:.2f} s | {lat['p90']:.2f} s | {lat['p99']:.2f} s | {b['errors']} "
            f"| {b['lost']} | {b['duplicated']} | {b['mismatches']} |",
            "",
        ]
    rss = result["server_rss_mb"]
    lines.append(
        f"requests: {result['total_requests']}; server RSS (MB) start {rss['start']}, middle "
        f"{rss['middle']}, end {rss['end']} (min {rss['min']}, max {rss['max']}); idle server's CPU "
        f"while the in-process judge ran: {result['server_idle_cpu_share']:.3f} cores"
    )
    return "\n".join(lines)


def _sh(command: str) -> str:
    return subprocess.run(command, shell=True, capture_output=True, text=True).stdout.strip()


if __name__ == "__main__":
    main()
