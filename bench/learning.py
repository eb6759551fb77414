"""A learning result over several seeds: train once per seed, evaluate every final model and the base model
on the starter set's test split (never trained or tuned on), and write one raw record with the per-seed
figures, their mean and spread, and 95% intervals.

    python bench/learning.py [--config configs/cpu.yaml] [--seeds 0,1,2] [--runs runs/learning-cpu] \
        [--n 16] [--k 1,8] [--out PATH] [-- key=value ...]

Each seed trains with `codefu train --config C --run-dir RUNS/seed<S> loop.seed=S key=value ...`, then
`codefu eval` samples n programs per test problem from RUNS/seed<S>/model and from the config's base model,
at the run's temperature, length cap and compute dtype (with --parallel N > 1 on a GPU, all N + 1
evaluations at once). A finished seed (its model/ exists) or evaluation (its JSON exists) is not redone:
rerunning the command after an interruption continues it; an interrupted training run resumes from its
checkpoint.

The record's `pooled` block averages each problem's pass@k over the seeds and bootstraps the mean paired
difference (trained - base) over problems: the interval of the headline claim. `seeds` gives each seed's
own paired interval; `seed_spread` the mean over seeds with a t-interval of the per-seed differences
(3 seeds: wide, it says how much a single run can be trusted).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import record  # noqa: E402
from codefu.config import load_config  # noqa: E402
from codefu.models import resolve_dtype_name  # noqa: E402
from codefu.observability.passk import bootstrap_mean_ci, pass_at_k  # noqa: E402
from codefu.orchestrator.config import RunConfig  # noqa: E402

SPLIT_FILE = Path(__file__).resolve().parents[1] / "codefu" / "data" / "starter" / "split.json"
T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def t_975(df: float) -> float:
    """t's 97.5% quantile at `df` degrees of freedom, floored to a whole number; above 9, t(9) (2.262 against
    2.228 at 10 and 1.96 in the limit) keeps an interval a little wide, never narrow."""
    return T_975[max(1, min(9, math.floor(df)))]


def train_command(config: str, run_dir: Path, seed: int, overrides: list[str]) -> list[str] | None:
    """The command that trains (or resumes) this seed; None when it has finished before."""
    if (run_dir / "model" / "config.json").exists():
        return None
    if (run_dir / "checkpoints").is_dir() and any((run_dir / "checkpoints").iterdir()):
        return [sys.executable, "-m", "codefu", "train", "--resume", str(run_dir)]
    cmd = [sys.executable, "-m", "codefu", "train", "--config", config, "--run-dir", str(run_dir)]
    return [*cmd, f"loop.seed={seed}", *overrides]


def share_of_cores(parallel: int) -> dict[str, str]:
    """The environment of one of `parallel` runs at once: its share of the cores for a CPU run's roles
    (codefu's CPU roles otherwise take every core each, and runs at once would oversubscribe them)."""
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // parallel)))
    return env


def run_at_once(
    commands: dict[str, list[str] | None], at_once: int, what: str, logs: dict[str, Path] | None = None
) -> dict[str, float]:
    """Run the commands (None: done before), `at_once` at a time; the seconds each took (0: done before).
    With `logs`, each one's console output goes to its file and each gets its share of the cores (runs on
    the CPU side by side). Every failure is named, once all have ended, as a SystemExit."""
    seconds = dict.fromkeys(commands, 0.0)
    waiting = [name for name, cmd in commands.items() if cmd is not None]
    running: dict[str, tuple[subprocess.Popen, float]] = {}
    failed = []
    while waiting or running:
        while waiting and len(running) < max(1, at_once):
            name = waiting.pop(0)
            cmd = commands[name] or []
            log = logs[name] if logs else None
            print(f"$ {' '.join(cmd)}" + (f"  > {log}" if log else ""), flush=True)
            out = None
            if log:
                log.parent.mkdir(parents=True, exist_ok=True)
                out = log.open("ab")
            env = share_of_cores(at_once) if log else None
            running[name] = (
                subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env),
                time.monotonic(),
            )
            if out is not None:
                out.close()  # the child holds its own descriptor
        time.sleep(2)
        for name, (proc, start) in list(running.items()):
            if proc.poll() is not None:
                del running[name]
                seconds[name] = time.monotonic() - start
                print(f"{name}: {what} finished, exit {proc.returncode}", flush=True)
                if proc.returncode:
                    where = f", see {logs[name]}" if logs else ""
                    failed.append(f"{name} (exit {proc.returncode}{where})")
    if failed:
        raise SystemExit(f"{what} failed: " + "; ".join(failed))
    return seconds


def train_all(
    commands: dict[int, list[str] | None], run_dirs: dict[int, Path], parallel: int
) -> dict[int, float]:
    """Run the training commands, `parallel` at a time (with more than one, each one's console output goes
    to RUN_DIR.out beside its run, and each gets its share of the cores); the seconds each took (0:
    finished before)."""
    logs = {f"seed {s}": d.with_suffix(".out") for s, d in run_dirs.items()} if parallel > 1 else None
    took = run_at_once({f"seed {s}": cmd for s, cmd in commands.items()}, parallel, "training", logs)
    return {s: took[f"seed {s}"] for s in commands}


def eval_command(
    model: str, out: Path, args: argparse.Namespace, sampling: dict[str, Any]
) -> list[str] | None:
    """The `codefu eval` that writes `out` for `model`; None when `out` exists (written before)."""
    if out.exists():
        return None
    cmd = [sys.executable, "-m", "codefu", "eval", "--model", model, "--dataset", "starter"]
    cmd += ["--split-file", str(SPLIT_FILE), "--split", args.split, "--n", str(args.n), "--k", args.k]
    cmd += [
        "--temperature",
        str(sampling["temperature"]),
        "--max-new-tokens",
        str(sampling["max_new_tokens"]),
    ]
    cmd += ["--dtype", sampling["dtype"], "--batch-size", str(args.eval_batch_size), "--device", args.device]
    return [*cmd, "--sandbox", args.sandbox, "--out", str(out)]


def per_problem(result: dict[str, Any], k: int) -> dict[str, float]:
    """pass@k of each problem from an eval record's accepted counts (unbiased, from c of n)."""
    n = int(result["n"])
    return {name: pass_at_k(n, int(c), k) for name, c in result["per_problem"].items()}


def paired(trained: dict[str, float], base: dict[str, float]) -> dict[str, Any]:
    names = sorted(base)
    d = [trained[p] - base[p] for p in names]
    low, high = bootstrap_mean_ci(d)
    return {
        "trained": math.fsum(trained[p] for p in names) / len(names),
        "base": math.fsum(base.values()) / len(names),
        "diff": math.fsum(d) / len(names),
        "ci95": [low, high],
        "better": sum(x > 1e-12 for x in d),
        "worse": sum(x < -1e-12 for x in d),
    }


def training_summary(run_dir: Path) -> dict[str, Any]:
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    rows = [r for r in rows if "judge/pass_rate" in r]
    rates = [r["judge/pass_rate"] for r in rows]
    step_s = [r["timing/step_s"] for r in rows[1:] if "timing/step_s" in r]
    return {
        "steps": len(rows),
        "pass_rate_first5": statistics.fmean(rates[:5]),
        "pass_rate_last5": statistics.fmean(rates[-5:]),
        "entropy_last5": statistics.fmean([r.get("policy/entropy", math.nan) for r in rows[-5:]]),
        "step_s_median": statistics.median(step_s) if step_s else None,
        "response_len_mean_last5": statistics.fmean(
            [r.get("rollout/response_len_mean", math.nan) for r in rows[-5:]]
        ),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default="configs/cpu.yaml")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--runs", default=None, help="folder of the runs (default runs/learning-<config name>)")
    ap.add_argument("--split", default="test", help="the split of codefu/data/starter/split.json evaluated")
    ap.add_argument("--n", type=int, default=16, help="samples per problem in the evaluations")
    ap.add_argument("--k", default="1,8")
    ap.add_argument("--eval-batch-size", type=int, default=32)
    ap.add_argument("--device", default="cpu", help="the evaluations' device (cuda on a GPU machine)")
    ap.add_argument(
        "--sandbox", default="bwrap", help="the evaluations' sandbox (none where bwrap is absent)"
    )
    ap.add_argument(
        "--parallel", type=int, default=1, help="seeds trained at once (a GPU machine's spare room)"
    )
    ap.add_argument("--name", default=None, help="the record's name (default learning-<config name>)")
    record.add_out_argument(ap, "learning")
    ap.add_argument("overrides", nargs="*", help="key=value for every training run (after --)")
    args = ap.parse_args()
    head = record.header()
    seeds = [int(s) for s in args.seeds.split(",")]
    ks = [int(k) for k in args.k.split(",")]
    if len(set(seeds)) != len(seeds):
        ap.error(f"--seeds: a seed named twice in {args.seeds}")
    stem = Path(args.config).stem
    runs = Path(args.runs or f"runs/learning-{stem}")
    cfg = load_config(RunConfig, args.config, args.overrides)
    sampling = {
        "temperature": cfg.rollout.temperature,
        "max_new_tokens": cfg.rollout.max_new_tokens,
        "dtype": resolve_dtype_name(cfg.rollout.dtype, args.device),
    }

    run_dirs = {seed: runs / f"seed{seed}" for seed in seeds}
    commands = {seed: train_command(args.config, run_dirs[seed], seed, args.overrides) for seed in seeds}
    seconds = train_all(commands, run_dirs, args.parallel)
    # on a GPU the seeds' and the base's at once; on a CPU each takes every core: one at a time
    at_once = args.parallel + 1 if args.parallel > 1 and args.device != "cpu" else 1
    outs = {f"seed{s}": (str(d / "model"), d / f"{args.split}-eval.json") for s, d in run_dirs.items()}
    outs["base"] = (cfg.trainer.model, runs / f"base-{args.split}-eval.json")
    run_at_once(
        {k: eval_command(m, out, args, sampling) for k, (m, out) in outs.items()}, at_once, "evaluation"
    )
    trained: dict[int, dict[str, Any]] = {}
    for seed, run_dir in run_dirs.items():
        result = json.loads(outs[f"seed{seed}"][1].read_text())
        trained[seed] = {"run_dir": str(run_dir), "train_s": round(seconds[seed], 1), "eval": result}
        trained[seed]["training"] = training_summary(run_dir)
    base = json.loads(outs["base"][1].read_text())

    results: dict[str, Any] = {"pooled": {}, "seeds": {}, "seed_spread": {}}
    for k in ks:
        base_k = per_problem(base, k)
        by_seed = {s: per_problem(t["eval"], k) for s, t in trained.items()}
        pooled = {p: statistics.fmean(by_seed[s][p] for s in seeds) for p in base_k}
        results["pooled"][f"pass@{k}"] = paired(pooled, base_k)
        results["seeds"][f"pass@{k}"] = {str(s): paired(by_seed[s], base_k) for s in seeds}
        diffs = [results["seeds"][f"pass@{k}"][str(s)]["diff"] for s in seeds]
        mean = statistics.fmean(diffs)
        spread: dict[str, Any] = {"diff_mean": mean, "diff_sd": None, "t_ci95": None}  # one seed: no spread
        if len(seeds) > 1:
            sd = statistics.stdev(diffs)
            half = t_975(len(seeds) - 1) * sd / math.sqrt(len(seeds))
            spread |= {"diff_sd": sd, "t_ci95": [mean - half, mean + half]}
        results["seed_spread"][f"pass@{k}"] = spread
        results["seed_spread"][f"pass@{k}"]["per_problem_pooled"] = {
            p: round(pooled[p], 4) for p in sorted(pooled)
        }
        results["seed_spread"][f"pass@{k}"]["per_problem_base"] = {
            p: round(base_k[p], 4) for p in sorted(base_k)
        }

    out = record.resolve_out(args.out, args.name or f"learning-{stem}")
    record.write(
        out,
        head
        | {
            "params": {
                "config": args.config,
                "overrides": args.overrides,
                "seeds": seeds,
                "split": args.split,
                "n": args.n,
                "ks": ks,
                "sampling": sampling,
                "device": args.device,
                "sandbox": args.sandbox,
                "problems": len(base["per_problem"]),
            },
            "results": results,
            "training": {
                str(s): {"run_dir": t["run_dir"], "train_s": t["train_s"], **t["training"]}
                for s, t in trained.items()
            },
            "evals": {"base": base, **{f"seed{s}": t["eval"] for s, t in trained.items()}},
        },
    )
    for k in ks:
        p = results["pooled"][f"pass@{k}"]
        print(
            f"pass@{k} on {args.split}: base {p['base']:.3f}, trained (mean of {len(seeds)} seeds) "
            f"{p['trained']:.3f}, difference {p['diff']:+.3f} [{p['ci95'][0]:+.3f}, {p['ci95'][1]:+.3f}]"
        )


if __name__ == "__main__":
    main()
