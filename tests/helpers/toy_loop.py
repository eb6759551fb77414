"""The toy tasks of the Ray tier: a tiny model learns to write 'a' (CharScorer), or, over two self-repair
turns, the character a problem keeps secret until the feedback shows it (SecretCharScorer); their config
and problems; and a spy on the samples a loop trains on (`on_each_sample`)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from codefu.data.difficulty import DifficultyConfig
from codefu.models.tiny import tiny_model, tiny_tokenizer
from codefu.orchestrator import loop
from codefu.orchestrator.config import AlgoConfig, DataConfig, LoopConfig, RolloutConfig, RunConfig
from codefu.orchestrator.layout import ResourcesConfig
from codefu.orchestrator.samplers import Sampled
from codefu.orchestrator.scoring import BaseScorer, Feedback, Score
from codefu.trainer.config import TrainerConfig
from codefu.types import Problem, TestCase

TARGET = "a"
SECRETS = "QZ"  # characters that no prompt and no feedback text holds but the expected output


def char_score(target: str, text: str, over: float = 0.0) -> Score:
    """The share of the response's characters that are `target`; passed from half (above `over` too)."""
    share = text.count(target) / max(1, len(text))
    passed = share >= 0.5 and share > over
    return Score(share, passed, "ACCEPTED" if passed else "WRONG_ANSWER")


class CharScorer(BaseScorer):
    """Toy verifiable reward: the share of the response's characters that are TARGET; the public test
    (self-repair's feedback) wants TARGET x 4."""

    def score_stream(self, items: Iterable[tuple[Problem, str]]) -> list[Score]:
        return [char_score(TARGET, text) for _, text in items]

    def check_public_each(self, items: Iterable[tuple[Problem, str]]) -> Iterator[tuple[int, Feedback]]:
        for i, (_, text) in enumerate(items):
            ok = char_score(TARGET, text).passed
            test = None if ok else TestCase("", TARGET * 4)
            yield i, Feedback(ok, "ACCEPTED" if ok else "WRONG_ANSWER", test=test, example=1, examples=1)


class SecretCharScorer(BaseScorer):
    """The two-turn toy: each problem wants its own character of SECRETS (Problem.extra["target"]) as
    more than half of the response (so no blind mix passes both), and every prompt is the same, so a
    first turn can only guess: its program always fails the examples (a lucky guess ending an episode
    would only teach guessing). The feedback's expected output shows the character 32 times, so a second
    turn succeeds by reading it. `reveal=False` shows a random one of SECRETS instead (the control: the
    same feedback with nothing in it to learn from; a blind policy passes at most half the problems)."""

    def __init__(self, reveal: bool = True, seed: int = 0):
        self.reveal, self.rng = reveal, random.Random(seed)

    def score_stream(self, items: Iterable[tuple[Problem, str]]) -> list[Score]:
        return [char_score(p.extra["target"], text, over=0.5) for p, text in items]

    def check_public_each(self, items: Iterable[tuple[Problem, str]]) -> Iterator[tuple[int, Feedback]]:
        for i, (p, _) in enumerate(items):
            shown = p.extra["target"] if self.reveal else self.rng.choice(SECRETS)
            yield i, Feedback(False, "WRONG_ANSWER", test=TestCase("", shown * 32), example=1, examples=1)


def toy_model_dir(path: Path) -> Path:
    if not (path / "config.json").exists():
        tiny_model(seed=0).save_pretrained(path)
        tiny_tokenizer().save_pretrained(path)
    return path


def toy_config(
    model_dir: Path, steps: int, save_every: int = 0, recompute: bool = True, difficulty: bool = False
) -> RunConfig:
    return RunConfig(
        data=DataConfig(prompts_per_step=4, difficulty=DifficultyConfig(difficulty, window=1, retry_after=1)),
        rollout=RolloutConfig(n=8, max_new_tokens=8, batch_size=32),
        algo=AlgoConfig(recompute_logprobs=recompute),
        trainer=TrainerConfig(model=str(model_dir), lr=3e-2, gradient_checkpointing=False, weight_decay=0.0),
        # half a CPU per rank: the policy, a reference or critic beside it, and the engine fit 2 CPUs
        resources=ResourcesConfig(judge_cpus=0, cpus_per_rank=0.5),
        loop=LoopConfig(steps=steps, val_every=0, save_every=save_every),
    )


def toy_problems() -> list[Problem]:
    return [Problem(f"p{i}", "", [], [], prompt=[{"role": "user", "content": f"x{i}"}]) for i in range(8)]


def secret_problems() -> list[Problem]:
    """8 problems with one prompt, four of each secret character (prompts_per_step 8: every step is
    balanced, so no step's majority pulls a blind policy towards one character)."""
    prompt = [{"role": "user", "content": "x"}]
    return [Problem(f"s{i}", "", [], [], prompt=prompt, extra={"target": SECRETS[i % 2]}) for i in range(8)]


def on_each_sample(monkeypatch, see: Callable[[int, Sampled], None]) -> None:
    """`see(step, sampled)` with every step's samples, where codefu.orchestrator.loop gets them from its
    sampler (whatever sampler make_sampler picks)."""
    real_make = loop.make_sampler

    def spying_make(*args, **kwargs):
        sampler = real_make(*args, **kwargs)
        real_sample = sampler.sample

        def sample(step, timer):
            sampled = real_sample(step, timer)
            see(step, sampled)
            return sampled

        sampler.sample = sample
        return sampler

    monkeypatch.setattr(loop, "make_sampler", spying_make)
