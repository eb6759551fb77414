"""Test inputs as files for the sandbox's stdin: written once and shared by every run of the same input,
and bounded, since a judge lives for a whole training run or service and its inputs (a CodeContests
problem's can be tens of MB, a /run_code stdin up to the body limit) would otherwise fill `$TMPDIR`."""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

INPUT_CACHE_BYTES = 1 << 30  # inputs no run holds, kept for the next run of the same test


@dataclass
class _Entry:
    path: Path
    size: int
    holders: int = 0


class InputFiles:
    """Thread-safe. A file is never removed while a run holds it; of the others, at most `keep_bytes`
    are kept, the least recently used removed first."""

    def __init__(self, folder: Path, keep_bytes: int = INPUT_CACHE_BYTES):
        self.folder, self.keep_bytes = folder, keep_bytes
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._idle_bytes = 0  # the size of the files no run holds

    @contextlib.contextmanager
    def hold(self, text: str) -> Iterator[Path]:
        data = text.encode("utf-8", errors="replace")
        key = hashlib.sha256(data).hexdigest()
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = _Entry(self.folder / key, len(data))
                entry.path.write_bytes(data)
                self._entries[key] = entry
            elif entry.holders == 0:
                self._idle_bytes -= entry.size
            entry.holders += 1
            self._entries.move_to_end(key)
        try:
            yield entry.path
        finally:
            with self._lock:
                entry.holders -= 1
                if entry.holders == 0:
                    self._idle_bytes += entry.size
                    self._evict()

    def _evict(self) -> None:
        if self._idle_bytes <= self.keep_bytes:  # the usual case: no copy of the keys on every run
            return
        for key in list(self._entries):
            if self._idle_bytes <= self.keep_bytes:
                return
            entry = self._entries[key]
            if entry.holders == 0:
                entry.path.unlink(missing_ok=True)
                self._idle_bytes -= entry.size
                del self._entries[key]

    @property
    def idle_bytes(self) -> int:
        return self._idle_bytes
