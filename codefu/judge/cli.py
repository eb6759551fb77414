"""`codefu judge`: judge a file of model responses against a dataset of problems.

Responses are JSONL, one object per line: {"index": <dataset row>, "response": "<model text>"}, where
"name" (the problem's name) may replace "index". Output is JSONL, one line per response in input order,
with status, passed, total, reward, time_s, per-test results and the response's line number.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from codefu.errors import CodefuError, check_flags
from codefu.judge.checker import check_python_checkers
from codefu.judge.judge import Judge, JudgeConfig
from codefu.judge.rewards import REWARDS, check_tested, compute_reward
from codefu.judge.sandbox import SandboxConfig
from codefu.types import Problem, Verdict


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "judge", help="judge model responses against a dataset's hidden tests", description=__doc__
    )
    p.add_argument("--dataset", required=True, help="verl-schema parquet or problems JSONL (file or folder)")
    p.add_argument("--responses", required=True, help="JSONL of {index|name, response}")
    p.add_argument("--out", required=True, help="where to write one JSONL verdict per response")
    p.add_argument("--reward", default="codefu", choices=sorted(REWARDS))
    p.add_argument("--max-tests", type=int, default=None, help="tests per submission at most")
    p.add_argument("--seed", type=int, default=0, help="seed of the test sample when --max-tests cuts")
    add_judge_flags(p)
    add_unsafe_no_sandbox_flag(p)
    p.set_defaults(run=run)


def add_judge_flags(p: argparse.ArgumentParser) -> None:
    """The flags of the commands that run a judge of their own (`codefu judge`, `codefu audit-tests`):
    --workers, --time-scale, --python-checker and --ray; `judge_flag_checks` checks them and `make_judge`
    builds the judge they describe."""
    p.add_argument("--workers", type=int, default=0, help="sandboxes at once (default: one per CPU)")
    p.add_argument("--time-scale", type=float, default=1.0, help="multiply every problem's time limit")
    add_python_checker_flag(p)
    p.add_argument(
        "--ray",
        nargs="?",
        const="auto",
        default=None,
        metavar="ADDRESS",
        help="judge on a Ray cluster's judge pool (default address: auto, else a local one)",
    )


def judge_flag_checks(args: argparse.Namespace) -> list[tuple[str, bool, str]]:
    """`check_flags` rules of `add_judge_flags`' flags."""
    return [
        ("workers", args.workers >= 0, ">= 0 (0: one per CPU)"),
        ("time_scale", args.time_scale > 0, "> 0"),
    ]


def add_unsafe_no_sandbox_flag(p: argparse.ArgumentParser) -> None:
    """--unsafe-no-sandbox, one wording for every command that can run programs without the sandbox."""
    p.add_argument(
        "--unsafe-no-sandbox",
        action="store_true",
        help="run programs on the host WITHOUT isolation (debugging trusted code only)",
    )


def add_python_checker_flag(p: argparse.ArgumentParser) -> None:
    """--python-checker, shared by the commands that judge: the operator's python checkers."""
    p.add_argument(
        "--python-checker",
        action="append",
        default=[],
        dest="python_checkers",
        metavar="MODULE:FUNCTION",
        help="a python checker problems may name, run in this process (repeat for more); "
        "only these and codefu's built-ins run: a dataset or request cannot pick any other",
    )


@dataclass
class Submission:
    line: int
    problem: Problem
    response: str


def read_responses(path: Path, problems: list[Problem]) -> list[Submission]:
    """Every line checked before any is judged: a bad line is an error naming file and line."""
    by_name = {p.name: p for p in problems}
    subs: list[Submission] = []
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as e:
        raise CodefuError(f"{path}: cannot read responses ({e.strerror})") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path}, line {n}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise CodefuError(f"{where}: not valid JSON ({e.msg} at column {e.colno})") from None
        if not isinstance(obj, dict):
            raise CodefuError(f"{where}: expected an object with 'index' or 'name' and 'response'")
        response = obj.get("response")
        if not isinstance(response, str):
            raise CodefuError(f"{where}: 'response' must be a string")
        if "index" in obj:
            index = obj["index"]
            if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(problems):
                raise CodefuError(
                    f"{where}: index {index!r} is not a row of the dataset (0..{len(problems) - 1})"
                )
            problem = problems[index]
        elif "name" in obj:
            if obj["name"] not in by_name:
                raise CodefuError(f"{where}: no problem named {obj['name']!r} in the dataset")
            problem = by_name[obj["name"]]
        else:
            raise CodefuError(f"{where}: needs 'index' (dataset row) or 'name' (problem name)")
        subs.append(Submission(n, problem, response))
    if not subs:
        raise CodefuError(f"{path}: no responses")
    return subs


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from codefu.data.loader import load_problems

    check_flags(
        args, [("max_tests", args.max_tests is None or args.max_tests >= 1, ">= 1"), *judge_flag_checks(args)]
    )
    problems = load_problems(args.dataset)
    check_tested(problems, args.reward, f"--dataset {args.dataset}")
    check_python_checkers(problems, args.python_checkers, args.dataset)
    subs = read_responses(Path(args.responses), problems)
    config = JudgeConfig(
        reward=args.reward,
        max_tests=args.max_tests,
        seed=args.seed,
        workers=args.workers,
        time_scale=args.time_scale,
        python_checkers=args.python_checkers,
        sandbox=SandboxConfig(kind="none" if args.unsafe_no_sandbox else "bwrap"),
    )
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    verdicts: dict[int, Verdict] = {}
    start = time.monotonic()
    pool = make_judge(config, args.ray)
    try:
        with open(partial, "w") as f, tqdm(total=len(subs), unit="sub", desc="judge", disable=None) as bar:
            for i, verdict in pool.judge_many((s.problem, s.response) for s in subs):
                verdicts[i] = verdict
                f.write(json.dumps(_record(subs[i], verdict, args.reward)) + "\n")
                f.flush()
                bar.update()
    except KeyboardInterrupt:
        print(f"interrupted: {len(verdicts)} verdicts kept in {partial}", file=sys.stderr)
        raise
    finally:
        pool.close()
    # final file: input order, written whole, then the partial one goes
    tmp = out.with_name(out.name + ".tmp")
    with open(tmp, "w") as f:
        for i, s in enumerate(subs):
            f.write(json.dumps(_record(s, verdicts[i], args.reward)) + "\n")
    os.replace(tmp, out)
    partial.unlink()
    print(summary_table(list(verdicts.values()), args.reward, time.monotonic() - start))
    return 0


def make_judge(config: JudgeConfig, ray_address: str | None):
    """A `Judge` on this machine, or with `--ray` (`ray_address`) the `RayJudgePool` of that cluster."""
    if ray_address is None:
        return Judge(config)
    import ray

    from codefu.judge.pool import RayJudgePool

    ray.init(
        address=None if ray_address == "auto" and not os.environ.get("RAY_ADDRESS") else ray_address,
        ignore_reinit_error=True,
        log_to_driver=False,
    )
    return RayJudgePool(config)


def _record(s: Submission, v: Verdict, reward: str) -> dict:
    d = v.to_dict()
    return {"line": s.line, "name": s.problem.name, "reward": compute_reward(v, reward), **d}


def summary_table(verdicts: list[Verdict], reward: str, seconds: float) -> str:
    counts = Counter(v.status.value for v in verdicts)
    rewards = [r for v in verdicts if (r := compute_reward(v, reward)) is not None]
    tests = sum(len(v.tests) for v in verdicts)
    rows = [f"{'verdict':<16}{'count':>8}{'share':>9}"]
    for status, n in counts.most_common():
        rows.append(f"{status:<16}{n:>8}{n / len(verdicts):>9.1%}")
    mean = sum(rewards) / len(rewards) if rewards else float("nan")
    rows += [
        f"{'submissions':<16}{len(verdicts):>8}",
        f"mean reward ({reward}): {mean:.4f} over {len(rewards)} (sandbox errors excluded)",
        f"throughput: {len(verdicts) / seconds:.2f} submissions/s, {tests / seconds:.1f} tests/s "
        f"in {seconds:.1f} s",
    ]
    return "\n".join(rows)
