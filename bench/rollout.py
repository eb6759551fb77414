"""Benchmark rollout engines: the native engine (paged KV cache, continuous batching, CUDA graphs, the
Triton decode kernel) against transformers `generate` (TransformersEngine), on random-init Qwen2.5
architectures, in one process, each after a warm-up.

One H200:   python bench/rollout.py --model 1.5b --engines native     (about 40 s)
            python bench/rollout.py --model 1.5b --max-new-tokens 1024 --hf-prompts 32
                                        (both engines, same workload: ~2 min; at the 4096 cap
                                         transformers' batch runs for many minutes)
            python bench/rollout.py --model 7b --engines native
            python bench/rollout.py --model qwen3-0.6b --engines native   (Qwen3: q/k norms, head_dim 128)
            python bench/rollout.py --model 1.5b --max-new-tokens 8192 --engines native
Kernel:     python bench/rollout.py --kernel                          (decode attention bandwidth sweep)
            python bench/rollout.py --shared-prefix-kernel            (a GRPO batch: prompt pages per group)
CPU smoke:  python bench/rollout.py --smoke                           (tiny model, seconds)

Workload: --prompts prompts of --prompt-len random token ids, n samples each, temperature 1, responses
up to --max-new-tokens. A random-init model almost never emits EOS, so `stop_token_ids` is a random set
of k ids with k chosen so that, if next-token probabilities were uniform, response lengths (geometric,
cut at the cap) would average --mean-frac of the cap; the measured distribution is printed. The
transformers baseline runs --hf-prompts prompts (same prompt length, n and cap: the same per-sequence
shapes, fewer of them) in one `generate` batch; compare tokens/s, not wall time.

Roofline of the native engine's decode (prefill is reported separately):
    roofline time  = sum over decode steps of (weight bytes + KV bytes read that step) / bandwidth
    weight bytes   = every parameter read in one step: the decoder layers, the final norm and lm_head
                     (the input embedding is not counted: only B rows of it are read)
    KV bytes/step  = sum over running sequences of context_len * layers * 2 (K, V) * Hkv * D * bytes,
                     less the prompt tokens a shared-prefix group read once for its samples
    bandwidth      = measured here: a large device-to-device copy, (bytes read + written) / time
    fraction       = roofline time / measured decode time
The engine's `last_stats` gives decode steps, the sum of context lengths over decode steps and the
tokens shared-prefix groups saved (`decode_shared_tokens`), which is all the formula needs. Not counted:
activations, logits (B x V fp32 per step), sampling.

Throughput is given both ways, side by side: generated (response) tokens/s, what a rollout engine is
judged by, and prompt + response tokens/s (verl's convention for a step), each sequence's prompt counted
once per sample. Writes every figure with the command, commit and machine to --out (bench/record.py;
default docs/results/<date>-rollout-<model>-<engines>-<cap>.json, -rollout-kernel.json,
-rollout-shared-prefix-kernel.json; --smoke writes only to an explicit --out).
"""

from __future__ import annotations

import argparse
import functools
import gc
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import record  # noqa: E402
from bench.make_random_model import save_random_model  # noqa: E402
from bench.train_step import MODELS  # noqa: E402
from codefu.rollout.actor import build_engine  # noqa: E402
from codefu.rollout.engine import EngineConfig  # noqa: E402
from codefu.rollout.types import Completion, SamplingParams  # noqa: E402

ARCHS = {
    "1.5b": "qwen2.5-1.5b",
    "7b": "qwen2.5-7b",
    "qwen3-0.6b": "qwen3-0.6b",
    "qwen3-8b": "qwen3-8b",
}
#: --smoke: a 2-layer Qwen2 (vocab above the tiny tokenizer's 128 ids, so decoding unknown ids is covered)
SMOKE_ARCH = dict(
    model_type="qwen2",
    vocab_size=512,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=4096,
    tie_word_embeddings=True,
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=sorted(ARCHS), default="1.5b")
    p.add_argument("--prompts", type=int, default=32, help="prompts for the native engine")
    p.add_argument("--hf-prompts", type=int, default=2, help="prompts for transformers (same shapes)")
    p.add_argument("--n", type=int, default=8, help="samples per prompt")
    p.add_argument("--prompt-len", type=int, default=1024)
    p.add_argument("--max-new-tokens", type=int, default=4096)
    p.add_argument("--mean-frac", type=float, default=0.4, help="target mean response length / cap")
    p.add_argument("--engines", default="native,transformers")
    p.add_argument("--max-num-seqs", type=int, default=256, help="native: sequences decoded together")
    p.add_argument("--gpu-memory-fraction", type=float, default=0.85, help="native: weights + KV cache")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--model-dir", type=Path, help="reuse/save the random model here (default: a temp dir)")
    p.add_argument("--kernel", action="store_true", help="only the decode-attention kernel sweep")
    p.add_argument(
        "--shared-prefix-kernel",
        action="store_true",
        help="only the decode-attention kernel on a GRPO batch (prompts x 8 samples), groups on and off",
    )
    p.add_argument("--smoke", action="store_true", help="tiny model on CPU, a few seconds")
    record.add_out_argument(p, "rollout-MODEL-ENGINES-CAP")
    args = p.parse_args(argv)
    if args.smoke:
        args.prompts, args.hf_prompts, args.n = 2, 2, 2
        args.prompt_len, args.max_new_tokens, args.max_num_seqs = 24, 48, 4
    return args


# ---- pure helpers -------------------------------------------------------------------------------------
def stop_token_count(vocab: int, cap: int, mean_frac: float) -> int:
    """k stop ids such that, with uniform next-token probabilities (stop chance p = k / vocab per token),
    the mean response length min(Geometric(p), cap) = (1 - (1 - p)^cap) / p is mean_frac * cap."""
    lo, hi = 1e-9, 1.0
    for _ in range(100):  # the mean falls as p grows: bisect on p
        p = (lo + hi) / 2
        mean = (1 - (1 - p) ** cap) / p
        lo, hi = (p, hi) if mean > mean_frac * cap else (lo, p)
    return max(1, round(lo * vocab))


def head_dim(cfg: dict[str, Any]) -> int:
    return cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]


def weight_bytes_per_step(cfg: dict[str, Any], dtype_bytes: int = 2) -> int:
    """Bytes of parameters one decode step reads: decoder layers, final norm, lm_head (input embedding
    rows are gathered, not read in full). Qwen2 has q/k/v biases; Qwen3 per-head q/k norm weights."""
    h, inter, layers = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    d = head_dim(cfg)
    q, kv = cfg["num_attention_heads"] * d, cfg["num_key_value_heads"] * d
    attn = h * q + 2 * h * kv + q * h
    attn += (q + 2 * kv) if cfg["model_type"] == "qwen2" else 0
    attn += 2 * d if cfg["model_type"] == "qwen3" else 0
    per_layer = attn + 3 * h * inter + 2 * h
    return (layers * per_layer + h + cfg["vocab_size"] * h) * dtype_bytes


def kv_bytes_per_token(cfg: dict[str, Any], dtype_bytes: int = 2) -> int:
    """K and V of one token in every layer."""
    return cfg["num_hidden_layers"] * 2 * cfg["num_key_value_heads"] * head_dim(cfg) * dtype_bytes


def roofline(stats: dict[str, float], cfg: dict[str, Any], bandwidth: float, dtype_bytes: int = 2) -> dict:
    """The native decode roofline from the engine's last_stats (see the module docstring)."""
    weight = weight_bytes_per_step(cfg, dtype_bytes) * stats["decode_steps"]
    # K/V read: every context token, less those a shared-prefix group read once for all its samples
    read = stats["decode_context_sum"] - stats.get("decode_shared_tokens", 0.0)
    kv = kv_bytes_per_token(cfg, dtype_bytes) * read
    ideal = (weight + kv) / bandwidth
    steps = max(stats["decode_steps"], 1)
    return {
        "weight_gb": weight / 1e9,
        "kv_gb": kv / 1e9,
        "roofline_s": ideal,
        "decode_ms_per_step": 1e3 * stats["decode_s"] / steps,
        "roofline_ms_per_step": 1e3 * ideal / steps,
        "roofline_fraction": ideal / stats["decode_s"] if stats["decode_s"] > 0 else 0.0,
        "achieved_gb_per_s": (weight + kv) / stats["decode_s"] / 1e9 if stats["decode_s"] > 0 else 0.0,
        "decode_tokens_per_s": stats["decode_batch_sum"] / stats["decode_s"]
        if stats["decode_s"] > 0
        else 0.0,
    }


def length_stats(completions: list[Completion], cap: int) -> dict[str, float]:
    lengths = sorted(c.num_tokens for c in completions)
    q = statistics.quantiles(lengths, n=10, method="inclusive") if len(lengths) > 1 else [lengths[0]] * 9
    return {
        "sequences": len(lengths),
        "tokens": sum(lengths),
        "mean": statistics.fmean(lengths),
        "p10": q[0],
        "p50": statistics.median(lengths),
        "p90": q[8],
        "max": lengths[-1],
        "mean_frac_of_cap": statistics.fmean(lengths) / cap,
        "stopped_frac": sum(c.finish_reason == "stop" for c in completions) / len(completions),
    }


def histogram(completions: list[Completion], cap: int, bins: int = 8) -> str:
    counts = [0] * bins
    for c in completions:
        counts[min(bins - 1, c.num_tokens * bins // (cap + 1))] += 1
    width = -(-cap // bins)
    return "  ".join(f"{i * width}-{(i + 1) * width}: {n}" for i, n in enumerate(counts))


# ---- measurements ---------------------------------------------------------------------------------------
def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def measure_bandwidth(device: torch.device, nbytes: int = 2**31, repeats: int = 10) -> float:
    """(bytes read + written) / time of the fastest of `repeats` device-to-device copies, bytes/s."""
    src = torch.empty(nbytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    best = math.inf
    for _ in range(repeats):
        sync(device)
        t = time.perf_counter()
        dst.copy_(src)
        sync(device)
        best = min(best, time.perf_counter() - t)
    del src, dst
    return 2 * nbytes / best


def run_engine(name: str, config: EngineConfig, prompts: list[list[int]], sampling: SamplingParams) -> dict:
    """Build, warm up (a short generate), then one timed generate; the engine is freed before returning."""
    device = torch.device(config.device)
    t = time.perf_counter()
    engine = build_engine(config)
    build_s = time.perf_counter() - t
    warm = SamplingParams(n=2, temperature=1.0, max_new_tokens=16, seed=1)
    engine.generate([p[:64] for p in prompts[:2]], warm)
    sync(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    t = time.perf_counter()
    completions = engine.generate(prompts, sampling)
    sync(device)
    wall = time.perf_counter() - t
    lengths = length_stats(completions, sampling.max_new_tokens)
    prompt_tokens = sum(len(prompts[c.prompt_index]) for c in completions)
    result: dict[str, Any] = {
        "engine": name,
        "prompts": len(prompts),
        "build_s": build_s,
        "wall_s": wall,
        "generated_tokens_per_s": lengths["tokens"] / wall,
        "prompt_tokens": prompt_tokens,
        "prompt_response_tokens_per_s": (prompt_tokens + lengths["tokens"]) / wall,
        "lengths": lengths,
        "histogram": histogram(completions, sampling.max_new_tokens),
    }
    stats = getattr(engine, "last_stats", None)
    if stats:
        result["stats"] = dict(stats)
    if device.type == "cuda":
        result["peak_allocated_gb"] = torch.cuda.max_memory_allocated(device) / 2**30
    del engine, completions
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return result


# ---- the kernel sweep -----------------------------------------------------------------------------------
#: (partition_size, block_n, num_warps): None = the automatic partition, 0 = no split-K; the first row is
#: what the engine uses
KERNEL_VARIANTS = [
    (None, 64, 4),
    (0, 64, 4),
    (256, 64, 4),
    (1024, 64, 4),
    (None, 64, 8),
    (None, 128, 4),
    (None, 128, 8),
]


def graph_time(call: Any, calls: int = 20, replays: int = 5) -> float:
    """Seconds per call, from a CUDA graph of `calls` calls (eager Triton launches cost more host time than
    a small decode-attention call takes on the GPU), the best of `replays` replays."""
    call()  # compile outside the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            call()
    graph.replay()
    best = math.inf
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(end) / 1e3 / calls)
    return best


def kernel_sweep(bandwidth: float, seed: int = 0) -> list[dict]:
    """paged_decode_attention_triton alone: uniform contexts, random page order, K/V bytes / time. The
    same cache is read by every call; the smallest case (64 MiB) is barely larger than the L2 cache."""
    from codefu.rollout.native.triton_decode import paged_decode_attention_triton

    rows = []
    g = torch.Generator(device="cuda").manual_seed(seed)
    for model, (hq, hkv, dim) in {"1.5b": (12, 2, 128), "7b": (28, 4, 128)}.items():
        for batch in (64, 256):
            for ctx in (1024, 4096, 8192):
                page = 16
                blocks = batch * ctx // page
                k = torch.randn(blocks, page, hkv, dim, device="cuda", dtype=torch.bfloat16, generator=g)
                v = torch.randn_like(k)
                tables = torch.randperm(blocks, device="cuda", generator=g).to(torch.int32).view(batch, -1)
                lens = torch.full((batch,), ctx, dtype=torch.int32, device="cuda")
                q = torch.randn(batch, hq, dim, device="cuda", dtype=torch.bfloat16, generator=g)
                kv_bytes = 2 * k.numel() * k.element_size()
                for partition, block_n, warps in KERNEL_VARIANTS:
                    call = functools.partial(
                        paged_decode_attention_triton,
                        *(q, k, v, tables, lens, dim**-0.5),
                        partition_size=partition,
                        block_n=block_n,
                        num_warps=warps,
                    )
                    seconds = graph_time(call)
                    rows.append(
                        {
                            "model": model,
                            "batch": batch,
                            "context": ctx,
                            "partition": "auto" if partition is None else partition,
                            "block_n": block_n,
                            "num_warps": warps,
                            "us": seconds * 1e6,
                            "gb_per_s": kv_bytes / seconds / 1e9,
                            "fraction_of_copy_bw": kv_bytes / seconds / bandwidth,
                        }
                    )
                del k, v
                torch.cuda.empty_cache()
    return rows


def shared_prefix_sweep(seed: int = 0) -> list[dict]:
    """The decode kernel on a GRPO batch at 7B: 16 prompts x 8 samples, each sample's context its prompt
    (shared pages) and its own tokens so far, with the shared-prefix groups (host_tables.shared_prefix_groups)
    and without; `live` samples of each prompt still running (the tail of a rollout thins the groups)."""
    from codefu.rollout.native.host_tables import SHARED_GROUP_MAX, shared_prefix_groups
    from codefu.rollout.native.triton_decode import paged_decode_attention_triton

    hq, hkv, dim, page = 28, 4, 128, 16
    rows = []
    g = torch.Generator(device="cuda").manual_seed(seed)
    for prompt in (512, 1408):
        for own in (256, 1024, 3072):
            for live in (8, 4, 2):
                prompts, batch = 16, 16 * live
                prompt_blocks, own_blocks = prompt // page, -(-own // page)
                blocks = prompts * prompt_blocks + batch * own_blocks + 1
                k = torch.randn(blocks, page, hkv, dim, device="cuda", dtype=torch.bfloat16, generator=g)
                v = torch.randn_like(k)
                ids = torch.randperm(blocks, device="cuda", generator=g).to(torch.int32)
                shared_ids = ids[: prompts * prompt_blocks].view(prompts, 1, prompt_blocks)
                own_ids = ids[prompts * prompt_blocks : -1].view(prompts, live, own_blocks)
                tables = torch.cat([shared_ids.expand(-1, live, -1), own_ids], dim=2).reshape(batch, -1)
                lens = torch.full((batch,), prompt + own, dtype=torch.int32, device="cuda")
                q = torch.randn(batch, hq, dim, device="cuda", dtype=torch.bfloat16, generator=g)
                shared, sizes = shared_prefix_groups(
                    tables.cpu().numpy(), lens.cpu().numpy(), page, SHARED_GROUP_MAX
                )
                groups = dict(
                    shared_lens=torch.from_numpy(shared).cuda(), group_sizes=torch.from_numpy(sizes).cuda()
                )
                per_token = 2 * hkv * dim * 2
                for mode, extra in (("per sequence", {}), ("shared prefix", groups)):
                    call = functools.partial(
                        paged_decode_attention_triton, *(q, k, v, tables, lens, dim**-0.5), **extra
                    )
                    seconds = graph_time(call)
                    read = (prompts * prompt + batch * own) if extra else batch * (prompt + own)
                    rows.append(
                        {
                            "prompt": prompt,
                            "own": own,
                            "batch": batch,
                            "mode": mode,
                            "us": seconds * 1e6,
                            "kv_mb_read": read * per_token / 1e6,
                            "gb_per_s_of_contexts": batch * (prompt + own) * per_token / seconds / 1e9,
                        }
                    )
                del k, v
                torch.cuda.empty_cache()
    return rows


def shared_prefix_markdown(rows: list[dict]) -> str:
    cells = [
        [r["prompt"], r["own"], r["batch"], r["mode"], f"{r['us']:.0f}", f"{r['kv_mb_read']:,.0f}",
         f"{r['gb_per_s_of_contexts']:,.0f}"]
        for r in rows
    ]  # fmt: skip
    return table("prompt own_tokens batch mode us KV_MB_read contexts'_GB/s", "rrrlrrr", cells)


def table(columns: str, align: str, cells: list[list[Any]]) -> str:
    """A markdown table: column names split on spaces (underscores become spaces), `align` one letter a
    column (l or r)."""
    head = "| " + " | ".join(c.replace("_", " ") for c in columns.split()) + " |"
    rule = "|" + "|".join("---:" if a == "r" else "---" for a in align) + "|"
    return "\n".join([head, rule] + ["| " + " | ".join(str(c) for c in row) + " |" for row in cells])


# ---- reporting ------------------------------------------------------------------------------------------
def markdown(results: list[dict]) -> str:
    head = (
        "| engine | seqs | wall s | prefill s | decode s | generated tokens | generated tok/s "
        "| prompt + response tok/s | mean len | p10 | p50 | p90 | max | stopped | roofline |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    lines = [head]
    for r in results:
        s, ln = r.get("stats", {}), r["lengths"]
        prefill = f"{s['prefill_s']:.1f}" if "prefill_s" in s else "-"
        decode = f"{s['decode_s']:.1f}" if "decode_s" in s else "-"
        roof = f"{100 * r['roofline']['roofline_fraction']:.1f}%" if "roofline" in r else "-"
        lines.append(
            f"| {r['engine']} | {ln['sequences']} | {r['wall_s']:.1f} | {prefill} | {decode} | "
            f"{ln['tokens']:,} | {r['generated_tokens_per_s']:,.0f} | "
            f"{r['prompt_response_tokens_per_s']:,.0f} | {ln['mean']:.0f} | {ln['p10']:.0f} | "
            f"{ln['p50']:.0f} | {ln['p90']:.0f} | {ln['max']} | {100 * ln['stopped_frac']:.0f}% | {roof} |"
        )
    return "\n".join(lines)


def kernel_markdown(rows: list[dict]) -> str:
    cells = [
        [r["model"], r["batch"], r["context"], r["partition"], r["block_n"], r["num_warps"], f"{r['us']:.0f}",
         f"{r['gb_per_s']:,.0f}", f"{r['fraction_of_copy_bw']:.1%}"]
        for r in rows
    ]  # fmt: skip
    return table("model batch context partition block_n warps us GB/s of_copy_bw", "lrrlrrrrr", cells)


def describe(r: dict) -> str:
    """Two lines per engine: throughput and the length distribution; a third with the native roofline."""
    ln = r["lengths"]
    text = (
        f"{r['engine']}: {ln['sequences']} sequences, {ln['tokens']:,} generated tokens in "
        f"{r['wall_s']:.1f} s = "
        f"{r['generated_tokens_per_s']:,.0f} generated tok/s, {r['prompt_response_tokens_per_s']:,.0f} "
        f"prompt + response tok/s (build {r['build_s']:.0f} s); mean length {ln['mean']:.0f} "
        f"= {100 * ln['mean_frac_of_cap']:.0f}% of the cap, {100 * ln['stopped_frac']:.0f}% stopped\n"
        f"  lengths: {r['histogram']}"
    )
    if "roofline" in r:
        rf, st = r["roofline"], r["stats"]
        batch = st["decode_batch_sum"] / max(st["decode_steps"], 1)
        text += (
            f"\n  decode: {st['decode_steps']:.0f} steps, mean batch {batch:.1f}, {rf['weight_gb']:.0f} GB "
            f"weights + {rf['kv_gb']:.0f} GB KV read; roofline {rf['roofline_s']:.1f} s of "
            f"{st['decode_s']:.1f} s = {100 * rf['roofline_fraction']:.1f}% "
            f"({rf['achieved_gb_per_s']:,.0f} GB/s), {rf['decode_tokens_per_s']:,.0f} generated tok/s in "
            f"decode; "
            f"prefill {st['prefill_s']:.1f} s for {st['prefill_tokens']:,.0f} tokens, "
            f"{st['preemptions']:.0f} preemptions"
        )
        if st.get("decode_wait_s"):
            host = st["decode_s"] - st["decode_wait_s"]
            steps = st["decode_steps"]
            text += (
                f"\n  decode host time (not waiting for the device): {host:.1f} s = "
                f"{1e3 * host / steps:.2f} ms/step of {1e3 * st['decode_s'] / steps:.2f}"
            )
    return text


# ---- main -----------------------------------------------------------------------------------------------
def workload(args: argparse.Namespace, vocab: int) -> tuple[list[list[int]], SamplingParams]:
    """Random prompts (ids >= 128: clear of the tiny tokenizer's specials) and the sampling with stop ids."""
    g = torch.Generator().manual_seed(args.seed)
    prompts = torch.randint(128, vocab, (args.prompts, args.prompt_len), generator=g).tolist()
    k = stop_token_count(vocab, args.max_new_tokens, args.mean_frac)
    stop_ids = tuple(torch.randperm(vocab, generator=g)[:k].tolist())
    print(f"{k} stop ids of {vocab} (a uniform model would average {args.mean_frac:.2f} x the cap)")
    sampling = SamplingParams(
        n=args.n, temperature=1.0, max_new_tokens=args.max_new_tokens, seed=args.seed, stop_token_ids=stop_ids
    )
    return prompts, sampling


def engine_config(args: argparse.Namespace, name: str, model_dir: Path, device: torch.device) -> EngineConfig:
    common = dict(model=str(model_dir), dtype="float32" if args.smoke else "bfloat16", device=str(device))
    if name == "transformers":
        return EngineConfig(engine="transformers", batch_size=args.hf_prompts * args.n, **common)
    if name == "native":
        max_len = args.prompt_len + args.max_new_tokens + 16  # block tables sized to the workload
        return EngineConfig(
            engine="native",
            max_num_seqs=args.max_num_seqs,
            max_model_len=max_len,
            gpu_memory_fraction=args.gpu_memory_fraction,
            kv_cache_tokens=args.max_num_seqs * max_len,  # CPU only (--smoke)
            **common,
        )
    raise SystemExit(f"unknown engine {name!r}: expected native and/or transformers")


def run_engines(args: argparse.Namespace, device: torch.device, bandwidth: float) -> list[dict]:
    arch = SMOKE_ARCH if args.smoke else MODELS[ARCHS[args.model]]
    prompts, sampling = workload(args, arch["vocab_size"])
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = args.model_dir or Path(tmp) / "model"
        if not (model_dir / "config.json").exists():
            t = time.perf_counter()
            save_random_model(model_dir, arch, 0, device, torch.float32 if args.smoke else torch.bfloat16)
            print(f"saved a random model to {model_dir} in {time.perf_counter() - t:.0f} s")
        for name in [e.strip() for e in args.engines.split(",") if e.strip()]:
            config = engine_config(args, name, model_dir, device)
            use = prompts if name == "native" else prompts[: args.hf_prompts]
            r = run_engine(name, config, use, sampling)
            if name == "native":
                r["roofline"] = roofline(r["stats"], arch, bandwidth, 4 if args.smoke else 2)
            print(describe(r))
            results.append(r)
    return results


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    head = record.header(None if argv is None else ["bench/rollout.py", *argv])
    device = torch.device("cpu" if args.smoke else "cuda")
    bandwidth = measure_bandwidth(device, 2**26 if args.smoke else 2**31)
    print(f"device copy bandwidth: {bandwidth / 1e9:,.0f} GB/s (read + write)")
    summary: dict[str, Any] = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "torch": torch.__version__,
        "bandwidth_gb_per_s": bandwidth / 1e9,
    }
    if args.kernel:
        summary["kernel"] = kernel_sweep(bandwidth, args.seed)
        print(kernel_markdown(summary["kernel"]))
    elif args.shared_prefix_kernel:
        summary["shared_prefix_kernel"] = shared_prefix_sweep(args.seed)
        print(shared_prefix_markdown(summary["shared_prefix_kernel"]))
    else:
        summary["model"] = "smoke" if args.smoke else ARCHS[args.model]
        results = summary["results"] = run_engines(args, device, bandwidth)
        print(markdown(results))
        speeds = {r["engine"]: r["generated_tokens_per_s"] for r in results}
        if "native" in speeds and "transformers" in speeds:
            summary["native_over_transformers"] = speeds["native"] / speeds["transformers"]
            print(f"native / transformers generated tokens/s: {summary['native_over_transformers']:.1f}x")
    params = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "out"}
    record.write(
        record.resolve_out(args.out, out_name(args), smoke=args.smoke),
        head | {"params": params, "results": summary},
    )
    return summary


def out_name(args: argparse.Namespace) -> str:
    """The default raw file's name for this mode and workload."""
    if args.kernel:
        return "rollout-kernel"
    if args.shared_prefix_kernel:
        return "rollout-shared-prefix-kernel"
    engines = "+".join(e.strip() for e in args.engines.split(",") if e.strip())
    return f"rollout-{args.model}-{engines}-{args.max_new_tokens}"


if __name__ == "__main__":
    main()
