"""`codefu eval`: pass@k of a model on a dataset, per difficulty bucket, with the training judge.

    codefu eval --model PATH --dataset PATH [--n 8] [--k 1,8] [--out results.json]

PATH is an HF folder (e.g. a checkpoint's HF export), a .gguf file, or `smollm2` (the bundled default).
pass@k is the unbiased estimator of Chen et al. (2021) over n samples per problem.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections import Counter, defaultdict
from pathlib import Path

from tqdm import tqdm

from codefu.errors import CodefuError
from codefu.judge.judge import Judge, JudgeConfig
from codefu.judge.rewards import REWARDS
from codefu.observability.passk import by_bucket, pass_at_k_table
from codefu.types import Problem, Status


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "eval",
        help="pass@k of a model on a dataset, per difficulty bucket",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", required=True, help="HF folder, .gguf file, or 'smollm2'")
    p.add_argument("--dataset", required=True, help="verl-schema parquet, problems JSONL, or 'starter'")
    p.add_argument("--n", type=int, default=8, help="samples per problem")
    p.add_argument("--k", default="1,8", help="comma-separated k values (each <= n)")
    p.add_argument("--max-problems", type=int, default=None)
    p.add_argument("--max-new-tokens", type=int, default=512)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--language", default="python", help="asked for when a problem has no prompt of its own")
    p.add_argument("--reward", default="codefu", choices=sorted(REWARDS))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="write the results as JSON here")
    p.set_defaults(run=run)


def bucket_of(problem: Problem) -> str:
    """The problem's difficulty bucket: from the dataset, else from its rating, else "all"."""
    if problem.extra.get("bucket"):
        return str(problem.extra["bucket"])
    r = problem.rating
    if r is None:
        return "all"
    return "easy" if r <= 1000 else "hard" if r <= 2200 else "expert"


def passk_by_bucket(correct: dict[str, int], buckets: dict[str, str], n: int, ks: list[int]) -> dict:
    """{bucket: {"problems": count, "pass@k": value, ...}} plus an "all" row over every problem (pure)."""
    results = {name: [True] * correct[name] + [False] * (n - correct[name]) for name in buckets}
    tables = {b: t for b, t in by_bucket(results, buckets, ks).items() if b != "all"}
    tables["all"] = pass_at_k_table(results, ks)
    sizes = Counter(buckets.values())
    sizes["all"] = len(results)
    return {
        b: {"problems": sizes[b], **{f"pass@{k}": v for k, v in t.items()}} for b, t in sorted(tables.items())
    }


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING)
    ks = sorted({int(k) for k in args.k.split(",")})
    if not ks or ks[0] < 1 or ks[-1] > args.n:
        raise CodefuError(f"--k {args.k}: every k must be between 1 and --n {args.n}")
    from codefu.data.loader import load_problems
    from codefu.data.starter import load_starter_problems
    from codefu.models import smollm2_gguf
    from codefu.rollout.hf_engine import TransformersEngine
    from codefu.rollout.prompts import encode_prompt
    from codefu.rollout.types import SamplingParams

    problems = load_starter_problems() if args.dataset == "starter" else load_problems(args.dataset)
    problems = problems[: args.max_problems]
    for p in problems:
        if p.prompt is None:
            p.preferred_language = args.language
    model = str(smollm2_gguf()) if args.model == "smollm2" else args.model
    engine = TransformersEngine.from_pretrained(
        model, dtype=args.dtype, device=args.device, batch_size=args.batch_size
    )
    sampling = SamplingParams(
        n=args.n, temperature=args.temperature, max_new_tokens=args.max_new_tokens, seed=args.seed
    )
    start = time.monotonic()
    completions = []
    per_call = max(1, args.batch_size // args.n)  # whole GRPO-style groups per engine call
    with tqdm(total=len(problems), unit="problem", desc="generate", disable=None) as bar:
        for i in range(0, len(problems), per_call):
            chunk = problems[i : i + per_call]
            out = engine.generate([encode_prompt(engine.tokenizer, p) for p in chunk], sampling)
            completions += [(chunk[c.prompt_index], c) for c in out]
            bar.update(len(chunk))
    correct: dict[str, int] = defaultdict(int)
    statuses: dict[str, int] = defaultdict(int)
    with Judge(JudgeConfig(reward=args.reward)) as judge:
        items = [(p, c.text) for p, c in completions]
        for i, verdict in tqdm(judge.judge_many(items), total=len(items), desc="judge", disable=None):
            statuses[verdict.status.value] += 1
            correct[items[i][0].name] += verdict.status is Status.ACCEPTED
    table = passk_by_bucket(correct, {p.name: bucket_of(p) for p in problems}, args.n, ks)
    print(f"{'bucket':<10}{'problems':>9}" + "".join(f"{'pass@' + str(k):>10}" for k in ks))
    for bucket, row in table.items():
        print(f"{bucket:<10}{row['problems']:>9}" + "".join(f"{row[f'pass@{k}']:>10.4f}" for k in ks))
    print("verdicts: " + ", ".join(f"{s} {n}" for s, n in sorted(statuses.items(), key=lambda x: -x[1])))
    result = {
        "model": args.model,
        "dataset": args.dataset,
        "n": args.n,
        "ks": ks,
        "buckets": table,
        "verdicts": dict(statuses),
        "seconds": round(time.monotonic() - start, 1),
    }
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return 0
