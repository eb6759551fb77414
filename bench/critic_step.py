"""Benchmark what PPO's critic adds to a step: its forward (values) and its update, beside the policy's
forward (old log-probs) and update, on the same batch, both models on one device (the colocated layout).

One GPU:   python bench/critic_step.py --model qwen2.5-1.5b --seq-len 4096 --seqs-per-step 16
CPU smoke: python bench/critic_step.py --model tiny --seq-len 256 --seqs-per-step 4 --steps 2

Both models are random-init `bench/train_step.py` architectures (the critic: the same decoder, its lm_head
replaced by a scalar head). Each timed step runs, in the loop's order: policy compute_logprobs, critic
compute_values, GAE (on the CPU, as the loop's driver does), critic update, policy update. The claim it
checks (issue #17): the critic costs its own forward and backward and nothing else, i.e. about what the
policy's forward and update cost, less the lm_head.

Writes the result with the command, commit and machine to --out (bench/record.py; default
docs/results/<date>-critic-<model>-<seq-len>x<seqs>.json; --json is the older name of --out).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from train_step import MODELS, synthetic_batch  # noqa: E402

from bench import record  # noqa: E402
from codefu.algo.advantages import gae  # noqa: E402
from codefu.algo.shaping import outcome_token_rewards  # noqa: E402
from codefu.trainer import TrainerConfig, TrainerWorker, init_distributed  # noqa: E402
from codefu.trainer.critic import CriticWorker  # noqa: E402
from codefu.trainer.distributed import resolve_device  # noqa: E402
from codefu.trainer.model import build_model  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=sorted(MODELS), default="qwen2.5-1.5b")
    p.add_argument("--seq-len", type=int, default=4096, help="tokens per sequence (prompt + response)")
    p.add_argument("--prompt-len", type=int, default=512)
    p.add_argument("--seqs-per-step", type=int, default=16)
    p.add_argument("--micro-batch-tokens", type=int, default=0, help="0: one sequence per micro-batch")
    p.add_argument("--master-dtype", default="float32")
    p.add_argument("--steps", type=int, default=3, help="timed steps")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    p.add_argument("--device", default="auto")
    record.add_out_argument(p, "critic-MODEL-SEQLENxSEQS", "--json")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    head = record.header(None if argv is None else ["bench/critic_step.py", *argv])
    init_distributed(device=args.device)
    device = resolve_device(args.device)
    cfg = TrainerConfig(
        model=f"<random {args.model}>",
        device=args.device,
        master_dtype=args.master_dtype,
        lr=1e-6,
        weight_decay=0.0,
        micro_batch_tokens=args.micro_batch_tokens or args.seq_len,
        logprob_chunk_tokens=2048,
    )
    spec = MODELS[args.model]
    torch.manual_seed(0)
    policy = TrainerWorker(cfg, model=build_model(spec, cfg, device))
    critic = CriticWorker(cfg, value_clip=0.5, model=build_model(spec, cfg, device))
    n_policy = sum(p.numel() for p in policy.model.parameters())
    n_critic = sum(p.numel() for p in critic.model.parameters())
    batch = synthetic_batch(args.seqs_per_step, args.seq_len, args.prompt_len, spec["vocab_size"])
    rewards = batch.advantages.clone()  # +1 / -1: outcome rewards
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    parts = ("policy_forward", "critic_forward", "gae", "critic_update", "policy_update")
    times: dict[str, list[float]] = {k: [] for k in parts}

    def timed(name, step, fn, *fn_args):
        sync()
        t = time.perf_counter()
        out = fn(*fn_args)
        sync()
        if step >= args.warmup:
            times[name].append(time.perf_counter() - t)
        return out

    def targets(values):
        token_rewards = outcome_token_rewards(rewards, batch.response_mask)
        return gae(token_rewards, values, batch.response_mask, 1.0, 1.0)

    for step in range(args.warmup + args.steps):
        batch.old_logprobs = timed("policy_forward", step, policy.compute_logprobs, batch)
        values = timed("critic_forward", step, critic.compute_values, batch)
        advantages, returns = timed("gae", step, targets, values)
        batch.advantages, batch.old_values, batch.returns = advantages.float(), values, returns.float()
        timed("critic_update", step, critic.update, batch)
        timed("policy_update", step, policy.update, batch)
    median = {k: statistics.median(v) for k, v in times.items()}
    critic_s = median["critic_forward"] + median["gae"] + median["critic_update"]
    policy_s = median["policy_forward"] + median["policy_update"]
    result = {
        "model": args.model,
        "device": str(device),
        "seq_len": args.seq_len,
        "seqs_per_step": args.seqs_per_step,
        "params_policy": n_policy,
        "params_critic": n_critic,
        "median_s": {k: round(v, 3) for k, v in median.items()},
        "critic_s": round(critic_s, 3),
        "policy_s": round(policy_s, 3),
        "critic_over_policy": round(critic_s / policy_s, 3),
        "torch": torch.__version__,
    }
    if device.type == "cuda":
        result["peak_allocated_gb"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        result["gpu"] = torch.cuda.get_device_name(device)
    print(
        f"{args.model} {args.seq_len} tok x {args.seqs_per_step}: policy forward + update {policy_s:.2f} s, "
        f"critic forward + GAE + update {critic_s:.2f} s ({100 * critic_s / policy_s:.0f}% of the policy's)"
    )
    print(json.dumps(result))
    name = f"critic-{args.model}-{args.seq_len}x{args.seqs_per_step}"
    params = {k: v for k, v in vars(args).items() if k != "out"}
    record.write(
        record.resolve_out(args.out, name, smoke=args.model == "tiny"),
        head | {"params": params, "results": result},
    )
    torch.distributed.destroy_process_group()
    return result


if __name__ == "__main__":
    main()
