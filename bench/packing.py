"""The trainer's update and forward pass with padded rows against shared-prefix packing (trainer.packing),
on a GRPO batch of the config's shape: its prompts (the loop's own encoding of its training problems),
rollout.n samples each, random response tokens of random lengths up to rollout.max_new_tokens.

CPU default:  python bench/packing.py --config configs/cpu.yaml
One GPU:      python bench/packing.py --config configs/gpu-1.5b.yaml trainer.model=/tmp/r15

Times `--repeats` updates and forward passes after one of each untimed, each way, on the same batch (the
two workers start from the same weights); prints seconds, the positions computed and the largest
log-prob difference between the two ways (`--fp32-reference`: and each way's error against fp32).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from codefu.config import load_config  # noqa: E402
from codefu.orchestrator import loop  # noqa: E402
from codefu.orchestrator.cli import load_splits, load_tokenizer, resolve_model  # noqa: E402
from codefu.orchestrator.config import RunConfig  # noqa: E402
from codefu.trainer import TrainerWorker  # noqa: E402
from codefu.trainer.batch import Batch  # noqa: E402


def grpo_batch(cfg: RunConfig, seed: int) -> Batch:
    problems, _ = load_splits(cfg)
    encode = loop._prompt_cache(load_tokenizer(cfg))
    g = torch.Generator().manual_seed(seed)
    picked = torch.randperm(len(problems), generator=g)[: cfg.data.prompts_per_step].tolist()
    rows = []
    for i in picked:
        prompt = torch.tensor(encode(problems[i]))
        for _ in range(cfg.rollout.n):
            cap = cfg.rollout.max_new_tokens
            n = int(torch.randint(cap // 2, cap + 1, (1,), generator=g))
            rows.append((prompt, torch.randint(10, 5000, (n,), generator=g)))
    B, T = len(rows), max(len(p) + len(r) for p, r in rows)
    ids, attention, response = (torch.zeros(B, T, dtype=torch.long) for _ in range(3))
    for b, (p, r) in enumerate(rows):
        ids[b, : len(p) + len(r)] = torch.cat([p, r])
        attention[b, : len(p) + len(r)] = 1
        response[b, len(p) : len(p) + len(r)] = 1
    return Batch(ids, attention, response, advantages=torch.randn(B, generator=g))


def timed(fn, repeats: int) -> tuple[list[float], object]:
    out = fn()  # untimed: first-call costs
    seconds = []
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        seconds.append(time.perf_counter() - t)
    return seconds, out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--config", default="configs/cpu.yaml")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--fp32-reference",
        action="store_true",
        help="also each way's log-prob error against a padded fp32 pass (one more forward)",
    )
    p.add_argument("overrides", nargs="*", help="config key=value")
    args = p.parse_args()
    cfg = resolve_model(load_config(RunConfig, args.config, args.overrides))
    batch = grpo_batch(cfg, args.seed)
    result: dict[str, object] = {
        "command": " ".join(sys.argv),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "rows": len(batch),
        "tokens": int(batch.attention_mask.sum()),
        "prompt_tokens_per_row": statistics.mean((batch.response_mask.argmax(1)).tolist()),
    }
    logprobs = {}
    for packing in ("padded", "shared_prefix"):
        worker = TrainerWorker(replace(cfg.trainer, packing=packing))
        fwd, lp = timed(lambda w=worker: w.compute_logprobs(batch), args.repeats)
        logprobs[packing] = lp
        batch.old_logprobs = lp
        upd, metrics = timed(lambda w=worker: w.update(batch), args.repeats)
        result[packing] = {
            "forward_s": [round(s, 2) for s in fwd],
            "update_s": [round(s, 2) for s in upd],
            "computed_tokens_per_mini_batch": metrics["perf/computed_tokens"],
            "tokens_per_mini_batch": metrics["perf/tokens"],
        }
        del worker
    on = batch.response_mask.bool()
    result["max_logprob_diff"] = float((logprobs["padded"] - logprobs["shared_prefix"])[on].abs().max())
    if args.fp32_reference:
        # in bf16 the two paths differ by two rounding errors: each path's own distance to fp32 tells
        # whether packing adds any
        exact = TrainerWorker(replace(cfg.trainer, packing="padded", dtype="float32")).compute_logprobs(batch)
        for packing, lp in logprobs.items():
            error = (lp - exact)[on].abs()
            result[packing]["logprob_error_vs_fp32"] = {
                "mean": round(float(error.mean()), 4),
                "p99": round(float(error.quantile(0.99)), 4),
                "max": round(float(error.max()), 4),
            }
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
