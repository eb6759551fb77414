"""Rows of a dataset's published files as dicts, in whichever format the hub ships them: parquet (one row
group at a time, only the columns the source uses: TACO's and APPS' solutions are most of their bytes),
arrow IPC as `datasets.save_to_disk` writes it (TACO's train/data-0000N-of-00009.arrow; one record batch at
a time), or JSONL (APPS', LiveCodeBench's; one line at a time).

A `TableSource` names its dataset's columns and turns one row into a RawProblem, so every format gets the
same checks, the same `Malformed` rows, and CodeContests' split rule and file order (evaluation splits
first). The helpers below read one value each and raise RowError naming the column.
"""

from __future__ import annotations

import glob
import json
from collections.abc import Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from codefu.data.raw import Malformed, RawProblem
from codefu.data.sources.code_contests import read_order, split_of
from codefu.data.sources.jsonl import RowError, iter_objects
from codefu.data.sources.parquet import open_parquet, parquet_rows
from codefu.errors import CodefuError
from codefu.types import TestCase

SUFFIXES = (".parquet", ".arrow", ".jsonl")
DEFAULT_TIME_LIMIT_S = 2.0  # for datasets without limits (APPS, LiveCodeBench; TACO rows without one)
DEFAULT_MEMORY_BYTES = 256 << 20  # the same defaults as our JSONL's

Row = dict[str, Any]


def table_files(spec: str) -> list[Path]:
    """A file, a directory (its .parquet/.arrow/.jsonl files, recursively) or a glob -> sorted files."""
    p = Path(spec)
    if p.is_dir():
        found = sorted(p.rglob("*"))
    else:
        found = [p] if p.exists() else sorted(Path(f) for f in glob.glob(spec, recursive=True))
    files = [f for f in found if f.suffix in SUFFIXES and f.is_file()]
    if not files:
        raise CodefuError(f"{spec}: no {'/'.join(SUFFIXES)} files found (give a file, a directory or a glob)")
    return files


def _ipc_batches(f: pa.MemoryMappedFile) -> tuple[pa.Schema, Iterator[pa.RecordBatch]]:
    """The stream format (what `datasets` writes), else the file format."""
    try:
        stream = pa.ipc.open_stream(f)
        return stream.schema, iter(stream)
    except pa.ArrowInvalid:
        f.seek(0)
        reader = pa.ipc.open_file(f)
        return reader.schema, (reader.get_batch(i) for i in range(reader.num_record_batches))


class TableSource:
    """Rows of one dataset's files (a file, a directory or a glob; parquet, arrow or JSONL). Subclasses set
    the names and columns and turn one row into a RawProblem (`row_to_raw`)."""

    name = ""  # written as data_source
    dataset = ""  # as named on the hub, for messages
    required: tuple[str, ...] = ()  # a parquet/arrow file without one is not this dataset's
    optional: tuple[str, ...] = ()  # read when present

    def __init__(self, spec: str, splits: tuple[str, ...] | None = None, batch_rows: int = 64) -> None:
        files = table_files(spec)
        if splits:
            files = [f for f in files if split_of(f) in splits]
        self._files = sorted(files, key=read_order)
        self.batch_rows = batch_rows

    def files(self) -> list[Path]:
        return self._files

    def count_rows(self) -> int | None:
        if any(f.suffix != ".parquet" for f in self._files):
            return None
        return sum(open_parquet(f).metadata.num_rows for f in self._files)

    def __iter__(self) -> Iterator[RawProblem | Malformed]:
        for path in self._files:
            split = split_of(path)
            for item in self.rows(path, split):
                if isinstance(item, Malformed):
                    yield item
                else:
                    yield self.row_to_raw(item[1], split, str(path), item[0])

    def row_to_raw(self, row: Row, split: str, file: str, index: int) -> RawProblem | Malformed:
        raise NotImplementedError

    def rows(self, path: Path, split: str) -> Iterator[tuple[int, Row] | Malformed]:
        """(row number, row) for each row of one file, or Malformed for a row (or row group) that cannot
        be read. Parquet and arrow rows count from 0, JSONL lines from 1. A file that cannot be opened, or
        whose schema lacks a required column, is an error (not this dataset's file)."""
        if path.suffix == ".jsonl":
            return self._jsonl_rows(path, split)
        if path.suffix == ".arrow":
            return self._arrow_rows(path)
        return self._parquet_rows(path, split)

    def _columns(self, path: Path, names: list[str]) -> list[str]:
        """The columns to read, after checking the required ones are there."""
        for col in self.required:
            if col not in names:
                raise CodefuError(
                    f"{path}, row 0, column {col!r}: column missing (not {self.dataset}'s schema?)"
                )
        return [c for c in (*self.required, *self.optional) if c in names]

    def _parquet_rows(self, path: Path, split: str) -> Iterator[tuple[int, Row] | Malformed]:
        pf = open_parquet(path)
        yield from parquet_rows(pf, path, self._columns(path, pf.schema_arrow.names), split, self.batch_rows)

    def _arrow_rows(self, path: Path) -> Iterator[tuple[int, Row]]:
        start = 0
        try:
            with pa.memory_map(str(path)) as f:
                schema, batches = _ipc_batches(f)
                columns = self._columns(path, schema.names)
                for batch in batches:
                    batch = batch.select(columns)
                    for offset in range(0, batch.num_rows, self.batch_rows):
                        for i, row in enumerate(batch.slice(offset, self.batch_rows).to_pylist()):
                            yield start + offset + i, row
                    start += batch.num_rows
        except (pa.ArrowException, OSError) as e:
            raise CodefuError(f"{path}, row {start}, column '*': not readable as arrow IPC ({e})") from None

    def _jsonl_rows(self, path: Path, split: str) -> Iterator[tuple[int, Row] | Malformed]:
        for lineno, obj in iter_objects(path):
            if isinstance(obj, RowError):
                yield Malformed(str(path), lineno, obj.column, str(obj), split)
            elif not isinstance(obj, dict):
                yield Malformed(str(path), lineno, "-", "a line must hold a JSON object", split)
            elif missing := [c for c in self.required if c not in obj]:
                yield Malformed(str(path), lineno, missing[0], "missing", split)
            else:
                yield lineno, obj


def text(row: Row, column: str) -> str:
    v = row.get(column)
    if v is not None and not isinstance(v, str):
        raise RowError(column, f"must be a string, not {type(v).__name__}")
    return v or ""


def ident(row: Row, column: str) -> str:
    """An id column: a string or an integer, as text ("" when null)."""
    v = row.get(column)
    if v is None:
        return ""
    if isinstance(v, bool) or not isinstance(v, str | int):
        raise RowError(column, f"must be a string or an integer, not {type(v).__name__}")
    return str(v)


def number(row: Row, column: str) -> float:
    """A numeric column; 0 when null."""
    v = row.get(column)
    if v is None:
        return 0.0
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise RowError(column, f"must be a number, not {v!r}")
    return float(v)


def json_value(row: Row, column: str) -> Any:
    """A column holding JSON text: the parsed value; None when null or empty."""
    v = text(row, column)
    if not v or v.isspace():
        return None
    try:
        return json.loads(v)
    except json.JSONDecodeError as e:
        raise RowError(column, f"not valid JSON ({e.msg} at char {e.pos})") from None


def iso_date(v: Any, column: str) -> str:
    """An ISO date or date-time ("2023-08-21T00:00:00"), a date or a datetime -> "2023-08-21"; null or "" ->
    "" (undated)."""
    if v is None or v == "":
        return ""
    if isinstance(v, datetime):
        return v.date().isoformat()
    if isinstance(v, date):
        return v.isoformat()
    if not isinstance(v, str):
        raise RowError(column, f"must be an ISO date string, not {type(v).__name__}")
    try:
        return datetime.fromisoformat(v.strip()).date().isoformat()
    except ValueError:
        raise RowError(column, f"not an ISO date or date-time: {v!r}") from None


def unix_date(v: Any, column: str) -> str:
    """Seconds since the epoch (open-r1's contest_start) -> "YYYY-MM-DD" (UTC); null -> ""."""
    if v is None:
        return ""
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise RowError(column, f"must be seconds since the epoch, not {v!r}")
    return datetime.fromtimestamp(v, UTC).date().isoformat()


def nominal_rating(label: str, ratings: dict[str, int | None], column: str) -> int | None:
    """A difficulty label's rating on the Codeforces scale (see the source's RATINGS); unknown labels are
    errors, so that a renamed label is noticed instead of silently unrated."""
    if label not in ratings:
        raise RowError(column, f"unknown label {label!r} (known: {', '.join(ratings)})")
    return ratings[label]


def case_list(v: Any, column: str) -> list[TestCase]:
    """[{input, output}, ...] (open-r1's examples and official tests, LiveCodeBench's stdin tests)."""
    if v is None:
        return []
    if not isinstance(v, list):
        raise RowError(column, "must be a list of {input, output}")
    out = []
    for i, t in enumerate(v):
        if not (isinstance(t, dict) and isinstance(t.get("input"), str) and isinstance(t.get("output"), str)):
            raise RowError(column, f'test {i} must be {{"input": str, "output": str}}')
        out.append(TestCase(t["input"], t["output"]))
    return out


def where(file: str, index: int) -> str:
    return f"{file}, row {index}"
