"""The GRPO step as a whole and as its parts, in one run: how much the loop loses against its parts.

One H200:  python bench/loop.py --model /tmp/r15 --config configs/gpu-1.5b.yaml --max-new-tokens 4096
           python bench/loop.py --model /tmp/r7 --config configs/gpu-7b.yaml --max-new-tokens 4096
CPU smoke: python bench/loop.py --model /tmp/tiny --config configs/cpu.yaml --max-new-tokens 64 \
               --steps 1 rollout.device=cpu judge.sandbox.kind=none

--model is a random-init model folder (bench/make_random_model.py: Qwen2.5 shapes and the tiny character
tokenizer). Prompts are codefu-easy training problems (data.train, cut by data.max_prompt_tokens). A
random model almost never emits EOS, so responses end at a random set of stop tokens sized so that a
uniform model would average --mean-frac of the cap (bench/rollout.py's trick): lengths spread from a few
tokens to the cap, as a reasoning model's do.

1. `--steps` whole steps through the loop's own parts (the run's sampler: generate and judge; then
   `batch_with_advantages`, `update`: old-policy and reference log-probs, update; weight sync), after
   `--warmup` steps.
2. Then each part alone on the same roles and the last step's prompts: generate, judge, the batch's
   old-policy forward, the reference forward, the update, the weight sync.
Reports step time, the sum of the parts, their ratio (the loop's overhead; goal <= 1.15), and throughput
per GPU both ways, side by side: `tokens_per_s_per_gpu` = (prompt + response tokens) / step time (verl's
definition), which counts each prompt once per sample (n times; the packed update, trainer.packing:
shared_prefix, computes it once), and `generated_tokens_per_s_per_gpu` = response tokens / step time.
Writes the numbers with the command, commit and machine (bench/record.py) to --out.

--programs PARQUET: the judge's real work in the workload. Each response is judged as one of the real
programs of tests/data/codefu_easy_solutions.json (correct and wrong in turn, each sample a distinct
program) on its problem from PARQUET (codefu-easy's train.parquet), whatever the random model wrote. The
loop sends completions to the judge as they finish (loop.overlap_judge): `judge_tail_s` is what judging
adds after the last token, and `judge_tail_frac` its share of the step (goal <= 0.05).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import signal
import statistics
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

import ray
import torch

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench import record  # noqa: E402
from bench.rollout import stop_token_count  # noqa: E402
from codefu.config import load_config  # noqa: E402
from codefu.data.loader import load_problems, training_loader  # noqa: E402
from codefu.observability.metrics import StepTimer  # noqa: E402
from codefu.orchestrator import loop  # noqa: E402
from codefu.orchestrator.batching import completions_to_batch  # noqa: E402
from codefu.orchestrator.cli import load_splits, load_tokenizer  # noqa: E402
from codefu.orchestrator.config import RunConfig  # noqa: E402
from codefu.orchestrator.episodes import EpisodePlan  # noqa: E402
from codefu.orchestrator.roles import Roles, run_layout  # noqa: E402
from codefu.orchestrator.samplers import Sampled, sampling_params  # noqa: E402
from codefu.orchestrator.scoring import JudgeScorer  # noqa: E402
from codefu.types import Problem  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="model folder (bench/make_random_model.py)")
    p.add_argument("--config", default="configs/gpu-1.5b.yaml")
    p.add_argument("--max-new-tokens", type=int, default=4096)
    p.add_argument("--mean-frac", type=float, default=0.35, help="mean response length / cap, if uniform")
    p.add_argument("--steps", type=int, default=2, help="timed whole steps")
    p.add_argument(
        "--warmup",
        type=int,
        default=2,
        help="untimed steps first: compiles, CUDA graphs, the optimizer's first move to pinned "
        "CPU memory (step 2: there is no AdamW state to move before the first update)",
    )
    p.add_argument(
        "--programs",
        metavar="PARQUET",
        help="judge real programs instead of the responses (codefu-easy train.parquet)",
    )
    p.add_argument("--language", default="cpp", help="--programs: the solutions of this language")
    p.add_argument("--no-parts", action="store_true", help="whole steps only, no parts alone after them")
    p.add_argument("--out", help="write the results here (JSON)")
    p.add_argument(
        "--profile-step",
        type=int,
        metavar="N",
        help="torch.profiler tables of step N's update and forward-only passes (counted from 0, "
        "warm-up steps included) in OUT-profile/ (OUT: --out less .json): ROLE_KIND_N_rank0.txt. "
        "It slows the step it watches: pick a warm-up step after the first (--warmup 2 "
        "--profile-step 1)",
    )
    p.add_argument("overrides", nargs="*", help="config key=value, after the ones this script sets")
    args = p.parse_args()
    head = record.header()

    from transformers import AutoConfig

    vocab = AutoConfig.from_pretrained(args.model).vocab_size
    k = stop_token_count(vocab, args.max_new_tokens, args.mean_frac)
    g = torch.Generator().manual_seed(0)
    stops = sorted(torch.randperm(vocab - 128, generator=g)[:k].add(128).tolist())  # clear of specials
    overrides = [
        f"trainer.model={args.model}",
        f"rollout.max_new_tokens={args.max_new_tokens}",
        f"rollout.stop_token_ids={json.dumps(stops)}",
        "algo.dynamic_sampling=false",
        "data.val=null",
        "judge.sandbox.kind=none",
        "loop.val_every=0",
        "loop.save_every=0",
        *args.overrides,
    ]
    if args.profile_step is not None:
        # relative is fine: TrainerConfig makes it absolute for the trainer's processes
        profile_dir = f"{Path(args.out).with_suffix('')}-profile" if args.out else "profile"
        overrides += [f"trainer.profile_dir={profile_dir}", f"trainer.profile_calls=[{args.profile_step}]"]
    cfg = load_config(RunConfig, args.config, overrides)
    train_problems, _ = load_splits(cfg)
    tokenizer = load_tokenizer(cfg)
    encode = loop._prompt_cache(tokenizer)
    train_problems = loop.fit_prompts(train_problems, encode, cfg.data.max_prompt_tokens, "training")
    os.environ.setdefault("RAY_worker_niceness", "0")
    # a `timeout` around this script sends SIGTERM: leave through the ExitStack below, so that no actor is
    # left holding GPU memory for the next run (Ray's processes outlive a killed driver)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ray.init(
        num_cpus=max(os.cpu_count() or 1, int(run_layout(cfg).cpus + 0.999)),
        include_dashboard=False,
        log_to_driver=False,
    )
    # everything started is given back, in reverse, whatever fails: Ray's processes outlive a driver
    # that leaves without it, holding the GPU memory of the next run
    with contextlib.ExitStack() as started:
        started.callback(ray.shutdown)
        roles = Roles(cfg)
        started.callback(roles.close)
        scorer = JudgeScorer.on_cluster(cfg)
        started.callback(scorer.close)  # (RealPrograms, below, holds nothing of its own)
        if args.programs:
            scorer = RealPrograms(scorer, load_problems(args.programs), args.language)
        loader = training_loader(train_problems, cfg.data.train, cfg.data.seed, None)
        plan = EpisodePlan.of(cfg.rollout, tokenizer)
        sampler = loop.make_sampler(cfg, roles, scorer, loader, encode, plan, args.warmup + args.steps)
        started.callback(sampler.close)
        steps = []
        for step in range(args.warmup + args.steps):
            timer = StepTimer()
            t0 = time.perf_counter()
            sampled = sampler.sample(step, timer)
            t1 = time.perf_counter()
            # the generation phase's: offload, KV cache (Roles.memory_metrics, as the sampling ended)
            memory = {
                k: v for k, v in sampled.metrics.items() if k.startswith(("rollout/", "memory/", "timing/"))
            }
            batch, rewards, trained = loop.batch_with_advantages(cfg, sampled)
            trained |= loop.update(cfg, roles, batch, rewards, timer, step)
            sampler.sync_weights(step + 1, loop.policy_trains(cfg, step), timer)
            # the update alone (train_s less it: the reference pass), its recompiles, weight moves, memory
            moves = ("timing/update", "compile/", "timing/reload", "timing/reference", "memory/")
            memory |= {k: v for k, v in trained.items() if k.startswith(moves)}
            walls = {"sample_step_s": t1 - t0, "update_step_s": time.perf_counter() - t1}
            row = step_record(timer.metrics() | walls, sampled) | memory
            if step >= args.warmup:
                steps.append(row)
            # warm-up steps too: a run cut short by a time limit still shows how far it got
            print(json.dumps({"step": step, "warmup": step < args.warmup} | row), flush=True)
        sampler.close()  # loop.mode one_step_off / async: nothing more sampled ahead
        with sampler.latest_weights():  # ... and the rollout workers idle for the parts alone
            parts = {} if args.no_parts else parts_alone(cfg, roles, scorer, sampled, encode)
        print(json.dumps({"parts": parts}), flush=True)
    result = summary(cfg, args, steps, parts)
    print(json.dumps(result, indent=1))
    if args.out:
        params = {k: v for k, v in vars(args).items() if k != "out"}
        body = {"params": params, "steps": steps, "parts": parts, "summary": result}
        record.write(Path(args.out), head | body)
    return 0


class RealPrograms:
    """A scorer that judges real programs in place of the responses (see --programs): sample k is solution
    k mod S (correct, then wrong on the next pass over them), with its number in a comment so that no two
    are the same program (no compile-cache hit, no twin judged once)."""

    def __init__(self, scorer: JudgeScorer, problems: list[Problem], language: str):
        solutions = json.loads((REPO / "tests" / "data" / "codefu_easy_solutions.json").read_text())
        self.solutions = [(problems[s["index"]], s) for s in solutions if s["language"] == language]
        if not self.solutions:
            raise SystemExit(f"--language {language}: no such solutions")
        self.scorer, self.language, self.count = scorer, language, itertools.count()

    def _programs(self, items: Iterable[tuple[Problem, str]]) -> Iterator[tuple[Problem, str]]:
        for _ in items:
            k = next(self.count)
            problem, solution = self.solutions[k % len(self.solutions)]
            source = solution["wrong" if (k // len(self.solutions)) % 2 else "correct"]
            yield problem, f"```{self.language}\n{source}\n// sample {k}\n```"

    @property
    def busy_s(self) -> float:
        return self.scorer.busy_s

    def score_stream(self, items: Iterable[tuple[Problem, str]]):
        return self.scorer.score_stream(self._programs(items))

    def score(self, problems: list[Problem], responses: list[str]):
        return self.scorer.score_stream(list(self._programs(zip(problems, responses, strict=True))))

    def check_public(self, problems: list[Problem], responses: list[str]):
        return self.scorer.check_public(problems, responses)

    def check_public_stream(self, items: Iterable[tuple[Problem, str]]):
        return self.scorer.check_public_stream(items)

    def check_public_each(self, items: Iterable[tuple[Problem, str]]):
        return self.scorer.check_public_each(items)

    def close(self) -> None:
        self.scorer.close()


def step_record(timing: dict[str, float], sampled: Sampled) -> dict[str, float]:
    prompt = sum(len(c.prompt_ids) for c in sampled.completions)
    response = sum(len(c.token_ids) for c in sampled.completions)
    lengths = sorted(len(c.token_ids) for c in sampled.completions)
    return {
        **{k.removeprefix("timing/"): round(v, 3) for k, v in timing.items()},
        "prompt_tokens": prompt,
        "response_tokens": response,
        "samples": len(lengths),
        "response_len_p50": lengths[len(lengths) // 2],
        "response_len_max": lengths[-1],
        "stopped_frac": sum(c.finish_reason == "stop" for c in sampled.completions) / len(lengths),
    }


def parts_alone(cfg: RunConfig, roles: Roles, scorer, sampled: Sampled, encode) -> dict[str, float]:
    """Each phase of a step by itself, on the last step's prompts and batch."""
    problems = list({id(p): p for p in sampled.problems}.values())
    sampling = sampling_params(cfg, cfg.rollout.n, seed=12345)
    out: dict[str, float] = {}
    t = time.perf_counter()
    completions = roles.generate([encode(p) for p in problems], sampling)
    out["generate_s"] = time.perf_counter() - t
    owners = [problems[c.prompt_index] for c in completions]
    t = time.perf_counter()
    scorer.score(owners, [c.text for c in completions])  # timed only: the update takes random advantages
    out["judge_s"] = time.perf_counter() - t
    advantages = torch.randn(len(completions))
    batch = completions_to_batch(completions, advantages, torch.ones(len(completions), dtype=torch.bool))
    t = time.perf_counter()
    recompute = loop.behaviour_logprobs(cfg, batch)
    batch_ref = ray.put(batch)
    out["put_s"] = time.perf_counter() - t
    if recompute:
        t = time.perf_counter()
        batch.old_logprobs = roles.logprobs(batch_ref)
        out["old_logprobs_s"] = time.perf_counter() - t
    if roles.kl:  # the reference ranks, or with LoRA the policy with its adapters off
        t = time.perf_counter()
        batch.ref_logprobs = roles.logprobs(batch_ref, reference=True)
        out["ref_logprobs_s"] = time.perf_counter() - t
    t = time.perf_counter()
    roles.update(batch)
    out["update_s"] = time.perf_counter() - t
    t = time.perf_counter()
    roles.sync_weights()
    out["sync_s"] = time.perf_counter() - t
    out["tokens"] = float(sum(len(c.prompt_ids) + len(c.token_ids) for c in completions))
    return {k: round(v, 3) for k, v in out.items()}


def summary(cfg: RunConfig, args, steps: list[dict], parts: dict[str, float]) -> dict:
    step_s = statistics.mean(s["step_s"] for s in steps)
    prompt = statistics.mean(s["prompt_tokens"] for s in steps)
    response = statistics.mean(s["response_tokens"] for s in steps)
    tokens = prompt + response
    gpus = max(1, run_layout(cfg).gpus) if cfg.rollout.device == "cuda" else 1
    # the parts were timed on a fresh sample of the same prompts: scale them to the steps' token count
    scale = tokens / parts["tokens"] if parts.get("tokens") else 1.0
    sum_parts = sum(v for k, v in parts.items() if k.endswith("_s")) * scale
    return {
        "device": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
        "model": args.model,
        "config": args.config,
        "cap": args.max_new_tokens,
        "step_s": round(step_s, 2),
        "sum_of_parts_s": round(sum_parts, 2),
        "overhead": round(step_s / sum_parts, 3) if sum_parts else None,
        "tokens_per_step": round(tokens),
        "prompt_tokens_per_step": round(prompt),
        "response_tokens_per_step": round(response),
        "samples_per_prompt": cfg.rollout.n,
        "tokens_per_s_per_gpu": round(tokens / step_s / gpus),  # prompt + response (verl's definition)
        "generated_tokens_per_s_per_gpu": round(response / step_s / gpus),
        "phases_in_step": {
            k: round(statistics.mean(s.get(k, 0.0) for s in steps), 2)
            for k in ("generate_s", "judge_s", "judge_tail_s", "train_s", "sync_s")
        },
        "judge_tail_frac": round(statistics.mean(s.get("judge_tail_s", 0.0) / s["step_s"] for s in steps), 4),
        "judge_alone_s": parts.get("judge_s"),
    }


if __name__ == "__main__":
    sys.exit(main())
