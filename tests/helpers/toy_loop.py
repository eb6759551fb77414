"""The toy task of the Ray tier: a tiny model learns to write 'a' (CharScorer), its config and problems."""

from __future__ import annotations

from pathlib import Path

from codefu.data.difficulty import DifficultyConfig
from codefu.models.tiny import tiny_model, tiny_tokenizer
from codefu.orchestrator.config import AlgoConfig, DataConfig, LoopConfig, RolloutConfig, RunConfig
from codefu.orchestrator.layout import ResourcesConfig
from codefu.orchestrator.roles import Score
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
