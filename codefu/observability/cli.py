"""`codefu report`: the run report as one self-contained HTML page.

    codefu report RUN_DIR [--out FILE]

Reads RUN_DIR/metrics.jsonl, config.yaml and checkpoints/; works on a finished run and on one still
running (run it again to refresh). Writes RUN_DIR/report.html unless --out says otherwise. Unreadable
lines of metrics.jsonl are skipped with a warning naming them (FILE:LINE); none readable is an error.
"""

from __future__ import annotations

import argparse
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="write a run's HTML report (plots, pass@k, verdict mix, timing, config)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="a codefu train run directory")
    p.add_argument("--out", default=None, help="where the page goes (default: RUN_DIR/report.html)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from codefu.observability.report import load_run, skipped_lines, write_report

    data = load_run(args.run_dir)
    if data.skipped:
        print(f"codefu report: warning: {skipped_lines(data)}", file=sys.stderr)
    print(write_report(data, args.out))
    return 0
