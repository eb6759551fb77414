"""Stop tokens that end greedy outputs at different steps: a batch that thins out while it decodes."""

from __future__ import annotations


def pick_stops(outputs: list[list[int]]) -> tuple[int, ...]:
    """One or two tokens of these outputs whose first occurrences end some outputs at different steps
    and leave at least one running to the length cap."""
    candidates = sorted({t for out in outputs for t in out[1:]})
    for size in (1, 2):
        for first in candidates:
            for second in candidates if size == 2 else [None]:
                stop = {first} if second is None else {first, second}
                ends = [next((i for i, t in enumerate(out) if t in stop), None) for out in outputs]
                if None in ends and len({e for e in ends if e is not None}) >= 2:
                    return tuple(sorted(stop))
    raise AssertionError("no such stop tokens in these outputs")


__all__ = ["pick_stops"]
