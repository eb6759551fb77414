"""Several training datasets in one run: `data.train` as a list of `TrainSource(path, weight)`.

    data:
      train:
        - {path: data/taco/train.parquet, weight: 2}
        - {path: data/cc/train.parquet, weight: 1}

A weight is a dataset's share of the prompts, relative to the others' (2 and 1: two thirds and one third).
`plan_draws` decides which dataset each prompt comes from, with no randomness: every prompt goes to the
dataset furthest below its share of all prompts drawn so far, so after any number of prompts each dataset's
count is within one of its exact share (largest deficit first; ties to the dataset listed first). Within a
dataset, `ProblemLoader`'s seeded order, epochs and difficulty-aware skipping apply as for a single dataset
(`codefu.data.loader.MixedLoader`). This module reads no file (no pyarrow): the config imports it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from codefu.errors import CodefuError

#: Problem.extra key holding the index in `data.train` of the dataset a training problem came from.
DATASET_KEY = "train_dataset"


@dataclass
class TrainSource:
    """One dataset of a mixed `data.train`."""

    path: str
    """A verl-schema parquet / problems JSONL file, a directory of them or a glob; or "starter"."""
    weight: float = 1.0
    """Its share of each step's prompts, relative to the other datasets' weights; > 0."""

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path:
            raise ValueError(f"path must be a non-empty string, got {self.path!r}")
        if isinstance(self.weight, bool) or not isinstance(self.weight, int | float):
            raise ValueError(f"weight must be a number > 0, got {self.weight!r}")
        if not (math.isfinite(self.weight) and self.weight > 0):
            raise ValueError(f"weight must be a finite number > 0, got {self.weight!r}")


def check_train(train: str | Sequence[TrainSource], key: str = "data.train") -> None:
    """A CodefuError naming the key of the first bad entry of `data.train` (an empty list, a bad weight)."""
    if isinstance(train, str):
        if not train:
            raise CodefuError(f'{key} must be "starter", a dataset path or a list of {{path, weight}}')
        return
    if not train:
        raise CodefuError(f"{key} must be a non-empty list of {{path, weight}}, got []")
    for i, source in enumerate(train):
        try:
            TrainSource.__post_init__(source)
        except ValueError as e:
            raise CodefuError(f"{key}[{i}].{e}") from None


def describe_train(train: str | Sequence[TrainSource]) -> str:
    """'data/taco/train.parquet' or 'data/taco/train.parquet (x2), data/cc/train.parquet (x1)'."""
    if isinstance(train, str):
        return repr(train)
    return ", ".join(f"{s.path} (x{s.weight:g})" for s in train)


def plan_draws(weights: Sequence[float], drawn: Sequence[int], n: int, open_: Sequence[bool]) -> list[int]:
    """The datasets the next `n` prompts come from, in order: each goes to the open dataset furthest below
    its share of all prompts drawn from the open datasets (weight / total weight of the open ones), counting
    the ones planned before it; ties go to the lowest index. `drawn`: prompts drawn from each so far.
    Empty when no dataset is open. Pure: the caller updates `drawn` with what it actually drew."""
    if len(weights) != len(drawn) or len(weights) != len(open_):
        raise ValueError(f"{len(weights)} weights, {len(drawn)} counts, {len(open_)} open flags")
    ids = [i for i, is_open in enumerate(open_) if is_open]
    if not ids or n <= 0:
        return []
    total_w = math.fsum(weights[i] for i in ids)
    counts = {i: int(drawn[i]) for i in ids}
    total = sum(counts.values())
    out: list[int] = []
    for _ in range(n):
        total += 1
        pick = max(ids, key=lambda i: (total * weights[i] / total_w - counts[i], -i))
        counts[pick] += 1
        out.append(pick)
    return out
