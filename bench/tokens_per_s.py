"""A bench/loop.py run's throughput in three units, from its raw file: what the docs' tokens/s/GPU mean.

    python bench/tokens_per_s.py docs/results/2026-12-06-loop-7b-4k-flex-options.json \
        docs/results/2026-12-06-loop-7b-8k-flex-options.json

Over a run's timed steps (mean tokens per step / mean step time / GPUs, as bench/loop.py's summary):
- prompt + response tokens/s/GPU: verl's convention and bench/loop.py's `tokens_per_s_per_gpu`. Each of a
  GRPO group's n samples carries its prompt, so a prompt counts n times;
- generated tokens/s/GPU: response tokens only;
- prompt once + response tokens/s/GPU: a prompt counted once per group (prompt tokens / n), which is what
  the packed update (trainer.packing: shared_prefix) computes; exact when every prompt has n samples.

Reads a bench/loop.py --out file (its "steps"), a file of one step record, or a .jsonl of step records
(warm-up steps left out). Writes the figures with the command, commit and machine to --out
(bench/record.py; default docs/results/<date>-tokens-per-s.json).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import record  # noqa: E402


def timed_steps(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The timed step records of a raw file, and its summary ({} if it has none)."""
    if path.suffix == ".jsonl":
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return [r for r in rows if not r.get("warmup")], {}
    data = json.loads(path.read_text())
    if "steps" in data:
        return data["steps"], data.get("summary", {})
    return [data], {}


def units(steps: list[dict[str, Any]], n: int, gpus: int) -> dict[str, Any]:
    step_s = statistics.mean(s["step_s"] for s in steps)
    prompt = statistics.mean(s["prompt_tokens"] for s in steps)
    response = statistics.mean(s["response_tokens"] for s in steps)
    return {
        "steps": len(steps),
        "step_s": round(step_s, 3),
        "prompt_tokens_per_step": round(prompt),
        "response_tokens_per_step": round(response),
        "samples_per_prompt": n,
        "gpus": gpus,
        "prompt_response_tokens_per_s_per_gpu": round((prompt + response) / step_s / gpus),
        "generated_tokens_per_s_per_gpu": round(response / step_s / gpus),
        "prompt_once_tokens_per_s_per_gpu": round((prompt / n + response) / step_s / gpus),
        "per_step_prompt_response": [
            round((s["prompt_tokens"] + s["response_tokens"]) / s["step_s"]) for s in steps
        ],
        "per_step_generated": [round(s["response_tokens"] / s["step_s"]) for s in steps],
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", type=Path, help="bench/loop.py raw files")
    p.add_argument("--n", type=int, default=8, help="samples per prompt, if the file does not say")
    p.add_argument("--gpus", type=int, default=1, help="GPUs of the run (the docs' runs: one)")
    record.add_out_argument(p, "tokens-per-s")
    args = p.parse_args(argv)
    head = record.header(None if argv is None else ["bench/tokens_per_s.py", *argv])
    results = {}
    print("tokens/s per GPU over the timed steps:")
    print("| file | steps | prompt + response | generated | prompt once + response |")
    print("|---|---:|---:|---:|---:|")
    for path in args.files:
        steps, summary = timed_steps(path)
        u = units(steps, summary.get("samples_per_prompt", args.n), args.gpus)
        results[path.as_posix()] = u
        print(
            f"| {path.name} | {u['steps']} | {u['prompt_response_tokens_per_s_per_gpu']:,} | "
            f"{u['generated_tokens_per_s_per_gpu']:,} | {u['prompt_once_tokens_per_s_per_gpu']:,} |"
        )
    params = {"files": [f.as_posix() for f in args.files], "n": args.n, "gpus": args.gpus}
    full = head | {"params": params, "results": results}
    record.write(record.resolve_out(args.out, "tokens-per-s"), full)
    return full


if __name__ == "__main__":
    main()
