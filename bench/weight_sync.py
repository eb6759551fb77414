"""Benchmark the trainer -> rollout weight sync on one GPU: CUDA IPC (in place) vs Ray's object store.

    python bench/weight_sync.py --model qwen2.5-7b           # one GPU, ~3 minutes (a 7B model is saved)
    python bench/weight_sync.py --model tiny --check          # also checks the engine's outputs afterwards

A frozen trainer rank (FSDP2, fp32 master weights) and a native rollout engine (bf16) share one GPU as two
Ray actors, as in colocated training. One IPC sync = `share_weights` (pack the full weights in bf16 into one
buffer on the trainer's GPU, hand out its CUDA IPC handle) + the engine's `load_shared_weights` (map, copy
in place) + `drop_shared_weights`, each timed from the driver. The object-store path is what a split
placement uses: `state_dict_for_sync` (GPU -> CPU) and the engine's `load_weights` (CPU -> GPU).
--check: the engine starts from OTHER random weights; after one IPC sync its greedy output must equal that
of an engine built from the trainer's weights.

--lora-rank R (trainer.lora; with --master-dtype bfloat16 as configs/gpu-7b-lora.yaml): the trainer is a
LoRA policy (fp32 adapters of rank R on the attention and MLP projections, after one update on a random
batch: B is no longer 0), and a sync sends only the adapters through CUDA IPC, which the native engine
copies beside its weights (unmerged; the first sync allocates them: read ipc[1:]). Run it beside the
full sync on the same card to compare: the issue's goal is >= 5x faster at 7B. Not with --check.

Writes the timings with the command, commit and machine to --out (bench/record.py; default
docs/results/<date>-weight-sync-<model>.json). On an 80 GB card the 7B needs `--engine-memory-fraction 0.9`
(the fraction counts the trainer's fp32 weights and its bf16 share buffer too).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import record  # noqa: E402
from bench.make_random_model import save_random_model  # noqa: E402
from bench.train_step import MODELS  # noqa: E402


def save_random(out: Path, name: str, seed: int) -> None:
    import torch

    save_random_model(out, name, seed, "cuda" if torch.cuda.is_available() else "cpu")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="qwen2.5-7b", choices=sorted(MODELS))
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--store-repeats", type=int, default=1)
    p.add_argument("--check", action="store_true")
    p.add_argument("--lora-rank", type=int, default=0, help="sync LoRA adapters of this rank (0: full)")
    p.add_argument("--master-dtype", default="float32", help="the trainer's stored weights (LoRA: bfloat16)")
    p.add_argument(
        "--engine-memory-fraction",
        type=float,
        default=0.6,
        help="the engine's gpu_memory_fraction (of the whole GPU, the trainer's memory included)",
    )
    record.add_out_argument(p, "weight-sync-MODEL")
    args = p.parse_args()
    if args.check and args.lora_rank:
        p.error("--check compares full syncs only (an engine from other weights takes full weights)")
    head = record.header()
    name = f"weight-sync-{args.model}" + (f"-lora{args.lora_rank}" if args.lora_rank else "")
    out = record.resolve_out(args.out, name, smoke=args.model == "tiny")

    import ray

    from codefu.rollout.actor import make_rollout_actor
    from codefu.rollout.engine import EngineConfig
    from codefu.rollout.types import SamplingParams
    from codefu.trainer.actor import make_trainer_ranks
    from codefu.trainer.config import TrainerConfig

    tmp = Path(tempfile.mkdtemp())
    t = time.perf_counter()
    save_random(tmp / "trainer", args.model, seed=0)
    if args.check:
        save_random(tmp / "engine", args.model, seed=1)
    print(f"saved random {args.model} in {time.perf_counter() - t:.0f} s", flush=True)

    ray.init(num_gpus=1, include_dashboard=False, log_to_driver=True)
    tcfg = TrainerConfig(
        model=str(tmp / "trainer"), device="cuda", dtype="bfloat16", master_dtype=args.master_dtype, seed=0
    )
    if args.lora_rank:
        from codefu.models.lora_config import LoRAConfig

        lora = LoRAConfig(rank=args.lora_rank, alpha=2.0 * args.lora_rank)
        tcfg = replace(tcfg, lora=lora)
    kind = "policy" if args.lora_rank else "reference"
    (trainer,) = make_trainer_ranks(tcfg, 1, kind=kind, num_gpus=0.5)
    if args.lora_rank:  # B starts at zero: one update on a random batch makes the adapters real
        from codefu.trainer.testing import random_batch

        batch = random_batch(4, 64, 1000, prompt_len=8, seed=0)
        batch.old_logprobs = ray.get(trainer.compute_logprobs.remote(batch))
        ray.get(trainer.update.remote(batch))

    def engine_actor(path: Path, fraction: float):
        # the fraction counts everything in use on the GPU (the trainer, other engines): see EngineConfig
        cfg = EngineConfig(model=str(path), engine="native", dtype="bfloat16", device="cuda",
                           gpu_memory_fraction=fraction, max_model_len=2048, max_num_seqs=16)  # fmt: skip
        return make_rollout_actor(cfg, num_gpus=0.25)

    fraction = args.engine_memory_fraction  # with --check two engines share it
    rollout = engine_actor(
        tmp / ("engine" if args.check else "trainer"), fraction / 2 if args.check else fraction
    )
    ray.get([trainer.step.remote(), rollout.ping.remote()])

    def ipc_sync() -> dict[str, float]:
        t0 = time.perf_counter()
        shared = ray.get(trainer.share_weights.remote())
        t1 = time.perf_counter()
        ray.get(rollout.load_shared_weights.remote(shared))
        t2 = time.perf_counter()
        ray.get(trainer.drop_shared_weights.remote())
        t3 = time.perf_counter()
        return {"share_s": t1 - t0, "load_s": t2 - t1, "drop_s": t3 - t2, "total_s": t3 - t0}

    ipc = [ipc_sync() for _ in range(args.repeats)]  # the first one maps the buffer for the first time
    store = []
    for _ in range(args.store_repeats if not args.lora_rank else 0):
        t0 = time.perf_counter()
        ray.get(rollout.load_weights.remote(trainer.state_dict_for_sync.remote()))
        store.append(time.perf_counter() - t0)
    totals = [r["total_s"] for r in ipc]
    result = {
        "model": args.model,
        "ipc": ipc,
        "ipc_total_s_min": min(totals),
        "ipc_total_s_max": max(totals),
        "object_store_s": store,
    }
    for i, r in enumerate(ipc):
        print(f"ipc sync {i}: " + ", ".join(f"{k} {v:.3f}" for k, v in r.items()), flush=True)
    print(f"object store sync: {', '.join(f'{s:.2f} s' for s in store)}", flush=True)

    if args.check:
        ray.get(trainer.drop_shared_weights.remote())
        ipc_sync()
        reference = engine_actor(tmp / "trainer", fraction)
        prompts = [[5, 6, 7, 8], [9, 10, 11]]
        sampling = SamplingParams(n=1, temperature=0.0, max_new_tokens=16)
        got, want = ray.get(
            [rollout.generate.remote(prompts, sampling), reference.generate.remote(prompts, sampling)]
        )
        same = [a.token_ids == b.token_ids for a, b in zip(got, want, strict=True)]
        print(f"check: greedy outputs after the IPC sync equal the trainer's model: {same}")
        result["check"] = all(same)
    params = {k: v for k, v in vars(args).items() if k != "out"}
    record.write(out, head | {"params": params, "results": result})
    if not result.get("check", True):
        sys.exit(1)


if __name__ == "__main__":
    main()
