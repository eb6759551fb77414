"""Checks codefu/data/starter/problems.jsonl by running every solution on every test.

    python tools/starter/validate.py [--only NAME ...] [--jobs N]

Reference solutions (C++17 and Python 3) must pass every public and private test within the time
limit, the Python one with a wide margin (at most half the limit); every wrong solution must fail at
least one private test, even when all tokens are compared case-insensitively. Outputs are compared as
whitespace-separated tokens (YES/NO case-insensitively), the judge's rule. Plain subprocess, no
sandbox: run it only on the definitions in this repository. Prints a table; exit status 1 on any
failure.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import JSONL, Runner, tokens_equal  # noqa: E402

PY_MARGIN = 0.5  # the Python reference must use at most this fraction of the time limit


@dataclass
class Row:
    name: str
    n_tests: int
    cpp_ok: bool = False
    cpp_max_s: float = 0.0
    py_ok: bool = False
    py_max_s: float = 0.0
    wrong: list[str] = field(default_factory=list)  # one cell per wrong solution
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _check(runner: Runner, cmd: list[str], tests: list[dict], timeout_s: float, fold_all: bool = False):
    """-> (verdict per test, max wall seconds); verdict 'OK', 'WA', 'TLE' or 'RE'."""
    verdicts, worst = [], 0.0
    for t in tests:
        r = runner.run(cmd, t["input"], timeout_s)
        worst = max(worst, r.wall_s)
        if r.timed_out:
            verdicts.append("TLE")
        elif r.returncode != 0:
            verdicts.append("RE")
        elif tokens_equal(t["output"].encode(), r.stdout, fold_all=fold_all):
            verdicts.append("OK")
        else:
            verdicts.append("WA")
    return verdicts, worst


def validate_one(p: dict, runner: Runner) -> Row:
    public, private = p["public_tests"], p["private_tests"]
    tests = public + private
    limit = p["time_limit_s"]
    row = Row(p["name"], len(tests))
    for lang in ("cpp", "python"):
        try:
            cmd = runner.prepare(lang, p["solutions"][lang])
        except RuntimeError as e:
            row.problems.append(f"{lang} reference: {e}")
            continue
        verdicts, worst = _check(runner, cmd, tests, limit)
        bad = [f"#{i}:{v}" for i, v in enumerate(verdicts) if v != "OK"]
        if lang == "cpp":
            row.cpp_ok, row.cpp_max_s = not bad, worst
        else:
            row.py_ok, row.py_max_s = not bad, worst
            if worst > PY_MARGIN * limit:
                row.problems.append(f"python reference took {worst:.2f}s of {limit}s")
        if bad:
            row.problems.append(f"{lang} reference fails {' '.join(bad[:5])}")
    for k, w in enumerate(p["wrong_solutions"]):
        try:
            cmd = runner.prepare(w["language"], w["source"])
        except RuntimeError:
            row.wrong.append(f"{w['language']}:CE")
            row.problems.append(f"wrong #{k} does not compile")
            continue
        pub, _ = _check(runner, cmd, public, limit, fold_all=True)
        priv, _ = _check(runner, cmd, private, limit, fold_all=True)
        failed = [v for v in priv if v != "OK"]
        kinds = "/".join(sorted(set(failed))) or "-"
        pub_note = "" if all(v == "OK" for v in pub) else ",fails-public"
        row.wrong.append(f"{w['language']}:{len(failed)}/{len(priv)} {kinds}{pub_note}")
        if not failed:
            row.problems.append(f"wrong #{k} ({w['flaw']}) passes every private test")
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, default=JSONL)
    ap.add_argument("--only", nargs="*", help="problem names to check (default: all)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()

    problems = [json.loads(s) for s in args.data.read_text().splitlines() if s.strip()]
    if args.only:
        problems = [p for p in problems if p["name"] in set(args.only)]
    runner = Runner()
    try:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            rows = list(pool.map(lambda p: validate_one(p, runner), problems))
    finally:
        runner.close()

    w = max([len(r.name) for r in rows] + [7])
    print(f"{'problem':<{w}}  tests  cpp  max_ms  python  max_ms  wrong (failed private tests)")
    for r in rows:
        print(
            f"{r.name:<{w}}  {r.n_tests:>5}  {'ok' if r.cpp_ok else 'BAD':<3}  {r.cpp_max_s * 1000:>6.0f}"
            f"  {'ok' if r.py_ok else 'BAD':<6}  {r.py_max_s * 1000:>6.0f}  {'; '.join(r.wrong)}"
        )
    bad = [r for r in rows if not r.ok]
    n_wrong = sum(len(r.wrong) for r in rows)
    print(
        f"\n{len(rows)} problems, {sum(r.n_tests for r in rows)} tests, {n_wrong} wrong solutions; "
        f"{len(rows) - len(bad)} ok, {len(bad)} with problems"
    )
    for r in bad:
        for msg in r.problems:
            print(f"  {r.name}: {msg}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
