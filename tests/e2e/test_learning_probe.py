"""The cheap real-model guard: with the default model and the CPU default's trainer settings (its
temperature 0.6 included: the trainer's follows the rollout's), one update on real responses (the starter
problems' reference solutions and their wrong solutions, one GRPO group per problem) moves each group's
accepted response up against its wrong ones, and the advantage-weighted log-probability rises. A sign
error, a shifted response mask or misaligned log-probs turn this around (the flipped case is run too).

Measured here (docs/LOG.md): at temperature 0.6 the update lowers the wrong responses by ~0.5 nats per
token and the accepted ones by ~0.02 on average (three of four slightly down, one up): what a policy
gradient step promises to first order is the relative move, not that every positive row rises."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from codefu.config import load_config
from codefu.data.starter import load_starter_problems
from codefu.models.loading import cpu_has_native_bf16
from codefu.orchestrator.cli import resolve_model
from codefu.orchestrator.config import RunConfig
from codefu.orchestrator.probe import probe_update, solution_batch
from codefu.trainer.model import load_policy
from codefu.trainer.worker import TrainerWorker

CPU_DEFAULT = Path(__file__).parents[2] / "configs" / "cpu.yaml"


def _has_python_wrong(problem) -> bool:
    return any(w["language"] == "python" for w in problem.extra["wrong_solutions"])


@pytest.mark.slow
def test_one_default_update_moves_real_responses_the_way_their_advantages_say():
    pytest.importorskip("gguf")
    cfg = resolve_model(load_config(RunConfig, CPU_DEFAULT)).trainer
    # one optimizer step over the whole batch, from a fresh optimizer: no warm-up ramp hiding the step
    cfg = replace(cfg, warmup_steps=0, mini_batch_size=0)
    if not cpu_has_native_bf16():  # emulated bf16 takes this past its time limit; the README says float32
        cfg = replace(cfg, dtype="float32")
    model, tokenizer = load_policy(cfg)
    problems = [p for p in load_starter_problems() if _has_python_wrong(p)][:4]
    for p in problems:
        p.preferred_language = "python"

    sizes = [1 + sum(w["language"] == "python" for w in p.extra["wrong_solutions"]) for p in problems]
    batch = solution_batch(tokenizer, problems)
    assert int((batch.advantages > 0).sum()) == 4 and int((batch.advantages < 0).sum()) >= 4
    result = probe_update(TrainerWorker(cfg, model=model, tokenizer=tokenizer), batch)
    assert_moves_the_advantages_way(result, sizes)
    assert result.changed_fraction > 0  # the update reached the compute-dtype weights the engine gets

    # the same batch with the advantages flipped, on a fresh copy of the weights, moves the other way
    model, _ = load_policy(cfg)
    flipped = solution_batch(tokenizer, problems)
    flipped.advantages = -flipped.advantages
    result = probe_update(TrainerWorker(cfg, model=model, tokenizer=tokenizer), flipped)
    assert_moves_the_advantages_way(result, sizes)


def assert_moves_the_advantages_way(result, sizes: list[int]) -> None:
    """In every group the rows of higher advantage gain on the rows of lower advantage, and the
    advantage-weighted change of the log-probs is positive."""
    assert float((result.delta * result.advantages).sum()) > 0, (result.delta, result.advantages)
    start = 0
    for n in sizes:
        d, a = result.delta[start : start + n], result.advantages[start : start + n]
        assert float(d[a > 0].mean()) > float(d[a < 0].mean()), (start, d, a)
        start += n
