"""Problems out: verl-schema parquet (ours, CodeFu's, other verl code datasets) and our JSONL, as `Problem`s;
and `ProblemLoader`, the seeded, resumable order in which training sees them (`MixedLoader`: several
datasets, drawn by weight; `training_loader`: the one `data.train` asks for)."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from codefu.data.difficulty import PassRateRecord
from codefu.data.mixing import DATASET_KEY, TrainSource, plan_draws
from codefu.data.schema import row_to_problem
from codefu.data.sources.jsonl import RowError, expand, iter_objects, parse_problem
from codefu.errors import CodefuError
from codefu.types import Problem

log = logging.getLogger(__name__)


def load_problems(path: str | Path) -> list[Problem]:
    """Every problem in `path`: a .parquet or .jsonl file, a directory (its .parquet and .jsonl files,
    recursively, sorted) or a glob. Raises CodefuError naming file, row and column on bad input."""
    p = Path(path)
    if p.is_dir():
        files = sorted([*p.rglob("*.parquet"), *p.rglob("*.jsonl")])
        if not files:
            raise CodefuError(f"{p}: no .parquet or .jsonl files in this directory")
    elif p.exists():
        files = [p]
    else:
        files = expand(str(path), "")
    problems: list[Problem] = []
    for f in files:
        problems.extend(_load_jsonl(f) if f.suffix == ".jsonl" else _load_parquet(f))
    return problems


def _load_jsonl(path: Path) -> list[Problem]:
    out = []
    for lineno, obj in iter_objects(path):
        try:
            if isinstance(obj, RowError):
                raise obj
            out.append(parse_problem(obj, f"{path.stem}-{lineno}"))
        except RowError as e:
            raise CodefuError(f"{path}, line {lineno}, field {e.column!r}: {e}") from None
    return out


def _load_parquet(path: Path) -> list[Problem]:
    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as e:
        raise CodefuError(f"{path}: not a readable parquet file ({e})") from None
    names = pf.schema_arrow.names
    if "reward_model" not in names and "prompt" not in names:
        raise CodefuError(
            f"{path}, row 0, column 'reward_model': missing (not a verl-schema file; has {names})"
        )
    out: list[Problem] = []
    for g in range(pf.num_row_groups):
        try:
            rows = pf.read_row_group(g).to_pylist()
        except (pa.ArrowException, OSError) as e:
            raise CodefuError(f"{path}, row group {g} (rows from {len(out)}): unreadable ({e})") from None
        for row in rows:
            out.append(_row(path, len(out), row))
    return out


def _row(path: Path, index: int, row: dict[str, Any]) -> Problem:
    try:
        return row_to_problem(row, f"{path.stem}-{index}")
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise CodefuError(f"{path}, row {index}, column 'reward_model': cannot read ({e})") from None


class ProblemLoader:
    """Batches of problems in a seeded order, epoch after epoch.

    Epoch e visits every problem once, in the permutation drawn from numpy's PCG64 seeded with
    (seed, e); `shuffle=False` keeps file order. `next_batch(n)` crosses epoch boundaries, so batches
    are always full until `epochs` (None: unlimited) run out; then it returns what is left, and an
    empty list after that. `state_dict()` is small (seed, epoch, position, a fingerprint of the problem
    names); `load_state_dict()` on a loader over the same problems resumes the exact same order.

    With a `difficulty` record (the difficulty-aware sampler, difficulty.py) an epoch skips the problems
    the record has set aside; `record()` feeds it each step's results. An epoch in which every problem
    is set aside visits them all (a run never stalls).
    """

    def __init__(
        self,
        problems: list[Problem],
        seed: int = 0,
        shuffle: bool = True,
        epochs: int | None = None,
        difficulty: PassRateRecord | None = None,
    ):
        if not problems:
            raise CodefuError("ProblemLoader: no problems to load")
        self.problems = problems
        self.seed = seed
        self.shuffle = shuffle
        self.epochs = epochs
        self.difficulty = difficulty
        self._visited_in: dict[str, int] = {}  # problem name -> epoch of its latest visit
        self.epoch = 0
        self.position = 0  # index into the current epoch's order
        self._order = self._permutation(0)

    def _permutation(self, epoch: int) -> np.ndarray:
        n = len(self.problems)
        if not self.shuffle:
            return np.arange(n)
        return np.random.Generator(np.random.PCG64([self.seed, epoch])).permutation(n)

    def _fingerprint(self) -> str:
        h = hashlib.sha256()
        for p in self.problems:
            h.update(p.name.encode() + b"\0")
        return h.hexdigest()[:16]

    def __len__(self) -> int:
        return len(self.problems)

    def next_batch(self, n: int) -> list[Problem]:
        batch: list[Problem] = []
        skip = self._skip_filter()
        while len(batch) < n and (self.epochs is None or self.epoch < self.epochs):
            problem = self.problems[self._order[self.position]]
            if not skip(problem):
                batch.append(problem)
                self._visited_in[problem.name] = self.epoch
            self.position += 1
            if self.position == len(self.problems):
                self.epoch, self.position = self.epoch + 1, 0
                self._order = self._permutation(self.epoch)
                skip = self._skip_filter()
        return batch

    def _skip_filter(self) -> Callable[[Problem], bool]:
        """The current epoch's test for set-aside problems; none when all are set aside (visit them all)."""
        d, epoch = self.difficulty, self.epoch
        if d is None or not any(d.eligible(p.name, epoch) for p in self.problems):
            return lambda problem: False
        return lambda problem: not d.eligible(problem.name, epoch)

    def record(self, results: dict[str, tuple[int, int]]) -> None:
        """This step's {problem name: (accepted samples, judged samples)} for the difficulty record."""
        if self.difficulty is None:
            return
        for epoch in sorted({self._visited_in.get(name, self.epoch) for name in results}):
            part = {k: v for k, v in results.items() if self._visited_in.get(k, self.epoch) == epoch}
            self.difficulty.record(part, epoch)

    def difficulty_metrics(self) -> dict[str, float]:
        """data/problems_active, data/problems_too_hard, data/problems_solved (none without a record)."""
        if self.difficulty is None:
            return {}
        counts = self.difficulty.counts((p.name for p in self.problems), self.epoch)
        return {f"data/problems_{k}": float(v) for k, v in counts.items()}

    def state_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "shuffle": self.shuffle,
            "epoch": self.epoch,
            "position": self.position,
            "num_problems": len(self.problems),
            "fingerprint": self._fingerprint(),
        } | ({"difficulty": self.difficulty.state_dict()} if self.difficulty is not None else {})

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["num_problems"] != len(self.problems) or state["fingerprint"] != self._fingerprint():
            raise CodefuError(
                f"ProblemLoader: the saved state is for a different problem set "
                f"({state['num_problems']} problems, fingerprint {state['fingerprint']}; "
                f"this one has {len(self.problems)}, {self._fingerprint()})"
            )
        self.seed, self.shuffle = state["seed"], state["shuffle"]
        self.epoch, self.position = state["epoch"], state["position"]
        self._order = self._permutation(self.epoch)
        if self.difficulty is not None and "difficulty" in state:
            self.difficulty.load_state_dict(state["difficulty"])


class MixedLoader:
    """Batches drawn from several datasets in proportion to their weights (codefu.data.mixing).

    Each dataset has its own `ProblemLoader` (the same seed, so its order is the one it would have alone),
    with its own epochs: a dataset that has given every problem starts its next epoch independently of the
    others. `next_batch(n)` takes the datasets `plan_draws` names, in that order; a dataset that runs out
    (only with `epochs` set) leaves the mix and the others share its part by their weights; when all have
    run out, the batch is what is left. The difficulty record (one, shared: problems are told apart by
    name) feeds every dataset's skipping. `state_dict()` holds each dataset's loader state and draw count,
    so a resumed run draws what the uninterrupted one would have; resuming with other weights starts the
    counting afresh (the new shares apply from there, without catching up on the old ones).
    """

    def __init__(
        self,
        datasets: Sequence[list[Problem]],
        weights: Sequence[float],
        seed: int = 0,
        shuffle: bool = True,
        epochs: int | None = None,
        difficulty: PassRateRecord | None = None,
    ):
        if not datasets or len(datasets) != len(weights):
            raise CodefuError(f"MixedLoader: {len(datasets)} datasets but {len(weights)} weights")
        self.weights = [float(w) for w in weights]
        self.loaders = [ProblemLoader(ps, seed, shuffle, epochs, difficulty) for ps in datasets]
        self.difficulty = difficulty
        self.drawn = [0] * len(datasets)  # prompts drawn from each dataset (since the weights were set)
        self.exhausted = [False] * len(datasets)
        self._owner: dict[str, int] = {}  # problem name -> the dataset it was last drawn from
        seen: set[str] = set()
        shared = 0
        for ps in datasets:
            names = {p.name for p in ps}
            shared += len(names & seen)
            seen |= names
        if shared:
            log.warning(
                "%d problem names appear in more than one training dataset: each such name has one "
                "difficulty record",
                shared,
            )

    def __len__(self) -> int:
        return sum(len(loader) for loader in self.loaders)

    @property
    def problems(self) -> list[Problem]:
        return [p for loader in self.loaders for p in loader.problems]

    def next_batch(self, n: int) -> list[Problem]:
        batch: list[Problem] = []
        while len(batch) < n:
            plan = plan_draws(self.weights, self.drawn, n - len(batch), [not e for e in self.exhausted])
            if not plan:
                break
            drawn = {i: iter(self.loaders[i].next_batch(plan.count(i))) for i in sorted(set(plan))}
            for i in plan:
                problem = next(drawn[i], None)
                if problem is None:
                    self.exhausted[i] = True  # its epochs ran out: the others share its part from now
                    continue
                batch.append(problem)
                self.drawn[i] += 1
                self._owner[problem.name] = i
        return batch

    def record(self, results: dict[str, tuple[int, int]]) -> None:
        """This step's {problem name: (accepted, judged)}, each to the dataset that served the problem."""
        if self.difficulty is None:
            return
        parts: dict[int, dict[str, tuple[int, int]]] = {}
        for name, counts in results.items():
            parts.setdefault(self._owner.get(name, 0), {})[name] = counts
        for i, part in sorted(parts.items()):
            self.loaders[i].record(part)

    def difficulty_metrics(self) -> dict[str, float]:
        """As `ProblemLoader.difficulty_metrics`, summed over the datasets (each at its own epoch)."""
        out: dict[str, float] = {}
        for loader in self.loaders:
            for key, value in loader.difficulty_metrics().items():
                out[key] = out.get(key, 0.0) + value
        return out

    def state_dict(self) -> dict[str, Any]:
        datasets = []
        for loader, weight, drawn, exhausted in zip(
            self.loaders, self.weights, self.drawn, self.exhausted, strict=True
        ):
            state = loader.state_dict()
            state.pop("difficulty", None)  # shared: saved once below
            datasets.append({"weight": weight, "drawn": drawn, "exhausted": exhausted, "loader": state})
        return {"datasets": datasets} | (
            {"difficulty": self.difficulty.state_dict()} if self.difficulty is not None else {}
        )

    def load_state_dict(self, state: dict[str, Any]) -> None:
        saved = state.get("datasets")
        if saved is None:
            raise CodefuError("MixedLoader: the saved state is a single dataset's (data.train was one path)")
        if len(saved) != len(self.loaders):
            raise CodefuError(
                f"MixedLoader: the saved state is for {len(saved)} datasets; "
                f"data.train lists {len(self.loaders)}"
            )
        for i, (loader, s) in enumerate(zip(self.loaders, saved, strict=True)):
            try:
                loader.load_state_dict(s["loader"])
            except CodefuError as e:
                raise CodefuError(f"data.train[{i}]: {e}") from None
        if [float(s["weight"]) for s in saved] == self.weights:
            self.drawn = [int(s["drawn"]) for s in saved]
        else:  # new weights: their shares count from here
            self.drawn = [0] * len(self.loaders)
        self.exhausted = [bool(s["exhausted"]) for s in saved]
        if self.difficulty is not None and "difficulty" in state:
            self.difficulty.load_state_dict(state["difficulty"])


def training_loader(
    problems: list[Problem],
    train: str | Sequence[TrainSource],
    seed: int = 0,
    difficulty: PassRateRecord | None = None,
) -> ProblemLoader | MixedLoader:
    """The loader `data.train` asks for: one path (or "starter"): a `ProblemLoader` over `problems`, as
    always; a list: a `MixedLoader`, each problem going to the dataset `Problem.extra[DATASET_KEY]` names
    (set by `codefu.orchestrator.cli.load_splits`). A dataset with no problem left is an error."""
    if isinstance(train, str):
        return ProblemLoader(problems, seed=seed, difficulty=difficulty)
    datasets: list[list[Problem]] = [[] for _ in train]
    for p in problems:
        i = p.extra.get(DATASET_KEY)
        if not isinstance(i, int) or not 0 <= i < len(train):
            raise CodefuError(
                f"problem {p.name!r} names no dataset of data.train (extra[{DATASET_KEY!r}] = {i!r}): "
                "load the training problems with codefu.orchestrator.cli.load_splits"
            )
        datasets[i].append(p)
    for i, (source, ps) in enumerate(zip(train, datasets, strict=True)):
        if not ps:
            raise CodefuError(
                f"data.train[{i}] ({source.path}): no training problem left (all held out, or over "
                "data.max_prompt_tokens)"
            )
    return MixedLoader(datasets, [s.weight for s in train], seed=seed, difficulty=difficulty)
