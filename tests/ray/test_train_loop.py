"""The GRPO loop end to end on Ray with a tiny model and a toy verifiable task whose reward must rise;
a flipped advantage sign must make the same test fail (it is run too, and must not rise)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from codefu.errors import CodefuError
from codefu.models.tiny import tiny_tokenizer
from codefu.observability.sinks import JsonlSink, read_metrics
from codefu.orchestrator import loop
from codefu.trainer.checkpoint import latest_checkpoint
from helpers.toy_loop import CharScorer, toy_config, toy_model_dir, toy_problems


def toy_run(
    tmp_path: Path,
    name: str,
    steps: int = 10,
    recompute: bool = True,
    keep_state: bool = True,
    algo: dict | None = None,
    trainer: dict | None = None,
    critic: dict | None = None,
):
    run_dir = tmp_path / name
    cfg = toy_config(toy_model_dir(tmp_path / "model"), steps, recompute=recompute)
    cfg = replace(
        cfg,
        loop=replace(cfg.loop, keep_final_state=keep_state),
        algo=replace(cfg.algo, **(algo or {})),
        trainer=replace(cfg.trainer, **(trainer or {})),
        critic=replace(cfg.critic, **(critic or {})),
    )
    loop.train(cfg, run_dir, toy_problems(), [], tiny_tokenizer(), CharScorer(), sinks=[JsonlSink(run_dir)])
    rows = read_metrics(run_dir / "metrics.jsonl")
    assert [r["step"] for r in rows] == list(range(1, steps + 1))
    # the final model's HF export loads in plain transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer

    export = run_dir / "model"
    AutoModelForCausalLM.from_pretrained(export)
    assert AutoTokenizer.from_pretrained(export).decode([40]) == tiny_tokenizer().decode([40])
    # the final checkpoint stays resumable, or (keep_final_state: false) only the model and records stay
    assert (latest_checkpoint(run_dir / "checkpoints") is not None) == keep_state
    assert not list(run_dir.glob("checkpoints/step_*/hf"))  # hf_export: end
    if not keep_state:
        with pytest.raises(CodefuError, match="finished run that kept no resumable state"):
            loop.train(
                cfg, run_dir, toy_problems(), [], tiny_tokenizer(), CharScorer(), sinks=[JsonlSink(run_dir)]
            )
        assert len(read_metrics(run_dir / "metrics.jsonl")) == steps  # nothing lost
    return [r["reward/mean"] for r in rows]


@pytest.mark.slow
def test_reward_rises_and_a_flipped_sign_does_not(local_ray, tmp_path, monkeypatch):
    rewards = toy_run(tmp_path, "right")
    assert sum(rewards[-3:]) / 3 > sum(rewards[:3]) / 3 + 0.15, rewards

    # trusting the rollout's log-probs as the old policy (the CPU default) learns too
    without_recompute = toy_run(tmp_path, "rollout-logprobs", recompute=False, keep_state=False)
    assert sum(without_recompute[-3:]) / 3 > sum(without_recompute[:3]) / 3 + 0.15, without_recompute

    real = loop.sequence_advantages
    monkeypatch.setattr(loop, "sequence_advantages", lambda *a, **k: -real(*a, **k))
    flipped = toy_run(tmp_path, "flipped")
    assert sum(flipped[-3:]) / 3 <= sum(flipped[:3]) / 3 + 0.02, flipped
    assert torch.tensor(flipped[-3:]).mean() < torch.tensor(rewards[-3:]).mean()


@pytest.mark.slow
@pytest.mark.parametrize(
    "algo,trainer",
    [
        ({"estimator": "rloo"}, {}),
        ({"estimator": "reinforce_pp"}, {}),
        ({}, {"policy_loss": "gspo"}),
        ({}, {"policy_loss": "cispo"}),
        # no recompute pass: pi_old from the update's own forward, truncated importance weights to the engine
        ({"recompute_logprobs": False}, {"rollout_correction": "token_truncate"}),
    ],
    ids=["rloo", "reinforce_pp", "gspo", "cispo", "tis-without-recompute"],
)
def test_each_estimator_and_loss_learns_and_its_flipped_sign_does_not(
    local_ray, tmp_path, monkeypatch, algo, trainer
):
    rewards = toy_run(tmp_path, "right", keep_state=False, algo=algo, trainer=trainer)
    assert sum(rewards[-3:]) / 3 > sum(rewards[:3]) / 3 + 0.15, rewards
    real = loop.sequence_advantages
    monkeypatch.setattr(loop, "sequence_advantages", lambda *a, **k: -real(*a, **k))
    flipped = toy_run(tmp_path, "flipped", keep_state=False, algo=algo, trainer=trainer)
    assert sum(flipped[-3:]) / 3 <= sum(flipped[:3]) / 3 + 0.02, flipped


@pytest.mark.slow
def test_ppo_with_a_critic_learns_and_its_flipped_sign_does_not(local_ray, tmp_path, monkeypatch):
    ppo = dict(algo={"estimator": "ppo"}, critic={"lr": 1e-2})
    rewards = toy_run(tmp_path, "right", keep_state=False, **ppo)
    assert sum(rewards[-3:]) / 3 > sum(rewards[:3]) / 3 + 0.15, rewards
    rows = read_metrics(tmp_path / "right" / "metrics.jsonl")
    assert [r["critic/steps"] for r in rows] == list(range(1, 11))  # one critic mini-batch per step
    assert all("critic/vf_loss" in r and "timing/critic_s" in r for r in rows)
    # the critic learns the returns: its values move from 0 (the zero head) towards the rising reward
    assert rows[0]["critic/values_mean"] == 0.0 and rows[-1]["critic/values_mean"] > 0.1
    assert not (tmp_path / "right" / "checkpoints" / "critic").exists()  # keep_final_state: false
    real = loop.gae

    def flipped_gae(*args, **kwargs):
        advantages, returns = real(*args, **kwargs)
        return -advantages, returns  # the critic still learns the true returns

    monkeypatch.setattr(loop, "gae", flipped_gae)
    flipped = toy_run(tmp_path, "flipped", keep_state=False, **ppo)
    assert sum(flipped[-3:]) / 3 <= sum(flipped[:3]) / 3 + 0.02, flipped


@pytest.mark.slow
def test_ppo_with_the_critic_in_bundles_of_its_own(local_ray, tmp_path):
    cfg = toy_config(toy_model_dir(tmp_path / "model"), steps=2)
    res = replace(cfg.resources, critic_colocate=False, cpus_per_rank=0.5)
    cfg = replace(cfg, algo=replace(cfg.algo, estimator="ppo"), resources=res)
    from codefu.orchestrator.roles import run_layout

    layout = run_layout(cfg)
    trainer_bundles = {s.bundle for s in layout.slots_of("trainer")}
    assert not trainer_bundles & {s.bundle for s in layout.slots_of("critic")}  # split, not beside
    run_dir = tmp_path / "run"
    loop.train(cfg, run_dir, toy_problems(), [], tiny_tokenizer(), CharScorer(), sinks=[JsonlSink(run_dir)])
    rows = read_metrics(run_dir / "metrics.jsonl")
    assert [r["critic/steps"] for r in rows] == [1, 2] and [r["optim/steps"] for r in rows] == [1, 2]


@pytest.mark.slow
def test_ppo_resumes_the_critic_and_waits_for_its_pretraining(local_ray, tmp_path):
    cfg = toy_config(toy_model_dir(tmp_path / "model"), steps=4, save_every=2)
    cfg = replace(cfg, algo=replace(cfg.algo, estimator="ppo"), critic=replace(cfg.critic, pretrain_steps=1))
    run_dir = tmp_path / "run"

    def run(max_steps=None):
        loop.train(
            cfg,
            run_dir,
            toy_problems(),
            [],
            tiny_tokenizer(),
            CharScorer(),
            max_steps=max_steps,
            sinks=[JsonlSink(run_dir)],
        )

    run(max_steps=2)
    assert (run_dir / "checkpoints" / "critic" / "step_00000002").is_dir()
    run()  # resumes at step 2: the policy's and the critic's optimizers both continue
    rows = read_metrics(run_dir / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    assert [r["critic/steps"] for r in rows] == [1, 2, 3, 4]
    assert "optim/steps" not in rows[0]  # step 1: the critic's pretraining, the policy waits
    assert [r["optim/steps"] for r in rows[1:]] == [1, 2, 3]
    # a run without a critic cannot resume from it silently, nor the other way round
    grpo = replace(cfg, algo=replace(cfg.algo, estimator="grpo"), loop=replace(cfg.loop, steps=6))
    loop.train(
        grpo,
        run_dir,
        toy_problems(),
        [],
        tiny_tokenizer(),
        CharScorer(),
        max_steps=1,
        sinks=[JsonlSink(run_dir)],
    )  # the critic's state is simply not used
    other = tmp_path / "grpo"
    g = replace(cfg, algo=replace(cfg.algo, estimator="grpo"))
    loop.train(
        g, other, toy_problems(), [], tiny_tokenizer(), CharScorer(), max_steps=2, sinks=[JsonlSink(other)]
    )
    with pytest.raises(CodefuError, match="has no critic checkpoint"):
        loop.train(cfg, other, toy_problems(), [], tiny_tokenizer(), CharScorer(), sinks=[JsonlSink(other)])
    assert len(read_metrics(other / "metrics.jsonl")) == 2  # nothing lost


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_redoes_only_steps_since_the_checkpoint(tmp_path):
    """The driver dies with SIGKILL after step 3 (checkpoint at step 2); the resumed run redoes step 3
    identically (same data order, difficulty record and sampling seeds) and the metrics file has no gap
    or duplicate."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    script = [sys.executable, str(Path(__file__).parent / "toy_train.py"), str(run_dir), "6"]
    first = subprocess.Popen(
        script, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
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
