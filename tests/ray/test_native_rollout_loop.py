"""`rollout.engine=native` in the GRPO loop on Ray: two steps of the toy task with the native engine in
the rollout actor; its log-probs agree with the trainer's recomputation of the same tokens."""

from __future__ import annotations

from dataclasses import replace

import pytest

from codefu.models.tiny import tiny_tokenizer
from codefu.observability.sinks import JsonlSink, read_metrics
from codefu.orchestrator import loop
from helpers.toy_loop import CharScorer, toy_config, toy_model_dir, toy_problems

pytestmark = pytest.mark.slow  # a Ray loop (~1-2 min on a loaded 2-core machine): the slow tier (`-m slow`)


def test_two_steps_with_the_native_engine(local_ray, tmp_path):
    cfg = toy_config(toy_model_dir(tmp_path / "model"), steps=2)
    cfg = replace(cfg, rollout=replace(cfg.rollout, engine="native", kv_cache_tokens=1024))
    run_dir = tmp_path / "run"
    loop.train(cfg, run_dir, toy_problems(), [], tiny_tokenizer(), CharScorer(), sinks=[JsonlSink(run_dir)])
    rows = read_metrics(run_dir / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2]
    for r in rows:
        assert r["rollout/logprob_tokens"] > 0
        # fp32 on both sides: the rollout's log-probs are the trainer's up to float noise
        assert r["rollout/logprob_diff_abs_max"] < 1e-3, r["rollout/logprob_diff_abs_max"]


def test_judging_while_decoding_changes_no_sample_and_no_score(local_ray, tmp_path):
    """loop.overlap_judge: completions reach the scorer in the order the engine finishes them; the step's
    samples, scores, advantages and loss are those of judging after generation, and the judge's time is
    its tail after the last token (timing/judge_tail_s), not a phase of its own."""
    base = toy_config(toy_model_dir(tmp_path / "model"), steps=1)
    base = replace(
        base, rollout=replace(base.rollout, engine="native", kv_cache_tokens=1024, max_new_tokens=12)
    )
    rows = {}
    for overlap in (True, False):
        cfg = replace(base, loop=replace(base.loop, overlap_judge=overlap))
        run_dir = tmp_path / f"overlap-{overlap}"
        loop.train(
            cfg, run_dir, toy_problems(), [], tiny_tokenizer(), CharScorer(), sinks=[JsonlSink(run_dir)]
        )
        rows[overlap] = read_metrics(run_dir / "metrics.jsonl")[0]
    same = [
        "reward/mean",
        "rollout/response_tokens",
        "rollout/response_len_std",
        "rollout/stop_frac",
        "policy/advantage_abs_mean",
        "loss/pg",
        "judge/pass_rate",
    ]
    assert {k: rows[True][k] for k in same} == {k: rows[False][k] for k in same}
    assert "timing/judge_tail_s" in rows[True] and "timing/judge_s" not in rows[True]
    assert "timing/judge_s" in rows[False] and "timing/judge_tail_s" not in rows[False]
