"""The difficulty-aware sampler's memory: each problem's recent pass rates, and which problems sit out.

GRPO learns nothing from a group whose samples all fail or all pass (every advantage is 0), so a problem
the policy never solves, or always solves, only costs generation time. `PassRateRecord` keeps each
problem's pass rate (accepted samples / samples) over its last `window` visits; a problem whose whole
window is 0% (too hard for now) or 100% (learned) is set aside for `retry_after` epochs and then visited
again, where one more visit decides whether it stays (the window rolls). Cf. prime-rl's difficulty pools,
open-instruct's no-resampling threshold and DAPO's dynamic sampling, which drops such groups after paying
for them; this skips them before.

The record is plain data: `state_dict()` goes into the loop's checkpoint, and a resumed run skips exactly
the problems the uninterrupted run would have skipped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from codefu.errors import CodefuError


@dataclass
class DifficultyConfig:
    enabled: bool = False
    """Set aside problems whose last `window` visits passed none or all of their samples."""
    window: int = 2
    """Visits (one per epoch) a problem's record keeps; it is judged only once the window is full."""
    retry_after: int = 2
    """Epochs a set-aside problem sits out before it is sampled again."""

    def check(self, prefix: str = "data.difficulty") -> None:
        if self.window < 1:
            raise CodefuError(f"{prefix}.window must be >= 1, got {self.window!r}")
        if self.retry_after < 1:
            raise CodefuError(f"{prefix}.retry_after must be >= 1, got {self.retry_after!r}")


class PassRateRecord:
    """Per-problem pass rates over recent visits, and the epoch from which a set-aside problem returns."""

    def __init__(self, cfg: DifficultyConfig):
        cfg.check()
        self.cfg = cfg
        self.history: dict[str, list[float]] = {}  # name -> pass rates of its last `window` visits
        self.aside_until: dict[str, int] = {}  # name -> first epoch it may be sampled again

    def eligible(self, name: str, epoch: int) -> bool:
        return self.aside_until.get(name, 0) <= epoch

    def record(self, results: Mapping[str, tuple[int, int]], epoch: int) -> None:
        """Add one visit per problem: results = {name: (accepted samples, judged samples)}, seen in `epoch`.
        A problem whose full window is all 0% or all 100% sits out the next `retry_after` epochs."""
        for name, (accepted, samples) in results.items():
            if samples <= 0:
                continue  # nothing judged (e.g. only sandbox errors): no evidence either way
            rates = (self.history.get(name, []) + [accepted / samples])[-self.cfg.window :]
            self.history[name] = rates
            self.aside_until.pop(name, None)
            if len(rates) == self.cfg.window and (max(rates) == 0.0 or min(rates) == 1.0):
                self.aside_until[name] = epoch + 1 + self.cfg.retry_after

    def counts(self, names: Iterable[str], epoch: int) -> dict[str, int]:
        """How many of `names` are active, and set aside as too hard (0%) or as learned (100%)."""
        out = {"active": 0, "too_hard": 0, "solved": 0}
        for name in names:
            if self.eligible(name, epoch):
                out["active"] += 1
            elif max(self.history[name]) == 0.0:
                out["too_hard"] += 1
            else:
                out["solved"] += 1
        return out

    def state_dict(self) -> dict[str, Any]:
        return {
            "window": self.cfg.window,
            "history": {k: list(v) for k, v in self.history.items()},
            "aside_until": dict(self.aside_until),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.history = {k: [float(x) for x in v][-self.cfg.window :] for k, v in state["history"].items()}
        self.aside_until = {k: int(v) for k, v in state["aside_until"].items()}
