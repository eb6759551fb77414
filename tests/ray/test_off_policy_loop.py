"""loop.mode one_step_off / async on Ray with the toy task: max_staleness 0 is the sync loop exactly, the
bound holds on every sample whichever side is slower, a resumed run keeps it and draws the prompts an
uninterrupted run would, and the toy task learns off-policy while a flipped advantage sign does not."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest
from safetensors.torch import load_file

from codefu.errors import CodefuError
from codefu.models.tiny import tiny_tokenizer
from codefu.observability.sinks import JsonlSink, read_metrics
from codefu.orchestrator import loop
from helpers.toy_loop import CharScorer, on_each_sample, toy_config, toy_model_dir, toy_problems


class SlowScorer(CharScorer):
    """The toy judge, `delay_s` slower per batch: a slow rollout side."""

    def __init__(self, delay_s: float):
        super().__init__()
        self.delay_s = delay_s

    def score_stream(self, items):
        scores = super().score_stream(items)
        time.sleep(self.delay_s)
        return scores


def run(
    tmp_path: Path,
    name: str,
    steps: int,
    scorer: CharScorer | None = None,
    max_steps: int | None = None,
    save_every: int = 0,
    validate: bool = False,
    **loop_keys,
) -> list[dict]:
    cfg = toy_config(toy_model_dir(tmp_path / "model"), steps, save_every=save_every)
    cfg = replace(cfg, loop=replace(cfg.loop, val_every=1 if validate else 0, **loop_keys))
    run_dir = tmp_path / name
    loop.train(
        cfg,
        run_dir,
        toy_problems(),
        toy_problems()[:3] if validate else [],
        tiny_tokenizer(),
        scorer or CharScorer(),
        max_steps=max_steps,
        sinks=[JsonlSink(run_dir)],
    )
    return read_metrics(run_dir / "metrics.jsonl")


@pytest.fixture
def samples_seen(monkeypatch):
    """Every sample the loop trained on, as (step, policy_version, problem), taken where the loop gets
    them from its sampler."""
    seen: list[tuple[int, int | None, str]] = []

    def see(step, sampled):
        seen.extend(
            (step, c.policy_version, p.name)
            for c, p in zip(sampled.completions, sampled.problems, strict=True)
        )

    on_each_sample(monkeypatch, see)
    return seen


def test_max_staleness_0_is_the_sync_loop(local_ray, tmp_path):
    # validation every step: it must come between a step's weights and the next step's samples, as in sync
    sync = run(tmp_path, "sync", steps=3, validate=True)
    off = run(tmp_path, "async0", steps=3, validate=True, mode="async", max_staleness=0)
    keys = ["reward/mean", "rollout/response_tokens", "loss/pg", "policy/entropy", "async/staleness_max"]
    keys += ["eval/pass@1", "eval/reward_mean"]
    assert [[r[k] for k in keys] for r in off] == [[r[k] for k in keys] for r in sync]
    assert all(r["async/staleness_max"] == 0 for r in off)
    a = load_file(tmp_path / "sync" / "model" / "model.safetensors")
    b = load_file(tmp_path / "async0" / "model" / "model.safetensors")
    assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)


@pytest.mark.parametrize("slow", ["trainer", "rollout"])
def test_the_bound_holds_on_every_sample(local_ray, tmp_path, monkeypatch, samples_seen, slow):
    scorer = CharScorer()
    if slow == "trainer":
        real = loop.update

        def slow_update(*args, **kwargs):
            time.sleep(1.5)  # the rollout side runs ahead until the bound stops it
            return real(*args, **kwargs)

        monkeypatch.setattr(loop, "update", slow_update)
    else:
        scorer = SlowScorer(1.5)
    rows = run(tmp_path, slow, steps=6, scorer=scorer, mode="async", max_staleness=2)
    behind = [step - version for step, version, _ in samples_seen]
    assert len(behind) == 6 * 4 * 8 and all(0 <= b <= 2 for b in behind), behind
    worst: dict[int, int] = {}
    for step, version, _ in samples_seen:
        worst[step] = max(worst.get(step, 0), step - version)
    assert [r["async/staleness_max"] for r in rows] == [float(worst[r["step"] - 1]) for r in rows]
    if slow == "trainer":
        # the bound is what held sampling back: it was reached, and the rollout side waited for it
        assert max(behind) == 2
        assert sum(r["async/rollout_wait_s"] for r in rows) > 1.0
    else:
        # the trainer waited for samples; what it got was at most one version old
        assert sum(r["timing/wait_samples_s"] for r in rows) > 3.0
        assert max(behind) <= 1


def test_one_step_off_resumes_within_the_bound_on_the_same_prompts(local_ray, tmp_path, samples_seen):
    run(tmp_path, "whole", steps=4, mode="one_step_off")
    whole = list(samples_seen)
    samples_seen.clear()
    run(tmp_path, "cut", steps=4, mode="one_step_off", max_steps=2, save_every=2)
    run(tmp_path, "cut", steps=4, mode="one_step_off")
    resumed = list(samples_seen)
    # one_step_off: every sample one version old, except the first step's of each session (no older
    # weights exist): staleness does not carry over the interruption
    assert {s - v for s, v, _ in whole if s > 0} == {1} and {s - v for s, v, _ in whole if s == 0} == {0}
    second = [(s, v) for s, v, _ in resumed[len(resumed) // 2 :]]
    assert [v for _, v in second[:32]] == [2] * 32  # the resumed session's first step: the checkpoint's
    # the checkpoint's loader state is that of the first step not trained, not of what was sampled ahead
    assert sorted(p for _, _, p in resumed) == sorted(p for _, _, p in whole)
    assert [p for _, _, p in resumed] == [p for _, _, p in whole]


def test_an_off_policy_mode_on_shared_gpus_is_refused_with_the_key(tmp_path):
    from codefu.orchestrator.config import check_run_config

    cfg = toy_config(toy_model_dir(tmp_path / "model"), 2)
    cfg = replace(cfg, loop=replace(cfg.loop, mode="one_step_off"))
    cfg.resources.gpus_per_rank = 1
    with pytest.raises(CodefuError, match="loop.mode must be sync while resources.colocate"):
        check_run_config(cfg)
    cfg.resources.colocate = False
    check_run_config(cfg)
    cfg.loop.max_staleness = 3
    with pytest.raises(CodefuError, match="loop.max_staleness must be null unless loop.mode is async"):
        check_run_config(cfg)


@pytest.mark.slow
def test_the_toy_task_learns_async_and_a_flipped_sign_does_not(local_ray, tmp_path, monkeypatch):
    rewards = [r["reward/mean"] for r in run(tmp_path, "right", steps=10, mode="async", max_staleness=2)]
    assert sum(rewards[-3:]) / 3 > sum(rewards[:3]) / 3 + 0.15, rewards
    real = loop.sequence_advantages
    monkeypatch.setattr(loop, "sequence_advantages", lambda *a, **k: -real(*a, **k))
    flipped = [r["reward/mean"] for r in run(tmp_path, "flipped", steps=10, mode="async", max_staleness=2)]
    assert sum(flipped[-3:]) / 3 <= sum(flipped[:3]) / 3 + 0.02, flipped


@pytest.mark.parametrize("mode", ["sync", "one_step_off"])
def test_a_rollout_worker_that_dies_mid_run_is_named_with_its_node(local_ray, tmp_path, monkeypatch, mode):
    real = loop.update

    def update_then_kill(cfg, roles, *args, **kwargs):
        import ray

        out = real(cfg, roles, *args, **kwargs)
        ray.kill(roles.rollout.actors[0])  # the worker dies: the next sampling (or sync) meets it
        return out

    monkeypatch.setattr(loop, "update", update_then_kill)
    with pytest.raises(CodefuError, match=r"rollout worker 0 \(node \d+\.\d+\.\d+\.\d+, node id \w+\) died"):
        run(tmp_path, mode, steps=3, mode=mode)


@pytest.mark.slow
def test_async_with_the_native_engine_updates_weights_mid_generation(local_ray, tmp_path, monkeypatch):
    """Partial rollouts: the trainer's weights reach the native engine while it writes the next step's
    samples, so some samples are written by two versions; every token stays within the bound."""
    seen = []
    real = loop.batch_with_advantages

    def spying(cfg, sampled):
        seen.append(list(sampled.completions))
        return real(cfg, sampled)

    monkeypatch.setattr(loop, "batch_with_advantages", spying)
    cfg = toy_config(toy_model_dir(tmp_path / "model"), steps=4)
    # long samples (a random model seldom stops): generation outlasts an update, which lands inside it
    rollout = replace(cfg.rollout, engine="native", kv_cache_tokens=16384, max_new_tokens=320)
    cfg = replace(cfg, rollout=rollout, loop=replace(cfg.loop, mode="async", max_staleness=1))
    run_dir = tmp_path / "run"
    loop.train(cfg, run_dir, toy_problems(), [], tiny_tokenizer(), CharScorer(), sinks=[JsonlSink(run_dir)])
    rows = read_metrics(run_dir / "metrics.jsonl")
    for step, completions in enumerate(seen):
        for c in completions:
            versions = c.token_versions
            assert versions is not None and len(versions) == c.num_tokens
            assert versions == sorted(versions) and c.policy_version == versions[0]
            assert all(step - 1 <= v <= step for v in versions), (step, sorted(set(versions)))
    partial = [c for completions in seen for c in completions if len(set(c.token_versions)) > 1]
    assert partial, "no sample was written across a weight update"
    assert sum(r["async/partial_samples"] for r in rows) > 0
    assert all(r["async/staleness_max"] <= 1 for r in rows)
