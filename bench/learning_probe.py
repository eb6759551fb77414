"""How far one GRPO update moves the default model, per learning rate and compute dtype.

    python bench/learning_probe.py [--lrs 3e-6,1e-5,3e-5,1e-4] [--dtypes bfloat16,float32] [--problems 6]

For each (dtype, lr): a fresh SmolLM2-135M trainer (fp32 master weights, the CPU default's settings
otherwise), ONE optimizer step on the starter problems' reference solutions (advantage +1) and wrong
solutions (advantage -1), then the change of each row's mean response-token log-prob and the share of
parameters whose compute-dtype copy changed (codefu/orchestrator/probe.py). Prints one line per setting.
~25 s per setting on 2 cores, after ~20 s to load the model.
"""

from __future__ import annotations

import argparse
import copy
import time
from dataclasses import replace

from codefu.data.starter import load_starter_problems
from codefu.models import smollm2_gguf
from codefu.orchestrator.probe import probe_update, solution_batch
from codefu.trainer.config import TrainerConfig
from codefu.trainer.model import load_policy
from codefu.trainer.worker import TrainerWorker


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lrs", default="3e-6,1e-5,3e-5,1e-4")
    ap.add_argument("--dtypes", default="bfloat16,float32")
    ap.add_argument("--problems", type=int, default=6)
    ap.add_argument("--steps", type=int, default=3, help="optimizer steps on the same batch")
    args = ap.parse_args()

    def has_python_wrong(p) -> bool:
        return any(w["language"] == "python" for w in p.extra["wrong_solutions"])

    problems = [p for p in load_starter_problems() if has_python_wrong(p)][: args.problems]
    base = TrainerConfig(model=str(smollm2_gguf()), gradient_checkpointing=False, micro_batch_tokens=8192)
    model, tokenizer = load_policy(base)
    print(
        f"{'dtype':<10}{'lr':>8}{'step':>6}{'d logp +':>11}{'d logp -':>11}{'changed':>9}"
        f"{'grad norm':>11}{'s':>6}"
    )
    for dtype in args.dtypes.split(","):
        for lr in [float(x) for x in args.lrs.split(",")]:
            t0 = time.perf_counter()
            cfg = replace(base, lr=lr, dtype=dtype)
            worker = TrainerWorker(cfg, model=copy.deepcopy(model), tokenizer=tokenizer)
            batch = solution_batch(tokenizer, problems)
            for step in range(1, args.steps + 1):  # one line per optimizer step on the same batch
                r = probe_update(worker, batch)
                print(
                    f"{dtype:<10}{lr:>8.0e}{step:>6}{r.positive_mean:>+11.4f}{r.negative_mean:>+11.4f}"
                    f"{r.changed_fraction:>9.4f}{r.metrics['optim/grad_norm']:>11.2f}"
                    f"{time.perf_counter() - t0:>6.0f}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
