"""LoRA (trainer.lora) in the GRPO loop on Ray: the toy task is learned through the adapters alone, with
the KL reference taken from the policy's own base weights (no reference ranks), and the engines, which
take only the adapters at each sync, keep computing the trainer's log-probs step after step."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from codefu.models.lora_config import LoRAConfig
from codefu.models.tiny import tiny_tokenizer
from codefu.observability.sinks import JsonlSink, read_metrics
from codefu.orchestrator import loop
from codefu.orchestrator.roles import run_layout
from codefu.trainer.checkpoint import latest_checkpoint
from helpers.toy_loop import CharScorer, toy_config, toy_model_dir, toy_problems

pytestmark = pytest.mark.slow  # Ray loops of 10-12 steps: the slow tier

# the tiny model's lm_head (untied) too: the toy task is a matter of the output layer, which adapters on
# two tiny layers alone move slowly (at lr 0.5: +0.02 in 10 steps; with lm_head at 0.05: +0.99)
LORA = LoRAConfig(rank=8, alpha=16, target_modules=["q_proj", "v_proj", "o_proj", "down_proj", "lm_head"])


def lora_config(tmp_path, steps: int, engine: str = "transformers", kl_coef: float = 0.01, lora=LORA):
    cfg = toy_config(toy_model_dir(tmp_path / "model"), steps)
    trainer = replace(cfg.trainer, lora=lora, kl_coef=kl_coef, lr=0.05)
    rollout = replace(cfg.rollout, engine=engine, kv_cache_tokens=1024)
    return replace(cfg, trainer=trainer, rollout=rollout, loop=replace(cfg.loop, keep_final_state=True))


def run(cfg, run_dir):
    loop.train(cfg, run_dir, toy_problems(), [], tiny_tokenizer(), CharScorer(), sinks=[JsonlSink(run_dir)])
    return read_metrics(run_dir / "metrics.jsonl")


def test_lora_with_kl_learns_the_toy_task_and_a_flipped_sign_does_not(local_ray, tmp_path, monkeypatch):
    cfg = lora_config(tmp_path, steps=10)
    assert not run_layout(cfg).need("reference")  # the KL reference is the policy without its adapters
    rows = run(cfg, tmp_path / "right")
    rewards = [r["reward/mean"] for r in rows]
    assert sum(rewards[-3:]) / 3 > sum(rewards[:3]) / 3 + 0.15, rewards
    # the reference is the base model: no KL at the first update (B = 0), then the policy moves away
    assert rows[0]["loss/kl"] == pytest.approx(0.0, abs=1e-6)
    assert rows[-1]["loss/kl"] > 1e-4, [r["loss/kl"] for r in rows]
    # the resumable state is the adapters (DCP) and PEFT's folder beside them
    adapter = latest_checkpoint(tmp_path / "right" / "checkpoints") / "adapter"
    assert json.loads((adapter / "adapter_config.json").read_text())["r"] == LORA.rank

    real = loop.sequence_advantages
    monkeypatch.setattr(loop, "sequence_advantages", lambda *a, **k: -real(*a, **k))
    flipped = [r["reward/mean"] for r in run(cfg, tmp_path / "flipped")]
    assert sum(flipped[-3:]) / 3 <= sum(flipped[:3]) / 3 + 0.02, flipped


def test_the_native_engine_keeps_the_trainers_logprobs_over_many_adapter_syncs(local_ray, tmp_path):
    """Each step the engine takes the new adapters beside its weights; the trainer recomputes the sampled
    tokens' log-probs: fp32 on both sides, they agree to float noise at the last step as at the first
    (adapters that built on the previous ones, or weights that drifted, would not). The native engine
    takes adapters on the attention and MLP projections only."""
    projections = replace(LORA, target_modules=["q_proj", "v_proj", "o_proj", "gate_proj", "down_proj"])
    cfg = lora_config(tmp_path, steps=12, engine="native", lora=projections)
    rows = run(cfg, tmp_path / "run")
    diffs = [r["rollout/logprob_diff_abs_max"] for r in rows]
    assert all(d < 1e-3 for d in diffs), diffs
    assert rows[-1]["loss/kl"] > 0  # the adapters did move the policy the engine samples from
