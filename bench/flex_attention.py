"""Benchmark the trainer's shared-prefix attention alone: FlexAttention over `packed_attention_mask`'s block
mask for one packed micro-batch (GRPO groups: a prompt once, then its n responses), forward and forward +
backward, under a list of kernel options (Inductor's default tiles, the options `codefu.trainer.packing`
passes, candidate tile sizes).

GPU:   python bench/flex_attention.py                      # Qwen2.5-7B's heads, a 32k update micro-batch
       python bench/flex_attention.py --tokens 65536 --forward-only   # the reference's 64k micro-batch

The layout comes from the trainer's own packing functions (prefix groups, first-fit packing, padding to a
multiple of 128); prompts of --prompt tokens (+-50%), responses uniform in [cap/16, cap]. The kernels are
compiled with a dynamic sequence length, as the trainer's compiled decoder layers run them after their
first recompile. Prints one JSON line per option set: milliseconds (median of --repeats after --warmup),
TFLOP/s over the attended pairs (forward 2 matmuls, backward 5), and the largest differences from the
first option set's output and gradients.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from codefu.trainer.packing import (  # noqa: E402
    flex_kernel_options,
    packed_attention_mask,
    packed_layout,
    plan_micro_batches,
    rows_of,
)

# name -> kernel_options (None: Inductor's defaults). Tiles: forward BLOCK_M x BLOCK_N; backward
# BLOCK_M1 x BLOCK_N1 (dK/dV) and BLOCK_M2 x BLOCK_N2 (dQ).
CANDIDATES: dict[str, dict | None] = {
    "inductor_default": None,
    "codefu": {},  # what the trainer passes on this GPU (flex_kernel_options), filled in by main
    "divisible": {"IS_DIVISIBLE": True},
}
_TILES = [
    # (M1, N1, M2, N2, warps, stages) for the backward
    (32, 128, 128, 32, 8, 3),
    (64, 64, 64, 64, 4, 3),
    (32, 64, 64, 32, 4, 3),
    (32, 64, 64, 32, 4, 2),
    (32, 64, 64, 32, 4, 4),
    (32, 32, 32, 32, 4, 3),
]
for _m1, _n1, _m2, _n2, _w, _s in _TILES:
    CANDIDATES[f"bwd_{_m1}x{_n1}_{_m2}x{_n2}_w{_w}_s{_s}"] = {
        "IS_DIVISIBLE": True,
        "bwd_BLOCK_M1": _m1,
        "bwd_BLOCK_N1": _n1,
        "bwd_BLOCK_M2": _m2,
        "bwd_BLOCK_N2": _n2,
        "bwd_num_warps": _w,
        "bwd_num_stages": _s,
    }
for _m, _n, _w, _s in [(128, 128, 8, 2), (128, 64, 8, 2)]:
    CANDIDATES[f"fwd_{_m}x{_n}_w{_w}_s{_s}"] = {
        "IS_DIVISIBLE": True,
        "fwd_BLOCK_M": _m,
        "fwd_BLOCK_N": _n,
        "fwd_num_warps": _w,
        "fwd_num_stages": _s,
    }


def grpo_layout(tokens: int, prompt: int, cap: int, n: int, seed: int):
    """The largest packed micro-batch of at most `tokens` positions from enough GRPO groups to fill it."""
    g = torch.Generator().manual_seed(seed)
    lengths, rows, shared = [], [], []
    total = 0
    while total < 1.5 * tokens:
        p = int(torch.randint(prompt // 2, prompt * 3 // 2 + 1, (), generator=g))
        for _ in range(n):
            r = int(torch.randint(max(1, cap // 16), cap + 1, (), generator=g))
            lengths.append(p + r)
            shared.append(p)
            rows.append(len(rows))
        total += p + sum(lengths[-n:]) - n * p
    T = max(lengths)
    input_ids = torch.zeros(len(rows), T, dtype=torch.long)
    response_mask = torch.zeros(len(rows), T, dtype=torch.bool)
    for r, (length, p) in enumerate(zip(lengths, shared, strict=True)):
        group = r // n
        input_ids[r, :p] = 1000 + group  # one prompt per group, differing between groups
        input_ids[r, p:length] = torch.randint(1, 1000, (length - p,), generator=g)
        response_mask[r, p:length] = True
    plan = plan_micro_batches(input_ids, lengths, response_mask, rows, tokens, 1)[0]
    groups = max(plan, key=lambda gs: sum(gr.cost(lengths) for gr in gs))
    return packed_layout(input_ids, lengths, response_mask, groups), len(rows_of(groups))


def attended_pairs(pieces: torch.Tensor) -> int:
    """(query, key) pairs the mask allows: a piece's queries see its prefix and themselves causally."""
    total = 0
    for q0, q1, p0, p1 in pieces.tolist():
        m = q1 - q0
        total += m * (p1 - p0) + m * (m + 1) // 2
    return total


def timed(fn, warmup: int, repeats: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--q-heads", type=int, default=28)
    ap.add_argument("--kv-heads", type=int, default=4)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--tokens", type=int, default=32768, help="the micro-batch's token budget")
    ap.add_argument("--prompt", type=int, default=400, help="mean prompt length")
    ap.add_argument("--cap", type=int, default=4096, help="the response cap")
    ap.add_argument("--n", type=int, default=8, help="samples per prompt")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--forward-only", action="store_true", help="time the forward pass only")
    ap.add_argument("--only", nargs="*", help="option sets to run, by name (default: all)")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench/flex_attention.py needs a CUDA GPU: the trainer runs FlexAttention on CUDA only")
    names = args.only or list(CANDIDATES)
    unknown = [x for x in names if x not in CANDIDATES]
    if unknown:
        sys.exit(f"--only: unknown option sets {unknown}; known: {list(CANDIDATES)}")

    layout, rows = grpo_layout(args.tokens, args.prompt, args.cap, args.n, args.seed)
    layout = layout.to("cuda")
    L = layout.tokens
    pairs = attended_pairs(layout.pieces.cpu())
    mask = packed_attention_mask(layout)
    CANDIDATES["codefu"] = flex_kernel_options(torch.cuda.get_device_capability(), args.head_dim, L)
    print(
        json.dumps(
            {
                "positions": L,
                "rows": rows,
                "attended_pairs": pairs,
                "density": round(pairs / (L * L), 4),
                "block_mask_sparsity": round(mask.sparsity(), 2),
                "device": torch.cuda.get_device_name(),
                "torch": torch.__version__,
            }
        ),
        flush=True,
    )
    g = torch.Generator(device="cuda").manual_seed(args.seed)
    shape = (1, args.q_heads, L, args.head_dim), (1, args.kv_heads, L, args.head_dim)
    q = torch.randn(shape[0], device="cuda", dtype=torch.bfloat16, generator=g)
    k = torch.randn(shape[1], device="cuda", dtype=torch.bfloat16, generator=g)
    v = torch.randn(shape[1], device="cuda", dtype=torch.bfloat16, generator=g)
    d_out = torch.randn(shape[0], device="cuda", dtype=torch.bfloat16, generator=g)
    for t in (q, k, v):
        torch._dynamo.mark_dynamic(t, 2)
    flops_fwd = 4 * pairs * args.head_dim * args.q_heads
    reference = None
    for name in names:
        row, results = measure(CANDIDATES[name], mask, (q, k, v), d_out, args)
        row = {"options": name, **row, "kernel_options": CANDIDATES[name]}
        if results is not None:
            row["forward_tflops"] = round(flops_fwd / row["forward_ms"] / 1e9, 1)
            if "backward_ms" in row:
                row["backward_tflops"] = round(2.5 * flops_fwd / row["backward_ms"] / 1e9, 1)
            if reference is None:
                reference = [r.detach().float() for r in results]
            row["max_diff"] = {
                key: float((r.detach().float() - ref).abs().max())
                for key, r, ref in zip(("out", "dq", "dk", "dv"), results, reference, strict=False)
            }
        print(json.dumps(row), flush=True)


def measure(options, mask, qkv, d_out, args) -> tuple[dict, tuple | None]:
    """One option set: its times, and its output (and gradients) for the comparison; a tile that does
    not fit the GPU's shared memory fails to compile, reported as an error."""
    from torch.nn.attention.flex_attention import flex_attention

    torch._dynamo.reset()
    gqa = qkv[0].shape[1] != qkv[1].shape[1]

    def attend(q, k, v):
        return flex_attention(q, k, v, block_mask=mask, enable_gqa=gqa, kernel_options=options)

    fn = torch.compile(attend, dynamic=True)
    leaves = [t.detach().requires_grad_() for t in qkv]

    def step():
        out = fn(*leaves)
        return (out, *torch.autograd.grad(out, leaves, d_out))

    row: dict = {}
    try:
        with torch.no_grad():
            row["forward_ms"] = round(timed(lambda: fn(*qkv), args.warmup, args.repeats), 3)
            if args.forward_only:
                return row, (fn(*qkv),)
        total = timed(step, args.warmup, args.repeats)
        row["backward_ms"] = round(total - row["forward_ms"], 3)
        row["backward_over_forward"] = round(row["backward_ms"] / row["forward_ms"], 2)
        return row, step()
    except Exception as e:
        row["error"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
        return row, None


if __name__ == "__main__":
    main()
