"""Self-repair episodes: assembly (masks, log-probs), the lock-step turns, budgets, the feedback turn's
text and tokens, the public-only judging (a canary hidden test never reaches feedback), reward shaping,
the per-turn metrics and the evaluation's comparison with sampling."""

from __future__ import annotations

import itertools
import math
import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

import pytest
import torch

from codefu.algo.loss import LossSettings, rl_loss
from codefu.algo.shaping import turn_shaping
from codefu.errors import CodefuError
from codefu.judge.arrivals import Arrivals
from codefu.judge.judge import JudgeConfig
from codefu.judge.rewards import select_tests
from codefu.models.tiny import tiny_tokenizer
from codefu.orchestrator.batching import completions_to_batch
from codefu.orchestrator.config import RunConfig, check_run_config
from codefu.orchestrator.episodes import (
    Episode,
    EpisodePlan,
    clip,
    episode_metrics,
    feedback_message,
    run_episodes,
    run_episodes_async,
    turn_in_sequence,
)
from codefu.orchestrator.evaluation import EpisodeResult, first_public_pick, turn_report
from codefu.orchestrator.scoring import Feedback, JudgeScorer, Score
from codefu.rollout.follow_ups import LocalConversations, follow_ups_in_batches
from codefu.rollout.metrics import logprob_mismatch
from codefu.rollout.prompts import encode_prompt, follow_up_ids
from codefu.rollout.types import Completion, SamplingParams
from codefu.types import Problem, Status, TestCase, TestResult, Verdict

CANARY = "CANARY-7f3a91"


def completion(
    prompt_index: int, prompt: list[int], tokens: list[int], text: str, sample: int = 0
) -> Completion:
    return Completion(prompt_index, sample, prompt, tokens, text, [-0.5] * len(tokens), "length")


# ---- assembly ---------------------------------------------------------------------------------------


def test_an_episode_is_one_completion_whose_feedback_tokens_are_masked():
    first = completion(0, [1, 2], [10, 11, 12], "one")
    second = replace(completion(0, [1, 2, 10, 11, 12, 90, 91], [20, 21], "two"), finish_reason="stop")
    e = Episode(3, 1, [1, 2], [first, second], feedback_ids=[[90, 91]])
    c = e.completion()
    assert (c.prompt_index, c.sample_index, c.prompt_ids) == (3, 1, [1, 2])
    assert c.token_ids == [10, 11, 12, 90, 91, 20, 21]
    assert c.loss_mask == [1, 1, 1, 0, 0, 1, 1]
    assert c.logprobs == [-0.5, -0.5, -0.5, 0.0, 0.0, -0.5, -0.5]
    assert (c.text, c.finish_reason) == ("two", "stop")  # the last program is the one judged
    assert (c.model_tokens, c.num_tokens, e.tokens) == (5, 7, 7)
    # one turn: the response itself, unchanged (rollout.turns 1 trains exactly today's samples)
    assert Episode(0, 0, [1, 2], [first]).completion() is first


def test_the_batch_trains_only_the_models_tokens():
    e = Episode(
        0,
        0,
        [1, 2],
        [completion(0, [1, 2], [10, 11], "a"), completion(0, [], [20], "b")],
        feedback_ids=[[90, 91, 92]],
    )
    plain = completion(1, [1, 2, 3], [30, 31], "c")
    batch = completions_to_batch(
        [e.completion(), plain, plain], torch.zeros(3), torch.tensor([True, True, False])
    )
    assert batch.response_mask[0].tolist() == [0, 0, 1, 1, 0, 0, 0, 1]
    assert batch.old_logprobs[0].tolist() == [0, 0, -0.5, -0.5, 0, 0, 0, -0.5]
    assert batch.response_mask[1].tolist() == [0, 0, 0, 1, 1, 0, 0, 0]
    assert batch.response_mask[2].sum() == 0  # not scored: nothing trained, as before


@pytest.mark.parametrize("policy_loss", ["ppo", "gspo", "cispo"])
def test_no_loss_term_or_mismatch_metric_reads_a_feedback_token(policy_loss):
    """Whatever the log-probs at the feedback positions (any number: the trainer's, the reference's, the
    engine's 0.0), the loss with its KL, entropy and rollout-correction terms, its gradient there, and the
    rollout-vs-trainer mismatch metrics are the same."""
    e = Episode(
        0,
        0,
        [1, 2],
        [completion(0, [1, 2], [10, 11], "a"), completion(0, [], [20, 21], "b")],
        feedback_ids=[[90, 91, 92]],
    )
    batch = completions_to_batch([e.completion()], torch.tensor([1.0]), torch.tensor([True]))
    mask = batch.response_mask.float()
    feedback = (torch.arange(mask.shape[1]) >= 4) & (torch.arange(mask.shape[1]) < 7)
    assert mask[0, feedback].sum() == 0 and mask.sum() == 4
    settings = LossSettings(
        policy_loss=policy_loss, kl_coef=0.1, entropy_coef=0.01, rollout_correction="token_truncate"
    )

    def run(junk: float):
        g = torch.Generator().manual_seed(0)
        parts = [-torch.rand(mask.shape, generator=g) for _ in range(4)]
        for x in parts:
            x[0, feedback] = junk
        lp = parts[0].clone().requires_grad_(True)
        loss, _ = rl_loss(
            lp,
            parts[1],
            batch.advantages,
            mask,
            mask.sum(-1),
            float(mask.sum()),
            settings,
            entropy=-parts[0],
            ref_logprobs=parts[2],
            rollout_logprobs=parts[3],
        )
        loss.backward()
        return (
            float(loss.detach()),
            lp.grad[0, feedback],
            logprob_mismatch(parts[3], parts[0], batch.response_mask),
        )

    loss, grad, mismatch = run(-0.1)
    loss_junk, grad_junk, mismatch_junk = run(-30.0)
    assert loss == pytest.approx(loss_junk) and mismatch == pytest.approx(mismatch_junk)
    assert grad.abs().sum() == 0 and grad_junk.abs().sum() == 0
    assert mismatch["rollout/logprob_tokens"] == 4


# ---- the turns --------------------------------------------------------------------------------------


class Fakes:
    """generate: reply "ok" to prompts listed in `solve` (by the prompt's first token), else "bad <turn>";
    check_public: passes "ok". Every call is recorded."""

    def __init__(self, solve_at: dict[int, int]):
        self.solve_at = solve_at  # first prompt token -> the turn whose reply passes (absent: never)
        self.calls: list[tuple[list[list[int]], SamplingParams]] = []
        self.checked: list[list[str]] = []

    def generate(self, prompts: list[list[int]], sampling: SamplingParams) -> list[Completion]:
        self.calls.append((prompts, sampling))
        out = []
        for i, p in enumerate(prompts):
            turn = 1 + sum(50 < t < 60 for t in p) // 3  # the replies so far in the conversation
            for j in range(sampling.n):
                ok = self.solve_at.get(p[0]) == turn
                tokens = [50 + turn] * 3
                out.append(completion(i, p, tokens, "ok" if ok else f"bad {turn}", j))
        return out

    def check_public(self, problems: list[Problem], responses: list[str]) -> list[Feedback]:
        self.checked.append(list(responses))
        return [
            Feedback(True, "ACCEPTED")
            if r == "ok"
            else Feedback(False, "WRONG_ANSWER", test=TestCase("1\n", "2\n"), example=1, examples=1, output=r)
            for r in responses
        ]

    def generate_stream(self, prompts, sampling, follow_ups=None):
        """`generate` as one batch, then each lot of follow-ups as one (what run_episodes_async drives)."""

        def once(prompts, sampling):
            yield self.generate(prompts, sampling)

        yield from (
            once(prompts, sampling)
            if follow_ups is None
            else follow_ups_in_batches(once, prompts, sampling, follow_ups)
        )

    def check_public_each(self, items):
        """Each check after a random pause, on a pool of threads, given as each is done (a judge's order)."""
        rng = random.Random(0)

        def check(problem, response):
            time.sleep(rng.random() * 0.01)
            return self.check_public([problem], [response])[0]

        with ThreadPoolExecutor(4) as pool:
            pending, arrived = {}, itertools.count()
            arrivals = Arrivals(items)
            while not arrivals.finished or pending:
                for problem, response in arrivals.take():
                    pending[pool.submit(check, problem, response)] = next(arrived)
                done = [f for f in pending if f.done()]
                for f in done:
                    yield pending.pop(f), f.result()
                arrivals.wait(0.002)


def follow_up(text: str, reply: list[int]) -> list[int]:
    return [7] * (1 + len(text) % 3)  # stands in for a tokenizer: a few ids that depend on the text


PROBLEMS = [Problem("a", "", [TestCase("1\n", "2\n")], []), Problem("b", "", [TestCase("1\n", "2\n")], [])]
PROMPTS = [[100, 1], [200, 1]]


def test_one_turn_is_one_generate_call_and_no_public_check():
    fakes = Fakes({100: 1})
    sampling = SamplingParams(n=2, seed=5, max_new_tokens=3)
    episodes = run_episodes(
        PROBLEMS, PROMPTS, sampling, EpisodePlan(), turn_in_sequence(fakes.generate, fakes.check_public)
    )
    assert fakes.calls == [(PROMPTS, sampling)] and fakes.checked == []
    assert [e.turns for e in episodes] == [1, 1, 1, 1] and all(not e.checks for e in episodes)


def test_failing_episodes_get_feedback_and_one_more_sample_each():
    fakes = Fakes({100: 1, 200: 2})  # problem a passes its examples at once, b at the second turn
    sampling = SamplingParams(n=2, seed=5, max_new_tokens=3)
    plan = EpisodePlan(turns=3, follow_up=follow_up)
    episodes = run_episodes(
        PROBLEMS, PROMPTS, sampling, plan, turn_in_sequence(fakes.generate, fakes.check_public)
    )
    assert [(e.prompt_index, e.sample_index, e.turns) for e in episodes] == [
        (0, 0, 1),
        (0, 1, 1),
        (1, 0, 2),
        (1, 1, 2),
    ]
    assert (
        len(fakes.calls) == 2
    )  # b passed at turn 2: no third turn, and its turn-2 program is not re-checked
    prompts, later = fakes.calls[1]
    assert (later.n, later.max_new_tokens, later.temperature) == (1, 3, sampling.temperature)
    assert later.seed != sampling.seed  # another draw than turn 1's
    b = episodes[2]
    fb = b.checks[0]
    assert b.feedback_ids == [follow_up(feedback_message(fb, plan.feedback_chars), [51, 51, 51])]
    # turn 2's prompt is the conversation so far: prompt, reply, feedback turn
    assert prompts == [[200, 1, 51, 51, 51, *b.feedback_ids[0]]] * 2
    assert b.responses[1].prompt_ids == prompts[0] and b.final.text == "ok"
    assert [c.passed for c in b.checks] == [False, True]
    assert fakes.checked == [["ok", "ok", "bad 1", "bad 1"], ["ok", "ok"]]


def test_turns_stop_at_the_limit_and_at_the_token_budget():
    fakes = Fakes({})  # never passes
    sampling = SamplingParams(n=1, max_new_tokens=3)
    plan = EpisodePlan(turns=3, follow_up=follow_up)
    episodes = run_episodes(
        PROBLEMS[:1], PROMPTS[:1], sampling, plan, turn_in_sequence(fakes.generate, fakes.check_public)
    )
    assert (
        episodes[0].turns == 3 and len(episodes[0].checks) == 2
    )  # the last turn is judged on hidden tests only
    # a budget that holds turn 1, its feedback and one more response, not a third
    feedback = len(episodes[0].feedback_ids[0])
    budget = 3 + feedback + 3 + feedback + 2
    fakes = Fakes({})
    plan = EpisodePlan(turns=3, max_episode_tokens=budget, follow_up=follow_up)
    episodes = run_episodes(
        PROBLEMS[:1], PROMPTS[:1], sampling, plan, turn_in_sequence(fakes.generate, fakes.check_public)
    )
    e = episodes[0]
    assert e.turns == 2 and len(e.checks) == 2 and e.tokens <= budget
    assert len(e.feedback_ids) == 1  # no feedback turn without a response after it


def test_our_own_failure_ends_an_episode_without_feedback():
    fakes = Fakes({})
    plan = EpisodePlan(turns=2, follow_up=follow_up)
    failure = turn_in_sequence(
        fakes.generate, lambda problems, responses: [Feedback(False, "SANDBOX_ERROR")] * len(responses)
    )
    episodes = run_episodes(PROBLEMS[:1], PROMPTS[:1], SamplingParams(n=1), plan, failure)
    assert episodes[0].turns == 1 and not episodes[0].feedback_ids and len(fakes.calls) == 1


# ---- the feedback turn ------------------------------------------------------------------------------


def test_feedback_shows_the_first_failing_example():
    fb = Feedback(False, "WRONG_ANSWER", test=TestCase("3 4\n", "7\n"), example=2, examples=3, output="12\n")
    text = feedback_message(fb, 400)
    assert text == (
        "Your program failed example 2 of 3: wrong answer.\n"
        "Input:\n```\n3 4\n```\nExpected output:\n```\n7\n```\nYour program's output:\n```\n12\n```\n"
        "Fix the program and reply with the complete corrected program in a single code block."
    )
    empty = feedback_message(replace(fb, output=""), 400)
    assert "Your program's output: (nothing)\n" in empty


def test_feedback_of_each_kind_of_failure():
    compile_error = feedback_message(
        Feedback(False, "COMPILE_ERROR", compile_output="main.cpp:3: error: x"), 400
    )
    assert compile_error.startswith(
        "Your program does not compile.\nCompiler output:\n```\nmain.cpp:3: error: x\n```"
    )
    crash = Feedback(
        False,
        "RUNTIME_ERROR",
        test=TestCase("0\n", "1\n"),
        example=1,
        examples=1,
        message="exit status 1\nZeroDivisionError: division by zero",
    )
    text = feedback_message(crash, 400)
    assert "runtime error" in text and "Error:\n```\nexit status 1\nZeroDivisionError" in text
    slow = feedback_message(replace(crash, status="TIME_LIMIT", output="partial"), 400)
    assert "time limit exceeded" in slow and "partial" not in slow and "Expected output" in slow
    assert feedback_message(Feedback(False, "NO_CODE"), 400).startswith("Your reply holds no program.")


def test_each_part_is_cut_to_the_budget_keeping_head_and_tail():
    assert clip("short", 10) == "short"
    cut = clip("A" * 50 + "B" * 50, 30)
    assert cut == "A" * 20 + "\n... (70 characters cut) ...\n" + "B" * 10
    fb = Feedback(
        False, "WRONG_ANSWER", test=TestCase("x" * 5000, "y" * 5000), example=1, examples=1, output="z" * 5000
    )
    text = feedback_message(fb, 100)
    assert len(text) < 3 * (100 + 40) + 250  # three parts of ~100 characters and the fixed lines
    assert text.count("characters cut") == 3


def test_the_feedback_turn_is_what_the_chat_template_renders_after_a_reply():
    tok = tiny_tokenizer()
    problem = Problem("p", "", [], [], prompt=[{"role": "user", "content": "solve it"}])
    prompt = encode_prompt(tok, problem)
    reply = tok.encode("print(1)", add_special_tokens=False)  # cut by the length cap: no end-of-turn
    follow = follow_up_ids(tok, "failed", reply)
    whole = tok.apply_chat_template(
        [
            *problem.prompt,
            {"role": "assistant", "content": "print(1)"},
            {"role": "user", "content": "failed"},
        ],
        add_generation_prompt=True,
        tokenize=False,
    )
    assert prompt + reply + follow == tok.encode(whole, add_special_tokens=False)
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    assert follow[0] == im_end
    # a reply that ended on <|im_end|> (finish "stop" where it is the EOS, as SmolLM2's) keeps one
    assert follow_up_ids(tok, "failed", [*reply, im_end]) == follow[1:]
    # no template: a tokenizer that knows ChatML gets ChatML, the same ids here
    tok.chat_template = None
    assert follow_up_ids(tok, "failed", reply) == follow


# ---- public tests only: the canary ------------------------------------------------------------------


class RecordingJudge:
    """Stands in for the judge: fails a program at the first test whose input is "bad", printing "out",
    and records every problem it is handed."""

    def __init__(self, max_tests=None):
        self.judge_config = JudgeConfig(max_tests=max_tests)
        self.seen: list[Problem] = []

    def judge_many(self, items):
        for i, (problem, _response) in enumerate(items):
            self.seen.append(problem)
            tests = select_tests(problem, "private", self.judge_config.max_tests, self.judge_config.seed)
            bad = next((j for j, t in enumerate(tests) if t.input.startswith("bad")), None)
            results = (
                [TestResult(Status.ACCEPTED)] * len(tests)
                if bad is None
                else ([TestResult(Status.ACCEPTED)] * bad + [TestResult(Status.WRONG_ANSWER, output="out")])
            )
            status = Status.ACCEPTED if bad is None else Status.WRONG_ANSWER
            yield i, Verdict(status, tests=results, first_failure=bad)


def test_hidden_tests_never_reach_the_feedback():
    canary = TestCase(f"{CANARY}-in\n", f"{CANARY}-out\n")
    failing = Problem("f", "", [TestCase("ok-1\n", "1\n"), TestCase("bad-2\n", "2\n")], [canary, canary])
    passing = Problem("p", "", [TestCase("ok-3\n", "3\n")], [TestCase(f"bad-{CANARY}\n", "x\n")])
    judge = RecordingJudge()
    feedback = JudgeScorer(judge, "codefu").check_public([failing, failing, passing], ["a", "b", "c"])
    assert all(CANARY not in repr(p.public_tests + p.private_tests) for p in judge.seen)
    assert len({id(p) for p in judge.seen}) == 2  # one copy per problem: twins are still judged once
    fb = feedback[0]
    assert (fb.passed, fb.status, fb.test, fb.example, fb.examples, fb.output) == (
        False,
        "WRONG_ANSWER",
        TestCase("bad-2\n", "2\n"),
        2,
        2,
        "out",
    )
    assert CANARY not in feedback_message(fb, 10_000)
    # the program that passes the public tests ends its episode, whatever the hidden tests say
    assert feedback[2].passed
    plan = EpisodePlan(turns=2, follow_up=follow_up)
    fakes = Fakes({})
    turn = turn_in_sequence(fakes.generate, JudgeScorer(RecordingJudge(), "codefu").check_public)
    episodes = run_episodes([passing], [[1]], SamplingParams(n=1), plan, turn)
    assert episodes[0].turns == 1 and len(fakes.calls) == 1


def test_the_failing_example_is_found_when_judge_max_tests_cuts_the_public_tests():
    tests = [TestCase(f"ok-{i}\n", f"{i}\n") for i in range(6)] + [TestCase("bad, the largest\n", "7\n")]
    problem = Problem("many", "", tests, [TestCase(f"{CANARY}\n", "0\n")])
    fb = JudgeScorer(RecordingJudge(max_tests=3), "codefu").check_public([problem], ["x"])[0]
    # 3 of the 7 run (the largest input always among them): the failing one is found among those 3
    assert fb.test == TestCase("bad, the largest\n", "7\n") and (fb.example, fb.examples) == (3, 3)


# ---- asynchronous turns -----------------------------------------------------------------------------


def episode_summary(episodes):
    return [
        (
            e.prompt_index,
            e.sample_index,
            [r.text for r in e.responses],
            [c.status for c in e.checks],
            e.feedback_ids,
            [r.prompt_ids for r in e.responses],
        )
        for e in episodes
    ]


@pytest.mark.parametrize(
    "solve_at, turns, budget",
    [
        ({100: 1, 200: 2}, 3, None),
        ({}, 3, None),
        ({200: 3}, 4, None),
        ({}, 3, 3 + 2 + 3 + 2),
        ({100: 2}, 2, None),
    ],
)
def test_async_turns_end_every_episode_as_the_lock_step_does(solve_at, turns, budget):
    """The same episodes as in lock-step, with each check back at its own time (a pool of threads): every
    turn's prompt is its conversation so far, the same checks, the same ends (public tests passed, the
    turn limit, the token budget); later turns numbered after the prompts, each after its own episode."""
    sampling = SamplingParams(n=2, seed=5, max_new_tokens=3)
    plan = EpisodePlan(turns=turns, max_episode_tokens=budget, follow_up=lambda text, reply: [7, 7])
    lock = Fakes(solve_at)
    expected = run_episodes(
        PROBLEMS, PROMPTS, sampling, plan, turn_in_sequence(lock.generate, lock.check_public)
    )
    fakes = Fakes(solve_at)
    conversations = LocalConversations(fakes, PROMPTS, sampling)
    put = []
    real_put = conversations.follow_up
    conversations.follow_up = lambda index, prompt, after: (
        put.append((index, after)),
        real_put(index, prompt, after),
    )
    got = run_episodes_async(PROBLEMS, sampling, plan, conversations, fakes.check_public_each)
    assert episode_summary(got) == episode_summary(expected)
    assert sorted(i for i, _ in put) == list(range(len(PROMPTS), len(PROMPTS) + len(put)))
    assert conversations.inbox.take(wait=False) is None  # closed, nothing left
    for index, after in put:  # each later turn follows a turn of its own episode
        e = next(e for e in got if any(r.prompt_index == index for r in e.responses))
        assert after in [r.prompt_index for r in e.responses]


def test_async_turns_raise_a_failing_check_or_generation_instead_of_waiting():
    sampling = SamplingParams(n=2, max_new_tokens=3)
    plan = EpisodePlan(turns=3, follow_up=follow_up)

    def broken_check(items):
        for i, _ in enumerate(items):
            if i == 2:
                raise RuntimeError("the judge is gone")
            yield i, Feedback(False, "WRONG_ANSWER")

    conversations = LocalConversations(Fakes({}), PROMPTS, sampling)
    with pytest.raises(RuntimeError, match="the judge is gone"):
        run_episodes_async(PROBLEMS, sampling, plan, conversations, broken_check)
    assert conversations.inbox.aborted  # the engine drops its work: nobody will read it

    class BrokenEngine(Fakes):
        def generate(self, prompts, sampling):
            if len(prompts[0]) > 2:  # a later turn
                raise RuntimeError("CUDA error: out of memory")
            return super().generate(prompts, sampling)

    fakes = BrokenEngine({})
    with pytest.raises(RuntimeError, match="out of memory"):
        run_episodes_async(
            PROBLEMS, sampling, plan, LocalConversations(fakes, PROMPTS, sampling), fakes.check_public_each
        )


# ---- reward, metrics, config ------------------------------------------------------------------------


def test_turn_shaping_by_hand():
    turns = torch.tensor([1, 1, 2, 3])
    passed = torch.tensor([True, False, True, False])
    # cost 0.1 per turn after the first; bonus 0.5 for a first-turn solve
    assert turn_shaping(turns, passed, 0.1, 0.5).tolist() == pytest.approx([0.5, 0.0, -0.1, -0.2])
    assert turn_shaping(turns, passed, 0.0, 0.0).tolist() == [0.0] * 4
    with pytest.raises(ValueError, match=">= 1"):
        turn_shaping(torch.tensor([0]), torch.tensor([True]), 0.1, 0.0)


def test_episode_metrics_by_hand():
    def ep(turns: int, checks: list[bool]) -> Episode:
        return Episode(
            0,
            0,
            [1],
            [completion(0, [1], [5], "x")] * turns,
            checks=[Feedback(c, "ACCEPTED" if c else "WRONG_ANSWER") for c in checks],
            feedback_ids=[[9, 9]] * (turns - 1),
        )

    episodes = [ep(1, [True]), ep(2, [False]), ep(2, [False]), ep(1, [False])]  # the last: out of budget
    scores = [
        Score(1.0, True, "ACCEPTED"),
        Score(1.0, True, "ACCEPTED"),
        Score(0.0, False, "WRONG_ANSWER"),
        Score(None, False, "SANDBOX_ERROR"),
    ]
    m = episode_metrics(episodes, scores, turns=2)
    assert m == {
        "rollout/turns_mean": 1.5,
        "rollout/ended_early_frac": 0.5,
        "rollout/feedback_tokens_mean": 1.0,
        "rollout/public_pass_turn1": 0.25,
        "judge/pass_rate_turn1": 1.0,  # the unscored one is left out
        "judge/pass_rate_turn2": 0.5,
    }
    assert episode_metrics(episodes, scores, turns=1) == {}


@pytest.mark.parametrize(
    "override,key",
    [
        ({"turns": 0}, "rollout.turns"),
        ({"max_episode_tokens": 10}, "rollout.max_episode_tokens"),
        ({"feedback_chars": 0}, "rollout.feedback_chars"),
    ],
)
def test_out_of_range_episode_settings_name_the_key(override, key):
    cfg = RunConfig()
    cfg = replace(cfg, rollout=replace(cfg.rollout, **override))
    with pytest.raises(CodefuError, match=key.replace(".", r"\.")):
        check_run_config(cfg)
    bad = replace(RunConfig(), algo=replace(RunConfig().algo, turn_cost=-0.1))
    with pytest.raises(CodefuError, match=r"algo\.turn_cost"):
        check_run_config(bad)


# ---- evaluation: self-repair against sampling -------------------------------------------------------


def brute_force_pick(first_public: list[bool], correct: list[bool], k: int) -> tuple[float, float]:
    """Every ordered draw of k of the n: submit the first passing the public tests, else the last."""
    n = len(correct)
    hits = drawn = total = 0
    for order in itertools.permutations(range(n), k):
        pick = next((j for j, i in enumerate(order) if first_public[i]), k - 1)
        hits += correct[order[pick]]
        drawn += pick + 1
        total += 1
    return hits / total, drawn / total


def test_first_public_pick_by_hand_and_against_every_draw():
    # n=4, m=2 passing the examples, a=1 of them correct, b=0: q1 = 2/4, q2 = 2/4 * 1/3 = 1/6
    assert first_public_pick(4, 2, 1, 0, 2) == pytest.approx((5 / 6 * 1 / 2, 1.5))
    for first_public, correct, k in [
        ([True, False, False, True, False], [True, True, False, False, False], 3),
        ([False, False, False, False], [False, True, False, False], 2),
        ([True, True, True], [True, False, True], 3),
        ([False, True, False, True, False, False], [False, True, True, False, False, True], 4),
    ]:
        n, m = len(correct), sum(first_public)
        a = sum(p and c for p, c in zip(first_public, correct, strict=True))
        b = sum(c and not p for p, c in zip(first_public, correct, strict=True))
        assert first_public_pick(n, m, a, b, k) == pytest.approx(brute_force_pick(first_public, correct, k))
    with pytest.raises(ValueError, match="1 <= k <= n"):
        first_public_pick(2, 1, 1, 0, 3)


def test_turn_report_compares_repair_with_sampling_at_equal_turns():
    def r(passed, public, tokens):
        return EpisodeResult(passed, public, tokens)

    episodes = {
        # repair turns a failure into a pass; sampling two could find the one passing first turn
        "x": [r([False, True], False, [10, 12]), r([True, True], True, [8])],
        "y": [r([False, False], False, [10, 10]), r([False, False], False, [10, 10])],
    }
    report = turn_report(episodes, 2, seed=0)
    assert report["problems"] == 2
    assert report["pass@1_after_turn"]["1"]["pass@1"] == pytest.approx(0.25)
    assert report["pass@1_after_turn"]["2"]["pass@1"] == pytest.approx(0.5)
    # x: two draws always include the one passing the examples (correct): 1; y: 0
    assert report["sampling"]["pass@1"] == pytest.approx(0.5) and report["sampling"]["samples"] == 2
    assert report["diff"]["pass@1"] == pytest.approx(0.0)
    # x: 1.5 programs drawn on average x 9 tokens; y: 2 x 10
    assert report["sampling"]["tokens"] == pytest.approx((1.5 * 9 + 20) / 2)
    assert report["self_repair"]["tokens"] == pytest.approx(((22 + 8) / 2 + 20) / 2)
    for cell in (report["self_repair"], report["sampling"], report["diff"]):
        low, high = cell["ci95"]
        assert low <= cell["pass@1"] <= high
    with pytest.raises(ValueError, match="--n >= --turns"):
        turn_report({"x": episodes["x"][:1]}, 2)
    assert math.isclose(report["self_repair"]["pass@1"], report["pass@1_after_turn"]["2"]["pass@1"])
