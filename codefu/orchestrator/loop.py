"""The GRPO loop, top to bottom: prompts → samples → scores → advantages → update → weight sync.

One driver process (the single controller) calls the role actors; everything it computes itself is a
pure function of their answers. Step t's sampling seed is derived from (seed, t), so a resumed run
draws the same samples it would have drawn without the interruption.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import ray
import torch
from tqdm import tqdm

from codefu.algo.advantages import gae
from codefu.algo.aggregation import masked_mean
from codefu.algo.estimators import sequence_advantages
from codefu.algo.kl import kl_penalty
from codefu.algo.shaping import outcome_token_rewards, overlong_penalty, turn_shaping
from codefu.algo.value_loss import explained_variance
from codefu.data.difficulty import PassRateRecord
from codefu.data.loader import training_loader
from codefu.errors import CodefuError
from codefu.observability import metrics as M
from codefu.observability.metrics import StepTimer, source_metrics, summary_stats, verdict_metrics
from codefu.observability.passk import passk_metrics_with_ci
from codefu.observability.setup import open_sinks
from codefu.observability.sinks import MetricsSink, MultiSink
from codefu.orchestrator.batching import completions_to_batch, mixed_groups
from codefu.orchestrator.config import AlgoConfig, RunConfig
from codefu.orchestrator.episodes import (
    Episode,
    EpisodeFeed,
    EpisodePlan,
    Turn,
    episode_metrics,
    run_episodes,
    run_episodes_async,
    turn_in_sequence,
)
from codefu.orchestrator.evaluation import sample_and_score, turn_metrics
from codefu.orchestrator.roles import Roles
from codefu.orchestrator.scoring import Feedback, Score, Scorer
from codefu.rollout.metrics import logprob_mismatch
from codefu.rollout.prompts import encode_prompt
from codefu.rollout.types import Completion, SamplingParams
from codefu.trainer.batch import Batch
from codefu.trainer.checkpoint import EXPORT_MARKER, latest_checkpoint
from codefu.types import Problem

log = logging.getLogger(__name__)


@dataclass
class Sampled:
    """One step's kept samples: completions, their problems and scores, and their GRPO groups. A sample is
    an episode (of one turn unless rollout.turns > 1); its completion is what the trainer sees."""

    completions: list[Completion] = field(default_factory=list)
    episodes: list[Episode] = field(default_factory=list)  # the completions' episodes
    problems: list[Problem] = field(default_factory=list)
    scores: list[Score] = field(default_factory=list)
    groups: list[int] = field(default_factory=list)
    all_scores: list[Score] = field(default_factory=list)  # before dynamic sampling dropped any
    all_problems: list[Problem] = field(default_factory=list)  # the owner of each of all_scores
    all_episodes: list[Episode] = field(default_factory=list)  # the episode of each of all_scores
    generated_tokens: int = 0  # tokens the model wrote in every episode, dropped ones included
    judge_busy_s: float = 0.0  # seconds the judge had a submission of this step awaiting its verdict


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
    roles = Roles(cfg)
    difficulty = PassRateRecord(cfg.data.difficulty) if cfg.data.difficulty.enabled else None
    loader = training_loader(train_problems, cfg.data.train, cfg.data.seed, difficulty)  # one or a mix
    start = 0
    if checkpoint is not None:
        extra = roles.load(str(checkpoint))
        loader.load_state_dict(extra["loader"])
        start = int(extra["step"])
        roles.sync_weights()
        log.info("resumed from %s at step %d", checkpoint, start)
    sink = (
        MultiSink(sinks)
        if sinks
        else open_sinks(cfg.observability, run_dir, start, cfg.loop.steps, run_config=cfg, out=tqdm.write)
    )
    end = cfg.loop.steps if max_steps is None else min(cfg.loop.steps, start + max_steps)
    metrics: dict[str, float] = {}
    try:
        for step in tqdm(range(start, end), initial=start, total=cfg.loop.steps, unit="step", disable=None):
            timer = StepTimer()
            sampled = sample_step(cfg, roles, scorer, loader, encode, plan, step, timer)
            loader.record(pass_counts(sampled.all_problems, sampled.all_scores))
            metrics = step_metrics(sampled, plan.turns) | loader.difficulty_metrics() | roles.memory_metrics
            metrics |= source_metrics(sampled.all_problems, sampled.all_scores)  # data/pass_rate/<source>
            if sampled.completions:
                metrics |= update_step(cfg, roles, sampled, timer, step)
            metrics |= timer.metrics()
            last = step + 1 == end
            if cfg.loop.val_every and ((step + 1) % cfg.loop.val_every == 0 or last) and val_problems:
                metrics |= validate(cfg, roles, scorer, val_problems, encode, plan)
            sink.write(step + 1, metrics)
            finished = step + 1 == cfg.loop.steps
            if finished:
                roles.export_hf(str(run_dir / FINAL_MODEL))  # loads in plain transformers
            if finished and not cfg.loop.keep_final_state:
                roles.drop_checkpoints(str(run_dir / "checkpoints"))
            elif last or (cfg.loop.save_every and (step + 1) % cfg.loop.save_every == 0):
                state = {"loader": loader.state_dict(), "step": step + 1}
                saved = roles.save(str(run_dir / "checkpoints"), step + 1, state)
                if cfg.loop.hf_export == "every_save":
                    roles.export_hf(str(Path(saved) / "hf"))
    finally:
        sink.close()
        roles.close()
    return metrics


def sample_step(
    cfg, roles: Roles, scorer: Scorer, loader, encode, plan: EpisodePlan, step: int, timer: StepTimer
) -> Sampled:
    """n samples (episodes: codefu.orchestrator.episodes) for each of the step's prompts, scored; with
    dynamic sampling, groups whose samples all pass or all fail are dropped and more prompts sampled, for
    up to max_sampling_rounds rounds."""
    out = Sampled()
    busy_before = scorer.busy_s
    want = cfg.data.prompts_per_step
    rounds = cfg.algo.max_sampling_rounds if cfg.algo.dynamic_sampling else 1
    for r in range(rounds):
        problems = loader.next_batch(want if r == 0 else want - len(set(out.groups)))
        if not problems:
            break
        sampling = sampling_params(cfg, cfg.rollout.n, seed=cfg.loop.seed * 1_000_003 + step * 101 + r)
        prompts = [encode(p) for p in problems]
        episodes, scores = scored_episodes(cfg, problems, prompts, sampling, plan, roles, scorer, timer)
        completions = [e.completion() for e in episodes]
        owners = [problems[c.prompt_index] for c in completions]
        out.generated_tokens += sum(c.model_tokens for c in completions)
        groups = [r * want + c.prompt_index for c in completions]
        out.all_scores += scores
        out.all_problems += owners
        out.all_episodes += episodes
        keep = mixed_groups([s.passed for s in scores], groups) if cfg.algo.dynamic_sampling else set(groups)
        for c, e, p, s, g in zip(completions, episodes, owners, scores, groups, strict=True):
            if g in keep:
                out.completions.append(c)
                out.episodes.append(e)
                out.problems.append(p)
                out.scores.append(s)
                out.groups.append(g)
        if len(set(out.groups)) >= want:
            break
    out.judge_busy_s = scorer.busy_s - busy_before
    return out


def scored_episodes(
    cfg: RunConfig,
    problems: list[Problem],
    prompts: list[list[int]],
    sampling: SamplingParams,
    plan: EpisodePlan,
    roles: Roles,
    scorer: Scorer,
    timer: StepTimer,
) -> tuple[list[Episode], list[Score]]:
    """The episodes of one sampling round in (prompt, sample) order (of one turn each unless
    rollout.turns > 1), each with the score of its last program on the hidden tests."""
    if plan.turns == 1 and cfg.loop.overlap_judge:  # the hidden tests while decoding
        completions, scores = judged_as_they_finish(
            problems, prompts, sampling, roles, scorer.score_stream, timer
        )
        return [Episode(c.prompt_index, c.sample_index, c.prompt_ids, [c]) for c in completions], scores
    if plan.turns > 1 and cfg.rollout.async_turns:  # each turn checked, the next started, the last scored
        return episodes_as_they_finish(problems, prompts, sampling, plan, roles, scorer, timer)
    if cfg.loop.overlap_judge:  # each turn's public tests while it decodes
        turn = turn_judged_while_decoding(roles, scorer, timer)
    else:
        turn = turn_in_sequence(
            _timed(timer, "generate", roles.generate), _timed(timer, "judge", scorer.check_public)
        )
    with roles.generating():  # one phase for every turn: memory moves once
        episodes = run_episodes(problems, prompts, sampling, plan, turn)
    with timer.phase("judge"):  # the last program of each episode, on the hidden tests
        scores = scorer.score([problems[e.prompt_index] for e in episodes], [e.final.text for e in episodes])
    return episodes, scores


Judged = TypeVar("Judged")


def judged_as_they_finish(
    owners: list[Problem],
    prompts: list[list[int]],
    sampling: SamplingParams,
    roles: Roles,
    judge: Callable[[Iterable[tuple[Problem, str]]], list[Judged]],
    timer: StepTimer,
) -> tuple[list[Completion], list[Judged]]:
    """`sampling.n` responses to each prompt (owners[i]'s problem is prompts[i]'s), each handed to `judge`
    (a scorer's `score_stream` or `check_public_stream`) the moment the engine finishes it (continuous
    batching finishes them at different steps), so the judge works while the rest decode. Returns the
    completions in (prompt, sample) order with what the judge made of each; times the phases generate (to
    the last token) and judge_tail (what judging adds after it)."""
    arrived: list[Completion] = []

    def arrivals() -> Iterator[tuple[Problem, str]]:  # pulled on the judge's arrivals thread
        nonlocal last_token
        for batch in roles.generate_stream(prompts, sampling):
            last_token = time.perf_counter()
            for c in batch:
                arrived.append(c)
                yield owners[c.prompt_index], c.text

    with roles.generating():  # here, not on the arrivals thread: memory moves outside the timed phases
        start = last_token = time.perf_counter()
        judged = judge(arrivals())
        timer.add("generate", last_token - start)
        timer.add("judge_tail", time.perf_counter() - last_token)
    order = sorted(range(len(arrived)), key=lambda k: (arrived[k].prompt_index, arrived[k].sample_index))
    return [arrived[k] for k in order], [judged[k] for k in order]


def turn_judged_while_decoding(roles: Roles, scorer: Scorer, timer: StepTimer) -> Turn:
    """A self-repair `Turn` whose public-test checks run as each completion finishes."""

    def turn(
        prompts: list[list[int]], sampling: SamplingParams, owners: list[Problem] | None
    ) -> tuple[list[Completion], list[Feedback] | None]:
        if owners is None:  # the last turn: nothing to check
            with timer.phase("generate"):
                return roles.generate(prompts, sampling), None
        return judged_as_they_finish(owners, prompts, sampling, roles, scorer.check_public_stream, timer)

    return turn


def episodes_as_they_finish(
    problems: list[Problem],
    prompts: list[list[int]],
    sampling: SamplingParams,
    plan: EpisodePlan,
    roles: Roles,
    scorer: Scorer,
    timer: StepTimer,
) -> tuple[list[Episode], list[Score]]:
    """Self-repair episodes without the lock-step (rollout.async_turns), each scored on the hidden tests
    as it ends, while others still run. Returns the episodes in (prompt, sample) order and their scores;
    times generate (to the last token) and judge_tail (the checks and scores after it)."""
    ended = EpisodeFeed(problems)
    with ThreadPoolExecutor(1, thread_name_prefix="codefu-scores") as pool:
        scoring = pool.submit(scorer.score_stream, ended)
        try:
            with roles.conversations(prompts, sampling) as conversations:
                start = time.perf_counter()
                episodes = run_episodes_async(
                    problems, sampling, plan, conversations, scorer.check_public_each, ended.put
                )
                ended.end()
                scored = scoring.result()
                end = time.perf_counter()  # before the phase's memory moves, as judged_as_they_finish
                last_token = max(conversations.last_batch_at, start)
        finally:
            ended.end()  # (again: a second end is never read) the scorer's input ends on any error
    timer.add("generate", last_token - start)
    timer.add("judge_tail", end - last_token)
    by_episode = {id(e): s for e, s in zip(ended.given, scored, strict=True)}
    return episodes, [by_episode[id(e)] for e in episodes]


def update_step(
    cfg: RunConfig, roles: Roles, sampled: Sampled, timer: StepTimer, step: int
) -> dict[str, float]:
    a = cfg.algo
    rewards = torch.tensor([s.reward if s.reward is not None else 0.0 for s in sampled.scores])
    valid = torch.tensor([s.reward is not None for s in sampled.scores])
    groups = torch.tensor(sampled.groups)
    lengths = torch.tensor([c.model_tokens for c in sampled.completions])  # the trained tokens
    metrics: dict[str, float] = {}
    if a.overlong_buffer:  # on the last response: each turn has its max_new_tokens
        last = torch.tensor([e.final.num_tokens for e in sampled.episodes])
        penalty = overlong_penalty(last, cfg.rollout.max_new_tokens, a.overlong_buffer, a.overlong_penalty)
        rewards = rewards + torch.where(valid, penalty, 0.0)
        metrics["reward/overlong_penalty"] = float(penalty[valid].mean()) if valid.any() else 0.0
    if a.turn_cost or a.first_turn_bonus:
        turns = torch.tensor([e.turns for e in sampled.episodes])
        passed = torch.tensor([s.passed for s in sampled.scores])
        shaping = turn_shaping(turns, passed, a.turn_cost, a.first_turn_bonus)
        rewards = rewards + torch.where(valid, shaping, 0.0)
        metrics["reward/turn_shaping"] = float(shaping[valid].mean()) if valid.any() else 0.0
    with_critic = a.estimator == "ppo"
    if with_critic:  # per-token advantages come from the critic's values below
        advantages = torch.zeros(len(rewards))
    else:
        advantages = sequence_advantages(
            a.estimator, rewards, groups, valid, lengths, a.norm_by_std, a.adv_eps
        )
        metrics["policy/advantage_abs_mean"] = float(advantages.abs().mean())
    batch = completions_to_batch(sampled.completions, advantages, valid)
    recompute = behaviour_logprobs(cfg, batch)
    with timer.phase("train"):
        batch_ref = ray.put(batch)
        if recompute:
            trainer_lp = roles.logprobs(batch_ref)
            metrics |= logprob_mismatch(batch.old_logprobs, trainer_lp, batch.response_mask)
            batch.old_logprobs = trainer_lp  # the trainer's own numbers: ratio 1 at the first mini-batch
        if roles.reference is not None:
            batch.ref_logprobs = roles.logprobs(batch_ref, reference=True)
    if with_critic:
        with timer.phase("critic"):
            metrics |= gae_targets(a, batch, rewards, roles.values(batch_ref))
            batch_ref = ray.put(batch)  # one object for both updates
            metrics |= roles.update_critic(batch_ref)
        if step < cfg.critic.pretrain_steps:
            return metrics  # the policy waits for the critic: no update, nothing to sync
    with timer.phase("train"):
        metrics |= roles.update(batch_ref if with_critic else batch)
    with timer.phase("sync"):
        roles.sync_weights()
    return metrics


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


def pass_counts(problems: list[Problem], scores: list[Score]) -> dict[str, tuple[int, int]]:
    """{problem name: (accepted samples, judged samples)}; samples without a reward (the judge's own
    errors) are not counted."""
    out: dict[str, tuple[int, int]] = {}
    for p, s in zip(problems, scores, strict=True):
        accepted, judged = out.get(p.name, (0, 0))
        counted = s.reward is not None
        out[p.name] = (accepted + int(counted and s.passed), judged + int(counted))
    return out


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
    return m | episode_metrics(sampled.all_episodes, scores, turns)


def validate(
    cfg: RunConfig, roles: Roles, scorer: Scorer, problems, encode, plan: EpisodePlan
) -> dict[str, float]:
    n = cfg.loop.val_n
    sampling = sampling_params(cfg, n, seed=cfg.loop.seed + 7)
    with roles.generating():
        result = sample_and_score(
            problems, encode, roles.generate, scorer, sampling, label=" (validation)", plan=plan
        )
    # eval/pass@k with eval/pass@k_ci_low, _ci_high: 95% bootstrap over problems (the last programs)
    out = passk_metrics_with_ci(result.passed, sorted({1, n}), seed=cfg.loop.seed)
    out["eval/reward_mean"] = sum(result.rewards) / max(1, len(result.rewards))
    return out | turn_metrics(result, seed=cfg.loop.seed)  # eval/turn{t}_pass@1 with self-repair


def sampling_params(cfg: RunConfig, n: int, seed: int) -> SamplingParams:
    r = cfg.rollout
    return SamplingParams(
        n=n,
        temperature=r.temperature,
        top_p=r.top_p,
        top_k=r.top_k,
        max_new_tokens=r.max_new_tokens,
        seed=seed,
        stop_token_ids=tuple(r.stop_token_ids),
    )


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


def _timed(timer: StepTimer, phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` with its calls' time added to `phase` of the step's timer."""

    def timed(*args: Any) -> Any:
        with timer.phase(phase):
            return fn(*args)

    return timed


def _prompt_cache(tokenizer: Any) -> Callable[[Problem], list[int]]:
    cache: dict[int, list[int]] = {}

    def encode(problem: Problem) -> list[int]:
        key = id(problem)
        if key not in cache:
            cache[key] = encode_prompt(tokenizer, problem)
        return cache[key]

    return encode
