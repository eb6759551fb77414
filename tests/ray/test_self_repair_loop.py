"""Self-repair in the loop (rollout.turns: 2) on Ray with a tiny model: the trainer sees each episode as
one row with its feedback tokens masked out; and on the two-turn toy, where only the feedback tells which
character a problem wants, the second turn learns to read it, and does not when the feedback is
scrambled."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from codefu.models.tiny import tiny_tokenizer
from codefu.observability.sinks import JsonlSink, read_metrics
from codefu.orchestrator import loop
from helpers.toy_loop import (
    CharScorer,
    SecretCharScorer,
    secret_problems,
    toy_config,
    toy_model_dir,
    toy_problems,
)

pytestmark = pytest.mark.slow  # Ray loops (1-4 min on a loaded 2-core machine): the slow tier (`-m slow`)


def two_turns(tmp_path: Path, steps: int, **rollout):
    cfg = toy_config(toy_model_dir(tmp_path / "model"), steps)
    return replace(
        cfg, rollout=replace(cfg.rollout, turns=2, **rollout), loop=replace(cfg.loop, keep_final_state=False)
    )


@pytest.mark.parametrize("async_turns", [False, True])
def test_two_turn_episodes_train_only_the_models_tokens(local_ray, tmp_path, monkeypatch, async_turns):
    batches = []
    real = loop.completions_to_batch

    def recording(completions, advantages, trained):
        batch = real(completions, advantages, trained)
        batches.append((completions, batch))
        return batch

    monkeypatch.setattr(loop, "completions_to_batch", recording)
    run_dir = tmp_path / "run"
    cfg = two_turns(tmp_path, steps=2, max_episode_tokens=260, async_turns=async_turns)  # 8 + 236 + 8
    loop.train(cfg, run_dir, toy_problems(), [], tiny_tokenizer(), CharScorer(), sinks=[JsonlSink(run_dir)])
    rows = read_metrics(run_dir / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2] and all("optim/steps" in r for r in rows)
    # a random tiny model rarely writes 'a' half the time: most episodes take the second turn
    assert rows[0]["rollout/turns_mean"] > 1.5 and "judge/pass_rate_turn2" in rows[0]
    assert rows[0]["rollout/feedback_tokens_mean"] > 20
    completions, batch = batches[0]
    two = [b for b, c in enumerate(completions) if c.loss_mask is not None]
    assert two
    for b in two:
        c = completions[b]
        p, mask = len(c.prompt_ids), batch.response_mask[b]
        assert mask[p : p + len(c.token_ids)].tolist() == c.loss_mask
        row = "".join(str(int(x)) for x in mask[p : p + len(c.token_ids)])
        assert row.strip("0").count("10") == 1 and row.endswith("1")  # two responses, the feedback between
        assert int(mask.sum()) == c.model_tokens <= 2 * cfg.rollout.max_new_tokens
        assert c.num_tokens <= cfg.rollout.max_episode_tokens


def secret_run(tmp_path: Path, name: str, reveal: bool, steps: int) -> list[float]:
    # lock-step: reproducible for the seed. The toy has a local optimum at the blind policy (one character,
    # half the problems) that some trajectories settle in for the 25 steps: asynchronous turns reached it
    # with seed 0 and learned fully with seed 1, lock-step learned with both (docs/LOG.md, 2026-12-02)
    cfg = two_turns(tmp_path, steps, async_turns=False)
    cfg = replace(cfg, data=replace(cfg.data, prompts_per_step=8), trainer=replace(cfg.trainer, lr=1e-2))
    run_dir = tmp_path / name
    loop.train(
        cfg,
        run_dir,
        secret_problems(),
        [],
        tiny_tokenizer(),
        SecretCharScorer(reveal),
        sinks=[JsonlSink(run_dir)],
    )
    return [r["judge/pass_rate_turn2"] for r in read_metrics(run_dir / "metrics.jsonl")]


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def test_the_second_turn_learns_to_read_the_feedback_and_not_without_it(local_ray, tmp_path):
    # every first program fails; the second passes only by writing the character the feedback shows
    read = secret_run(tmp_path, "reveal", reveal=True, steps=25)
    assert mean(read[:3]) < 0.1 and mean(read[-3:]) > 0.8, read
    # the same feedback showing a random character: blind, a policy passes at most half the problems
    blind = secret_run(tmp_path, "scrambled", reveal=False, steps=20)
    assert mean(blind[-3:]) < 0.65, blind
