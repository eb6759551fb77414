"""The native engine's host work per decode step, on CPU with a 1-layer model (no GPU needed).

    python bench/rollout_host.py                      # batch 256 (32 prompts x 8), 1k-token prompts
    python bench/rollout_host.py --prompts 8 --profile 25

On a GPU the decode step is a CUDA-graph replay plus the Triton kernel, and everything the engine does in
Python between replays (scheduling, building the step's inputs, reading back the sampled tokens) is time
the GPU waits. A model this small makes that host work visible: the time per decode step minus the CPU
attention and matmuls is roughly what a GPU step pays on top of its kernels. --profile N prints the N
functions with the most time of their own (cProfile).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from codefu.rollout.engine import EngineConfig  # noqa: E402
from codefu.rollout.native import NativeEngine  # noqa: E402
from codefu.rollout.types import SamplingParams  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prompts", type=int, default=32)
    p.add_argument("--n", type=int, default=8)
    p.add_argument("--prompt-len", type=int, default=999)
    p.add_argument("--max-new-tokens", type=int, default=200)
    p.add_argument("--profile", type=int, default=15, help="print this many cProfile rows (0: none)")
    args = p.parse_args()

    from transformers import AutoModelForCausalLM, Qwen2Config

    torch.set_num_threads(1)
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=512, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=4096,
                         tie_word_embeddings=True)  # fmt: skip
    max_len = args.prompt_len + args.max_new_tokens + 16
    seqs = args.prompts * args.n
    engine = NativeEngine.from_hf_model(
        AutoModelForCausalLM.from_config(config),
        None,
        EngineConfig(
            model="random",
            engine="native",
            device="cpu",
            kv_cache_tokens=seqs * max_len,
            max_num_seqs=seqs,
            max_model_len=max_len,
        ),  # fmt: skip
    )
    prompts = [[(i * 7 + j) % 500 + 1 for i in range(args.prompt_len)] for j in range(args.prompts)]
    sampling = SamplingParams(n=args.n, temperature=1.0, max_new_tokens=args.max_new_tokens, seed=0)
    engine.generate(prompts[:1], SamplingParams(n=2, max_new_tokens=4, seed=0))  # warm-up
    profiler = cProfile.Profile()
    t = time.perf_counter()
    profiler.enable()
    engine.generate(prompts, sampling)
    profiler.disable()
    st = engine.last_stats
    print(f"{seqs} sequences, {time.perf_counter() - t:.2f} s; {st['decode_steps']:.0f} decode steps, "
          f"{st['decode_s'] / st['decode_steps'] * 1e3:.2f} ms each (mean batch "
          f"{st['decode_batch_sum'] / st['decode_steps']:.0f})")  # fmt: skip
    if args.profile:
        pstats.Stats(profiler).sort_stats("tottime").print_stats(args.profile)


if __name__ == "__main__":
    main()
