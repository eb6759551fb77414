"""Benchmark `codefu prepare` on a synthetic CodeContests-scale input.

    python bench/prepare.py                      # 13,000 problems, like CodeContests' train split
    python bench/prepare.py --problems 2000 --include-generated

Writes the input as HF-style shards (train-NNNNN-of-NNNNN.parquet, plus valid and test), runs
`python -m codefu.cli prepare` in a child process, and prints rows/s and the child's peak RSS
(os.wait4), so generation memory does not count. Test sizes follow `codefu.data.synthetic.synth_rows`:
a median of ~20 private and ~90 generated tests per problem, mostly tiny, 1 % of 10-500 KB.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from codefu.data.synthetic import synth_rows, write_cc_parquet


def make_input(root: Path, problems: int, shard_rows: int, group_rows: int) -> int:
    """Shards of `shard_rows` problems; 1 % of problems each go to valid and test. Returns bytes."""
    n_eval = max(1, problems // 100)
    plan = [("valid", n_eval), ("test", n_eval), ("train", problems - 2 * n_eval)]
    start = 0
    for split, n in plan:
        shards = max(1, -(-n // shard_rows))
        for s in range(shards):
            k = min(shard_rows, n - s * shard_rows)
            path = root / f"{split}-{s:05d}-of-{shards:05d}.parquet"
            write_cc_parquet(path, synth_rows(k, seed=start, start=start), row_group_size=group_rows)
            start += k
    return sum(f.stat().st_size for f in root.glob("*.parquet"))


def run_prepare(inp: Path, out: Path, extra: list[str]) -> tuple[float, int, str]:
    """Wall seconds, peak RSS bytes and stdout of one `codefu prepare` child."""
    cmd = [sys.executable, "-m", "codefu.cli", "prepare", "--input", str(inp), "--out", str(out), *extra]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = proc.communicate()
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"prepare failed ({proc.returncode}):\n{stderr}")
    return wall, _children_peak_rss(), stdout


def _children_peak_rss() -> int:
    """Peak RSS over waited-for children: only the prepare child here (the input is made in-process)."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024  # Linux reports KiB


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", type=int, default=13_000)
    ap.add_argument("--shard-rows", type=int, default=350, help="problems per input shard")
    ap.add_argument("--group-rows", type=int, default=100, help="problems per parquet row group")
    ap.add_argument("--include-generated", action="store_true")
    ap.add_argument("--workdir", default=None, help="keep input and output here (default: a temp dir)")
    args = ap.parse_args()

    work = Path(args.workdir or tempfile.mkdtemp(prefix="codefu-bench-prepare-"))
    inp, out = work / "input", work / "out"
    shutil.rmtree(out, ignore_errors=True)
    if not inp.exists():
        inp.mkdir(parents=True)
        t = time.perf_counter()
        size = make_input(inp, args.problems, args.shard_rows, args.group_rows)
        made = time.perf_counter() - t
        print(f"input: {args.problems} problems, {size / 1e6:.0f} MB parquet, made in {made:.0f} s")
    extra = ["--include-generated"] if args.include_generated else []
    wall, rss, stdout = run_prepare(inp, out, extra)
    counts = json.loads((out / "manifest.json").read_text())["counts"]
    out_mb = sum(f.stat().st_size for f in out.rglob("*.parquet")) / 1e6
    print(stdout)
    print(f"rows read {counts['rows_read']}, kept {counts['kept']}, output {out_mb:.0f} MB")
    print(f"wall {wall:.1f} s (pipeline {counts['seconds']:.1f} s): {counts['rows_read'] / wall:.0f} rows/s")
    print(f"peak RSS of prepare: {rss / 2**20:.0f} MiB")
    if not args.workdir:
        shutil.rmtree(work)


if __name__ == "__main__":
    main()
