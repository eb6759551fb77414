"""Partial rollouts (loop.over_provision, APRIL) below the loop: the native engine stops mid-generation
and hands back every unfinished sample with the tokens it has, and goes on with them later to exactly the
tokens an uninterrupted run writes, old tokens keeping their version; continued samples queue first;
the sampler's bookkeeping over many steps on a real engine and rollout worker (every group trained once,
whole, with its own prompt, none carried past the bound); the carried samples' staleness rules; and the
config rules that name the key."""

from __future__ import annotations

import contextlib
import re

import pytest
import torch

from codefu.data.loader import ProblemLoader
from codefu.errors import CodefuError
from codefu.observability.metrics import StepTimer
from codefu.orchestrator.config import DataConfig, LoopConfig, RolloutConfig, RunConfig, check_run_config
from codefu.orchestrator.episodes import EpisodePlan
from codefu.orchestrator.partial_rollouts import (
    Group,
    OverProvisionedSampler,
    check_carry_bound,
    start_over_stale,
)
from codefu.orchestrator.scoring import BaseScorer, Score
from codefu.rollout import EngineConfig, NativeEngine, SamplingParams
from codefu.rollout.actor import RolloutWorker
from codefu.rollout.follow_ups import FollowUp, FollowUps, follow_ups_in_batches
from codefu.rollout.native.engine import PENDING
from codefu.rollout.native.kv_cache import BlockAllocator
from codefu.rollout.native.scheduler import Cohort, Scheduler, Sequence
from codefu.rollout.types import Completion
from codefu.types import Problem
from helpers.native_models import forward_logprobs, hf_greedy, tiny_hf
from helpers.stops import pick_stops
from helpers.threads import one_thread  # noqa: F401 (autouse: one intra-op thread)

PROMPTS = [[11, 12, 13], list(range(100, 116)), list(range(200, 221)), [7, 8, 9, 10, 11]]


@pytest.fixture(scope="module")
def hf():
    return tiny_hf("qwen2")


def make_engine(hf) -> NativeEngine:
    config = EngineConfig(model="(in memory)", engine="native", kv_cache_tokens=2048)
    return NativeEngine.from_hf_model(hf, None, config)


def test_an_interrupted_sample_goes_on_to_the_tokens_of_an_uninterrupted_run(hf):
    stop = pick_stops([hf_greedy(hf, p, 30) for p in PROMPTS])
    sampling = SamplingParams(n=2, temperature=0.0, max_new_tokens=30, stop_token_ids=stop)
    whole = {(c.prompt_index, c.sample_index): c for c in make_engine(hf).generate(PROMPTS, sampling)}
    engine = make_engine(hf)
    inbox = FollowUps()
    inbox.close()
    got: list[Completion] = []
    for batch in engine.generate_stream(PROMPTS, sampling, inbox):
        got += batch
        inbox.interrupt()  # at the first samples to finish: the rest come back in one last batch
    assert sorted((c.prompt_index, c.sample_index) for c in got) == sorted(whole)  # each exactly once
    cut = [c for c in got if c.finish_reason == "interrupted"]
    assert cut and any(c.token_ids for c in cut) and len(cut) < len(got), [len(c.token_ids) for c in got]
    for c in got:
        ref = whole[(c.prompt_index, c.sample_index)].token_ids
        assert PENDING not in c.token_ids and len(c.logprobs) == len(c.token_versions) == len(c.token_ids)
        if c.finish_reason == "interrupted":
            assert c.token_ids == ref[: len(c.token_ids)] and len(c.token_ids) < len(ref)
        else:
            assert c.token_ids == ref
    assert engine.done  # nothing left running or waiting

    engine.load_weights(None, version=4)  # the tokens written from now on are version 4's
    go_on = FollowUps()
    go_on.put([FollowUp(100 + k, c.prompt_ids, c) for k, c in enumerate(cut)])
    go_on.close()
    done = [c for batch in engine.generate_stream([], sampling, go_on) for c in batch]
    assert sorted(c.prompt_index for c in done) == [100 + k for k in range(len(cut))]
    for c in done:
        before = cut[c.prompt_index - 100]
        ref = whole[(before.prompt_index, before.sample_index)]
        assert c.prompt_ids == before.prompt_ids
        assert c.token_ids == ref.token_ids and c.finish_reason == ref.finish_reason
        assert len(c.token_ids) <= sampling.max_new_tokens  # the cap counts the tokens from before
        old = len(before.token_ids)
        assert c.token_versions == [0] * old + [4] * (len(c.token_ids) - old)
        assert c.logprobs[:old] == before.logprobs  # the behaviour log-probs of the old tokens are kept
        torch.testing.assert_close(
            torch.tensor(c.logprobs), forward_logprobs(hf, c.prompt_ids, c.token_ids, 1.0), atol=1e-4, rtol=0
        )


def test_an_interrupt_before_anything_ran_hands_every_sample_back_empty(hf):
    engine = make_engine(hf)
    inbox = FollowUps()
    inbox.close()
    inbox.interrupt()
    got = [
        c
        for b in engine.generate_stream(PROMPTS[:2], SamplingParams(n=3, max_new_tokens=8), inbox)
        for c in b
    ]
    assert len(got) == 6 and all(c.finish_reason == "interrupted" and not c.token_ids for c in got)
    again = engine.generate(PROMPTS[:2], SamplingParams(n=1, temperature=0.0, max_new_tokens=8))
    assert all(len(c.token_ids) >= 1 for c in again)  # the stopped call's blocks did not leak


def test_follow_ups_not_yet_taken_at_an_interrupt_come_back_too(hf):
    engine = make_engine(hf)
    partial = Completion(0, 0, PROMPTS[1], [5, 6], "x", [-1.0, -2.0], "interrupted", token_versions=[3, 3])
    inbox = FollowUps()
    inbox.put([FollowUp(50, PROMPTS[0]), FollowUp(51, PROMPTS[1], partial, first=True)])
    inbox.interrupt()  # before the stream took them
    got = {
        c.prompt_index: c for b in engine.generate_stream(PROMPTS[2:3], SamplingParams(), inbox) for c in b
    }
    assert sorted(got) == [0, 50, 51] and all(c.finish_reason == "interrupted" for c in got.values())
    assert (
        got[51].token_ids == [5, 6] and got[51].token_versions == [3, 3] and got[51].logprobs == [-1.0, -2.0]
    )


def test_a_follow_up_must_continue_a_response_of_its_own_prompt(hf):
    engine = make_engine(hf)
    other = Completion(0, 0, PROMPTS[1], [5], "x", [-1.0], "interrupted", token_versions=[0])
    inbox = FollowUps()
    inbox.put([FollowUp(9, PROMPTS[0], other)])
    inbox.close()
    with pytest.raises(ValueError, match="follow-up 9: the response it continues is not of its prompt"):
        list(engine.generate_stream([], SamplingParams(max_new_tokens=4), inbox))


def test_an_engine_that_cannot_continue_a_response_says_so():
    def stream(prompts, sampling):
        yield []

    inbox = FollowUps()
    partial = Completion(0, 0, [1, 2], [3], "x", [-1.0], "interrupted")
    inbox.put([FollowUp(7, [1, 2], partial)])
    inbox.close()
    with pytest.raises(ValueError, match=r"follow-ups \[7\] continue interrupted responses: this engine"):
        list(follow_ups_in_batches(stream, [], SamplingParams(), inbox))


def test_continued_samples_queue_ahead_of_new_prompts_in_the_order_given():
    sched = Scheduler(BlockAllocator(8), 4, max_num_seqs=8, max_prefill_tokens=64)
    cohorts = {name: Cohort([Sequence(i, i, 0, [1, 2])]) for i, name in enumerate("abcd")}
    sched.add(cohorts["a"])
    sched.add(cohorts["b"])
    sched.add(cohorts["c"], first=True)
    sched.add(cohorts["d"], first=True)
    assert [c.seqs[0].seq_id for c in sched.waiting] == [2, 3, 0, 1]


def sample(version: int | None, tokens: int, reason: str = "stop") -> Completion:
    return Completion(0, 0, [1], [5] * tokens, "x", [0.0] * tokens, reason, policy_version=version)


def test_stale_carried_samples_start_over_and_the_rest_stay():
    ok = Score(1.0, True, "OK")
    group = Group(
        Problem(name="p", statement="s", public_tests=[], private_tests=[]),
        [1],
        [sample(6, 3), sample(4, 5), sample(5, 2, "interrupted"), sample(6, 0, "interrupted"), None],
        [ok, ok, None, None, None],
    )
    assert start_over_stale([group], step=6, bound=1) == 1  # the finished sample of version 4
    assert [c is not None for c in group.samples] == [True, False, True, False, False]
    assert group.scores == [ok, None, None, None, None] and group.unfinished() == [1, 2, 3, 4]
    assert start_over_stale([group], step=7, bound=1) == 1  # now the interrupted one of version 5
    assert group.unfinished() == [1, 2, 3, 4] and group.samples[2] is None


def test_a_sample_past_the_carry_bound_is_never_trained():
    check_carry_bound([sample(5, 3), sample(4, 2)], step=5, bound=1)
    with pytest.raises(CodefuError, match="step 5 would train a carried sample 2 versions old"):
        check_carry_bound([sample(5, 3), sample(3, 2)], step=5, bound=1)


def test_each_mode_means_its_carry_bound():
    assert LoopConfig().carry_bound == 1
    assert LoopConfig(mode="async").carry_bound == 2
    assert LoopConfig(mode="async", max_staleness=4).carry_bound == 4


@pytest.mark.parametrize(
    "loop,rollout,message",
    [
        (LoopConfig(over_provision=-0.5), RolloutConfig(engine="native"), "must be >= 0 (0: off), got -0.5"),
        (LoopConfig(over_provision=0.5), RolloutConfig(), "must be 0 unless rollout.engine is native"),
        (
            LoopConfig(over_provision=0.5),
            RolloutConfig(engine="native", turns=2),
            "must be 0 with rollout.turns",
        ),
        (
            LoopConfig(over_provision=0.5, mode="one_step_off"),
            RolloutConfig(engine="native"),
            "must be 0 with loop.mode one_step_off, or async with loop.max_staleness < 2",
        ),
        (
            LoopConfig(over_provision=0.5, mode="async", max_staleness=1),
            RolloutConfig(engine="native"),
            "must be 0 with loop.mode one_step_off, or async with loop.max_staleness < 2",
        ),
    ],
)
def test_bad_over_provisioning_names_its_key(loop, rollout, message):
    with pytest.raises(CodefuError, match=re.escape("loop.over_provision " + message)):
        check_run_config(RunConfig(loop=loop, rollout=rollout))


def test_a_carried_group_survives_a_checkpoint_as_plain_data():
    problem = Problem(name="p", statement="s", public_tests=[], private_tests=[])
    partial = sample(3, 2, "interrupted")
    partial.token_versions = [2, 3]
    group = Group(problem, [1, 2], [sample(3, 4), partial, None], [Score(1.0, True, "ACCEPTED"), None, None])
    saved = group.saved()
    assert saved["problem"] == "p" and saved["samples"][2] is None
    again = Group.of_saved(saved, problem)
    assert again == group


class ScriptedEngines:
    """What the sampler asks of Roles, with batches given in advance: the bookkeeping under orders of
    arrival a real engine gives only by chance (a finished sample in the batch after the interrupt)."""

    memory_metrics: dict[str, float] = {}

    def __init__(self, batches: list[list[Completion]]):
        self.batches, self.rollout, self.interrupted_after = batches, self, None

    def deaths_named(self, what):
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def conversations(self, prompts, sampling, every_worker=False):
        engines = self

        class Conversations:
            def go_on(self, index, prompt, response):
                pass

            def close(self, abort=False):
                pass

            def interrupt(self):
                engines.interrupted_after = engines.interrupted_after or self.sent

            def __iter__(self):
                for self.sent, batch in enumerate(engines.batches, 1):
                    yield batch

        yield Conversations()


def scripted(prompt: int, sample: int, reason: str, versions: list[int]) -> Completion:
    n = len(versions)
    return Completion(
        prompt,
        sample,
        [1],
        [5] * n,
        "x",
        [0.0] * n,
        reason,
        policy_version=min(versions, default=3),
        token_versions=versions,
    )


def async_sampler(batches, want=1):
    problems = [Problem(f"p{i}", "", [], []) for i in range(10)]
    cfg = RunConfig(
        data=DataConfig(prompts_per_step=want),
        rollout=RolloutConfig(engine="native", n=2, max_new_tokens=40),
        loop=LoopConfig(over_provision=2.0, mode="async", max_staleness=2),
    )
    roles = ScriptedEngines(batches)
    loader = ProblemLoader(problems, seed=0, shuffle=False, epochs=1)
    return OverProvisionedSampler(cfg, roles, ByLength(), loader, lambda p: [1], EpisodePlan()), roles


def test_a_group_that_shows_its_age_after_the_interrupt_is_carried_not_waited_for():
    # step 5, bound 2: a sample of version 3 cannot wait for step 6
    sampler, roles = async_sampler(
        [
            [scripted(0, 0, "stop", [3]), scripted(0, 1, "stop", [3])],  # p0 complete: enough
            [
                scripted(1, 0, "stop", [3]),
                scripted(1, 1, "interrupted", [3]),
                scripted(2, 0, "interrupted", []),
            ],
        ]
    )
    out = sampler.sample(5, StepTimer())
    assert roles.interrupted_after == 1
    assert {p.name for p in out.problems} == {"p0"}
    assert [g.problem.name for g in sampler.carried] == ["p1", "p2"]


def test_a_group_completed_by_an_old_sample_is_due_and_trained_beyond_the_count():
    sampler, roles = async_sampler(
        [
            [scripted(0, 0, "stop", [5]), scripted(0, 1, "stop", [5])],  # p0 complete and young: enough...
            [scripted(1, 0, "stop", [5]), scripted(1, 1, "stop", [4, 3])],  # ...p1 completed by an old one
            [scripted(2, 0, "interrupted", [5])],
        ]
    )
    out = sampler.sample(5, StepTimer())
    assert {p.name for p in out.problems} == {"p1"}  # p1 could not wait: trained now, in p0's place
    assert [g.problem.name for g in sampler.carried] == ["p0", "p2"]  # p0 complete, first at step 6
    assert sampler.carried[0].complete and not sampler.carried[0].due(6, 2)


def test_a_checkpoint_names_a_carried_problem_this_run_cannot_continue():
    sampler, _ = async_sampler([])
    group = Group(Problem("p3", "", [], []), [1], [scripted(0, 0, "interrupted", [2]), None], [None, None])
    state = sampler.state() | {"carried": [group.saved()]}
    sampler.load_state(state, [Problem(f"p{i}", "", [], []) for i in range(10)])
    assert [g.problem.name for g in sampler.carried] == ["p3"] and sampler.carried[0].samples[
        0
    ] == group.samples[0]
    with pytest.raises(CodefuError, match="problem 'p3' .*this run has no problem of that name"):
        sampler.load_state(state, [Problem("p1", "", [], [])])
    other = dict(group.saved(), prompt=[9, 9])
    with pytest.raises(CodefuError, match="this run encodes its prompt otherwise: resume with the data"):
        sampler.load_state(sampler.state() | {"carried": [other]}, [Problem("p3", "", [], [])])


class WorkerOnThisThread:
    """What the sampler asks of Roles, served by one real RolloutWorker (the actor's body, stamping the
    versions) around a native engine, in this process: Ray only carries the same calls."""

    memory_metrics: dict[str, float] = {}

    def __init__(self, engine: NativeEngine):
        self.worker = RolloutWorker(lambda: engine)
        self.rollout = self
        self.streams = 0

    def deaths_named(self, what):
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def conversations(self, prompts, sampling, every_worker=False):
        self.streams += 1
        name = f"s{self.streams}"
        worker = self.worker

        class Conversations:
            def go_on(self, index, prompt, response):
                worker.follow_up(name, [FollowUp(index, prompt, response, first=True)])

            def close(self, abort=False):
                worker.end_follow_ups(name, abort)

            def interrupt(self):
                worker.interrupt(name)

            def __iter__(self):
                yield from worker.generate_stream(prompts, sampling, name)

        conversations = Conversations()
        try:
            yield conversations
        finally:
            conversations.close()


class ByLength(BaseScorer):
    """Passes a response of odd length: a verdict per sample, whatever the model wrote."""

    def score_stream(self, items):
        return [Score(float(len(text) % 2), bool(len(text) % 2), "ACCEPTED") for _, text in items]

    def check_public_each(self, items):
        raise NotImplementedError


@pytest.mark.parametrize(
    "mode,max_staleness,lag",
    # lag: how many versions behind the step its samples are written (async samples ahead of training)
    [("sync", None, 0), ("async", 2, 1), ("async", 2, 2)],
)
def test_every_group_is_trained_once_whole_and_within_the_bound(hf, mode, max_staleness, lag):
    problems = [Problem(f"p{i}", "", [], []) for i in range(40)]
    prompts = {p.name: [3 + i, 7, 11 + i % 13, 20 + i % 7] for i, p in enumerate(problems)}
    cfg = RunConfig(
        data=DataConfig(prompts_per_step=2),
        rollout=RolloutConfig(engine="native", n=4, max_new_tokens=40, temperature=1.0),
        loop=LoopConfig(over_provision=2.0, mode=mode, max_staleness=max_staleness),
    )
    bound = cfg.loop.carry_bound
    config = EngineConfig(model="(in memory)", engine="native", kv_cache_tokens=4096, max_num_seqs=6)
    engine = NativeEngine.from_hf_model(hf, None, config)
    roles = WorkerOnThisThread(engine)
    loader = ProblemLoader(problems, seed=0, shuffle=False, epochs=1)
    sampler = OverProvisionedSampler(cfg, roles, ByLength(), loader, lambda p: prompts[p.name], EpisodePlan())
    trained: list[str] = []
    totals = {"interrupted": 0.0, "continued": 0.0, "restarted": 0.0}
    due: set[str] = set()  # groups carried that could not wait another step
    for step in range(14):
        roles.worker.load_weights(None, version=max(0, step - lag))  # the weights the samples are written by
        out = sampler.sample(step, StepTimer())
        assert out.completions, step
        by_group: dict[int, list[Completion]] = {}
        for c, p, g in zip(out.completions, out.problems, out.groups, strict=True):
            assert c.prompt_ids == prompts[p.name]  # the group's own prompt: no sample misrouted
            assert c.finish_reason in ("stop", "length") and c.num_tokens <= 40
            assert 0 <= step - c.policy_version <= bound
            assert c.policy_version == min(c.token_versions) and len(c.token_versions) == c.num_tokens
            by_group.setdefault(g, []).append(c)
        names = {
            g: {p.name for p, gg in zip(out.problems, out.groups, strict=True) if gg == g} for g in by_group
        }
        assert all(len(n) == 1 for n in names.values())
        assert all(sorted(c.sample_index for c in cs) == [0, 1, 2, 3] for cs in by_group.values())
        assert len(by_group) >= 2  # prompts_per_step, or more when carried groups were due
        trained += [next(iter(n)) for n in names.values()]
        assert due <= {next(iter(n)) for n in names.values()}, step
        # a finished sample carried can wait a step (else its group was due, and trained); only a sample
        # interrupted before its group showed its age may be too old, and it starts over
        waiting = [
            c for g in sampler.carried for c, sc in zip(g.samples, g.scores, strict=True) if sc is not None
        ]
        assert all(step + 1 - c.policy_version <= bound for c in waiting), step
        if lag < bound:  # every token written now can wait a step
            assert all(
                step + 1 - v <= bound for g in sampler.carried if (v := g.oldest_version()) is not None
            )
        due = {g.problem.name for g in sampler.carried if g.due(step + 1, bound)}
        for key in totals:
            totals[key] += out.metrics[f"april/{key}_samples"]
    if lag < bound:  # every sample can wait a step: none starts over
        assert totals["restarted"] == 0
    else:  # only interrupted samples start over, never a finished one
        assert totals["restarted"] <= totals["interrupted"]
    assert len(trained) == len(set(trained))  # no group trained twice
    assert totals["interrupted"] > 0 and totals["continued"] > 0  # the tail was stopped and went on
    started = set(trained) | {g.problem.name for g in sampler.carried}
    assert started == {p.name for p in problems[: len(started)]}  # no group lost on the way
