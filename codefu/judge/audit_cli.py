"""`codefu audit-tests`: how well a dataset's tests tell right programs from wrong ones, and more tests
where they do not (docs/data.md, "Test audit and augmentation").

Runs every problem's known-correct and known-incorrect solutions (problem.extra "solutions" and
"wrong_solutions" / "incorrect_solutions": the starter set, problems JSONL) on its tests in the sandbox;
writes a JSON report (per problem and per source) and prints the summary. With --augment-tests N it adds
up to N verified generated tests per problem, and --dataset-out writes the dataset with them (problems
JSONL, which `codefu train` and `codefu judge` read like any dataset).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import random
import sys
import time
from pathlib import Path

from codefu.errors import CodefuError, check_flags
from codefu.judge.audit import AuditConfig, audit_judge_config, audit_problems, summary, summary_table
from codefu.judge.checker import check_python_checkers
from codefu.judge.cli import add_judge_flags, judge_flag_checks, make_judge
from codefu.types import Problem


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "audit-tests",
        help="run known-correct and known-incorrect solutions on a dataset's tests; add tests that kill "
        "the incorrect ones that pass",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("dataset", help="verl-schema parquet, problems JSONL (file or folder), or 'starter'")
    p.add_argument("--out", default="audit.json", help="the JSON report (default: audit.json)")
    p.add_argument("--max-problems", type=int, default=None, help="a seeded sample of this many problems")
    p.add_argument("--seed", type=int, default=0, help="seeds the sample and the mutations")
    p.add_argument("--augment-tests", type=int, default=0, help="generated tests per problem at most")
    p.add_argument("--candidates", type=int, default=24, help="new inputs tried per round")
    p.add_argument("--rounds", type=int, default=3, help="rounds of candidates per problem at most")
    p.add_argument("--time-budget-s", type=float, default=120.0, help="wall time per problem")
    p.add_argument(
        "--dataset-out", default=None, help="write the dataset with its generated tests here (.jsonl)"
    )
    p.add_argument(
        "--drop-broken",
        action="store_true",
        help="leave problems whose correct solutions fail out of --dataset-out (named in the report)",
    )
    p.add_argument("--parallel", type=int, default=0, help="problems at once (default: the judge's CPUs)")
    add_judge_flags(p)
    p.set_defaults(run=run)


def load(dataset: str, max_problems: int | None, seed: int) -> list[Problem]:
    from codefu.data.loader import load_problems
    from codefu.data.starter import load_starter_problems

    problems = load_starter_problems() if dataset == "starter" else load_problems(dataset)
    if max_problems is not None and max_problems < len(problems):
        keep = sorted(random.Random(seed).sample(range(len(problems)), max_problems))
        problems = [problems[i] for i in keep]
    return problems


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from codefu.data.sources.jsonl import problem_to_object
    from codefu.data.writer import write_json_atomic
    from codefu.observability.progress import phase_bar

    check_flags(
        args,
        [
            ("max_problems", args.max_problems is None or args.max_problems >= 1, ">= 1"),
            ("augment_tests", args.augment_tests >= 0, ">= 0"),
            ("candidates", args.candidates >= 1, ">= 1"),
            ("rounds", args.rounds >= 1, ">= 1"),
            ("time_budget_s", args.time_budget_s > 0, "> 0"),
            ("parallel", args.parallel >= 0, ">= 0 (0: the judge's CPUs)"),
            *judge_flag_checks(args),
            ("dataset_out", args.dataset_out is None or args.dataset_out.endswith(".jsonl"), "a .jsonl"),
        ],
    )
    problems = load(args.dataset, args.max_problems, args.seed)
    if not problems:
        raise CodefuError(f"{args.dataset}: no problems")
    check_python_checkers(problems, args.python_checkers, args.dataset)
    judge_config = audit_judge_config(
        workers=args.workers,
        time_scale=args.time_scale,
        python_checkers=args.python_checkers,
    )
    config = AuditConfig(
        args.augment_tests, args.candidates, args.rounds, args.time_budget_s, args.seed, judge_config
    )
    load_before = os.getloadavg()
    start = time.monotonic()
    judge = make_judge(judge_config, args.ray)
    try:
        capacity = getattr(judge, "capacity", None) or getattr(judge, "workers", 1)
        with phase_bar("audit", len(problems), "problem", lines=True) as bar:
            parallel = args.parallel or capacity
            results = audit_problems(problems, judge, config, parallel, lambda _: bar.update())
    finally:
        judge.close()
    seconds = time.monotonic() - start
    audits = [a for a, _ in results]
    by_source = summary(audits)
    dropped = []
    if args.dataset_out is not None:
        out = Path(args.dataset_out)
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_name(out.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            for audit, problem in results:
                if args.drop_broken and audit.broken:
                    dropped.append({"name": problem.name, "reason": "a correct solution fails its tests"})
                elif problem.function is not None:
                    dropped.append({"name": problem.name, "reason": "function-call problem (no JSONL field)"})
                else:
                    f.write(json.dumps(problem_to_object(problem)) + "\n")
        os.replace(tmp, out)
    report = {
        "dataset": args.dataset,
        "argv": sys.argv[1:],
        "config": {k: v for k, v in vars(config).items() if k != "judge"},
        "timing": {
            "seconds": round(seconds, 2),
            "problems": len(problems),
            "problems_per_minute": round(len(problems) / seconds * 60, 2),
            "judge_cpus": capacity,
            "cpus": os.cpu_count(),
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
        },
        "summary": by_source,
        "dropped": dropped,
        "problems": [a.to_dict() for a in audits],
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(Path(args.out), report)
    print(summary_table(by_source, args.augment_tests > 0))
    print(
        f"\n{len(problems)} problems in {seconds:.1f} s ({report['timing']['problems_per_minute']} per "
        f"minute on {capacity} judge CPUs); report: {args.out}"
        + (f"; dataset: {args.dataset_out} ({len(dropped)} left out)" if args.dataset_out else "")
    )
    return 0
