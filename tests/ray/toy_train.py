"""A toy training run in its own process, so a test can SIGKILL it: python toy_train.py RUN_DIR STEPS.

Resumes from RUN_DIR's last checkpoint when there is one (as `codefu train --resume` does)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import ray

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the shared helpers
from codefu.models.tiny import tiny_tokenizer  # noqa: E402
from codefu.orchestrator.loop import train  # noqa: E402
from helpers.toy_loop import CharScorer, toy_config, toy_model_dir, toy_problems  # noqa: E402

if __name__ == "__main__":
    run_dir, steps = Path(sys.argv[1]), int(sys.argv[2])
    logging.basicConfig(level=logging.INFO)  # the test reads "resumed from ... at step N"
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)  # its own cluster
    with open(run_dir / "starts.txt", "a") as f:
        f.write("start\n")
    cfg = toy_config(toy_model_dir(run_dir / "base_model"), steps, save_every=2, difficulty=True)
    train(cfg, run_dir, toy_problems(), [], tiny_tokenizer(), CharScorer())
