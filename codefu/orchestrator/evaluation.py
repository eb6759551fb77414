"""One evaluation path: n samples per problem from an engine, scored by the judge, gathered per problem.

`codefu eval` (a local engine of either backend and a local judge) and the loop's validation (the run's
rollout workers and judge pool) both call `sample_and_score`, with sampling options from the same
`SamplingParams` (temperature, top-p, top-k, new tokens, seed)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from tqdm import tqdm

from codefu.orchestrator.roles import Score
from codefu.rollout.types import Completion, SamplingParams
from codefu.types import Problem


@dataclass
class Evaluation:
    passed: dict[str, list[bool]]  # problem name -> accepted?, one entry per sample
    statuses: Counter[str]  # verdict -> samples
    rewards: list[float]  # of every sample the judge scored (SANDBOX_ERROR has none)

    def accepted(self) -> dict[str, int]:
        return {name: sum(p) for name, p in self.passed.items()}


def sample_and_score(
    problems: list[Problem],
    encode: Callable[[Problem], list[int]],
    generate: Callable[[list[list[int]], SamplingParams], list[Completion]],
    score: Callable[[list[Problem], list[str]], list[Score]],
    sampling: SamplingParams,
    prompts_per_call: int | None = None,
    label: str = "",
) -> Evaluation:
    """`sampling.n` samples of every problem (`prompts_per_call` problems per `generate` call; None: all at
    once), scored together. A progress bar (on a terminal) counts the problems generated."""
    per_call = prompts_per_call or max(1, len(problems))
    owners: list[Problem] = []
    texts: list[str] = []
    with tqdm(total=len(problems), unit="problem", desc=f"generate{label}", disable=None, leave=False) as bar:
        for start in range(0, len(problems), per_call):
            chunk = problems[start : start + per_call]
            for c in generate([encode(p) for p in chunk], sampling):
                owners.append(chunk[c.prompt_index])
                texts.append(c.text)
            bar.update(len(chunk))
    scores = score(owners, texts)
    passed: dict[str, list[bool]] = {p.name: [] for p in problems}
    for problem, s in zip(owners, scores, strict=True):
        passed[problem.name].append(s.passed)
    return Evaluation(
        passed, Counter(s.status for s in scores), [s.reward for s in scores if s.reward is not None]
    )
