"""The two-turn toy of tests/ray/test_self_repair_loop.py (the second turn passes only by reading the
feedback) as a run of its own, for comparing self-repair schedules and seeds:

    python bench/secret_toy.py {lock,async} STEPS [SEED]

Prints `judge/pass_rate_turn2` per step (the test asks > 0.8 over the last 3 of 25 steps).
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import replace
from pathlib import Path

import ray

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from codefu.models.tiny import tiny_tokenizer  # noqa: E402
from codefu.observability.sinks import JsonlSink, read_metrics  # noqa: E402
from codefu.orchestrator import loop  # noqa: E402
from helpers.toy_loop import SecretCharScorer, secret_problems, toy_config, toy_model_dir  # noqa: E402


def main() -> int:
    mode, steps = sys.argv[1], int(sys.argv[2])
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    if mode not in ("lock", "async"):
        raise SystemExit(f"schedule {mode!r}: expected lock or async")
    tmp = Path(f"/tmp/secret-toy-{mode}-s{seed}")
    shutil.rmtree(tmp, ignore_errors=True)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    cfg = toy_config(toy_model_dir(tmp / "model"), steps)  # as the test's secret_run
    cfg = replace(
        cfg,
        rollout=replace(cfg.rollout, turns=2, async_turns=mode == "async"),
        loop=replace(cfg.loop, keep_final_state=False, seed=seed),
        data=replace(cfg.data, prompts_per_step=8),
        trainer=replace(cfg.trainer, lr=1e-2),
    )
    run_dir = tmp / "run"
    loop.train(
        cfg,
        run_dir,
        secret_problems(),
        [],
        tiny_tokenizer(),
        SecretCharScorer(True),
        sinks=[JsonlSink(run_dir)],
    )
    print([round(r["judge/pass_rate_turn2"], 2) for r in read_metrics(run_dir / "metrics.jsonl")])
    return 0


if __name__ == "__main__":
    sys.exit(main())
