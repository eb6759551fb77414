"""The GRPO loop, top to bottom: sample → advantages → update → weight sync → log.

One driver process (the single controller) calls the role actors; everything it computes itself is a
pure function of their answers. How a step's samples are made (one turn, or self-repair turns in
lock-step or each at its own pace) is the sampler's (codefu.orchestrator.samplers), chosen once from the
config. Step t's sampling seed is derived from (seed, t), so a resumed run draws the same samples it would
have drawn without the interruption.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray
import torch
from tqdm import tqdm

from codefu.algo.advantages import gae
from codefu.algo.aggregation import masked_mean
from codefu.algo.estimators import sequence_advantages
from codefu.algo.kl import kl_penalty
from codefu.algo.shaping import outcome_token_rewards, shaped_rewards
from codefu.algo.value import explained_variance
from codefu.data.difficulty import PassRateRecord
from codefu.data.loader import MixedLoader, ProblemLoader, training_loader
from codefu.errors import CodefuError
from codefu.observability import metrics as M
from codefu.observability.metrics import StepTimer, source_metrics, summary_stats, verdict_metrics
from codefu.observability.passk import passk_metrics_with_ci
from codefu.observability.setup import open_sinks
from codefu.observability.sinks import MetricsSink, MultiSink
from codefu.orchestrator.batching import completions_to_batch
from codefu.orchestrator.config import AlgoConfig, RunConfig
from codefu.orchestrator.episodes import EpisodePlan, episode_metrics
from codefu.orchestrator.evaluation import sample_and_score, turn_metrics
from codefu.orchestrator.off_policy import OffPolicySampler
from codefu.orchestrator.partial_rollouts import OverProvisionedSampler
from codefu.orchestrator.roles import Roles
from codefu.orchestrator.samplers import (
    AsyncTurnsSampler,
    LockStepTurnsSampler,
    OnPolicySampler,
    Sampled,
    Sampler,
    SingleTurnSampler,
    sampling_params,
)
from codefu.orchestrator.scoring import Scorer
from codefu.rollout.metrics import logprob_mismatch
from codefu.rollout.prompts import encode_prompt
from codefu.trainer.batch import Batch
from codefu.trainer.checkpoint import EXPORT_MARKER, latest_checkpoint
from codefu.types import Problem

log = logging.getLogger(__name__)

FINAL_MODEL = "model"  # RUN_DIR/model: the run's final model in HF format


def resume_point(run_dir: Path) -> Path | None:
    """The checkpoint a session in `run_dir` continues from; None: there is none (a new run). CodefuError
    for a finished run that kept no resumable state."""
    checkpoint = latest_checkpoint(run_dir / "checkpoints")
    if checkpoint is None and (run_dir / FINAL_MODEL / EXPORT_MARKER).exists():
        raise CodefuError(
            f"{run_dir} is a finished run that kept no resumable state (loop.keep_final_state: false); "
            f"its model is {run_dir / FINAL_MODEL}: start a new run from it (trainer.model) to train on"
        )
    return checkpoint


def train(
    cfg: RunConfig,
    run_dir: Path,
    train_problems: list[Problem],
    val_problems: list[Problem],
    tokenizer: Any,
    scorer: Scorer,
    max_steps: int | None = None,
    sinks: list[MetricsSink] | None = None,
) -> dict[str, float]:
    """Train for cfg.loop.steps (or until max_steps this session); resumes from run_dir's last checkpoint.
    Returns the last step's metrics."""
    encode = _prompt_cache(tokenizer)
    plan = EpisodePlan.of(cfg.rollout, tokenizer)
    train_problems = fit_prompts(train_problems, encode, cfg.data.max_prompt_tokens, "training")
    val_problems = fit_prompts(val_problems, encode, cfg.data.max_prompt_tokens, "validation")
    checkpoint = resume_point(run_dir)
    with contextlib.ExitStack() as cleanup:  # whatever fails, the run's actors and resources go back
        given = MultiSink(sinks) if sinks else None  # the caller's sinks, open already: closed here too
        if given is not None:
            cleanup.callback(given.close)
        roles = Roles(cfg)
        cleanup.callback(roles.close)
        difficulty = PassRateRecord(cfg.data.difficulty) if cfg.data.difficulty.enabled else None
        loader = training_loader(train_problems, cfg.data.train, cfg.data.seed, difficulty)  # one or a mix
        start, extra = 0, None
        if checkpoint is not None:
            extra = roles.load(str(checkpoint))
            start = int(extra["step"])
            roles.sync_weights(version=start)  # the policy after `start` steps is version `start`
            log.info("resumed from %s at step %d", checkpoint, start)
        end = cfg.loop.steps if max_steps is None else min(cfg.loop.steps, start + max_steps)
        sampler = make_sampler(cfg, roles, scorer, loader, encode, plan, end)  # how samples are made
        cleanup.callback(sampler.close)
        if extra is not None:
            sampler.load_state(extra, train_problems)  # the loader, and any groups carried into step `start`
        sink = given
        if sink is None:
            sink = open_sinks(
                cfg.observability, run_dir, start, cfg.loop.steps, run_config=cfg, out=tqdm.write
            )
            cleanup.callback(sink.close)
        metrics: dict[str, float] = {}
        for step in tqdm(range(start, end), initial=start, total=cfg.loop.steps, unit="step", disable=None):
            timer = StepTimer()
            sampled = sampler.sample(step, timer)  # the step's prompts, sampled and scored
            metrics = step_metrics(sampled, plan.turns)
            metrics |= source_metrics(sampled.all_problems, sampled.all_scores)  # data/pass_rate/<source>
            changed = False
            if sampled.completions:
                batch, rewards, shaping = batch_with_advantages(cfg, sampled)
                metrics |= shaping | update(cfg, roles, batch, rewards, timer, step)
                changed = policy_trains(cfg, step)
            sampler.sync_weights(step + 1, changed, timer)  # version step + 1: the policy after this step
            metrics |= timer.metrics()
            last = step + 1 == end
            if cfg.loop.val_every and ((step + 1) % cfg.loop.val_every == 0 or last) and val_problems:
                with sampler.latest_weights():
                    metrics |= validate(cfg, roles, scorer, val_problems, encode, plan)
            sink.write(step + 1, metrics)
            save_state(cfg, roles, sampler, run_dir, step + 1, last)
    return metrics


def make_sampler(
    cfg: RunConfig,
    roles: Roles,
    scorer: Scorer,
    loader: ProblemLoader | MixedLoader,
    encode: Callable[[Problem], list[int]],
    plan: EpisodePlan,
    end: int,
) -> Sampler:
    """The run's way of sampling, from rollout.turns, rollout.async_turns and loop.mode (see the samplers'
    module docstring), for steps before `end` (this session's last)."""
    if plan.turns == 1:
        kind: type[OnPolicySampler] = SingleTurnSampler
        if cfg.loop.over_provision > 0:  # partial rollouts (APRIL): the first groups to finish train
            kind = OverProvisionedSampler
    else:
        kind = AsyncTurnsSampler if cfg.rollout.async_turns else LockStepTurnsSampler
    sampler = kind(cfg, roles, scorer, loader, encode, plan)
    if cfg.loop.mode == "sync":
        return sampler
    # async: new weights reach the engines mid-generation (partial rollouts); one_step_off: between steps
    return OffPolicySampler(sampler, cfg.loop.staleness_bound, end, mid_generation=cfg.loop.mode == "async")


def batch_with_advantages(cfg: RunConfig, sampled: Sampled) -> tuple[Batch, torch.Tensor, dict[str, float]]:
    """The trainer's `Batch` of the step's kept samples with an advantage each from their rewards (shaped:
    codefu.algo.shaping) by algo.estimator, or zeros with PPO (its per-token advantages come from the
    critic in `update`); the shaped rewards (PPO's GAE reads them); metrics."""
    a = cfg.algo
    rewards = torch.tensor([s.reward if s.reward is not None else 0.0 for s in sampled.scores])
    valid = torch.tensor([s.reward is not None for s in sampled.scores])
    last = torch.tensor([e.final.num_tokens for e in sampled.episodes])  # each turn has its max_new_tokens
    turns = torch.tensor([e.turns for e in sampled.episodes])
    passed = torch.tensor([s.passed for s in sampled.scores])
    rewards, metrics = shaped_rewards(rewards, valid, last, turns, passed, a, cfg.rollout.max_new_tokens)
    if a.estimator == "ppo":  # per-token advantages come from the critic's values (update)
        advantages = torch.zeros(len(rewards))
    else:
        groups = torch.tensor(sampled.groups)
        lengths = torch.tensor([c.model_tokens for c in sampled.completions])  # the trained tokens
        advantages = sequence_advantages(
            a.estimator, rewards, groups, valid, lengths, a.norm_by_std, a.adv_eps
        )
        metrics["policy/advantage_abs_mean"] = float(advantages.abs().mean())
    return completions_to_batch(sampled.completions, advantages, valid), rewards, metrics


def update(
    cfg: RunConfig, roles: Roles, batch: Batch, rewards: torch.Tensor, timer: StepTimer, step: int
) -> dict[str, float]:
    """The trainer's passes on `batch`: pi_old's log-probs (algo.recompute_logprobs) and the reference's;
    with PPO the critic's values, GAE's targets and the critic's update; then the policy's update, unless
    the critic trains alone (`policy_trains`). Returns the metrics."""
    a = cfg.algo
    metrics: dict[str, float] = {}
    with_critic = a.estimator == "ppo"
    recompute = behaviour_logprobs(cfg, batch)
    with timer.phase("train"):
        batch_ref = ray.put(batch)
        if recompute:
            trainer_lp = roles.logprobs(batch_ref)
            metrics |= logprob_mismatch(batch.old_logprobs, trainer_lp, batch.response_mask)
            batch.old_logprobs = trainer_lp  # the trainer's own numbers: ratio 1 at the first mini-batch
        if roles.kl:
            batch.ref_logprobs = roles.logprobs(batch_ref, reference=True)
    if with_critic:
        with timer.phase("critic"):
            metrics |= gae_targets(a, batch, rewards, roles.values(batch_ref))
            batch_ref = ray.put(batch)  # one object for both updates
            metrics |= roles.update_critic(batch_ref)
    if not policy_trains(cfg, step):
        return metrics  # the policy waits for the critic: no update, nothing to sync
    with timer.phase("train"):
        metrics |= roles.update(batch_ref if with_critic else batch)
    return metrics


def policy_trains(cfg: RunConfig, step: int) -> bool:
    """Whether step `step` updates the policy (and so syncs its weights): not in PPO's first
    critic.pretrain_steps steps, where the critic trains alone."""
    return cfg.algo.estimator != "ppo" or step >= cfg.critic.pretrain_steps


def save_state(cfg: RunConfig, roles: Roles, sampler: Sampler, run_dir: Path, done: int, last: bool) -> None:
    """After `done` steps: at the run's end the final model (and, without loop.keep_final_state, no
    checkpoint); else a checkpoint every loop.save_every steps and at this session's `last` step."""
    finished = done == cfg.loop.steps
    if finished:
        # a plain HF model, or with trainer.lora.export adapter PEFT's adapter folder (codefu eval merges
        # it into its base); either way with the export marker that resume_point looks for
        roles.export_hf(str(run_dir / FINAL_MODEL))
    if finished and not cfg.loop.keep_final_state:
        roles.drop_checkpoints(str(run_dir / "checkpoints"))
    elif last or (cfg.loop.save_every and done % cfg.loop.save_every == 0):
        state = sampler.state() | {"step": done}  # as of step `done`, the next to train
        saved = roles.save(str(run_dir / "checkpoints"), done, state)
        if cfg.loop.hf_export == "every_save":
            roles.export_hf(str(Path(saved) / "hf"))


def behaviour_logprobs(cfg: RunConfig, batch: Batch) -> bool:
    """Sets up the batch's sampling-policy log-probs (`batch.old_logprobs` holds the engine's): with a
    rollout correction they become `rollout_logprobs`, and without the recompute pass `old_logprobs` is
    cleared (the update's own forward is pi_old, TrainerWorker). Returns whether the trainer must
    recompute pi_old (algo.recompute_logprobs)."""
    if cfg.trainer.rollout_correction != "none":
        batch.rollout_logprobs = batch.old_logprobs  # the engine's: the importance weights' denominator
        if not cfg.algo.recompute_logprobs:
            batch.old_logprobs = None  # no extra pass
    return cfg.algo.recompute_logprobs


def gae_targets(a: AlgoConfig, batch: Batch, rewards: torch.Tensor, values: torch.Tensor) -> dict[str, float]:
    """PPO's targets from the critic's `values` (B, T): GAE advantages per token, the critic's returns,
    and its values at sampling time, set on `batch`; the outcome reward sits on each response's last
    token, and with algo.kl_reward_coef every token pays its KL to the reference. Returns metrics."""
    mask = batch.response_mask
    kl = None
    if a.kl_reward_coef > 0:
        behaviour = batch.old_logprobs if batch.old_logprobs is not None else batch.rollout_logprobs
        assert batch.ref_logprobs is not None and behaviour is not None
        kl = kl_penalty(behaviour, batch.ref_logprobs, "k1")
    token_rewards = outcome_token_rewards(rewards, mask, kl, a.kl_reward_coef)
    advantages, returns = gae(token_rewards, values, mask, a.gamma, a.lam)
    batch.advantages, batch.old_values, batch.returns = advantages.float(), values.float(), returns.float()
    on = mask != 0
    metrics = {
        "critic/values_mean": float(masked_mean(values, on)),
        "critic/returns_mean": float(masked_mean(returns, on)),
        "critic/vf_explained_var": explained_variance(values, returns, mask),
        "policy/advantage_abs_mean": float(masked_mean(advantages.abs(), on)),
    }
    if kl is not None:
        metrics["reward/kl_in_reward"] = float(masked_mean(kl, on))
    return metrics


def step_metrics(sampled: Sampled, turns: int = 1) -> dict[str, float]:
    scores = sampled.all_scores
    rewards = [s.reward for s in scores if s.reward is not None]
    m: dict[str, float] = {
        M.REWARD_MEAN: sum(rewards) / len(rewards) if rewards else float("nan"),
        "rollout/samples": float(len(scores)),
        "rollout/kept_samples": float(len(sampled.completions)),
        M.RESPONSE_TOKENS: float(sampled.generated_tokens),
    }
    m |= verdict_metrics(s.status for s in scores)
    m[M.JUDGE_REUSED] = sum(s.reused for s in scores) / len(scores) if scores else 0.0
    if sampled.judge_busy_s > 0:  # a scorer without a judge has no busy time (judge/submissions_per_s)
        m[M.JUDGE_BUSY] = sampled.judge_busy_s
    if sampled.completions:
        lengths = [c.model_tokens for c in sampled.completions]  # the model's tokens, over every turn
        m |= summary_stats(lengths, "rollout/response_len_")  # mean, std, min, max
        m["rollout/stop_frac"] = sum(c.finish_reason == "stop" for c in sampled.completions) / len(lengths)
    return m | episode_metrics(sampled.all_episodes, scores, turns) | sampled.metrics


def validate(
    cfg: RunConfig, roles: Roles, scorer: Scorer, problems, encode, plan: EpisodePlan
) -> dict[str, float]:
    n = cfg.loop.val_n
    sampling = sampling_params(cfg, n, seed=cfg.loop.seed + 7)
    with roles.rollout.deaths_named("validate"), roles.generating():
        result = sample_and_score(
            problems, encode, roles.generate, scorer, sampling, label=" (validation)", plan=plan
        )
    # eval/pass@k with eval/pass@k_ci_low, _ci_high: 95% bootstrap over problems (the last programs)
    out = passk_metrics_with_ci(result.passed, sorted({1, n}), seed=cfg.loop.seed)
    out["eval/reward_mean"] = sum(result.rewards) / max(1, len(result.rewards))
    return out | turn_metrics(result, seed=cfg.loop.seed)  # eval/turn{t}_pass@1 with self-repair


def fit_prompts(
    problems: list[Problem], encode: Callable[[Problem], list[int]], max_tokens: int | None, split: str
) -> list[Problem]:
    """The problems whose encoded prompt has at most `max_tokens` tokens (verl's filter_overlong_prompts:
    a cut prompt would lose the statement's end). Logs what it drops; none left is an error."""
    if max_tokens is None or not problems:
        return problems
    kept = [p for p in problems if len(encode(p)) <= max_tokens]
    if len(kept) < len(problems):
        log.warning(
            "%d of %d %s problems have prompts over data.max_prompt_tokens=%d tokens: skipped",
            len(problems) - len(kept),
            len(problems),
            split,
            max_tokens,
        )
    if not kept:
        raise CodefuError(f"data.max_prompt_tokens={max_tokens}: no {split} problem's prompt fits")
    return kept


def _prompt_cache(tokenizer: Any) -> Callable[[Problem], list[int]]:
    cache: dict[int, list[int]] = {}

    def encode(problem: Problem) -> list[int]:
        key = id(problem)
        if key not in cache:
            cache[key] = encode_prompt(tokenizer, problem)
        return cache[key]

    return encode
