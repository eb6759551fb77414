"""Stop tokens that end greedy outputs at different steps: a batch that thins out while it decodes."""

from __future__ import annotations

import itertools


def pick_stops(outputs: list[list[int]], min_ended: int = 1) -> tuple[int, ...]:
    """One to three tokens of these outputs whose first occurrences end at least `min_ended` outputs, at
    different steps, and leave at least one running to the length cap (`min_ended` makes a batch thin
    below a size: a test of what a smaller batch does)."""
    candidates = sorted({t for out in outputs for t in out[1:]})
    for size in (1, 2, 3):
        for stop in itertools.combinations(candidates, size):
            ends = [next((i for i, t in enumerate(out) if t in stop), None) for out in outputs]
            ended = [e for e in ends if e is not None]
            if None in ends and len(set(ended)) >= 2 and len(ended) >= min_ended:
                return stop
    raise AssertionError(f"no stop tokens end {min_ended} of these outputs at different steps and not all")


__all__ = ["pick_stops"]
