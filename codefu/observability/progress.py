"""Progress of long work, shown one way by every command: a tqdm bar on stderr (done of total, rate,
elapsed, ETA) when stderr is a terminal, as `codefu train`'s steps (`disable=None`); elsewhere no bar, and
for work that asks for them (`lines`) one line as a phase starts and one as it ends, so a log or a pipe
still tells what runs and for how long without a refresh per item."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

from tqdm import tqdm


@contextmanager
def phase_bar(
    desc: str,
    total: int | None,
    unit: str,
    lines: bool = False,
    leave: bool = True,
    file: TextIO | None = None,
) -> Iterator[tqdm]:
    """A bar of `total` `unit`s labelled `desc` on `file` (stderr) where it is a terminal; elsewhere, with
    `lines`, "DESC: TOTAL UNITs ..." as it opens and "DESC: done in S s" as it closes (not on an error)."""
    out = file or sys.stderr
    start = time.monotonic()
    with tqdm(total=total, desc=desc, unit=unit, disable=None, leave=leave, file=out) as bar:
        quiet = lines and bar.disable
        if quiet:
            count = f"{unit}s" if total is None else f"{total} {unit}{'' if total == 1 else 's'}"
            print(f"{desc}: {count} ...", file=out, flush=True)
        yield bar
    if quiet:
        print(f"{desc}: done in {time.monotonic() - start:.1f} s", file=out, flush=True)
