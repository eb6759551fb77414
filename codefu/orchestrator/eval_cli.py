"""`codefu eval`: pass@k of a model on a dataset, per difficulty bucket, with the training judge, each with
its 95% bootstrap interval over problems; with --baseline, the paired difference A - B.

    codefu eval --model PATH --dataset PATH [--n 8] [--k 1,8] [--out results.json]
                [--problems NAME,NAME | --split-file FILE [--split test]] [--baseline B]
                [--temperature 1.0] [--top-p 1.0] [--top-k 0] [--engine transformers|native|vllm|auto]
                [--dtype auto] [--seed 0] [--max-problems N] ...

PATH is an HF folder (e.g. a checkpoint's HF export), a .gguf file, or `smollm2` (the bundled default);
or PEFT's folder of LoRA adapters (a LoRA run's RUN_DIR/model with trainer.lora.export: adapter): its
adapters are merged into the base model its adapter_config.json names, in the eval dtype, in a temporary
folder that is evaluated and removed.
pass@k is the unbiased estimator of Chen et al. (2021) over n samples per problem; its interval is the
percentile bootstrap over problems (codefu.observability.passk), seeded by --seed. Sampling and judging
go through the loop's own validation path (codefu.orchestrator.evaluation), with any engine in this
process (vllm: where vLLM imports in this Python).

--dtype auto (the default) computes in the dtype training uses: for a run's model (RUN_DIR/model, or a
checkpoint's export RUN_DIR/checkpoints/step_N/hf) the rollout dtype of RUN_DIR/config.yaml, what the run
sampled with; for another model, or a run that sampled in auto, the device's native dtype (bfloat16 on a
GPU or a CPU with AMX / AVX512-BF16, float32 where bf16 would be emulated: several times slower). A line
names the dtype and why before the model loads; a --baseline model runs in the same dtype.

Progress goes to stderr: on a terminal a bar per phase and model (samples generated, programs judged,
elapsed, ETA), as `codefu train`'s; elsewhere a line as each phase starts and one as it ends.

--problems evaluates only the problems so named; --split-file FILE does the same with a JSON list of
names, or with one list of an object of named lists ({"train": [...], "validation": [...], "test": [...]})
chosen by --split. A name the dataset lacks is an error. --max-problems then keeps the first N of those.

--turns K evaluates self-repair (docs/self-repair.md): each sample is an episode of up to K turns, a program
that fails the problem's public tests getting the judge's feedback and another turn. pass@k is then of
the last programs; pass@1 after each turn is printed, and pass@1 against sampling at the budget of K turns:
K independent samples, the first that passes the public tests submitted (the episodes' first turns serve
as those samples, so --n >= K), paired by problem, with 95% bootstrap intervals and tokens used.

--baseline B compares with B, paired by problem: B is a previous --out file (a path ending in .json; its
`per_problem` is used, so it must come from this version or later) or a model (PATH or smollm2), then
sampled here on the same problems with the same seed and sampling. Only the problems both have are
compared; how many each side has alone is printed and written.

The --out JSON (`buckets`, `verdicts` and the rest as before; `ci95`, `per_problem`, `sampling`,
`comparison` added beside them, so a reader of the old keys sees no change):

    {"model": PATH, "dataset": PATH, "n": 8, "ks": [1, 8],
     "buckets": {"all": {"problems": 24, "pass@1": 0.21, "pass@8": 0.5}, "easy": {...}},
     "ci95": {"all": {"pass@1": [0.15, 0.28], "pass@8": [0.33, 0.67]}, "easy": {...}},
     "per_problem": {"square-number": 3, ...},     # accepted samples of the n, every problem evaluated
     "verdicts": {"WA": 120, ...}, "seconds": 81.2,
     "sampling": {"temperature": 1.0, "top_p": 1.0, "top_k": 0, "max_new_tokens": 512, "seed": 0,
                  "dtype": "float32"},
     "comparison": {                               # with --baseline only
         "baseline": B, "baseline_model": ..., "baseline_n": 8,
         "problems": 24, "only_a": 0, "only_b": 0,  # compared; evaluated here only; in B only
         "pass@1": {"diff": 0.083, "ci95": [0.021, 0.150], "a": 0.29, "b": 0.21,
                    "better": 7, "worse": 1, "equal": 16}, ...,
         "baseline_result": {...}},                # a model baseline's own result, laid out as above
     "turns": {...}}                               # with --turns K > 1: evaluation.turn_report's dict
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codefu.data.config import rating_bucket
from codefu.errors import CodefuError, check_flags
from codefu.judge.checker import check_python_checkers
from codefu.judge.cli import add_python_checker_flag
from codefu.judge.judge import Judge, JudgeConfig
from codefu.judge.rewards import REWARDS, check_tested
from codefu.judge.sandbox import SandboxConfig
from codefu.models.sources import DTYPE_NAMES, is_adapter_folder, model_problem
from codefu.observability.passk import (
    by_bucket,
    group_by_bucket,
    paired_difference,
    pass_at_k_ci,
    pass_at_k_table,
)
from codefu.types import Problem

if TYPE_CHECKING:
    from codefu.orchestrator.evaluation import Evaluation


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
    p.add_argument("--top-p", type=float, default=1.0, help="nucleus sampling; 1.0: off")
    p.add_argument("--top-k", type=int, default=0, help="sample among the k likeliest tokens; 0: off")
    p.add_argument(
        "--engine",
        default="transformers",
        choices=["transformers", "native", "vllm", "auto"],
        help="rollout backend (docs/rollout.md); native: paged KV cache, continuous batching; vllm: vLLM "
        "installed in this Python; auto: native where it serves the model, else vllm, else transformers",
    )
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--device", default="cpu")
    p.add_argument(
        "--dtype",
        default="auto",
        choices=["auto", *sorted(DTYPE_NAMES)],
        help="auto: a run's model in its run's rollout dtype, else bfloat16 on CUDA or on a CPU with native "
        "bf16, float32 on one without",
    )
    p.add_argument("--language", default="python", help="asked for when a problem has no prompt of its own")
    p.add_argument("--reward", default="codefu", choices=sorted(REWARDS))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--turns",
        type=int,
        default=1,
        help="self-repair: up to this many turns per sample, with the judge's feedback on the "
        "public tests between them (needs --n >= --turns)",
    )
    p.add_argument(
        "--sandbox",
        default="bwrap",
        choices=["bwrap", "none"],
        help="none: programs run WITHOUT isolation (no bubblewrap there; trusted code only)",
    )
    add_python_checker_flag(p)
    p.add_argument("--out", default=None, help="write the results as JSON here")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--problems", default=None, help="comma-separated problem names: evaluate only these")
    which.add_argument(
        "--split-file",
        default=None,
        help='JSON list of problem names, or {"train": [...], "test": [...]} with --split',
    )
    p.add_argument("--split", default=None, help="which list of --split-file's object, e.g. test")
    p.add_argument(
        "--baseline",
        default=None,
        help="a previous --out .json of this dataset, or a model (PATH, smollm2), to compare with",
    )
    p.set_defaults(run=run)


def bucket_of(problem: Problem) -> str:
    """The problem's difficulty bucket: from the dataset, else from its rating, else "all"."""
    if problem.extra.get("bucket"):
        return str(problem.extra["bucket"])
    r = problem.rating
    if r is None:
        return "all"
    return rating_bucket(r)


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


def results_of(per_problem: Mapping[str, int], n: int) -> dict[str, list[bool]]:
    """{problem: [True] * accepted + [False] * (n - accepted)}: what the pass@k functions take."""
    return {name: [True] * c + [False] * (n - c) for name, c in per_problem.items()}


def ci_by_bucket(
    correct: Mapping[str, int], buckets: Mapping[str, str], n: int, ks: list[int], seed: int = 0
) -> dict[str, dict[str, list[float]]]:
    """{bucket: {"pass@k": [low, high]}}: the 95% bootstrap interval over problems of each cell of
    passk_by_bucket(correct, buckets, n, ks), the same rows (pure)."""
    results = results_of({name: correct.get(name, 0) for name in buckets}, n)
    groups = {b: g for b, g in group_by_bucket(results, buckets).items() if b != "all"}
    groups["all"] = results
    return {
        b: {f"pass@{k}": list(pass_at_k_ci(g, k, seed=seed)) for k in ks} for b, g in sorted(groups.items())
    }


def compare(
    a: Mapping[str, int], a_n: int, b: Mapping[str, int], b_n: int, ks: list[int], seed: int = 0
) -> dict[str, Any]:
    """A - B per k over the problems both have, from accepted counts of a_n and b_n samples (pure):
    {"problems": P, "only_a": int, "only_b": int, "pass@k": {"diff", "ci95": [low, high], "a", "b",
    "better", "worse", "equal"}, ...}. CodefuError when no problem is shared or a side has fewer than k
    samples."""
    ra, rb = results_of(a, a_n), results_of(b, b_n)
    out: dict[str, Any] = {}
    for k in ks:
        try:
            d = paired_difference(ra, rb, k, seed=seed)
        except ValueError as e:
            raise CodefuError(f"--baseline: {e}") from None
        out |= {"problems": d["problems"], "only_a": d["only_a"], "only_b": d["only_b"]}
        out[f"pass@{k}"] = {
            "diff": d["diff"],
            "ci95": [d["ci_low"], d["ci_high"]],
            "a": d["a"],
            "b": d["b"],
            "better": d["better"],
            "worse": d["worse"],
            "equal": d["equal"],
        }
    return out


def format_comparison(comparison: Mapping[str, Any], ks: list[int]) -> list[str]:
    """One line per k: "pass@1  A - B: +0.083 [+0.021, +0.150] over 24 problems (A better on 7, worse on 1,
    equal on 16)"."""
    lines = []
    for k in ks:
        c = comparison[f"pass@{k}"]
        lo, hi = c["ci95"]
        lines.append(
            f"{'pass@' + str(k):<8}A - B: {c['diff']:+.3f} [{lo:+.3f}, {hi:+.3f}] over "
            f"{comparison['problems']} problems (A better on {c['better']}, worse on {c['worse']}, "
            f"equal on {c['equal']})"
        )
    return lines


def format_turns(report: Mapping[str, Any]) -> list[str]:
    """The self-repair lines of `turn_report`'s dict: pass@1 after each turn, then against sampling."""

    def cell(c: Mapping[str, Any], sign: str = "") -> str:
        lo, hi = c["ci95"]
        return f"{c['pass@1']:{sign}.4f} [{lo:{sign}.3f}, {hi:{sign}.3f}]"

    k = report["turns"]
    lines = [f"self-repair, up to {k} turns, over {report['problems']} problems:"]
    lines += [f"  pass@1 after turn {t}: {cell(c)}" for t, c in report["pass@1_after_turn"].items()]
    r, s = report["self_repair"], report["sampling"]
    lines.append(f"  {k} turns of repair:       {cell(r)}  {r['tokens']:.0f} tokens per episode")
    lines.append(f"  {k} samples, first passing the examples: {cell(s)}  {s['tokens']:.0f} tokens expected")
    lines.append(f"  repair - sampling: {cell(report['diff'], '+')} (paired by problem)")
    return lines


def parse_ks(text: str, n: int) -> list[int]:
    """The k values of `--k 1,8`, sorted (pure); CodefuError unless each is an integer in 1..n."""
    try:
        ks = sorted({int(k) for k in text.split(",")})
    except ValueError:
        ks = []
    if not ks or ks[0] < 1 or ks[-1] > n:
        raise CodefuError(f"--k {text}: must be comma-separated integers between 1 and --n {n}")
    return ks


def run_rollout_dtype(model: str) -> tuple[str, Path] | None:
    """(rollout.dtype, the config file) when `model` is a run's model, RUN_DIR/model or a checkpoint's
    export RUN_DIR/checkpoints/step_N/hf, and RUN_DIR/config.yaml (the run's config, as run) names it;
    else None."""
    import yaml

    from codefu.orchestrator.loop import FINAL_MODEL

    path = Path(model)
    if path.name == FINAL_MODEL:
        config = path.parent / "config.yaml"
    elif path.name == "hf" and path.parent.parent.name == "checkpoints":
        config = path.parents[2] / "config.yaml"
    else:
        return None
    try:
        dtype = yaml.safe_load(config.read_text())["rollout"]["dtype"]
    except (OSError, yaml.YAMLError, TypeError, KeyError):
        return None
    return (dtype, config) if dtype in (*DTYPE_NAMES, "auto") else None


def choose_dtype(requested: str, device: str, run: tuple[str, Path] | None, native: str) -> tuple[str, str]:
    """(dtype, why) for --dtype `requested` on `device` (pure): a dtype named is used as is; "auto" is the
    rollout dtype of the model's run where `run` (`run_rollout_dtype`) has one, else `native`: the
    device's `native_dtype_name` (bfloat16 on a GPU or a CPU that computes it natively, else float32), as
    for a run whose own rollout dtype is "auto"."""
    if requested != "auto":
        return requested, "given by --dtype"
    if run is not None and run[0] != "auto":
        return run[0], f"the rollout dtype of the model's run, {run[1]}"
    why = f"auto: bf16 is native on {device}"
    if native != "bfloat16":
        why = f"auto: no native bf16 on {device}, where emulated bf16 is several times slower"
    return native, why + ("" if run is None else f"; the model's run sampled in auto, {run[1]}")


def split_names(path: str, split: str | None) -> list[str]:
    """The problem names of a split file: a JSON list of names, or an object of such lists with `split`
    naming one. CodefuError naming the file for anything else."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise CodefuError(f"--split-file {path}: {e}") from None
    if isinstance(data, dict):
        if split is None or split not in data:
            raise CodefuError(
                f"--split-file {path} holds the splits {sorted(data)}: choose one with --split"
                + ("" if split is None else f" (no split {split!r})")
            )
        data = data[split]
    elif split is not None:
        raise CodefuError(f"--split {split}: --split-file {path} is one list of names, not named splits")
    if not isinstance(data, list) or not all(isinstance(x, str) for x in data):
        raise CodefuError(
            f"--split-file {path}: expected a list of problem names" + (f" under {split!r}" if split else "")
        )
    return data


def select_problems(problems: list[Problem], names: list[str], source: str) -> list[Problem]:
    """The problems named, in the dataset's order (pure). CodefuError naming the names the dataset lacks."""
    have = {p.name for p in problems}
    missing = [name for name in dict.fromkeys(names) if name not in have]
    if missing:
        raise CodefuError(
            f"{source}: {len(missing)} of {len(set(names))} problem names are not in the "
            f"dataset, e.g. {missing[:5]}"
        )
    wanted = set(names)
    return [p for p in problems if p.name in wanted]


def load_baseline(path: str, dataset: str, sampling: Mapping[str, Any]) -> dict[str, Any]:
    """A previous --out file, checked for `per_problem` and `n`; warns on stderr when its dataset or
    sampling differs from this run's (the comparison is then of more than the models)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as e:
        raise CodefuError(f"--baseline {path}: {e}") from None
    if (
        not isinstance(data, dict)
        or not isinstance(data.get("per_problem"), dict)
        or not isinstance(data.get("n"), int)
    ):
        raise CodefuError(
            f"--baseline {path}: no per_problem and n (an --out file of an older codefu "
            "eval?); evaluate the baseline again"
        )
    n = data["n"]
    bad = [name for name, c in data["per_problem"].items() if not isinstance(c, int) or not 0 <= c <= n]
    if bad:
        raise CodefuError(f"--baseline {path}: per_problem counts outside 0..n={n} for {bad[:5]}")
    if data.get("dataset") != dataset:
        print(
            f"warning: --baseline {path} was evaluated on {data.get('dataset')!r}, this on {dataset!r}",
            file=sys.stderr,
        )
    theirs = data.get("sampling")
    if isinstance(theirs, dict):
        differ = {k: (theirs[k], v) for k, v in sampling.items() if k in theirs and theirs[k] != v}
        if differ:
            print(
                f"warning: --baseline {path} sampled differently (baseline, this): {differ}", file=sys.stderr
            )
    return data


def merged_adapter_model(flag: str, path: str, into: Path, dtype: str) -> Path:
    """PEFT's LoRA adapter folder `path` merged into the base model its adapter_config.json names (each
    adapted weight W + (alpha / r) B A, in fp32, then `dtype`), written as an HF folder at `into`.
    CodefuError naming `flag` when the base is not named or not found, or the adapters are of a kind
    codefu does not write (rsLoRA, DoRA, per-layer ranks)."""
    from codefu.models import load_model, write_hf_model
    from codefu.models.lora import load_peft_adapter, merge_adapters
    from codefu.models.sources import adapter_base_model, adapter_folder_problem

    base = adapter_base_model(path)
    if base is None:
        raise CodefuError(f"{flag} {path}: {adapter_folder_problem(path)}")
    if problem := model_problem(base):
        raise CodefuError(f"{flag} {path}: LoRA adapters for the base model {base}, which is {problem}")
    tensors, config = load_peft_adapter(path)
    if config.get("use_rslora") or config.get("use_dora") or config.get("rank_pattern"):
        raise CodefuError(f"{flag} {path}: {adapter_folder_problem(path)} (rsLoRA, DoRA or per-layer ranks)")
    lm, tokenizer = load_model(base, dtype=dtype)
    merged = merge_adapters(lm.state_dict() | tensors, config["lora_alpha"] / config["r"])
    return write_hf_model(into, merged, lm.config, tokenizer)


def sample_and_judge(
    model_arg: str, problems: list[Problem], args: argparse.Namespace, judge: Judge, label: str = ""
) -> Evaluation:
    """One model's n samples per problem (episodes of up to --turns turns), judged, by the loop's own
    evaluation path (`sample_and_score`) over a local engine and judge; its progress labelled `label`."""
    from codefu.models import smollm2_gguf
    from codefu.orchestrator.episodes import EpisodePlan
    from codefu.orchestrator.evaluation import sample_and_score
    from codefu.orchestrator.scoring import JudgeScorer
    from codefu.rollout.actor import build_engine
    from codefu.rollout.engine import EngineConfig
    from codefu.rollout.prompts import encode_prompt, follow_up_ids
    from codefu.rollout.types import SamplingParams

    model = str(smollm2_gguf()) if model_arg == "smollm2" else model_arg
    try:
        config = EngineConfig(
            model=model, engine=args.engine, dtype=args.dtype, device=args.device, batch_size=args.batch_size
        )
        engine = build_engine(config)
    except (RuntimeError, ValueError) as e:  # an engine that cannot serve here (vLLM not installed, ...)
        raise CodefuError(f"--engine {args.engine}: {e}") from None
    sampling = SamplingParams(
        n=args.n,
        temperature=args.temperature,
        top_p=args.top_p,
        top_k=args.top_k,
        max_new_tokens=args.max_new_tokens,
        seed=args.seed,
    )
    scorer = JudgeScorer(judge, args.reward, progress=f"judge{label}")
    tokenizer = engine.tokenizer
    plan = EpisodePlan(args.turns, follow_up=lambda text, reply: follow_up_ids(tokenizer, text, reply))
    try:
        result = sample_and_score(
            problems,
            lambda p: encode_prompt(tokenizer, p),
            engine.generate,
            scorer,
            sampling,
            prompts_per_call=max(1, args.batch_size // args.n),  # whole groups of n samples per engine call
            label=label,
            plan=plan,
            lines=True,
        )
    except ValueError as e:  # what the engine refuses (a prompt longer than the model takes, ...)
        raise CodefuError(f"--model {model_arg} (--engine {args.engine}): {e}") from None
    del engine
    return result


def print_table(
    table: Mapping[str, Mapping[str, Any]], ci95: Mapping[str, Mapping[str, list[float]]], ks: list[int]
) -> None:
    width = 24
    print(f"{'bucket':<10}{'problems':>9}" + "".join(f"{'pass@' + str(k):>{width}}" for k in ks))
    for bucket, row in table.items():
        cells = []
        for k in ks:
            lo, hi = ci95[bucket][f"pass@{k}"]
            cells.append(f"{row[f'pass@{k}']:.4f} [{lo:.3f}, {hi:.3f}]".rjust(width))
        print(f"{bucket:<10}{row['problems']:>9}" + "".join(cells))
    print("[low, high]: 95% bootstrap interval over problems")


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING)
    ks = parse_ks(args.k, args.n)
    check_flags(
        args,
        [
            ("max_problems", args.max_problems is None or args.max_problems >= 1, ">= 1"),
            ("max_new_tokens", args.max_new_tokens >= 1, ">= 1"),
            ("temperature", args.temperature > 0, "> 0"),
            ("top_p", 0.0 < args.top_p <= 1.0, "in (0, 1]"),
            ("top_k", args.top_k >= 0, ">= 0 (0: off)"),
            ("batch_size", args.batch_size >= 1, ">= 1"),
            # the comparison with sampling draws --turns of the n first turns
            ("turns", 1 <= args.turns <= args.n, f"between 1 and --n {args.n}"),
            ("out", args.out is None or not Path(args.out).is_dir(), "a file to write, not a folder"),
        ],
    )
    if args.split is not None and args.split_file is None:
        raise CodefuError("--split needs --split-file")
    from codefu.data.loader import load_problems
    from codefu.data.starter import load_starter_problems
    from codefu.models import native_dtype_name

    run_dtype = run_rollout_dtype(args.model)
    args.dtype, dtype_why = choose_dtype(args.dtype, args.device, run_dtype, native_dtype_name(args.device))

    sampling_info = {
        "temperature": args.temperature,
        "top_p": args.top_p,
        "top_k": args.top_k,
        "max_new_tokens": args.max_new_tokens,
        "seed": args.seed,
        "dtype": args.dtype,
    }
    baseline_file = None
    if args.baseline is not None and args.baseline.endswith(".json"):
        baseline_file = load_baseline(args.baseline, args.dataset, sampling_info)
    problems = load_starter_problems() if args.dataset == "starter" else load_problems(args.dataset)
    if args.problems is not None:
        names = [x for x in (s.strip() for s in args.problems.split(",")) if x]
        problems = select_problems(problems, names, "--problems")
    elif args.split_file is not None:
        names = split_names(args.split_file, args.split)
        problems = select_problems(problems, names, f"--split-file {args.split_file}")
    problems = problems[: args.max_problems]
    if not problems:
        raise CodefuError(f"no problems to evaluate in {args.dataset}")
    check_tested(problems, args.reward, f"--dataset {args.dataset}")
    models = [("--model", args.model)]
    if args.baseline is not None and not args.baseline.endswith(".json"):
        models.append(("--baseline", args.baseline))
    for flag, model in models:
        if not is_adapter_folder(model) and (problem := model_problem(model)):
            raise CodefuError(f"{flag} {model}: {problem}")
    for p in problems:
        if p.prompt is None:
            p.preferred_language = args.language
    start = time.monotonic()
    buckets = {p.name: bucket_of(p) for p in problems}
    baseline_counts = None
    check_python_checkers(problems, args.python_checkers, args.dataset)
    config = JudgeConfig(
        reward=args.reward, python_checkers=args.python_checkers, sandbox=SandboxConfig(kind=args.sandbox)
    )
    print(
        f"dtype {args.dtype} ({dtype_why})" + (", the baseline's too" if len(models) > 1 else ""), flush=True
    )
    with tempfile.TemporaryDirectory(prefix="codefu-eval-") as scratch, Judge(config) as judge:
        source = {}  # an adapter folder -> its merged model
        for i, (flag, model) in enumerate(models):
            if is_adapter_folder(model):
                print(f"{flag} {model}: LoRA adapters, merged into their base model", flush=True)
                source[model] = str(merged_adapter_model(flag, model, Path(scratch) / str(i), args.dtype))
        model_a = source.get(args.model, args.model)
        evaluation = sample_and_judge(model_a, problems, args, judge, f" (model {args.model})")
        correct, statuses = evaluation.accepted(), dict(evaluation.statuses)
        if args.baseline is not None and baseline_file is None:
            model_b = source.get(args.baseline, args.baseline)
            b_eval = sample_and_judge(model_b, problems, args, judge, f" (baseline {args.baseline})")
            baseline_counts = b_eval.accepted(), dict(b_eval.statuses)
    table = passk_by_bucket(correct, buckets, args.n, ks)
    ci95 = ci_by_bucket(correct, buckets, args.n, ks, seed=args.seed)
    print_table(table, ci95, ks)
    print("verdicts: " + ", ".join(f"{s} {n}" for s, n in sorted(statuses.items(), key=lambda x: -x[1])))
    result: dict[str, Any] = {
        "model": args.model,
        "dataset": args.dataset,
        "n": args.n,
        "ks": ks,
        "buckets": table,
        "verdicts": statuses,
        "seconds": round(time.monotonic() - start, 1),
        "ci95": ci95,
        "per_problem": correct,
        "sampling": sampling_info,
    }
    if args.turns > 1:
        from codefu.orchestrator.evaluation import turn_report

        result["turns"] = turn_report(evaluation.episodes, args.turns, seed=args.seed)
        for line in format_turns(result["turns"]):
            print(line)
    if args.baseline is not None:
        if baseline_file is not None:
            b_counts, b_n = baseline_file["per_problem"], baseline_file["n"]
            b_model, b_result = baseline_file.get("model"), None
        else:
            b_counts, b_statuses = baseline_counts
            b_n, b_model = args.n, args.baseline
            b_table = passk_by_bucket(b_counts, buckets, args.n, ks)
            b_ci95 = ci_by_bucket(b_counts, buckets, args.n, ks, seed=args.seed)
            print(f"baseline {args.baseline}:")
            print_table(b_table, b_ci95, ks)
            b_result = {
                "model": args.baseline,
                "dataset": args.dataset,
                "n": args.n,
                "ks": ks,
                "buckets": b_table,
                "verdicts": b_statuses,
                "ci95": b_ci95,
                "per_problem": b_counts,
                "sampling": sampling_info,
            }
        comparison = {"baseline": args.baseline, "baseline_model": b_model, "baseline_n": b_n}
        comparison |= compare(correct, args.n, b_counts, b_n, ks, seed=args.seed)
        print(f"A = {args.model}, B = {args.baseline}")
        if comparison["only_a"] or comparison["only_b"]:
            print(
                f"compared on the {comparison['problems']} problems both have: {comparison['only_a']} "
                f"evaluated here only, {comparison['only_b']} in the baseline only"
            )
        for line in format_comparison(comparison, ks):
            print(line)
        if b_result is not None:
            comparison["baseline_result"] = b_result
        result["comparison"] = comparison
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return 0
