"""How a step's samples are made: the step's prompts → episodes from the rollout workers → scores from the
judge, as one `Sampled` for the loop, which does not know how they were made.

One `Sampler` per way of sampling, chosen once from the config (codefu.orchestrator.loop.make_sampler):

    SingleTurnSampler      one response per sample (rollout.turns: 1), judged on the hidden tests as each
                           finishes (loop.overlap_judge) or once all are written
    LockStepTurnsSampler   self-repair episodes (codefu.orchestrator.episodes), each turn of the batch
                           generated and checked on the public tests before the next starts
                           (rollout.async_turns: false); the last programs scored after
    AsyncTurnsSampler      self-repair episodes, each turn started as soon as its check is back and each
                           episode scored as it ends (rollout.async_turns, the default)

All three sample the step's prompts with the current weights (`OnPolicySampler`: seeds from (seed, step,
round); with dynamic sampling, more rounds while groups are dropped). With loop.mode one_step_off or async,
`OffPolicySampler` runs one of them on a thread of its own, ahead of training by at most
loop.max_staleness policy versions (codefu.orchestrator.off_policy).

Not codefu.rollout.sampling, which draws one token from the logits.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from codefu.data.loader import MixedLoader, ProblemLoader
from codefu.observability.metrics import StepTimer
from codefu.orchestrator.batching import mixed_groups
from codefu.orchestrator.config import RunConfig
from codefu.orchestrator.episodes import (
    Episode,
    EpisodeFeed,
    EpisodePlan,
    Turn,
    run_episodes,
    run_episodes_async,
    turn_in_sequence,
)
from codefu.orchestrator.roles import Roles
from codefu.orchestrator.scoring import Feedback, Score, Scorer
from codefu.rollout.types import Completion, SamplingParams
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
    # the sampler's own: difficulty, staleness, the generation phase's memory moves and engine numbers
    metrics: dict[str, float] = field(default_factory=dict)


class Sampler(Protocol):
    """What the loop asks of the way samples are made: each step's scored samples, told of each new policy."""

    def sample(self, step: int, timer: StepTimer) -> Sampled:
        """Step `step`'s scored samples, the loader's difficulty record told how its problems fared; the
        phases' times go to `timer` (generate, judge or judge_tail)."""
        ...

    def sync_weights(self, version: int, changed: bool, timer: StepTimer) -> None:
        """The trainer's policy is `version` now (the steps done); `changed`: the step updated it (else its
        weights are those of the version before). The time the caller waits goes to `timer` (sync)."""
        ...

    def latest_weights(self) -> AbstractContextManager[None]:
        """A block in which the rollout workers hold the trainer's newest weights and sample nothing else
        (validation)."""
        ...

    def state(self) -> dict[str, Any]:
        """What a checkpoint keeps of the sampling, as of the next step to train: the loader's state under
        "loader" (a resumed run draws that step's prompts) and, with loop.over_provision, the groups
        carried into it under "carried"."""
        ...

    def load_state(self, state: dict[str, Any], problems: list[Problem]) -> None:
        """Continue from a checkpoint's `state()` (before the first `sample`); `problems`: the run's
        training problems (a carried group names its problem)."""
        ...

    def close(self) -> None:
        """No more steps: anything sampling ahead stops."""
        ...


@dataclass
class OnPolicySampler:
    """A step's samples drawn now, with the weights of the last sync: n samples (episodes) of each of the
    step's prompts, scored; with dynamic sampling, groups whose samples all pass or all fail are dropped
    and more prompts sampled, for up to max_sampling_rounds rounds. Subclasses make one round's
    `episodes`."""

    cfg: RunConfig
    roles: Roles
    scorer: Scorer
    loader: ProblemLoader | MixedLoader
    encode: Callable[[Problem], list[int]]  # a problem's prompt, as token ids
    plan: EpisodePlan

    def sample(self, step: int, timer: StepTimer) -> Sampled:
        with self.roles.rollout.deaths_named("sample"):
            return self._sample(step, timer)

    def _sample(self, step: int, timer: StepTimer) -> Sampled:
        cfg = self.cfg
        out = Sampled()
        busy_before = self.scorer.busy_s
        want = cfg.data.prompts_per_step
        dynamic = cfg.algo.dynamic_sampling
        rounds = cfg.algo.max_sampling_rounds if dynamic else 1
        for r in range(rounds):
            problems = self.loader.next_batch(want if r == 0 else want - len(set(out.groups)))
            if not problems:
                break
            sampling = sampling_params(cfg, cfg.rollout.n, seed=step_seed(cfg, step, r))
            prompts = [self.encode(p) for p in problems]
            episodes, scores = self.episodes(problems, prompts, sampling, timer)
            completions = [e.completion() for e in episodes]
            owners = [problems[c.prompt_index] for c in completions]
            out.generated_tokens += sum(c.model_tokens for c in completions)
            groups = [r * want + c.prompt_index for c in completions]
            out.all_scores += scores
            out.all_problems += owners
            out.all_episodes += episodes
            keep = mixed_groups([s.passed for s in scores], groups) if dynamic else set(groups)
            for c, e, p, s, g in zip(completions, episodes, owners, scores, groups, strict=True):
                if g in keep:
                    out.completions.append(c)
                    out.episodes.append(e)
                    out.problems.append(p)
                    out.scores.append(s)
                    out.groups.append(g)
            if len(set(out.groups)) >= want:
                break
        out.judge_busy_s = self.scorer.busy_s - busy_before
        self.record(out, step)
        out.metrics |= self.roles.memory_metrics  # this sampling's memory moves and engine numbers
        return out

    def record(self, out: Sampled, step: int) -> None:
        """Tells the loader's difficulty record how step `step`'s problems fared, and sets the step's
        difficulty and staleness metrics on `out`."""
        self.loader.record(pass_counts(out.all_problems, out.all_scores))
        out.metrics = self.loader.difficulty_metrics() | staleness_metrics(out.completions, step)

    def sync_weights(self, version: int, changed: bool, timer: StepTimer) -> None:
        if changed:
            with timer.phase("sync"):
                self.roles.sync_weights(version)
        else:  # the weights they hold are the trainer's: only their number moves on
            self.roles.load_rollout_weights(None, version)

    def latest_weights(self) -> AbstractContextManager[None]:
        return contextlib.nullcontext()  # sampling waits for each sync: the engines are never behind

    def state(self) -> dict[str, Any]:
        return {"loader": self.loader.state_dict()}

    def load_state(self, state: dict[str, Any], problems: list[Problem]) -> None:
        self.loader.load_state_dict(state["loader"])
        if carried := state.get("carried"):
            log.warning(
                "the checkpoint carries %d groups of partial rollouts into this step, which this run "
                "(loop.over_provision 0) drops: their problems come again in the next epoch",
                len(carried),
            )

    def oldest_carried_version(self) -> int | None:
        """The policy version of the oldest token kept from an earlier step (loop.over_provision's carried
        samples); None: none is."""
        return None

    def close(self) -> None:
        pass

    def episodes(
        self, problems: list[Problem], prompts: list[list[int]], sampling: SamplingParams, timer: StepTimer
    ) -> tuple[list[Episode], list[Score]]:
        """The episodes of one sampling round in (prompt, sample) order (prompts[i] is problems[i]'s), each
        with the score of its last program on the hidden tests."""
        raise NotImplementedError


class SingleTurnSampler(OnPolicySampler):
    """One response per sample, judged as each finishes (loop.overlap_judge) or once all are written."""

    def episodes(
        self, problems: list[Problem], prompts: list[list[int]], sampling: SamplingParams, timer: StepTimer
    ) -> tuple[list[Episode], list[Score]]:
        if self.cfg.loop.overlap_judge:  # the hidden tests while decoding
            completions, scores = judged_as_they_finish(
                problems, prompts, sampling, self.roles, self.scorer.score_stream, timer
            )
        else:
            with self.roles.generating(), timer.phase("generate"):
                completions = self.roles.generate(prompts, sampling)
            with timer.phase("judge"):
                owners = [problems[c.prompt_index] for c in completions]
                scores = self.scorer.score(owners, [c.text for c in completions])
        return [Episode(c.prompt_index, c.sample_index, c.prompt_ids, [c]) for c in completions], scores


class LockStepTurnsSampler(OnPolicySampler):
    """Self-repair episodes turn by turn over the round (`run_episodes`), the last programs scored after."""

    def episodes(
        self, problems: list[Problem], prompts: list[list[int]], sampling: SamplingParams, timer: StepTimer
    ) -> tuple[list[Episode], list[Score]]:
        if self.cfg.loop.overlap_judge:  # each turn's public tests while it decodes
            turn = turn_judged_while_decoding(self.roles, self.scorer, timer)
        else:
            generate = _timed(timer, "generate", self.roles.generate)
            turn = turn_in_sequence(generate, _timed(timer, "judge", self.scorer.check_public))
        with self.roles.generating():  # one phase for every turn: memory moves once
            episodes = run_episodes(problems, prompts, sampling, self.plan, turn)
        with timer.phase("judge"):  # the last program of each episode, on the hidden tests
            finals = [e.final.text for e in episodes]
            scores = self.scorer.score([problems[e.prompt_index] for e in episodes], finals)
        return episodes, scores


class AsyncTurnsSampler(OnPolicySampler):
    """Self-repair episodes each at its own pace, each scored as it ends (`episodes_as_they_finish`)."""

    def episodes(
        self, problems: list[Problem], prompts: list[list[int]], sampling: SamplingParams, timer: StepTimer
    ) -> tuple[list[Episode], list[Score]]:
        return episodes_as_they_finish(problems, prompts, sampling, self.plan, self.roles, self.scorer, timer)


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


def staleness_metrics(completions: list[Completion], step: int) -> dict[str, float]:
    """How far behind the weights training step `step` (policy version `step`) the samples' weights were:
    the mean and the largest number of versions of each sample's oldest token, the share of samples at
    each staleness (async/staleness_{k}_samples), the share of the model's tokens at each
    (async/staleness_{k}_tokens: a sample whose weights were updated while it was written has tokens
    of several), and the share of samples written by more than one version (async/partial_samples).
    Unversioned samples are left out."""
    versioned = [c for c in completions if c.policy_version is not None]
    if not versioned:
        return {}
    behind = [step - c.policy_version for c in versioned]  # type: ignore[operator]
    tokens: dict[int, int] = {}
    for c in versioned:
        if c.token_versions is None:  # one version (every sample of a sync run): no walk over its tokens
            k = step - c.policy_version  # type: ignore[operator]
            tokens[k] = tokens.get(k, 0) + c.model_tokens
            continue
        for v, m in zip(c.token_versions, c.loss_mask or [1] * c.num_tokens, strict=True):
            tokens[step - v] = tokens.get(step - v, 0) + m
    total = max(1, sum(tokens.values()))
    out = {
        "async/staleness_mean": sum(behind) / len(behind),
        "async/staleness_max": float(max(behind)),
        "async/partial_samples": sum(len(set(c.token_versions or [])) > 1 for c in versioned)
        / len(versioned),
    }
    for k in sorted(set(behind) | set(tokens)):
        out[f"async/staleness_{k}_samples"] = behind.count(k) / len(behind)
        out[f"async/staleness_{k}_tokens"] = tokens.get(k, 0) / total
    return out


def step_seed(cfg: RunConfig, step: int, sampling_round: int = 0) -> int:
    """The sampling seed of one round of step `step`: from (loop.seed, step, round), so a resumed run
    draws what an uninterrupted one would."""
    return cfg.loop.seed * 1_000_003 + step * 101 + sampling_round


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


def pass_counts(problems: list[Problem], scores: list[Score]) -> dict[str, tuple[int, int]]:
    """{problem name: (accepted samples, judged samples)}; samples without a reward (the judge's own
    errors) are not counted."""
    out: dict[str, tuple[int, int]] = {}
    for p, s in zip(problems, scores, strict=True):
        accepted, judged = out.get(p.name, (0, 0))
        counted = s.reward is not None
        out[p.name] = (accepted + int(counted and s.passed), judged + int(counted))
    return out


def _timed(timer: StepTimer, phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` with its calls' time added to `phase` of the step's timer."""

    def timed(*args: Any) -> Any:
        with timer.phase(phase):
            return fn(*args)

    return timed
