"""The GRPO loop end to end on Ray with a tiny model and a toy verifiable task whose reward must rise;
a flipped advantage sign must make the same test fail (it is run too, and must not rise)."""

from __future__ import annotations

import torch

from codefu.observability.sinks import JsonlSink, read_metrics
from codefu.orchestrator import loop
from codefu.orchestrator.config import AlgoConfig, DataConfig, LoopConfig, RolloutConfig, RunConfig
from codefu.orchestrator.plan import ResourcesConfig
from codefu.orchestrator.roles import Score
from codefu.rollout.tiny import tiny_model, tiny_tokenizer
from codefu.trainer.config import TrainerConfig
from codefu.types import Problem

TARGET = "a"


class CharScorer:
    """Toy verifiable reward: the share of the response's characters that are TARGET."""

    def score(self, problems: list[Problem], responses: list[str]) -> list[Score]:
        out = []
        for text in responses:
            share = text.count(TARGET) / max(1, len(text))
            out.append(Score(share, share >= 0.5, "ACCEPTED" if share >= 0.5 else "WRONG_ANSWER"))
        return out

    def close(self) -> None:
        pass


def toy_run(tmp_path, name: str, steps: int = 10) -> list[float]:
    model_dir = tmp_path / f"{name}-model"
    tiny_model(seed=0).save_pretrained(model_dir)
    tokenizer = tiny_tokenizer()
    tokenizer.save_pretrained(model_dir)
    cfg = RunConfig(
        data=DataConfig(prompts_per_step=4),
        rollout=RolloutConfig(n=8, max_new_tokens=8, batch_size=32),
        algo=AlgoConfig(),
        trainer=TrainerConfig(model=str(model_dir), lr=3e-2, gradient_checkpointing=False, weight_decay=0.0),
        resources=ResourcesConfig(judge_cpus=0),
        loop=LoopConfig(steps=steps, val_every=0, save_every=0),
    )
    problems = [Problem(f"p{i}", "", [], [], prompt=[{"role": "user", "content": f"x{i}"}]) for i in range(8)]
    run_dir = tmp_path / name
    loop.train(cfg, run_dir, problems, [], tokenizer, CharScorer(), sinks=[JsonlSink(run_dir)])
    rows = read_metrics(run_dir / "metrics.jsonl")
    assert [r["step"] for r in rows] == list(range(1, steps + 1))
    return [r["reward/mean"] for r in rows]


def test_reward_rises_and_a_flipped_sign_does_not(local_ray, tmp_path, monkeypatch):
    rewards = toy_run(tmp_path, "right")
    assert sum(rewards[-3:]) / 3 > sum(rewards[:3]) / 3 + 0.15, rewards

    real = loop.group_advantages
    monkeypatch.setattr(loop, "group_advantages", lambda *a, **k: -real(*a, **k))
    flipped = toy_run(tmp_path, "flipped")
    assert sum(flipped[-3:]) / 3 <= sum(flipped[:3]) / 3 + 0.02, flipped
    assert torch.tensor(flipped[-3:]).mean() < torch.tensor(rewards[-3:]).mean()
