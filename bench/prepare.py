"""Benchmark `codefu prepare` on a synthetic CodeContests-scale input.

    python bench/prepare.py                      # 13,000 problems, like CodeContests' train split
    python bench/prepare.py --problems 2000 --include-generated

Writes the input as HF-style shards (train-NNNNN-of-NNNNN.parquet, plus valid and test), runs
`python -m codefu.cli prepare` in a child process, and prints rows/s and the child's peak RSS
(os.wait4), so generation memory does not count. Test sizes follow `codefu.data.synthetic.synth_rows`:
a median of ~20 private and ~90 generated tests per problem, mostly tiny, 1 % of 10-500 KB.

Writes the figures it prints, with the command, commit and machine, to --out (bench/record.py; default
docs/results/<date>-prepare-<problems>[-generated].json).
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import record  # noqa: E402
from codefu.data.synthetic import synth_rows, write_cc_parquet  # noqa: E402


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


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--problems", type=int, default=13_000)
    ap.add_argument("--shard-rows", type=int, default=350, help="problems per input shard")
    ap.add_argument("--group-rows", type=int, default=100, help="problems per parquet row group")
    ap.add_argument("--include-generated", action="store_true")
    ap.add_argument("--workdir", default=None, help="keep input and output here (default: a temp dir)")
    record.add_out_argument(ap, "prepare-PROBLEMS[-generated]")
    args = ap.parse_args(argv)
    head = record.header(None if argv is None else ["bench/prepare.py", *argv])
    name = f"prepare-{args.problems}" + ("-generated" if args.include_generated else "")
    out_path = record.resolve_out(args.out, name)

    work = Path(args.workdir or tempfile.mkdtemp(prefix="codefu-bench-prepare-"))
    inp, out = work / "input", work / "out"
    shutil.rmtree(out, ignore_errors=True)
    made_s = None
    if not inp.exists():
        inp.mkdir(parents=True)
        t = time.perf_counter()
        make_input(inp, args.problems, args.shard_rows, args.group_rows)
        made_s = time.perf_counter() - t
    size = sum(f.stat().st_size for f in inp.glob("*.parquet"))
    if made_s is not None:
        print(f"input: {args.problems} problems, {size / 1e6:.0f} MB parquet, made in {made_s:.0f} s")
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
    results = {
        "input_mb": round(size / 1e6, 1),
        "input_made_s": None if made_s is None else round(made_s, 1),
        "rows_read": counts["rows_read"],
        "kept": counts["kept"],
        "output_mb": round(out_mb, 1),
        "wall_s": round(wall, 2),
        "pipeline_s": round(counts["seconds"], 2),
        "rows_per_s": round(counts["rows_read"] / wall, 1),
        "peak_rss_mib": round(rss / 2**20, 1),
        "counts": counts,
    }
    params = {k: v for k, v in vars(args).items() if k != "out"}
    full = head | {"params": params, "results": results}
    record.write(out_path, full)
    return full


if __name__ == "__main__":
    main()
