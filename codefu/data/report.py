"""What a `codefu prepare` run did: counts per drop reason and per bucket and split, as a table."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from codefu.data.filters import REASONS


@dataclass
class PrepareReport:
    rows_read: int = 0
    kept: int = 0
    dropped: Counter[str] = field(default_factory=Counter)  # reason -> rows
    written: Counter[tuple[str, str]] = field(default_factory=Counter)  # (bucket, split) -> problems
    outputs: list[dict[str, Any]] = field(default_factory=list)  # per file: bucket, split, path, rows, sha256
    seconds: float = 0.0
    bucket_order: list[str] = field(default_factory=list)  # table rows in this order (the config's)

    def to_dict(self) -> dict[str, Any]:
        buckets: dict[str, dict[str, int]] = {}
        for (bucket, split), n in sorted(self.written.items()):
            buckets.setdefault(bucket, {})[split] = n
        return {
            "rows_read": self.rows_read,
            "kept": self.kept,
            "dropped": {r: self.dropped[r] for r in REASONS},
            "buckets": buckets,
            "seconds": round(self.seconds, 3),
        }

    def table(self) -> str:
        """The closing table: rows read, kept, dropped per reason, problems per bucket and split."""
        dropped = sum(self.dropped.values())
        lines = [
            f"{'rows read':<22}{self.rows_read:>9}",
            f"{'kept':<22}{self.kept:>9}",
            f"{'dropped':<22}{dropped:>9}",
        ]
        lines += [f"  {r:<20}{self.dropped[r]:>9}" for r in REASONS]
        splits = sorted({s for _, s in self.written}, key=_split_order)
        used = {b for b, _ in self.written}
        buckets = [b for b in self.bucket_order if b in used] + sorted(used - set(self.bucket_order))
        if splits:
            lines.append("")
            lines.append(f"{'bucket':<14}" + "".join(f"{s:>9}" for s in splits) + f"{'total':>9}")
            for b in buckets:
                row = [self.written[(b, s)] for s in splits]
                lines.append(f"{b:<14}" + "".join(f"{n:>9}" for n in row) + f"{sum(row):>9}")
        else:
            lines.append("\nno problems kept: nothing written")
        return "\n".join(lines)


def _split_order(split: str) -> tuple[int, str]:
    order = {"train": 0, "valid": 1, "test": 2}
    return (order.get(split, 3), split)
