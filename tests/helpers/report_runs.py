"""A run directory as `codefu train` leaves it, for the report's tests."""

from __future__ import annotations

import random
from pathlib import Path

from codefu.config import dump_yaml
from codefu.observability.metrics import summary_stats, verdict_metrics
from codefu.observability.sinks import JsonlSink
from codefu.orchestrator.config import LoopConfig, RunConfig
from codefu.types import Status


def make_run(run_dir: Path, steps: int, total: int = 20, val_every: int = 5, seed: int = 0) -> Path:
    """A run directory as `codefu train` leaves it: config.yaml, metrics.jsonl (through the real sink),
    checkpoints/step_*; the metrics are made up but have every key the loop writes."""
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(
        dump_yaml(RunConfig(loop=LoopConfig(steps=total, val_every=val_every)))
    )
    rng = random.Random(seed)
    with JsonlSink(run_dir) as sink:
        for step in range(1, steps + 1):
            p = min(0.9, 0.1 + 0.04 * step)
            statuses = rng.choices(list(Status), weights=[10 * p, 3, 1, 0.2, 1, 0.1, 1, 2, 0.1], k=32)
            m = verdict_metrics(statuses)
            m |= summary_stats([rng.gauss(p, 0.3) for _ in range(32)], "reward/")
            m |= summary_stats([rng.randint(40, 160) for _ in range(32)], "rollout/response_len_")
            m |= {
                "loss/kl": 1e-3 * step,
                "policy/entropy": 0.9 - 0.01 * step,
                "policy/clip_frac": 0.02,
                "timing/generate_s": 30.0,
                "timing/judge_s": 8.0,
                "timing/train_s": 7.0,
                "timing/sync_s": 1.0,
                "timing/step_s": 46.5,
                "rollout/kept_samples": 32.0,
            }
            # a run mixing two datasets at 3:1 (source_metrics)
            m |= {
                "data/pass_rate/taco": p,
                "data/prompts/taco": 6.0,
                "data/pass_rate/code_contests": p / 2,
                "data/prompts/code_contests": 2.0,
            }
            if step % val_every == 0:
                m |= {
                    "eval/pass@1": p * 0.8,
                    "eval/pass@4": p,
                    "eval/pass@1/easy": p,
                    "eval/pass@4/easy": p,
                    # the loop's intervals (passk_metrics_with_ci), for the whole set only
                    "eval/pass@1_ci_low": p * 0.6,
                    "eval/pass@1_ci_high": p * 0.95,
                    "eval/pass@4_ci_low": p * 0.8,
                    "eval/pass@4_ci_high": min(1.0, p * 1.15),
                }
            sink.write(step, m)
            if step % 10 == 0:
                (run_dir / "checkpoints" / f"step_{step:08d}").mkdir(parents=True)
    return run_dir
