"""What a colocated engine pays at each generate call to take its GPU memory back after the trainer's
turn: the KV cache's allocation, and the capture of the CUDA graphs of the decode step (they hold the
cache's addresses, so every release drops them; each bucket is captured again at its first use).

    python bench/graph_capture.py --model qwen2.5-7b --max-num-seqs 256 --batch 128

(writes docs/results/<date>-graph-capture-<model>.json, or where --out says: bench/record.py)

Random-init weights (bench/train_step.MODELS), bf16, one GPU. Per repetition: release, resume (the
allocation), then every bucket captured largest first, timed one by one. The first repetition includes
Triton's compilation and autotuning (once a process); the figures to read are the later ones. `--batch`
is the batch a generate call starts at (prompts x samples): the buckets above it are never used, so
capture at first use skips them.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import record  # noqa: E402
from bench.train_step import MODELS  # noqa: E402
from codefu.rollout import EngineConfig, NativeEngine  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=sorted(MODELS), default="qwen2.5-7b")
    p.add_argument("--max-num-seqs", type=int, default=256)
    p.add_argument("--batch", type=int, default=128, help="the batch a generate call starts at")
    p.add_argument("--max-model-len", type=int, default=8192)
    p.add_argument("--gpu-memory-fraction", type=float, default=0.6)
    p.add_argument("--repeats", type=int, default=3)
    record.add_out_argument(p, "graph-capture-MODEL")
    return p.parse_args(argv)


def build_engine(args: argparse.Namespace) -> NativeEngine:
    from transformers import AutoConfig, AutoModelForCausalLM

    spec = dict(MODELS[args.model])
    config = AutoConfig.for_model(spec.pop("model_type"), **spec)
    torch.manual_seed(0)
    with torch.device("cuda"):
        hf = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    engine_config = EngineConfig(
        model="(in memory)",
        engine="native",
        dtype="bfloat16",
        device="cuda",
        max_num_seqs=args.max_num_seqs,
        max_model_len=args.max_model_len,
        gpu_memory_fraction=args.gpu_memory_fraction,
    )
    engine = NativeEngine.from_hf_model(hf, None, engine_config)
    del hf
    torch.cuda.empty_cache()
    return engine


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    head = record.header(None if argv is None else ["bench/graph_capture.py", *argv])
    start = time.perf_counter()
    engine = build_engine(args)
    print(f"engine built in {time.perf_counter() - start:.1f} s: {engine.num_blocks} KV blocks", flush=True)
    repeats = []
    for r in range(args.repeats):
        engine.release_memory()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        engine.resume_memory()
        torch.cuda.synchronize()
        alloc_s = time.perf_counter() - t0
        graphs = engine.graphs
        assert graphs is not None, "no CUDA graphs (cuda_graphs is off?)"
        per_bucket = {}
        for bs in reversed(graphs.buckets):
            t = time.perf_counter()
            graphs.capture(bs)
            per_bucket[bs] = time.perf_counter() - t
        every = sum(per_bucket.values())
        used = sum(s for bs, s in per_bucket.items() if bs <= args.batch)
        repeats.append({"alloc_s": alloc_s, "capture_s": per_bucket, "all_buckets_s": every, "used_s": used})
        print(
            f"repeat {r}: allocation {alloc_s:.3f} s, capture of all {len(per_bucket)} buckets "
            f"{every:.3f} s, of those <= {args.batch} {used:.3f} s",
            flush=True,
        )
    result = {
        "model": args.model,
        "max_num_seqs": args.max_num_seqs,
        "batch": args.batch,
        "kv_blocks": engine.num_blocks,
        "repeats": repeats,
    }
    params = {k: v for k, v in vars(args).items() if k != "out"}
    out = record.resolve_out(args.out, f"graph-capture-{args.model}", smoke=args.model == "tiny")
    record.write(out, head | {"params": params, "results": result})
    return result


if __name__ == "__main__":
    main()
