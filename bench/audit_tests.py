"""Test audit throughput: `codefu audit-tests` on a dataset (default: the starter set, every problem, every
correct and known-incorrect solution on every test), as problems audited per minute on this machine.

    python bench/audit_tests.py [--dataset starter] [--augment-tests 0] [--max-problems N] [--ray]

Writes the command's timing and per-source summary, the load average before and after, the commit and the
machine to --out (bench/record.py; default docs/results/<date>-test-audit.json). The load is recorded
because the sandboxes share the cores with whatever else runs: other work slows the audit.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import record  # noqa: E402
from codefu.cli import main as codefu  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dataset", default="starter")
    ap.add_argument("--augment-tests", type=int, default=0)
    ap.add_argument("--max-problems", type=int, default=None)
    ap.add_argument("--workers", type=int, default=0, help="sandboxes at once (0: one per CPU)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ray", action="store_true", help="on a local Ray cluster's judge pool")
    record.add_out_argument(ap, "test-audit")
    args = ap.parse_args(argv)
    head = record.header(None if argv is None else ["bench/audit_tests.py", *argv])
    out = record.resolve_out(args.out, "test-audit")
    with tempfile.TemporaryDirectory() as tmp:
        report_path = Path(tmp) / "audit.json"
        cmd = ["audit-tests", args.dataset, "--out", str(report_path), "--seed", str(args.seed)]
        cmd += ["--augment-tests", str(args.augment_tests), "--workers", str(args.workers)]
        if args.ray:
            cmd += ["--ray"]
        if args.max_problems is not None:
            cmd += ["--max-problems", str(args.max_problems)]
        if codefu(cmd) != 0:
            return 1
        report = json.loads(report_path.read_text())
    audited = sum(s["audited"] for s in report["summary"].values())
    timing = report["timing"]
    results = {
        "problems_per_minute": timing["problems_per_minute"],
        "problems_per_minute_per_judge_cpu": round(timing["problems_per_minute"] / timing["judge_cpus"], 2),
        "audited": audited,
        **timing,
    }
    record.write(
        out,
        head
        | {
            "params": {"codefu": ["codefu", *cmd[:3], "REPORT", *cmd[4:]]},
            "results": results,
            "summary": report["summary"],
            "flagged": [p for p in report["problems"] if p["flags"]],
        },
    )
    print(json.dumps(results, indent=2))
    if out is not None:
        print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
