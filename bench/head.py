"""Benchmark the trainer's head alone: lm_head + log-probs (+ the entropy metric) over one micro-batch's
positions, forward and backward, the checkpointed path (`PolicyModel._head` under checkpoint, each chunk's
logits copied to fp32 for the log-probs and again for the entropy) against `linear_token_logprobs` (one
softmax pass each way, compiled on request).

GPU:   python bench/head.py --hidden 3584 --positions 32768        # Qwen2.5-7B's head, a 32k micro-batch
CPU:   python bench/head.py --hidden 64 --vocab 4096 --positions 2048 --dtype float32 --no-compile

Prints one JSON line per path: milliseconds per micro-batch for the update (forward + backward, entropy
on) and for the forward-only pass (the reference's: log-probs only), median of --repeats after --warmup.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from codefu.algo.logprobs import (  # noqa: E402
    entropy_from_logits,
    linear_token_logprobs,
    token_logprobs_from_logits,
)

DIFF_KEYS = ("lp", "entropy", "d_hidden", "d_weight")


def checkpointed_head(hidden, weight, ids, chunk, with_entropy):
    """The head before linear_token_logprobs (PolicyModel._head, each chunk checkpointed)."""

    def head(h, t):
        logits = F.linear(h, weight)
        lp = token_logprobs_from_logits(logits, t, chunk_size=t.numel())
        ent = entropy_from_logits(logits, chunk_size=t.numel()) if with_entropy else torch.zeros_like(lp)
        return lp, ent

    out = []
    for s in range(0, hidden.shape[0], chunk):
        args = (hidden[s : s + chunk], ids[s : s + chunk])
        out.append(checkpoint(head, *args, use_reentrant=False) if hidden.requires_grad else head(*args))
    return torch.cat([lp for lp, _ in out]), torch.cat([e for _, e in out])


def fused_head(hidden, weight, ids, chunk, with_entropy, compiled):
    out = [
        linear_token_logprobs(
            hidden[s : s + chunk], weight, None, ids[s : s + chunk], 1.0, with_entropy, compiled
        )
        for s in range(0, hidden.shape[0], chunk)
    ]
    return torch.cat([lp for lp, _ in out]), torch.cat([e for _, e in out])


def timed(fn, device, warmup, repeats) -> float:
    """Median wall milliseconds of fn() (synchronised)."""
    times = []
    for i in range(warmup + repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        if i >= warmup:
            times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--hidden", type=int, default=3584)
    p.add_argument("--vocab", type=int, default=151936)
    p.add_argument("--positions", type=int, default=32768, help="response positions in the micro-batch")
    p.add_argument("--chunk", type=int, default=1024, help="trainer.logprob_chunk_tokens")
    p.add_argument("--dtype", default="bfloat16", choices=["bfloat16", "float32"])
    p.add_argument("--no-compile", action="store_true", help="the fused path eager only")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dtype = getattr(torch, args.dtype)
    torch.manual_seed(0)
    weight = (torch.randn(args.vocab, args.hidden, device=device) * 0.02).to(dtype).requires_grad_()
    hidden = torch.randn(args.positions, args.hidden, device=device, dtype=dtype, requires_grad=True)
    ids = torch.randint(0, args.vocab, (args.positions,), device=device)
    grad_lp = torch.randn(args.positions, device=device)

    paths = {"checkpointed": lambda h, e: checkpointed_head(h, weight, ids, args.chunk, e)}
    paths["fused"] = lambda h, e: fused_head(h, weight, ids, args.chunk, e, False)
    if not args.no_compile:
        paths["fused_compiled"] = lambda h, e: fused_head(h, weight, ids, args.chunk, e, True)

    reference = None
    for name, path in paths.items():

        def update(path=path):
            lp, ent = path(hidden, True)
            torch.autograd.backward(lp, grad_lp)
            return lp, ent

        def forward_only(path=path):
            with torch.no_grad():
                return path(hidden.detach(), False)

        hidden.grad = weight.grad = None
        lp, ent = update()
        # copies: the timed calls below accumulate into .grad
        got = tuple(t.detach().float().clone() for t in (lp, ent, hidden.grad, weight.grad))
        if reference is None:
            reference = got
        diff = [float((a - b).abs().max()) for a, b in zip(got, reference, strict=True)]
        row = {
            "path": name,
            "device": torch.cuda.get_device_name() if device.type == "cuda" else "cpu",
            "hidden": args.hidden,
            "vocab": args.vocab,
            "positions": args.positions,
            "chunk": args.chunk,
            "dtype": args.dtype,
            "update_ms": round(timed(update, device, args.warmup, args.repeats), 2),
            "forward_only_ms": round(timed(forward_only, device, args.warmup, args.repeats), 2),
            "max_diff_vs_checkpointed": dict(zip(DIFF_KEYS, diff, strict=True)),
        }
        if device.type == "cuda":
            row["peak_gb"] = round(torch.cuda.max_memory_allocated() / 2**30, 2)
            torch.cuda.reset_peak_memory_stats()
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
