"""The gradient-direction probe: does one policy update move log-probs the way the advantages say?

A batch of real responses with known verdicts (the starter problems' reference solutions, reward 1, and
their wrong solutions, reward 0, one GRPO group per problem, with the loop's own `group_advantages`) goes
through one `TrainerWorker.update`; the probe reports, per
row, the change of the mean token log-prob of the response. A correct loss raises the positive rows and
lowers the negative ones; a sign error, a shifted mask or misaligned log-probs do not. It also counts
the parameters whose rounded copy in the compute dtype changed: with bf16 weights an update smaller than
half a bf16 step (2^-9 of the weight) is invisible to the rollout engine and to the trainer's forward.

Used by the CI guard (tests/e2e/test_learning_probe.py) and `bench/learning_probe.py` (the lr study).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from codefu.algo.advantages import group_advantages
from codefu.rollout.prompts import encode_prompt
from codefu.trainer.batch import Batch
from codefu.types import Problem


def solution_batch(tokenizer: Any, problems: list[Problem], language: str = "python") -> Batch:
    """One positive row (the reference solution) and one negative row per wrong solution in `language`,
    each answering the problem's real prompt as a fenced code block; advantages as the loop computes them
    (rewards 1 / 0, one group per problem: a group's advantages sum to zero, as in training)."""
    rows: list[tuple[list[int], list[int], float]] = []
    groups: list[int] = []
    tag = {"python": "python", "cpp": "cpp"}[language]
    for group, p in enumerate(problems):
        prompt = encode_prompt(tokenizer, p)
        answers = [(p.extra["solutions"][language], 1.0)]
        answers += [(w["source"], 0.0) for w in p.extra["wrong_solutions"] if w["language"] == language]
        for source, reward in answers:
            groups.append(group)
            text = f"```{tag}\n{source.strip()}\n```"
            response = list(tokenizer.encode(text, add_special_tokens=False))
            eos = tokenizer.eos_token_id
            rows.append((prompt, response + ([eos] if eos is not None else []), reward))
    B, T = len(rows), max(len(p) + len(r) for p, r, _ in rows)
    ids = torch.zeros(B, T, dtype=torch.long)
    attention = torch.zeros(B, T, dtype=torch.long)
    response_mask = torch.zeros(B, T, dtype=torch.long)
    for b, (prompt, response, _) in enumerate(rows):
        n = len(prompt) + len(response)
        ids[b, :n] = torch.tensor(prompt + response)
        attention[b, :n] = 1
        response_mask[b, len(prompt) : n] = 1
    rewards = torch.tensor([r for _, _, r in rows], dtype=torch.float32)
    advantages = group_advantages(rewards, torch.tensor(groups))
    return Batch(ids, attention, response_mask, advantages=advantages)


def mean_logprob(logprobs: Tensor, mask: Tensor) -> Tensor:
    """(B,) mean log-prob over each row's response tokens."""
    m = mask.to(logprobs.dtype)
    return (logprobs * m).sum(-1) / m.sum(-1).clamp(min=1.0)


@dataclass
class ProbeResult:
    delta: Tensor  # (B,) change of each row's mean response-token log-prob after the update
    advantages: Tensor  # (B,)
    changed_fraction: float  # share of parameters whose compute-dtype copy changed
    metrics: dict[str, float]  # the update's own metrics

    @property
    def positive_mean(self) -> float:
        return float(self.delta[self.advantages > 0].mean())

    @property
    def negative_mean(self) -> float:
        return float(self.delta[self.advantages < 0].mean())


def probe_update(worker: Any, batch: Batch) -> ProbeResult:
    """One `worker.update(batch)` with the worker's own log-probs as the old policy (ratio 1); the change
    of every row's mean response log-prob, and the share of compute-dtype parameters that moved."""
    # cloned: in float32 on a CPU the state dict holds the parameters themselves, which the update changes
    before_weights = {k: v.clone() for k, v in worker.state_dict_for_sync(to_cpu=True).items()}
    before = worker.compute_logprobs(batch)
    batch.old_logprobs = before
    metrics = worker.update(batch)
    after = worker.compute_logprobs(batch)
    after_weights = worker.state_dict_for_sync(to_cpu=True)
    changed = sum(int((after_weights[k] != v).sum()) for k, v in before_weights.items())
    total = sum(v.numel() for v in before_weights.values())
    delta = mean_logprob(after, batch.response_mask) - mean_logprob(before, batch.response_mask)
    return ProbeResult(delta, batch.advantages, changed / max(total, 1), metrics)
