"""How long the test tiers take: run one (or both) as scripts/test.sh does and write the wall time, the
counts and the slowest tests with the command, commit and machine (bench/record.py).

    python bench/test_tiers.py [--tier default|slow|both] [--durations 25] [--out PATH]

Run it alone: a training run or a benchmark beside it slows the tests and can trip Ray's memory monitor.
The tier's own exit status is this script's; the record is written either way (a failing run's time says
little, and the record says it failed).
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
COUNT = re.compile(r"(\d+) (passed|failed|skipped|deselected|xfailed|xpassed|errors?|warnings?)")
DURATION = re.compile(r"^\s*([\d.]+)s (call|setup|teardown)\s+(\S+)")


def summary_counts(output: str) -> dict[str, int]:
    """The counts of pytest's last summary line ("1 failed, 12 passed, 3 skipped in 9.1s"), each kind in
    the singular where pytest writes both ("1 error", "2 errors": "error")."""
    lines = [line for line in output.splitlines() if re.search(r"\d+ (passed|failed|errors?)\b", line)]
    if not lines:
        return {}
    found = COUNT.findall(lines[-1])
    return {kind if kind.endswith("ed") else kind.rstrip("s"): int(n) for n, kind in found}


def slowest(output: str) -> list[dict[str, Any]]:
    """pytest's --durations table: the slowest phases, each with its seconds, phase and test id."""
    return [
        {"s": float(m.group(1)), "phase": m.group(2), "test": m.group(3)}
        for line in output.splitlines()
        if (m := DURATION.match(line))
    ]


def run_tier(tier: str, durations: int) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "pytest", "-q", *TIER_ARGS[tier], f"--durations={durations}"]
    print("$ " + " ".join(cmd), flush=True)
    t0 = time.monotonic()
    proc = subprocess.run(cmd, cwd=record.REPO, capture_output=True, text=True)
    seconds = time.monotonic() - t0
    sys.stdout.write(proc.stdout[-3000:])
    return {
        "command": cmd,
        "exit_status": proc.returncode,
        "wall_s": round(seconds, 1),
        "counts": summary_counts(proc.stdout),
        "slowest": slowest(proc.stdout),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tier", choices=["default", "slow", "both"], default="both")
    ap.add_argument("--durations", type=int, default=25, help="the slowest tests recorded")
    record.add_out_argument(ap, "test-tiers")
    args = ap.parse_args()
    head = record.header()
    tiers = ["default", "slow"] if args.tier == "both" else [args.tier]
    results = {tier: run_tier(tier, args.durations) for tier in tiers}
    record.write(
        record.resolve_out(args.out, "test-tiers"),
        head | {"params": {"tiers": tiers, "durations": args.durations}, "results": results},
    )
    return max(r["exit_status"] for r in results.values())


if __name__ == "__main__":
    sys.exit(main())
