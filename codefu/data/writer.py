"""Output files written atomically: rows go to hidden temp files beside their final names, which appear
(by rename) only when the whole run succeeded; on any error the temp files are removed."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from codefu.data.schema import SCHEMA


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def _temp_name(final: Path) -> Path:
    return final.with_name(f".{final.name}.tmp-{os.getpid()}")


def write_json_atomic(path: Path, obj: Any) -> None:
    tmp = _temp_name(path)
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


class _Part:
    """One output file (a bucket and split): a buffer of rows and a parquet writer on a temp path."""

    def __init__(self, final: Path) -> None:
        self.final, self.temp = final, _temp_name(final)
        self.rows: list[dict[str, Any]] = []
        self.count = 0
        self.writer: pq.ParquetWriter | None = None

    def flush(self) -> None:
        if not self.rows:
            return
        if self.writer is None:
            self.final.parent.mkdir(parents=True, exist_ok=True)
            self.writer = pq.ParquetWriter(self.temp, SCHEMA, compression="zstd")
        self.writer.write_table(pa.Table.from_pylist(self.rows, schema=SCHEMA))
        self.rows = []

    def close(self) -> None:
        self.flush()
        if self.writer is not None:
            self.writer.close()
            self.writer = None


class OutputWriter:
    """OUT/<bucket>/<split>.parquet, appended row by row; `commit()` renames them into place."""

    def __init__(self, out: Path, flush_rows: int = 256) -> None:
        self.out, self.flush_rows = out, flush_rows
        self.parts: dict[tuple[str, str], _Part] = {}

    def next_index(self, bucket: str, split: str) -> int:
        part = self.parts.get((bucket, split))
        return part.count if part else 0

    def add(self, bucket: str, split: str, row: dict[str, Any]) -> None:
        part = self.parts.setdefault((bucket, split), _Part(self.out / bucket / f"{split}.parquet"))
        part.rows.append(row)
        part.count += 1
        if len(part.rows) >= self.flush_rows:
            part.flush()

    def close(self) -> list[dict[str, Any]]:
        """Finish every temp file; returns what the manifest lists for each output."""
        outputs = []
        for (bucket, split), part in sorted(self.parts.items()):
            part.close()
            outputs.append(
                {
                    "bucket": bucket,
                    "split": split,
                    "path": str(part.final.relative_to(self.out)),
                    "rows": part.count,
                    "sha256": sha256_file(part.temp),
                }
            )
        return outputs

    def commit(self) -> None:
        for part in self.parts.values():
            os.replace(part.temp, part.final)

    def abort(self) -> None:
        for part in self.parts.values():
            try:
                if part.writer is not None:
                    part.writer.close()
            finally:
                part.temp.unlink(missing_ok=True)
