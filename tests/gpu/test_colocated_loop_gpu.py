"""The loop colocated on one GPU (policy, reference and native engine share it), with the optimizer state
offloaded while the engine generates: every step moves the state out and back (the move back overlaps the
reference pass and is reported by the update), the reference's weights leave for the update and the
engine's for the trainer's turn (the sync brings them back: the reward could not rise on garbage weights),
reports the update's peak memory, and the toy reward rises as on CPU."""

from __future__ import annotations

import gc
from dataclasses import replace

import pytest
import ray
import torch

from codefu.models.tiny import tiny_tokenizer
from codefu.observability.sinks import JsonlSink, read_metrics
from codefu.orchestrator import loop
from helpers.toy_loop import CharScorer, toy_config, toy_model_dir, toy_problems

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")]


def test_colocated_steps_offload_the_optimizer_and_report_the_moves(tmp_path):
    gc.collect()
    torch.cuda.empty_cache()  # the engine sizes its KV cache from the free memory
    cfg = toy_config(toy_model_dir(tmp_path / "model"), steps=10)
    cfg = replace(
        cfg,
        rollout=replace(cfg.rollout, device="cuda", engine="native", gpu_memory_fraction=0.3),
        trainer=replace(cfg.trainer, kl_coef=0.01, offload_optimizer=True),
        resources=replace(cfg.resources, gpus_per_rank=1, colocate=True),
    )
    run_dir = tmp_path / "run"
    ray.init(num_cpus=4, num_gpus=1, include_dashboard=False, log_to_driver=False)
    try:
        loop.train(
            cfg, run_dir, toy_problems(), [], tiny_tokenizer(), CharScorer(), sinks=[JsonlSink(run_dir)]
        )
    finally:
        ray.shutdown()
    rows = read_metrics(run_dir / "metrics.jsonl")
    assert [r["step"] for r in rows] == list(range(1, 11))
    assert "memory/optimizer_offloaded_gb" not in rows[0]  # AdamW makes its state at the first step
    for r in rows[1:]:
        assert r["memory/optimizer_offloaded_gb"] > 0 and r["timing/offload_s"] > 0, r
        assert r["timing/reload_s"] > 0, r  # the update collected the move back, every step
        # the reference's weights left after its pass and came back while the engine generated
        assert r["memory/reference_offloaded_gb"] > 0 and r["timing/reference_reload_s"] > 0, r
    assert rows[0]["memory/reference_offloaded_gb"] > 0  # its first pass makes the CPU copy
    for r in rows:
        assert (
            0 < r["memory/update_peak_gb"] <= r["memory/update_reserved_gb"] and r["memory/gpu_free_gb"] > 0
        ), r
        assert r["memory/update_alloc_retries"] == 0, r  # a toy model is nowhere near the card's limit
        assert r["rollout/kv_cache_tokens"] > 0
        # the engine took its KV cache and graphs back each step, then prefilled and decoded
        assert r["rollout/resume_s"] > 0 and r["rollout/prefill_s"] > 0 and r["rollout/decode_s"] > 0, r
    rewards = [r["reward/mean"] for r in rows]
    assert sum(rewards[-3:]) / 3 > sum(rewards[:3]) / 3 + 0.15, rewards
