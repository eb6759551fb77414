"""Submissions that arrive over time: the judge starts on the first while later ones are still being written.

    arrivals = Arrivals(items)      # a list: all there at once; any other iterable: pulled by a thread
    while not arrivals.finished:
        for item in arrivals.take():    # what came since the last call, without blocking
            ...
        arrivals.wait(0.05)             # until something comes (or the end), at most 0.05 s

A rollout engine finishes completions at different decode steps (continuous batching); the loop hands the
judge an iterable that blocks until the next one is done. Pulling it on a thread of its own keeps the
judge's own loop free to dispatch and collect verdicts meanwhile.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import Generic, TypeVar

T = TypeVar("T")


class Arrivals(Generic[T]):
    def __init__(self, items: Iterable[T]):
        self._ready: list[T] = []
        self._error: BaseException | None = None
        self._ended = False
        self._changed = threading.Condition()
        if isinstance(items, Sequence):
            self._ready, self._ended = list(items), True
            return
        threading.Thread(target=self._pull, args=(items,), name="codefu-arrivals", daemon=True).start()

    def _pull(self, items: Iterable[T]) -> None:
        try:
            for item in items:
                with self._changed:
                    self._ready.append(item)
                    self._changed.notify_all()
        except BaseException as e:  # noqa: BLE001 - handed to the consumer, raised by take()
            self._error = e
        finally:
            with self._changed:
                self._ended = True
                self._changed.notify_all()

    def take(self) -> list[T]:
        """Everything that arrived since the last call (possibly nothing). Once the items before it are
        taken, an error of the iterable is raised here."""
        with self._changed:
            out, self._ready = self._ready, []
            if not out and self._ended and self._error is not None:
                error, self._error = self._error, None
                raise error
        return out

    def wait(self, timeout: float | None) -> None:
        """Until an item arrives or the iterable ends (at most `timeout` seconds; None: no limit)."""
        with self._changed:
            self._changed.wait_for(lambda: self._ready or self._ended, timeout)

    @property
    def finished(self) -> bool:
        """The iterable has ended and everything it gave was taken (its error too)."""
        with self._changed:
            return self._ended and not self._ready and self._error is None
