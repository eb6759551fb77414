"""The cheap real-model guard: with the default model and the CPU default's trainer settings, one update on
real responses (the starter problems' reference solutions, advantage +1, and their wrong solutions, -1)
raises the log-probability of the positive responses and lowers that of the negative ones. A sign error,
a shifted response mask or misaligned log-probs turn this around (the flipped case is run too)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from codefu.config import load_config
from codefu.data.starter import load_starter_problems
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
    model, tokenizer = load_policy(cfg)
    problems = [p for p in load_starter_problems() if _has_python_wrong(p)][:4]
    for p in problems:
        p.preferred_language = "python"

    batch = solution_batch(tokenizer, problems)
    assert int((batch.advantages > 0).sum()) == 4 and int((batch.advantages < 0).sum()) >= 4
    result = probe_update(TrainerWorker(cfg, model=model, tokenizer=tokenizer), batch)
    assert result.positive_mean > 0 > result.negative_mean, result.delta
    # most rows on their own, not only the means: positives up, negatives down
    agree = (result.delta * result.advantages > 0).float().mean()
    assert agree >= 0.75, (result.delta, result.advantages)
    assert result.changed_fraction > 0  # the update reached the compute-dtype weights the engine gets

    # the same batch with the advantages flipped, on a fresh copy of the weights, moves the other way
    model, _ = load_policy(cfg)
    flipped = solution_batch(tokenizer, problems)
    flipped.advantages = -flipped.advantages
    result = probe_update(TrainerWorker(cfg, model=model, tokenizer=tokenizer), flipped)
    assert result.positive_mean > 0 > result.negative_mean, result.delta  # "positive" = its new sign
