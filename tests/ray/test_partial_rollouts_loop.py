"""loop.over_provision (partial rollouts, APRIL) on Ray with the native engine and the toy task: every
step trains exactly data.prompts_per_step whole groups while more were started; samples stopped at one
step go on at the next with their earlier tokens, never more than the carry bound behind, also after a
resume; with async, too. The engine runs few sequences at once (rollout.max_num_seqs), so groups finish
at different steps."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from codefu.models.tiny import tiny_tokenizer
from codefu.observability.sinks import JsonlSink, read_metrics
from codefu.orchestrator import loop
from helpers.toy_loop import CharScorer, on_each_sample, toy_config, toy_model_dir, toy_problems

pytestmark = pytest.mark.slow  # Ray loops (~1-2 min each on a loaded 2-core machine): the slow tier


@pytest.fixture
def trained(monkeypatch):
    """Every step's trained completions with their problems and groups, taken where the loop gets them."""
    seen: dict[int, list] = {}

    def see(step, sampled):
        seen[step] = list(zip(sampled.completions, sampled.problems, sampled.groups, strict=True))

    on_each_sample(monkeypatch, see)
    return seen


def run(
    tmp_path: Path, name: str, steps: int, max_steps: int | None = None, save_every: int = 0, **loop_keys
) -> list[dict]:
    cfg = toy_config(toy_model_dir(tmp_path / "model"), steps, save_every=save_every)
    # 12 sequences at once: the 8 of a group are admitted over two prefills, so groups end at different steps
    rollout = replace(cfg.rollout, engine="native", kv_cache_tokens=1024, max_num_seqs=12, max_new_tokens=12)
    cfg = replace(cfg, rollout=rollout, loop=replace(cfg.loop, over_provision=1.0, **loop_keys))
    run_dir = tmp_path / name
    sinks = [JsonlSink(run_dir)]
    loop.train(
        cfg, run_dir, toy_problems(), [], tiny_tokenizer(), CharScorer(), max_steps=max_steps, sinks=sinks
    )
    return read_metrics(run_dir / "metrics.jsonl")


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_each_step_trains_whole_groups_and_carries_the_rest(local_ray, tmp_path, trained, mode):
    rows = run(tmp_path, mode, steps=4, mode=mode)
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    bound = 1 if mode == "sync" else 2
    for step, samples in trained.items():
        groups: dict[int, list] = {}
        for c, p, g in samples:
            groups.setdefault(g, []).append((c, p))
        if mode == "sync":  # data.prompts_per_step, though 8 were started (the carried ones, due, among them)
            assert len(groups) == 4, step
        else:  # also the groups sampled ahead that could not wait another step
            assert 4 <= len(groups) <= 8, step
        for members in groups.values():
            assert sorted(c.sample_index for c, _ in members) == list(range(8))  # whole: all n samples
            assert len({p.name for _, p in members}) == 1
            for c, _ in members:
                assert c.finish_reason in ("stop", "length") and c.num_tokens <= 12
                assert 0 <= step - c.policy_version <= bound
                assert c.token_versions and c.policy_version == min(c.token_versions)
                assert len(c.token_versions) == len(c.logprobs) == c.num_tokens
    assert all(r["april/groups_new"] + r["april/groups_carried_in"] == 8 for r in rows)
    assert rows[0]["april/interrupted_samples"] > 0, rows[0]  # the tail was stopped, not waited for
    assert sum(r["april/continued_samples"] for r in rows[1:]) > 0
    # a continued sample holds tokens of two versions: the step it started in and the one it ended in
    mixed = [c for s in trained.values() for c, _, _ in s if len(set(c.token_versions)) > 1]
    assert mixed and max(r["async/partial_samples"] for r in rows) > 0
    assert all(r["async/staleness_max"] <= bound for r in rows)
    for r in rows:  # what the engines wrote, not the tokens trained (a continued sample's earlier ones)
        assert r["rollout/response_tokens"] > 0


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_resumed_run_goes_on_with_the_groups_carried_at_its_checkpoint(local_ray, tmp_path, trained, mode):
    first = run(tmp_path, "resumed", steps=3, max_steps=2, save_every=2, mode=mode)
    assert first[-1]["april/carried_samples"] > 0  # the checkpoint after step 2 carries written samples
    trained.clear()
    rows = run(tmp_path, "resumed", steps=3, save_every=2, mode=mode)
    assert [r["step"] for r in rows] == [1, 2, 3]
    # tokens older than version 2 can only come from the checkpoint: the resumed session syncs version 2
    assert any(c.policy_version < 2 for c, _, _ in trained[2]), [c.policy_version for c, _, _ in trained[2]]
    assert rows[-1]["april/continued_samples"] > 0
