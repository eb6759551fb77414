"""The same training run in each loop.mode (or under each value of another key, --key), one after the
other on this machine: how long a step takes when the next step is sampled while this one trains (issue
#44: does one_step_off make the CPU default faster on 2 cores?), or with each rollout engine (#46).

    python bench/modes.py --config configs/cpu.yaml --steps 4 --modes sync,one_step_off
    python bench/modes.py --config configs/cpu.yaml --out - -- rollout.n=8   # overrides after --
    python bench/modes.py --config configs/cpu.yaml --key rollout.engine --values transformers,native,vllm

Each mode (value) is `codefu train --config CONFIG loop.steps=STEPS KEY=VALUE` with no validation and no
checkpoints between (loop.val_every=0, loop.save_every=0), in a run directory of its own; the runs go in
turn, never at once (they would share the cores). Per mode: every step's wall time (timing/step_s: for an
off-policy mode, the time between the trainer taking one step's samples and the next's, the pipeline's
period) and the trainer's wait for samples, the mean over the steps after the first (the first has no
step sampled ahead and loads everything), and the whole run's wall time from start to exit. Same seed in
every mode: the samples differ only where the weights that wrote them do. Writes the record
(bench/record.py) to --out.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import record  # noqa: E402

MODES = ("sync", "one_step_off", "async")


def run_mode(mode: str, args: argparse.Namespace, root: Path) -> dict:
    run_dir = root / mode
    cmd = [
        sys.executable, "-m", "codefu", "train", "--config", args.config, "--run-dir", str(run_dir),
        f"loop.steps={args.steps}", f"{args.key}={mode}", "loop.val_every=0", "loop.save_every=0",
        "loop.keep_final_state=false", *args.overrides,
    ]  # fmt: skip
    print("$ " + " ".join(cmd), flush=True)
    start = time.monotonic()
    subprocess.run(cmd, check=True, cwd=REPO)
    wall = time.monotonic() - start
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line]
    steps = [r["timing/step_s"] for r in rows]
    later = steps[1:] or steps
    return {
        "mode" if args.key == "loop.mode" else args.key: mode,
        "run_s": round(wall, 1),
        "step_s": [round(s, 2) for s in steps],
        "step_s_mean_after_first": round(statistics.mean(later), 2),
        "wait_samples_s": [round(r.get("timing/wait_samples_s", 0.0), 2) for r in rows],
        "train_s": [round(r.get("timing/train_s", 0.0), 2) for r in rows],
        "generate_s": [round(r.get("timing/generate_s", 0.0), 2) for r in rows],
        "generated_tokens_per_s": [round(r.get("rollout/tokens_per_s", 0.0), 1) for r in rows],
        "staleness_mean": [r.get("async/staleness_mean") for r in rows],
        "reward_mean": [r.get("reward/mean") for r in rows],
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", required=True, help="the run's config (e.g. configs/cpu.yaml)")
    ap.add_argument("--steps", type=int, default=4, help="steps per mode (the first is not in the mean)")
    ap.add_argument("--key", default="loop.mode", help="the config key whose values are compared")
    ap.add_argument(
        "--values",
        "--modes",
        dest="modes",
        default="sync,one_step_off",
        help=f"comma-separated values of --key (loop.mode: of {', '.join(MODES)})",
    )
    ap.add_argument("--runs", help="where the run directories go (default: a temporary folder)")
    record.add_out_argument(ap, "loop-modes")
    ap.add_argument("overrides", nargs="*", help="config key=value for every mode, after --")
    args = ap.parse_args()
    modes = args.modes.split(",")
    if args.key == "loop.mode" and (bad := [m for m in modes if m not in MODES]):
        ap.error(f"--modes: {', '.join(bad)} not one of {', '.join(MODES)}")
    if args.steps < 2:
        ap.error("--steps must be >= 2 (the first step is left out of the mean)")
    out = record.resolve_out(args.out, "loop-modes")
    head = record.header()
    with tempfile.TemporaryDirectory(prefix="codefu-modes-") as tmp:
        root = Path(args.runs) if args.runs else Path(tmp)
        results = [run_mode(m, args, root) for m in modes]
    base = results[0]["step_s_mean_after_first"]
    for r in results:
        r["speedup_vs_first"] = round(base / r["step_s_mean_after_first"], 3)
        label = r.get("mode", r.get(args.key))
        print(f"{label}: {r['step_s_mean_after_first']} s/step after the first, run {r['run_s']} s, "
              f"x{r['speedup_vs_first']} vs {modes[0]}", flush=True)  # fmt: skip
    params = {"config": args.config, "steps": args.steps, "key": args.key, "values": modes}
    params["overrides"] = args.overrides
    record.write(out, head | {"params": params, "results": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
