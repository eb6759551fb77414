"""Where a native-engine decode step spends its GPU time: torch.profiler over a window of decode steps.

    python bench/rollout_profile.py --model 1.5b            (on the GPU machine; about a minute)

Runs the bench/rollout.py workload on a random-init model up to --warm-steps decode steps, then profiles
--steps more and prints the kernels with the most GPU time (their count per step shows launch-bound
small kernels), the GPU's busy time per step and the wall time per step.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.make_random_model import save_random_model  # noqa: E402
from bench.rollout import ARCHS, engine_config, parse_args, workload  # noqa: E402
from bench.train_step import MODELS  # noqa: E402
from codefu.rollout.actor import build_engine  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--warm-steps", type=int, default=200)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--rows", type=int, default=25)
    own, rest = p.parse_known_args()
    args = parse_args(rest)
    arch = MODELS[ARCHS[args.model]]
    prompts, sampling = workload(args, arch["vocab_size"])
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(tmp) / "model"
        save_random_model(model_dir, arch, 0, "cuda")
        engine = build_engine(engine_config(args, "native", model_dir, torch.device("cuda")))
    engine.generate([p[:64] for p in prompts[:2]], sampling.__class__(n=2, max_new_tokens=16, seed=1))
    engine.start(prompts, sampling)
    while engine.last_stats["decode_steps"] < own.warm_steps:
        engine.step()
    torch.cuda.synchronize()
    batch = len(engine.scheduler.running)
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    ) as prof:
        t = time.perf_counter()
        steps = 0
        while steps < own.steps and not engine.done:
            engine.step()
            steps += 1
        torch.cuda.synchronize()
        wall = time.perf_counter() - t
    events = prof.key_averages()
    gpu_total = sum(e.self_device_time_total for e in events) / 1e3  # ms
    print(f"batch {batch}: {steps} steps, wall {1e3 * wall / steps:.2f} ms/step, "
          f"GPU busy {gpu_total / steps:.2f} ms/step")  # fmt: skip
    print(events.table(sort_by="self_device_time_total", row_limit=own.rows, max_name_column_width=60))
    # host ops that take long on the CPU are waiting for the device (a copy that synchronizes, ...)
    print(events.table(sort_by="cpu_time_total", row_limit=8, max_name_column_width=60))


if __name__ == "__main__":
    main()
