"""Partial rollouts with over-provisioning (loop.over_provision; APRIL, Zhou et al. 2025): a step starts
more groups than it trains on, trains on the first data.prompts_per_step whose samples have all finished,
and stops the engines there. The samples not finished yet are carried into the next step with the tokens
they have, and go on there under the new weights, ahead of the new prompts:

    step s:    groups A B C D E F (prompts_per_step 4, over_provision 0.5)
               A C D F finish first → trained; B (2 of 4 samples finished) and E (none) are carried
    step s+1:  B's and E's samples go on (first in the queue), then 4 new groups; B and E are trained
               with the first 2 new groups to finish

So no step waits for the longest samples of its new groups. A carried token was written by older
weights: its sample's policy version (its oldest token's) says by how much. A group is carried only while
its oldest token stays within LoopConfig.carry_bound versions of the step that trains it: a group that
cannot wait another step is `due`, and the engines are not stopped before it is complete (it is trained
then, with the step's count or beyond it), so no group waits for ever; in sync mode every carried group
is due at the next step, and in async a group sampled ahead becomes due as its first sample written by
too old weights finishes. A sample that is past the bound anyway (one interrupted before any of its
group's samples showed its age) starts over (`start_over_stale`). Only the native engine can stop
mid-generation and go on later (config checks).

A checkpoint keeps the carried groups (`state`), so a resumed run goes on with them.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from codefu.errors import CodefuError
from codefu.observability.metrics import StepTimer
from codefu.orchestrator.episodes import Episode
from codefu.orchestrator.samplers import (
    OnPolicySampler,
    Sampled,
    sampling_params,
    step_seed,
)
from codefu.orchestrator.scoring import Score
from codefu.rollout.types import Completion
from codefu.types import Problem


@dataclass
class Generation:
    """What one step's generation did."""

    generated: bool = False  # the engines ran (else the carried groups alone filled the step)
    written: int = 0  # tokens the engines wrote (a continued sample's earlier ones not counted)
    interrupted: int = 0  # samples stopped unfinished
    continued: int = 0  # interrupted samples that went on from their tokens


@dataclass
class Group:
    """One prompt's n samples across steps: each slot finished (with its score), interrupted (with the
    tokens it has), or None (not started, or starting over)."""

    problem: Problem
    prompt: list[int]
    samples: list[Completion | None]
    scores: list[Score | None]

    @property
    def complete(self) -> bool:
        return all(s is not None for s in self.scores)

    def unfinished(self) -> list[int]:
        return [j for j, s in enumerate(self.scores) if s is None]

    def due(self, step: int, bound: int) -> bool:
        """Whether it must be trained at `step`: its oldest token would be more than `bound` versions behind
        the step after."""
        v = self.oldest_version()
        return v is not None and step + 1 - v > bound

    def oldest_version(self) -> int | None:
        """The policy version of its oldest token (None: it has none yet)."""
        versions = [c.policy_version for c in self.samples if c is not None and c.num_tokens]
        return min((v for v in versions if v is not None), default=None)

    def saved(self) -> dict[str, Any]:
        """Plain data for a checkpoint: the problem by name and its prompt, each slot's completion and score
        as dicts."""
        return {
            "problem": self.problem.name,
            "prompt": list(self.prompt),
            "samples": [None if c is None else asdict(c) for c in self.samples],
            "scores": [None if s is None else asdict(s) for s in self.scores],
        }

    @classmethod
    def of_saved(cls, saved: dict[str, Any], problem: Problem) -> Group:
        return cls(
            problem,
            list(saved["prompt"]),
            [None if c is None else Completion(**c) for c in saved["samples"]],
            [None if s is None else Score(**s) for s in saved["scores"]],
        )


@dataclass
class OverProvisionedSampler(OnPolicySampler):
    """One response per sample (rollout.turns 1), judged as each finishes, with loop.over_provision more
    groups started than a step trains on; the rest carried (see the module docstring)."""

    carried: list[Group] = field(default_factory=list, init=False)  # oldest first

    def state(self) -> dict[str, Any]:
        return super().state() | {"carried": [group.saved() for group in self.carried]}

    def load_state(self, state: dict[str, Any], problems: list[Problem]) -> None:
        self.loader.load_state_dict(state["loader"])  # (not the base's: it drops the carried groups)
        self.carried = [Group.of_saved(g, self._owner(g, problems)) for g in state.get("carried", [])]

    def _owner(self, saved: dict[str, Any], problems: list[Problem]) -> Problem:
        """The problem of a saved group: the one of its name whose prompt this run encodes as it was
        sampled (two datasets of a mix may share a name), or a CodefuError."""
        named = [p for p in problems if p.name == saved["problem"]]
        for problem in named:
            if self.encode(problem) == saved["prompt"]:
                return problem
        why = "has no problem of that name" if not named else "encodes its prompt otherwise"
        raise CodefuError(
            f"the checkpoint carries partial samples of problem {saved['problem']!r} (loop.over_provision), "
            f"and this run {why}: resume with the data, prompt template and tokenizer it was written with"
        )

    def oldest_carried_version(self) -> int | None:
        return min((v for g in self.carried if (v := g.oldest_version()) is not None), default=None)

    def _sample(self, step: int, timer: StepTimer) -> Sampled:
        cfg = self.cfg
        want, n, bound = cfg.data.prompts_per_step, cfg.rollout.n, cfg.loop.carry_bound
        started = want + math.ceil(round(want * cfg.loop.over_provision, 9))  # (no float noise: 0.1 * 50)
        groups, self.carried = self.carried, []
        restarted = start_over_stale(groups, step, bound)
        carried_in = len(groups)
        fresh = self.loader.next_batch(max(0, started - carried_in))
        groups += [Group(p, self.encode(p), [None] * n, [None] * n) for p in fresh]
        # a group that could not wait another step (its oldest sample would pass the bound) is trained now:
        # the engines are not stopped before it is complete, so no group is carried for ever
        due = {g for g, group in enumerate(groups) if group.due(step, bound)}
        complete = [g for g, group in enumerate(groups) if group.complete]  # in the order they completed
        busy_before = self.scorer.busy_s
        run = Generation()
        if not enough(complete, due, want):  # else the carried groups alone fill the step
            run = self._generate(groups, carried_in, complete, due, timer, step)
        # the due groups first (complete: the engines waited for them), then in the order they completed
        trained = [g for g in complete if g in due] + [g for g in complete if g not in due]
        trained = trained[: max(want, len(due))]
        self.carried = [groups[g] for g in complete if g not in trained]  # complete, past the step's count
        self.carried += [group for g, group in enumerate(groups) if not group.complete]
        out = self._trained([groups[g] for g in trained], step)
        if run.generated:
            out.metrics |= self.roles.memory_metrics  # this generation's memory moves and engine numbers
        out.generated_tokens = run.written
        out.judge_busy_s = self.scorer.busy_s - busy_before
        out.metrics |= {
            "april/groups_new": float(len(fresh)),
            "april/groups_carried_in": float(carried_in),
            "april/groups_carried_out": float(len(self.carried)),
            "april/carried_samples": float(sum(c is not None for g in self.carried for c in g.samples)),
            "april/interrupted_samples": float(run.interrupted),
            "april/continued_samples": float(run.continued),
            "april/restarted_samples": float(restarted),
        }
        return out

    def _generate(
        self,
        groups: list[Group],
        first_new: int,
        complete: list[int],
        due: set[int],
        timer: StepTimer,
        step: int,
    ) -> Generation:
        """Samples every unfinished slot of `groups` (those from `first_new` on are new: n samples of each
        prompt; the carried ones' slots go on from what they have, or start over, ahead of the new
        prompts, oldest group first) and judges each as it finishes, appending each group to `complete`
        as its last sample finishes. Once prompts_per_step groups are complete, the `due` ones among
        them (a group whose finished samples turn out too old to wait joins them), the engines stop, and
        what they had not finished is left in its slot, interrupted."""
        cfg, run = self.cfg, Generation()
        bound = cfg.loop.carry_bound
        new = groups[first_new:]
        slot_of: dict[int, tuple[int, int]] = {}  # a carried slot's prompt index (after the new prompts)
        for g, group in enumerate(groups[:first_new]):
            for j in group.unfinished():
                slot_of[len(new) + len(slot_of)] = (g, j)
        if not new and not slot_of:
            return run
        run.generated = True
        had = {(g, j): c.num_tokens for g, j in slot_of.values() if (c := groups[g].samples[j]) is not None}
        run.continued = sum(n > 0 for n in had.values())
        judged: list[tuple[int, int]] = []  # the slots sent to the judge, in order
        sampling = sampling_params(cfg, cfg.rollout.n, seed=step_seed(cfg, step))
        prompts = [g.prompt for g in new]
        with self.roles.conversations(prompts, sampling, every_worker=True) as conversations:
            for index, (g, j) in slot_of.items():
                conversations.go_on(index, groups[g].prompt, groups[g].samples[j])
            conversations.close()  # no more: each worker's stream ends when its work is done

            def arrivals() -> Iterator[tuple[Problem, str]]:
                nonlocal last_token
                stopped = False
                for batch in conversations:
                    last_token = time.perf_counter()
                    for c in batch:
                        g, j = slot_of.get(c.prompt_index, (first_new + c.prompt_index, c.sample_index))
                        group = groups[g]
                        run.written += c.num_tokens - had.get((g, j), 0)
                        group.samples[j] = c
                        if c.finish_reason == "interrupted":
                            run.interrupted += 1
                            continue
                        judged.append((g, j))
                        group.scores[j] = PENDING_SCORE  # finished: its verdict is all that is to come
                        # written by weights too old to wait a step (async: sampled ahead; learned only
                        # as its samples finish): waited for, unless the engines were stopped already
                        if group.due(step, bound) and (group.complete or not stopped):
                            due.add(g)
                        if group.complete:
                            complete.append(g)
                        yield group.problem, c.text
                    if not stopped and enough(complete, due, cfg.data.prompts_per_step):
                        conversations.interrupt()  # the rest come back interrupted, in a last batch
                        stopped = True

            start = last_token = time.perf_counter()
            try:
                scores = self.scorer.score_stream(arrivals())
            except BaseException:
                with contextlib.suppress(Exception):  # the error that matters is the one raised
                    conversations.interrupt()  # the engines stop, not generate on for no one
                raise
            timer.add("generate", last_token - start)
            timer.add("judge_tail", time.perf_counter() - last_token)
        for (g, j), score in zip(judged, scores, strict=True):
            groups[g].scores[j] = score
        return run

    def _trained(self, groups: list[Group], step: int) -> Sampled:
        """The step's `Sampled` of complete `groups` (group k: prompt_index k), checked against the bound."""
        out = Sampled()
        for k, group in enumerate(groups):
            for j, (c, s) in enumerate(zip(group.samples, group.scores, strict=True)):
                assert c is not None and s is not None and s is not PENDING_SCORE
                c = replace(c, prompt_index=k, sample_index=j)
                out.completions.append(c)
                out.episodes.append(Episode(k, j, c.prompt_ids, [c]))
                out.problems.append(group.problem)
                out.scores.append(s)
                out.groups.append(k)
        out.all_scores, out.all_problems = list(out.scores), list(out.problems)
        out.all_episodes = list(out.episodes)
        check_carry_bound(out.completions, step, self.cfg.loop.carry_bound)
        self.record(out, step)
        return out


def enough(complete: list[int], due: set[int], want: int) -> bool:
    """Whether the step may stop its engines: `want` groups complete, every `due` one among them."""
    return len(complete) >= want and due <= set(complete)


# a finished sample's score before the judge's verdict comes (never trained: _trained checks)
PENDING_SCORE = Score(reward=None, passed=False, status="PENDING")


def start_over_stale(groups: list[Group], step: int, bound: int) -> int:
    """Empties every slot of `groups` whose sample (finished or not) is more than `bound` policy versions
    behind `step`, and every interrupted one without a token; returns how many had tokens."""
    restarted = 0
    for group in groups:
        for j, c in enumerate(group.samples):
            if c is None:
                continue
            stale = c.policy_version is not None and step - c.policy_version > bound
            if stale or (c.finish_reason == "interrupted" and not c.num_tokens):
                restarted += bool(c.num_tokens)
                group.samples[j] = group.scores[j] = None
    return restarted


def check_carry_bound(completions: list[Completion], step: int, bound: int) -> None:
    """Every completion's oldest token is at most `bound` versions behind `step`, or a CodefuError (the
    sampler starts stale samples over: this would be a bug, not a slow run)."""
    behind = [step - c.policy_version for c in completions if c.policy_version is not None]
    if behind and max(behind) > bound:
        raise CodefuError(
            f"internal: step {step} would train a carried sample {max(behind)} versions old; "
            f"loop.over_provision's bound is {bound}"
        )
