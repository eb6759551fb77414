"""Benchmark TrainerWorker.update: tokens/s, MFU and peak memory for Qwen2.5 architectures (random init).

One GPU:     python bench/train_step.py --model qwen2.5-7b --seq-len 16384 --seqs-per-step 4
N GPUs:      torchrun --nproc-per-node 8 bench/train_step.py --model qwen2.5-7b ...
CPU smoke:   python bench/train_step.py --model tiny --seq-len 256 --seqs-per-step 2 --steps 2

Each timed step is one `update` call = one optimizer step over `--seqs-per-step` sequences of `--seq-len`
tokens (every rank gets the same batch and trains its share), with gradient accumulation over micro-batches
of `--micro-batch-tokens` (default: one sequence each).

MFU convention: MFU = 6 * N * tokens/s / (989e12 * GPUs), N = ALL parameters, embeddings and lm_head
included (counted once when tied), tokens = every token of every sequence (prompt + response). This is the
convention of the 42.7% plain-transformers baseline in docs/benchmarks.md, so the numbers compare. It
ignores attention FLOPs (large at 16k tokens) and gradient-checkpointing recomputation (so it is MFU, not
HFU); "mfu_attn" adds causal attention, 6 * layers * hidden * seq_len per token (PaLM's 12*L*H*Q*T, halved
for the causal mask). 989e12 = H100/H200 dense bf16 peak. Throughput side by side: `tokens_per_s` (prompt +
response, every position trained) and `response_tokens_per_s` (the positions after --prompt-len, those with
a loss).

Writes the result with the command, commit and machine (rank 0) to --out (bench/record.py; default
docs/results/<date>-train-step-<model>-<N>gpu.json; --json is the older name of --out).
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import record  # noqa: E402
from codefu.models.tiny import TINY_LLAMA  # noqa: E402
from codefu.trainer import Batch, TrainerConfig, TrainerWorker, init_distributed  # noqa: E402
from codefu.trainer.distributed import resolve_device  # noqa: E402
from codefu.trainer.model import build_model  # noqa: E402

PEAK_FLOPS = 989e12

# From the public Qwen2.5 config.json files (Qwen/Qwen2.5-1.5B, Qwen/Qwen2.5-7B).
_QWEN2 = dict(
    model_type="qwen2",
    hidden_act="silu",
    rms_norm_eps=1e-6,
    rope_theta=1_000_000.0,
    max_position_embeddings=131072,
    use_sliding_window=False,
    attention_dropout=0.0,
)
_QWEN3 = dict(
    model_type="qwen3",
    hidden_act="silu",
    head_dim=128,
    rms_norm_eps=1e-6,
    rope_theta=1_000_000.0,
    max_position_embeddings=40960,
    attention_bias=False,
    use_sliding_window=False,
    attention_dropout=0.0,
)
MODELS = {
    "qwen2.5-1.5b": _QWEN2
    | dict(
        vocab_size=151936,
        hidden_size=1536,
        intermediate_size=8960,
        num_hidden_layers=28,
        num_attention_heads=12,
        num_key_value_heads=2,
        tie_word_embeddings=True,
    ),
    "qwen2.5-7b": _QWEN2
    | dict(
        vocab_size=152064,
        hidden_size=3584,
        intermediate_size=18944,
        num_hidden_layers=28,
        num_attention_heads=28,
        num_key_value_heads=4,
        tie_word_embeddings=False,
    ),
    # From the public Qwen3 config.json files (Qwen/Qwen3-0.6B, Qwen/Qwen3-8B): per-head q/k norms, no
    # biases, head_dim 128 whatever the hidden size
    "qwen3-0.6b": _QWEN3
    | dict(
        vocab_size=151936,
        hidden_size=1024,
        intermediate_size=3072,
        num_hidden_layers=28,
        num_attention_heads=16,
        num_key_value_heads=8,
        tie_word_embeddings=True,
    ),
    "qwen3-8b": _QWEN3
    | dict(
        vocab_size=151936,
        hidden_size=4096,
        intermediate_size=12288,
        num_hidden_layers=36,
        num_attention_heads=32,
        num_key_value_heads=8,
        tie_word_embeddings=False,
    ),
    # the embedded CPU default's architecture (HuggingFaceTB/SmolLM2-135M-Instruct's config.json)
    "smollm2-135m": dict(
        model_type="llama",
        vocab_size=49152,
        hidden_size=576,
        intermediate_size=1536,
        num_hidden_layers=30,
        num_attention_heads=9,
        num_key_value_heads=3,
        rms_norm_eps=1e-5,
        rope_theta=100000.0,
        max_position_embeddings=8192,
        tie_word_embeddings=True,
    ),
    "tiny": TINY_LLAMA | dict(max_position_embeddings=131072),
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=sorted(MODELS), default="qwen2.5-1.5b")
    p.add_argument("--seq-len", type=int, default=16384, help="tokens per sequence (prompt + response)")
    p.add_argument("--prompt-len", type=int, default=512, help="prompt tokens per sequence (no loss there)")
    p.add_argument("--seqs-per-step", type=int, default=4, help="sequences per optimizer step (all ranks)")
    p.add_argument(
        "--micro-batch-tokens", type=int, default=0, help="padded tokens per micro-batch; 0 = seq-len"
    )
    p.add_argument("--grad-ckpt", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--cpu-offload", action=argparse.BooleanOptionalAction, default=False)
    p.add_argument(
        "--master-dtype",
        choices=["float32", "bfloat16"],
        default="float32",
        help="stored params/grads/AdamW state; bfloat16 = pure bf16 like the baseline loop",
    )
    p.add_argument("--dtype", default="auto", help="compute dtype (auto: bf16 on GPU, fp32 on CPU)")
    p.add_argument("--attn", default="sdpa", help="attn_implementation (sdpa, flash_attention_2, ...)")
    p.add_argument("--logprob-chunk-tokens", type=int, default=2048)
    p.add_argument("--no-reshard-after-forward", action="store_true")
    p.add_argument("--compile", action="store_true", help="torch.compile each decoder layer")
    p.add_argument("--uncheckpointed-layers", type=int, default=0, help="last N layers without grad ckpt")
    p.add_argument("--sp-degree", type=int, default=1, help="Ulysses SP: ranks per SP group")
    p.add_argument("--steps", type=int, default=3, help="timed steps")
    p.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    p.add_argument("--device", default="auto")
    record.add_out_argument(p, "train-step-MODEL-NGPU", "--json")
    return p.parse_args(argv)


def synthetic_batch(n: int, seq_len: int, prompt_len: int, vocab: int, seed: int = 0) -> Batch:
    """n full-length sequences (no padding: SDPA can use its causal flash kernel), random tokens, advantages
    alternating +1/-1; old_logprobs are filled in from the model."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, vocab, (n, seq_len), generator=g)
    response = torch.zeros(n, seq_len, dtype=torch.long)
    response[:, min(prompt_len, seq_len - 1) :] = 1
    adv = torch.tensor([1.0, -1.0]).repeat((n + 1) // 2)[:n]
    return Batch(ids, torch.ones_like(ids), response, advantages=adv)


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    head = record.header(None if argv is None else ["bench/train_step.py", *argv])
    rank, world = init_distributed(device=args.device)
    device = resolve_device(args.device)
    cfg = TrainerConfig(
        model=f"<random {args.model}>",
        device=args.device,
        dtype=args.dtype,
        master_dtype=args.master_dtype,
        attn_implementation=args.attn,
        gradient_checkpointing=args.grad_ckpt,
        cpu_offload=args.cpu_offload,
        reshard_after_forward=not args.no_reshard_after_forward,
        compile=args.compile,
        uncheckpointed_layers=args.uncheckpointed_layers,
        lr=1e-6,
        weight_decay=0.0,
        micro_batch_tokens=args.micro_batch_tokens or args.seq_len,
        logprob_chunk_tokens=args.logprob_chunk_tokens,
        sp_degree=args.sp_degree,
    )
    spec = MODELS[args.model]
    torch.manual_seed(0)
    t0 = time.perf_counter()
    lm = build_model(spec, cfg, device)  # random init, on the GPU
    n_params = sum(p.numel() for p in lm.parameters())  # parameters() counts a tied embedding once
    n_embed = sum(m.weight.numel() for m in {lm.get_input_embeddings(), lm.get_output_embeddings()})
    worker = TrainerWorker(cfg, model=lm)
    build_s = time.perf_counter() - t0
    batch = synthetic_batch(args.seqs_per_step, args.seq_len, args.prompt_len, spec["vocab_size"])
    batch.old_logprobs = worker.compute_logprobs(batch)  # near ratio 1, as in real PPO: few clipped tokens
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    for _ in range(args.warmup):
        worker.update(batch)
    sync()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = []
    for _ in range(args.steps):
        t = time.perf_counter()
        metrics = worker.update(batch)
        sync()
        times.append(time.perf_counter() - t)

    step_s = sum(times) / len(times)
    tokens = args.seqs_per_step * args.seq_len
    response_tokens = args.seqs_per_step * (args.seq_len - min(args.prompt_len, args.seq_len - 1))
    tok_s = tokens / step_s
    attn_per_token = 6 * spec["num_hidden_layers"] * spec["hidden_size"] * args.seq_len
    result = {
        "model": args.model,
        "gpus": world,
        "device": str(device),
        "seq_len": args.seq_len,
        "seqs_per_step": args.seqs_per_step,
        "micro_batch_tokens": cfg.micro_batch_tokens,
        "sp_degree": cfg.sp_degree,
        "grad_ckpt": args.grad_ckpt,
        "cpu_offload": args.cpu_offload,
        "master_dtype": args.master_dtype,
        "attn": args.attn,
        "params": n_params,
        "params_non_embedding": n_params - n_embed,
        "build_s": round(build_s, 1),
        "step_s": round(step_s, 3),
        "step_s_all": [round(t, 3) for t in times],
        "tokens_per_s": round(tok_s, 1),
        "tokens_per_s_per_gpu": round(tok_s / world, 1),
        "response_tokens_per_s": round(response_tokens / step_s, 1),
        "mfu": round(6 * n_params * tok_s / (PEAK_FLOPS * world), 4),
        "mfu_non_embedding": round(6 * (n_params - n_embed) * tok_s / (PEAK_FLOPS * world), 4),
        "mfu_attn": round((6 * n_params + attn_per_token) * tok_s / (PEAK_FLOPS * world), 4),
        "host_peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2),
        "loss": metrics["loss/total"],
        "grad_norm": metrics["optim/grad_norm"],
        "torch": torch.__version__,
    }
    if device.type == "cuda":
        result["peak_allocated_gb"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
        result["peak_reserved_gb"] = round(torch.cuda.max_memory_reserved() / 2**30, 2)
        result["gpu"] = torch.cuda.get_device_name(device)
    if rank == 0:
        print(
            f"{args.model} x{world} {args.seq_len} tok x {args.seqs_per_step} seqs, ckpt={args.grad_ckpt} "
            f"offload={args.cpu_offload} master={args.master_dtype}: {tok_s:,.0f} tok/s (prompt + response; "
            f"{response_tokens / step_s:,.0f} of responses), "
            f"MFU {100 * result['mfu']:.1f}% (6*N_all), peak {result.get('peak_allocated_gb', '-')} GB "
            f"allocated / {result.get('peak_reserved_gb', '-')} GB reserved, "
            f"host RSS {result['host_peak_rss_gb']} GB"
        )
        print(json.dumps(result))
        params = {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items() if k != "out"}
        out = record.resolve_out(args.out, f"train-step-{args.model}-{world}gpu", smoke=args.model == "tiny")
        record.write(out, head | {"params": params | {"gpus": world}, "results": result})
    torch.distributed.destroy_process_group()
    return result


if __name__ == "__main__":
    main()
