"""Opening a parquet file, and its rows one row group at a time: a row group that cannot be read is one
`Malformed` entry covering its rows (the rest of the file is still read)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from codefu.data.raw import Malformed
from codefu.errors import CodefuError


def open_parquet(path: Path) -> pq.ParquetFile:
    """The file's reader; a CodefuError naming the file when it is not parquet."""
    try:
        return pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as e:
        raise CodefuError(f"{path}, row 0, column '*': not a readable parquet file ({e})") from None


def parquet_rows(
    pf: pq.ParquetFile, path: Path, columns: list[str], split: str, batch_rows: int
) -> Iterator[tuple[int, dict[str, Any]] | Malformed]:
    """(row index, row as a dict of `columns`) for every row of `pf`, `batch_rows` rows converted at a
    time; an unreadable row group yields one Malformed for its rows instead."""
    start = 0
    for g in range(pf.num_row_groups):
        n = pf.metadata.row_group(g).num_rows
        try:
            table = pf.read_row_group(g, columns=columns)
        except (pa.ArrowException, OSError) as e:
            rows = f"{start}-{start + n - 1}"
            yield Malformed(str(path), rows, "*", f"row group {g} unreadable ({e})", split, n)
            start += n
            continue
        for batch in table.to_batches(max_chunksize=batch_rows):
            for i, row in enumerate(batch.to_pylist()):
                yield start + i, row
            start += batch.num_rows
        del table
