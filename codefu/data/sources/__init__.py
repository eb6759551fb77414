"""Dataset sources: each turns one dataset's rows into `RawProblem`s (or `Malformed` for bad rows)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from codefu.data.raw import Malformed, RawProblem


class Source(Protocol):
    """What the pipeline needs from a source."""

    name: str  # written as data_source

    def files(self) -> list[Path]:
        """Input files (hashed into the manifest); empty for remote datasets."""
        ...

    def count_rows(self) -> int | None:
        """Rows the iteration will yield, when cheap to know (for the progress bar)."""
        ...

    def __iter__(self) -> Iterator[RawProblem | Malformed]: ...


SOURCES = ("code_contests", "jsonl", "taco", "apps", "livecodebench", "codeforces")
