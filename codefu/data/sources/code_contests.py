"""DeepMind CodeContests, as the parquet shards of the Hugging Face dataset `deepmind/code_contests`
(data/{train,valid,test}-NNNNN-of-NNNNN-*.parquet), or streamed with `datasets` ("hf:deepmind/code_contests").

Parquet is read one row group at a time, only the columns we use (solutions, several GB, are read
only for `prepare --keep-solutions`), and converted to Python `batch_rows` rows at a time, so memory
stays bounded by one row group's tests whatever the dataset size. The split of a file is the start of its
name (train/valid/test), else its directory's name, else "train". Files are read test split first, then
valid, then the rest, so duplicate statements are kept in the evaluation split and dropped from train.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from codefu.data.raw import Malformed, RawProblem
from codefu.data.sources.jsonl import RowError, expand
from codefu.data.sources.parquet import open_parquet, parquet_rows
from codefu.errors import CodefuError
from codefu.types import Problem, TestCase

REQUIRED = (
    "name",
    "description",
    "public_tests",
    "private_tests",
    "cf_rating",
    "time_limit",
    "memory_limit_bytes",
)
OPTIONAL = ("input_file", "output_file")
# read only for `prepare --keep-solutions` (several GB in all): Problem.extra key -> column
SOLUTION_COLUMNS = {"solutions": "solutions", "wrong_solutions": "incorrect_solutions"}
SPLITS = ("train", "valid", "test")
_SPLIT_ORDER = {"test": -2, "valid": -1}
HF_PREFIX = "hf:"


def split_of(path: Path) -> str:
    for s in SPLITS:
        if path.name.startswith(s):
            return s
    return path.parent.name if path.parent.name in SPLITS else "train"


def read_order(path: Path) -> tuple[int, str]:
    """Sort key: test files, then valid, then the rest (a statement also in train is kept in test)."""
    return (_SPLIT_ORDER.get(split_of(path), 0), str(path))


def _tests(row: dict[str, Any], column: str) -> list[TestCase]:
    v = row.get(column)
    if v is None:
        return []
    if not isinstance(v, dict):
        raise RowError(column, "must be a struct {input: list<string>, output: list<string>}")
    ins, outs = v.get("input"), v.get("output")
    ins, outs = [] if ins is None else ins, [] if outs is None else outs
    if not isinstance(ins, list) or not isinstance(outs, list):
        raise RowError(column, "input and output must be lists of strings")
    if len(ins) != len(outs):
        raise RowError(column, f"{len(ins)} inputs but {len(outs)} outputs")
    for i, (a, b) in enumerate(zip(ins, outs, strict=True)):
        if not isinstance(a, str) or not isinstance(b, str):
            raise RowError(
                column,
                f"test {i}: input and output must be strings, not {type(a).__name__}/{type(b).__name__}",
            )
    return [TestCase(a, b) for a, b in zip(ins, outs, strict=True)]


def _int(row: dict[str, Any], column: str) -> int:
    v = row.get(column)
    if v is None:
        return 0
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise RowError(column, f"must be a number, not {v!r}")
    return int(v)


def _time_limit(row: dict[str, Any]) -> float:
    v = row.get("time_limit")
    if v is None:
        return 0.0
    if not isinstance(v, dict):
        raise RowError("time_limit", "must be a struct {seconds, nanos}")
    s, n = v.get("seconds") or 0, v.get("nanos") or 0
    if not isinstance(s, int | float) or not isinstance(n, int | float):
        raise RowError("time_limit", f"seconds and nanos must be numbers, not {v!r}")
    return float(s) + float(n) / 1e9


def _text(row: dict[str, Any], column: str) -> str:
    v = row.get(column)
    if v is not None and not isinstance(v, str):
        raise RowError(column, f"must be a string, not {type(v).__name__}")
    return v or ""


def row_to_raw(
    row: dict[str, Any], split: str, file: str, index: int, generated: bool, solutions: bool = False
) -> RawProblem | Malformed:
    """One CodeContests record (a parquet row or a `datasets` example, as a dict) as a RawProblem."""
    try:
        name = _text(row, "name")
        if not name:
            raise RowError("name", "missing")
        problem = Problem(
            name=name,
            statement=_text(row, "description"),
            public_tests=_tests(row, "public_tests"),
            private_tests=_tests(row, "private_tests"),
            time_limit_s=_time_limit(row),
            memory_limit_bytes=_int(row, "memory_limit_bytes"),
            rating=_int(row, "cf_rating") or None,
            source="code_contests",
            extra={k: row.get(c) for k, c in SOLUTION_COLUMNS.items() if solutions and row.get(c)},
        )
        gen = _tests(row, "generated_tests") if generated else []
        input_file, output_file = _text(row, "input_file"), _text(row, "output_file")
    except RowError as e:
        return Malformed(file, index, e.column, str(e), split)
    return RawProblem(problem, split, name, f"{file}, row {index}", gen, input_file, output_file)


class CodeContestsSource:
    """Rows of CodeContests parquet files (a file, a directory or a glob), or of the hub dataset."""

    name = "code_contests"

    def __init__(
        self,
        spec: str,
        splits: tuple[str, ...] | None,
        include_generated: bool,
        batch_rows: int = 64,
        solutions: bool = False,
    ):
        self.spec, self.splits, self.generated, self.batch_rows = spec, splits, include_generated, batch_rows
        self.solutions = solutions
        self._files = [] if spec.startswith(HF_PREFIX) else expand(spec, ".parquet")
        if self.splits:
            self._files = [f for f in self._files if split_of(f) in self.splits]
        # Evaluation splits first: a statement in both test and train is kept in test, dropped from train.
        self._files.sort(key=read_order)

    def files(self) -> list[Path]:
        return self._files

    def columns(self) -> list[str]:
        solutions = tuple(SOLUTION_COLUMNS.values()) if self.solutions else ()
        return [*REQUIRED, *OPTIONAL, *(("generated_tests",) if self.generated else ()), *solutions]

    def count_rows(self) -> int | None:
        if self.spec.startswith(HF_PREFIX):
            return None
        return sum(open_parquet(f).metadata.num_rows for f in self._files)

    def __iter__(self) -> Iterator[RawProblem | Malformed]:
        if self.spec.startswith(HF_PREFIX):
            yield from self._iter_hub(self.spec[len(HF_PREFIX) :])
            return
        for f in self._files:
            yield from self._iter_file(f)

    def _iter_file(self, path: Path) -> Iterator[RawProblem | Malformed]:
        pf, split = open_parquet(path), split_of(path)
        names = set(pf.schema_arrow.names)
        for col in [*REQUIRED, *(("generated_tests",) if self.generated else ())]:
            if col not in names:
                raise CodefuError(
                    f"{path}, row 0, column {col!r}: column missing (not CodeContests' schema?)"
                )
        columns = [c for c in self.columns() if c in names]
        for item in parquet_rows(pf, path, columns, split, self.batch_rows):
            if isinstance(item, Malformed):
                yield item
            else:
                yield row_to_raw(item[1], split, str(path), item[0], self.generated, self.solutions)

    def _iter_hub(self, dataset: str) -> Iterator[RawProblem | Malformed]:
        try:
            import datasets  # optional, only for this path
        except ImportError:
            raise CodefuError(
                f"{HF_PREFIX}{dataset}: streaming from the hub needs `pip install datasets` and network; "
                "or download the parquet files and give their directory"
            ) from None
        for split in sorted(self.splits or SPLITS, key=lambda s: _SPLIT_ORDER.get(s, 0)):
            rows: Iterable[dict[str, Any]] = datasets.load_dataset(dataset, split=split, streaming=True)
            for i, row in enumerate(rows):
                where = f"{HF_PREFIX}{dataset}[{split}]"
                yield row_to_raw(row, split, where, i, self.generated, self.solutions)
