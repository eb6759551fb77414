"""Problems out: verl-schema parquet (ours, CodeFu's, other verl code datasets) and our JSONL, as `Problem`s;
and `ProblemLoader`, the seeded, resumable order in which training sees them."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from codefu.data.schema import row_to_problem
from codefu.data.sources.jsonl import RowError, expand, iter_objects, parse_problem
from codefu.errors import CodefuError
from codefu.types import Problem


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
    """

    def __init__(
        self, problems: list[Problem], seed: int = 0, shuffle: bool = True, epochs: int | None = None
    ):
        if not problems:
            raise CodefuError("ProblemLoader: no problems to load")
        self.problems = problems
        self.seed = seed
        self.shuffle = shuffle
        self.epochs = epochs
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
        while len(batch) < n and (self.epochs is None or self.epoch < self.epochs):
            take = min(n - len(batch), len(self.problems) - self.position)
            batch.extend(self.problems[i] for i in self._order[self.position : self.position + take])
            self.position += take
            if self.position == len(self.problems):
                self.epoch, self.position = self.epoch + 1, 0
                self._order = self._permutation(self.epoch)
        return batch

    def state_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "shuffle": self.shuffle,
            "epoch": self.epoch,
            "position": self.position,
            "num_problems": len(self.problems),
            "fingerprint": self._fingerprint(),
        }

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
