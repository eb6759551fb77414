"""Self-repair episodes: the model writes a program, sees the judge's feedback on the PUBLIC tests, and
writes a new one, for up to `rollout.turns` turns or until the public tests pass.

Two schedules. `run_episodes_async` (rollout.async_turns, the default): each program is checked as
soon as it is written, and each failing episode's next turn joins the running generation as soon as its
check is back (`Conversations`). `run_episodes`, in lock-step over a batch: turn 1 is today's sampling
(n samples of each prompt, one call of a `Turn`); the programs are run on the public tests
(`Scorer.check_public`, which hands the judge a copy of the problem holding nothing else; in the loop,
as each completion finishes, while the rest decode); each failing episode gets a feedback user turn
and, while its token budget allows, one more sample (n=1) with the conversation so far as its prompt,
all such continuations in one call per turn. With turns = 1 nothing but that first call runs.

An episode becomes one `Completion` for the trainer (`Episode.completion`): its responses with the
feedback turns between them, `loss_mask` 0 (and log-prob 0.0) on the feedback tokens, so only the model's
own tokens are trained; its text is the last program, the one judged on the hidden tests for the reward.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from codefu.orchestrator.config import RolloutConfig
from codefu.orchestrator.scoring import Feedback, Score
from codefu.rollout.prompts import follow_up_ids
from codefu.rollout.types import Completion, SamplingParams
from codefu.types import Problem, Status

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EpisodePlan:
    """How episodes run (the `rollout:` keys turns, max_episode_tokens, feedback_chars) and the token ids
    of a feedback turn after a reply (`follow_up(feedback text, reply ids)`: the tokenizer's template)."""

    turns: int = 1
    max_episode_tokens: int | None = None  # the model's tokens and the feedback's after the prompt
    feedback_chars: int = 400
    follow_up: Callable[[str, list[int]], list[int]] | None = None

    @classmethod
    def of(cls, rollout: RolloutConfig, tokenizer: Any) -> EpisodePlan:
        def follow_up(text: str, reply_ids: list[int]) -> list[int]:
            return follow_up_ids(tokenizer, text, reply_ids)

        return cls(rollout.turns, rollout.max_episode_tokens, rollout.feedback_chars, follow_up)


@dataclass
class Episode:
    """One sample's conversation: a response per turn, the public-test check of each turn that was
    checked, and the feedback turn (token ids) after each response but the last."""

    prompt_index: int  # into the prompts of the first turn
    sample_index: int  # 0 .. n-1 within the prompt: episodes of one prompt are its GRPO group
    prompt_ids: list[int]
    responses: list[Completion]  # turn t's prompt_ids: the conversation before it
    checks: list[Feedback] = field(default_factory=list)  # turn t's check at t-1; the last turn's may lack
    feedback_ids: list[list[int]] = field(default_factory=list)

    @property
    def turns(self) -> int:
        return len(self.responses)

    @property
    def final(self) -> Completion:
        return self.responses[-1]

    @property
    def tokens(self) -> int:
        """Tokens after the prompt: every response's and every feedback turn's."""
        return sum(r.num_tokens for r in self.responses) + sum(len(f) for f in self.feedback_ids)

    def completion(self) -> Completion:
        """The episode as the trainer sees it; a one-turn episode is its response, unchanged."""
        if self.turns == 1:
            return self.final
        ids: list[int] = []
        logprobs: list[float] = []
        mask: list[int] = []
        versions: list[int | None] = []  # a feedback turn's: its turn's (it is not trained: mask 0)
        for t, r in enumerate(self.responses):
            ids += r.token_ids
            logprobs += r.logprobs
            mask += [1] * r.num_tokens
            versions += r.token_versions or [r.policy_version] * r.num_tokens
            if t < len(self.feedback_ids):
                f = self.feedback_ids[t]
                ids += f
                logprobs += [0.0] * len(f)
                mask += [0] * len(f)
                versions += [r.policy_version] * len(f)
        last = self.final
        return Completion(
            self.prompt_index,
            self.sample_index,
            self.prompt_ids,
            ids,
            last.text,
            logprobs,
            last.finish_reason,
            loss_mask=mask,
            policy_version=oldest_version(self.responses),
            token_versions=None if None in versions else versions,  # type: ignore[arg-type]
        )


def oldest_version(completions: list[Completion]) -> int | None:
    """The oldest weights' version among `completions` (None if any has none)."""
    versions = [c.policy_version for c in completions]
    return None if None in versions else min(v for v in versions if v is not None)


#: One turn: (prompts, sampling, owners) -> the completions in (prompt, sample) order and, when `owners` is
#: given (another turn may follow), each program's public-test check (owners[c.prompt_index] is its
#: problem). `turn_in_sequence` checks after generating; the loop's `turn_judged_while_decoding` while the
#: turn decodes.
Turn = Callable[
    [list[list[int]], SamplingParams, list[Problem] | None], tuple[list[Completion], list[Feedback] | None]
]


def turn_in_sequence(
    generate: Callable[[list[list[int]], SamplingParams], list[Completion]],
    check_public: Callable[[list[Problem], list[str]], list[Feedback]],
) -> Turn:
    """A `Turn` that generates, then checks the programs on their problems' public tests."""

    def turn(
        prompts: list[list[int]], sampling: SamplingParams, owners: list[Problem] | None
    ) -> tuple[list[Completion], list[Feedback] | None]:
        completions = generate(prompts, sampling)
        if owners is None:
            return completions, None
        programs = [c.text for c in completions]
        return completions, check_public([owners[c.prompt_index] for c in completions], programs)

    return turn


def run_episodes(
    problems: list[Problem], prompts: list[list[int]], sampling: SamplingParams, plan: EpisodePlan, turn: Turn
) -> list[Episode]:
    """`sampling.n` episodes of each prompt (prompts[i] is problems[i]'s), in (prompt, sample) order. A
    failing episode goes on while its next turn fits: the feedback turn plus a whole response of
    `sampling.max_new_tokens` within `plan.max_episode_tokens`. An episode ends when its program passes
    the public tests, when the judge could not run it (SANDBOX_ERROR: our failure, nothing to show), when
    the budget is spent, or after `plan.turns` turns."""
    checked = plan.turns > 1
    first, checks = turn(prompts, sampling, problems if checked else None)
    episodes = [Episode(c.prompt_index, c.sample_index, c.prompt_ids, [c]) for c in first]
    going = episodes
    for t in range(2, plan.turns + 1):
        assert checks is not None
        going = [e for e, fb in zip(going, checks, strict=True) if _goes_on(e, fb, plan, sampling)]
        if not going:
            break
        later = replace(sampling, n=1, seed=None if sampling.seed is None else sampling.seed + 10_007 * t)
        conversations = [e.final.prompt_ids + e.final.token_ids + e.feedback_ids[-1] for e in going]
        owners = [problems[e.prompt_index] for e in going] if t < plan.turns else None
        later_turn, checks = turn(conversations, later, owners)
        for c in later_turn:
            going[c.prompt_index].responses.append(c)
    return episodes


class Conversations(Protocol):
    """Generation that takes follow-ups while it runs (roles.WorkerConversations on Ray's rollout
    workers, codefu.rollout.follow_ups.LocalConversations on one engine): iterating gives the completions
    of the prompts it was opened with, then of each follow-up, in batches as they finish, until `close`."""

    last_batch_at: float  # time.perf_counter() when the last batch came

    def __iter__(self) -> Iterator[list[Completion]]: ...

    def follow_up(self, index: int, prompt: list[int], after: int) -> None:
        """Generate one sample of `prompt` as prompt_index `index`, the turn after prompt `after`'s."""
        ...

    def close(self, abort: bool = False) -> None:
        """No more follow-ups; `abort`: drop what is being generated (the caller failed)."""
        ...


class EpisodeFeed:
    """Episodes handed to a judge one by one from another thread: iterating gives (problem, last program)
    of each as it is `put`, until `end()`; `given[i]` is the episode at the judge's position i."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        self.given: list[Episode] = []  # appended on the judge's arrivals thread
        self._queue: queue.Queue[Episode | None] = queue.Queue()

    def put(self, episode: Episode) -> None:
        self._queue.put(episode)

    def end(self) -> None:
        self._queue.put(None)

    def __iter__(self) -> Iterator[tuple[Problem, str]]:
        while (e := self._queue.get()) is not None:
            self.given.append(e)
            yield self.problems[e.prompt_index], e.final.text


def run_episodes_async(
    problems: list[Problem],
    sampling: SamplingParams,
    plan: EpisodePlan,
    conversations: Conversations,
    check_each: Callable[[Iterable[tuple[Problem, str]]], Iterator[tuple[int, Feedback]]],
    on_end: Callable[[Episode], None] = lambda episode: None,
) -> list[Episode]:
    """`run_episodes` without the lock-step: each program goes to `check_each` (a scorer's
    `check_public_each`) as soon as it is written, and each failing episode's next turn goes into the
    running generation (`conversations`, opened on the prompts of `problems` with `sampling`) as soon as
    its check is back, while other episodes still decode. The same episodes, ended by the same rules;
    the draws differ (a turn is sampled in whatever batch it joins). Later turns are prompt indices
    len(problems), len(problems) + 1, ... in the order they were put. `on_end(episode)` is called as
    each episode ends (its last program can be scored while others still run)."""
    n = sampling.n
    episodes: list[Episode | None] = [None] * (len(problems) * n)
    episode_of_turn: dict[int, Episode] = {}  # a later turn's prompt index -> its episode
    to_check = EpisodeFeed(problems)
    events: queue.Queue[tuple[str, Any]] = queue.Queue()
    pumps = [
        _pump(iter(conversations), "written", events),
        _pump(check_each(to_check), "checked", events),
    ]
    going, next_index = len(episodes), len(problems)
    try:
        while going:
            kind, payload = events.get()
            if kind == "error":
                raise payload
            if kind == "written":
                for c in payload:
                    if c.prompt_index < len(problems):
                        e = episodes[c.prompt_index * n + c.sample_index] = Episode(
                            c.prompt_index, c.sample_index, c.prompt_ids, [c]
                        )
                    else:
                        e = episode_of_turn.pop(c.prompt_index)
                        e.responses.append(c)
                    if e.turns < plan.turns:
                        to_check.put(e)
                    else:
                        going -= 1
                        on_end(e)
            elif kind == "checked":
                e = to_check.given[payload[0]]
                if _goes_on(e, payload[1], plan, sampling):
                    episode_of_turn[next_index] = e
                    conversation = e.final.prompt_ids + e.final.token_ids + e.feedback_ids[-1]
                    conversations.follow_up(next_index, conversation, after=e.final.prompt_index)
                    next_index += 1
                else:
                    going -= 1
                    on_end(e)
    except BaseException:
        to_check.end()
        try:  # the engines drop their work at once; the error that got us here is the one to raise
            conversations.close(abort=True)
        except Exception:  # noqa: BLE001 - logged, the first error is raised
            log.exception("closing the conversations after an error failed too")
        raise
    to_check.end()
    conversations.close()
    for pump in pumps:
        pump.join()
    assert all(e is not None for e in episodes), "an episode never had its first turn"
    return episodes  # type: ignore[return-value]


def _pump(items: Iterable[Any], kind: str, events: queue.Queue[tuple[str, Any]]) -> threading.Thread:
    """A thread putting each of `items` on `events` as (kind, item); an error as ("error", it)."""

    def pump() -> None:
        try:
            for item in items:
                events.put((kind, item))
        except BaseException as e:  # noqa: BLE001 - raised by run_episodes_async's loop
            events.put(("error", e))

    thread = threading.Thread(target=pump, name=f"codefu-episodes-{kind}", daemon=True)
    thread.start()
    return thread


def _goes_on(e: Episode, fb: Feedback, plan: EpisodePlan, sampling: SamplingParams) -> bool:
    """Records the check; True (with the feedback turn added) when the episode takes another turn."""
    e.checks.append(fb)
    if fb.passed or fb.status == Status.SANDBOX_ERROR.value:
        return False
    assert plan.follow_up is not None, "EpisodePlan.follow_up is needed for more than one turn"
    ids = plan.follow_up(feedback_message(fb, plan.feedback_chars), e.final.token_ids)
    budget = plan.max_episode_tokens
    if budget is not None and e.tokens + len(ids) + sampling.max_new_tokens > budget:
        return False
    e.feedback_ids.append(ids)
    return True


# ---- the feedback turn ------------------------------------------------------------------------------

_WHAT = {
    Status.WRONG_ANSWER: "wrong answer",
    Status.TIME_LIMIT: "time limit exceeded",
    Status.MEMORY_LIMIT: "memory limit exceeded",
    Status.RUNTIME_ERROR: "runtime error",
    Status.OUTPUT_LIMIT: "output limit exceeded",
}
_ASK = "Fix the program and reply with the complete corrected program in a single code block."


def clip(text: str, chars: int) -> str:
    """`text` cut to `chars` characters, its head (two thirds) and tail, saying how much was cut between
    them: an error's last line and an output's first difference both tend to survive."""
    if len(text) <= chars:
        return text
    head = chars * 2 // 3
    tail = chars - head
    return f"{text[:head]}\n... ({len(text) - chars} characters cut) ...\n{text[len(text) - tail :]}"


def _block(title: str, text: str, chars: int) -> str:
    body = clip(text.rstrip("\n"), chars)
    return f"{title}\n```\n{body}\n```\n" if body.strip() else f"{title} (nothing)\n"


def feedback_message(fb: Feedback, chars: int) -> str:
    """The user turn after a failing program: what went wrong on the first failing example (its input,
    the expected and the actual output, or the compiler's or the runtime's error), each part cut to
    `chars` characters (`clip`), then the request for a corrected program."""
    status = Status(fb.status)
    if status is Status.NO_CODE:
        return "Your reply holds no program. Reply with one complete program in a single code block."
    if status is Status.COMPILE_ERROR:
        compiler = _block("Compiler output:", fb.compile_output, chars)
        return f"Your program does not compile.\n{compiler}{_ASK}"
    what = _WHAT.get(status, status.value.lower().replace("_", " "))
    if fb.test is None:
        return f"Your program failed the examples: {what}.\n{_ASK}"
    text = f"Your program failed example {fb.example} of {fb.examples}: {what}.\n"
    text += _block("Input:", fb.test.input, chars) + _block("Expected output:", fb.test.output, chars)
    if status in (Status.WRONG_ANSWER, Status.RUNTIME_ERROR):
        text += _block("Your program's output:", fb.output, chars)
    if status is Status.RUNTIME_ERROR and fb.message:
        text += _block("Error:", fb.message, chars)
    return text + _ASK


# ---- metrics ----------------------------------------------------------------------------------------


def episode_metrics(episodes: list[Episode], scores: list[Score], turns: int) -> dict[str, float]:
    """Per-turn figures of a step's episodes (empty with one turn):

    rollout/turns_mean               turns per episode
    rollout/ended_early_frac         episodes that ended before `turns` (passed the examples, or budget)
    rollout/public_pass_turn{t}      episodes at turn t whose program passed the public tests (t < turns)
    judge/pass_rate_turn{t}          hidden-test pass rate of the episodes whose last program is turn t's
    rollout/feedback_tokens_mean     feedback tokens per episode
    """
    if turns == 1 or not episodes:
        return {}
    out = {
        "rollout/turns_mean": sum(e.turns for e in episodes) / len(episodes),
        "rollout/ended_early_frac": sum(e.turns < turns for e in episodes) / len(episodes),
        "rollout/feedback_tokens_mean": sum(len(f) for e in episodes for f in e.feedback_ids) / len(episodes),
    }
    for t in range(1, turns + 1):
        checked = [e.checks[t - 1].passed for e in episodes if len(e.checks) >= t]
        if t < turns and checked:
            out[f"rollout/public_pass_turn{t}"] = sum(checked) / len(checked)
        ended = [
            s.passed for e, s in zip(episodes, scores, strict=True) if e.turns == t and s.reward is not None
        ]
        if ended:
            out[f"judge/pass_rate_turn{t}"] = sum(ended) / len(ended)
    return out
