"""How long the test tiers take: run them as scripts/test.sh does (the default tier, then the slow tier
unless the default one failed) and write each one's wall time, counts and slowest tests with the command,
commit and machine (bench/record.py).

    python bench/tiers.py [--tier default|slow|both] [--durations 25] [--out PATH]

Run it alone: a training run or a benchmark beside it slows the tests and can trip Ray's memory monitor.
The exit status is the first failing tier's (128 + N where pytest died of signal N); the record is written
either way, with the end of a failing tier's output (a failing run's time says little).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import record  # noqa: E402

TIER_ARGS = {"default": [], "slow": ["-m", "slow"]}
# pytest's last line: "1 failed, 12 passed, 3 skipped, 2 warnings in 9.10s (0:00:09)", with or without
# the === around it (-q), or "no tests ran in 0.01s"
SUMMARY = re.compile(r"^=*\s*((?:\d+ [a-z]+(?:, )?)+|no tests ran) in [\d.]+s(?: \([\d:]+\))?\s*=*$")
COUNT = re.compile(r"(\d+) ([a-z]+)")
DURATION = re.compile(r"^\s*([\d.]+)s (call|setup|teardown)\s+(.+?)\s*$")


def summary_counts(output: str) -> dict[str, int] | None:
    """The counts of pytest's last summary line, each kind in the singular where pytest writes both
    ("1 error", "2 errors": "error"); {} for "no tests ran"; None: no summary (pytest did not finish)."""
    lines = [m.group(1) for line in output.splitlines() if (m := SUMMARY.match(line.strip()))]
    if not lines:
        return None
    return {kind if kind.endswith("ed") else kind.rstrip("s"): int(n) for n, kind in COUNT.findall(lines[-1])}


def slowest(output: str) -> list[dict[str, Any]]:
    """pytest's --durations table: the slowest phases, each with its seconds, phase and test id."""
    return [
        {"s": float(m.group(1)), "phase": m.group(2), "test": m.group(3)}
        for line in output.splitlines()
        if (m := DURATION.match(line))
    ]


def exit_status(returncode: int) -> int:
    """A process's exit status as a shell reports it: 128 + N for death by signal N."""
    return 128 - returncode if returncode < 0 else returncode


def run_tier(tier: str, durations: int) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "pytest", "-q", *TIER_ARGS[tier], f"--durations={durations}"]
    print("$ " + " ".join(cmd), flush=True)
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=record.REPO, capture_output=True, text=True)
    seconds = time.monotonic() - t0
    sys.stdout.write(proc.stdout[-3000:])
    sys.stderr.write(proc.stderr[-3000:])
    status = exit_status(proc.returncode)
    result: dict[str, Any] = {
        "command": cmd,
        "exit_status": status,
        "wall_s": round(seconds, 1),
        "counts": summary_counts(proc.stdout),
        "slowest": slowest(proc.stdout),
    }
    if status:
        lines = proc.stdout.splitlines()
        result["failures"] = [line for line in lines if line.startswith(("FAILED", "ERROR"))]
        result["output_tail"] = proc.stdout[-4000:]
        result["stderr_tail"] = proc.stderr[-4000:]
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tier", choices=["default", "slow", "both"], default="both")
    ap.add_argument("--durations", type=int, default=25, help="the slowest tests recorded")
    record.add_out_argument(ap, "test-tiers")
    args = ap.parse_args()
    head = record.header()
    results: dict[str, dict[str, Any]] = {}
    for tier in ["default", "slow"] if args.tier == "both" else [args.tier]:
        results[tier] = run_tier(tier, args.durations)
        if results[tier]["exit_status"]:
            break  # as scripts/test.sh: the slow tier only after a passing default tier
    record.write(
        record.resolve_out(args.out, "test-tiers"),
        head | {"params": {"tier": args.tier, "durations": args.durations}, "results": results},
    )
    return next((r["exit_status"] for r in results.values() if r["exit_status"]), 0)


if __name__ == "__main__":
    sys.exit(main())
