"""The GRPO loop end to end on Ray with a tiny model and a toy verifiable task whose reward must rise;
a flipped advantage sign must make the same test fail (it is run too, and must not rise)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from codefu.data.difficulty import DifficultyConfig
from codefu.models.tiny import tiny_model, tiny_tokenizer
from codefu.observability.sinks import JsonlSink, read_metrics
from codefu.orchestrator import loop
from codefu.orchestrator.config import AlgoConfig, DataConfig, LoopConfig, RolloutConfig, RunConfig
from codefu.orchestrator.plan import ResourcesConfig
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
        resources=ResourcesConfig(judge_cpus=0),
        loop=LoopConfig(steps=steps, val_every=0, save_every=save_every),
    )


def toy_problems() -> list[Problem]:
    return [Problem(f"p{i}", "", [], [], prompt=[{"role": "user", "content": f"x{i}"}]) for i in range(8)]


def toy_run(tmp_path: Path, name: str, steps: int = 10, recompute: bool = True) -> list[float]:
    run_dir = tmp_path / name
    cfg = toy_config(toy_model_dir(tmp_path / "model"), steps, recompute=recompute)
    loop.train(cfg, run_dir, toy_problems(), [], tiny_tokenizer(), CharScorer(), sinks=[JsonlSink(run_dir)])
    rows = read_metrics(run_dir / "metrics.jsonl")
    assert [r["step"] for r in rows] == list(range(1, steps + 1))
    # the final checkpoint's HF export loads in plain transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    export = run_dir / "checkpoints" / f"step_{steps:08d}" / "hf"
    AutoModelForCausalLM.from_pretrained(export)
    assert AutoTokenizer.from_pretrained(export).decode([40]) == tiny_tokenizer().decode([40])
    return [r["reward/mean"] for r in rows]


def test_reward_rises_and_a_flipped_sign_does_not(local_ray, tmp_path, monkeypatch):
    rewards = toy_run(tmp_path, "right")
    assert sum(rewards[-3:]) / 3 > sum(rewards[:3]) / 3 + 0.15, rewards

    # trusting the rollout's log-probs as the old policy (the CPU default) learns too
    without_recompute = toy_run(tmp_path, "rollout-logprobs", recompute=False)
    assert sum(without_recompute[-3:]) / 3 > sum(without_recompute[:3]) / 3 + 0.15, without_recompute

    real = loop.group_advantages
    monkeypatch.setattr(loop, "group_advantages", lambda *a, **k: -real(*a, **k))
    flipped = toy_run(tmp_path, "flipped")
    assert sum(flipped[-3:]) / 3 <= sum(flipped[:3]) / 3 + 0.02, flipped
    assert torch.tensor(flipped[-3:]).mean() < torch.tensor(rewards[-3:]).mean()


def test_sigkill_mid_run_then_resume_redoes_only_steps_since_the_checkpoint(tmp_path):
    """The driver dies with SIGKILL after step 3 (checkpoint at step 2); the resumed run redoes step 3
    identically (same data order, difficulty record and sampling seeds) and the metrics file has no gap
    or duplicate."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    script = [sys.executable, str(Path(__file__).parent / "toy_train.py"), str(run_dir), "6"]
    first = subprocess.Popen(script, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    metrics = run_dir / "metrics.jsonl"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and first.poll() is None:
        if metrics.exists() and len(read_metrics(metrics)) >= 3:
            break
        time.sleep(0.2)
    assert first.poll() is None, "the first run ended before it could be killed"
    os.killpg(first.pid, signal.SIGKILL)  # the driver and everything it started
    first.wait()
    before = {r["step"]: r for r in read_metrics(metrics)}
    assert 3 <= max(before) < 6

    # Which checkpoint the resumed run starts from is read from its own log, not guessed from the
    # directory now: the trainer actor may outlive the killed driver long enough to finish a save.
    done = subprocess.run(script, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    resumed = re.search(r"resumed from \S+ at step (\d+)", done.stderr)
    assert resumed, done.stderr[-3000:]
    resumed_at = int(resumed.group(1))
    # metrics are written before the checkpoint of the same step, so it never runs ahead of them
    assert 2 <= resumed_at <= max(before)
    after = read_metrics(metrics)
    assert [r["step"] for r in after] == [1, 2, 3, 4, 5, 6]
    assert (run_dir / "starts.txt").read_text().count("start") == 2
    for r in after:
        if r["step"] <= resumed_at:  # kept from the first run, not redone
            assert r["time"] == before[r["step"]]["time"]
        elif r["step"] in before:  # redone after the resume: the same prompts and sampling seeds
            assert r["time"] > before[r["step"]]["time"]
            # bit-identical in every run seen; a tolerance keeps thread-order float noise from failing it
            assert r["reward/mean"] == pytest.approx(before[r["step"]]["reward/mean"], abs=0.02)
        for key in ("data/problems_active", "data/problems_too_hard", "data/problems_solved"):
            assert r[key] == before.get(r["step"], r)[key]  # the difficulty record resumed exactly
