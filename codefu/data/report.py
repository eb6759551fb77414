"""What a `codefu prepare` run did: counts per drop reason (per source, when a run reads several), the
details behind a reason (a malformed column, an unsupported kind, the source that kept a duplicate) with an
example row each, and problems per bucket and split, as a table."""

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
    sources: dict[str, Counter[str]] = field(default_factory=dict)  # source -> rows_read, kept, reasons
    details: Counter[tuple[str, str, str]] = field(default_factory=Counter)  # (source, reason, detail): rows
    examples: dict[tuple[str, str, str], str] = field(default_factory=dict)  # the first row's message each

    def count(self, source: str, key: str, rows: int = 1) -> None:
        """Add `rows` to `key` ("rows_read", "kept" or a reason) of `source`, and to the totals."""
        self.sources.setdefault(source, Counter())[key] += rows
        if key == "rows_read":
            self.rows_read += rows
        elif key == "kept":
            self.kept += rows
        else:
            self.dropped[key] += rows

    def note(self, source: str, reason: str, detail: str, example: str, rows: int = 1) -> None:
        """Record what is behind a drop reason, keeping the first example of each."""
        key = (source, reason, detail)
        self.details[key] += rows
        self.examples.setdefault(key, example)

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
            "sources": {
                name: {
                    "rows_read": c["rows_read"],
                    "kept": c["kept"],
                    "dropped": {r: c[r] for r in REASONS if c[r]},
                }
                for name, c in self.sources.items()
            },
            "details": [
                {"source": s, "reason": r, "detail": d, "rows": n, "example": self.examples[(s, r, d)]}
                for (s, r, d), n in self.details.items()
            ],
        }

    def table(self) -> str:
        """The closing table: rows read, kept, dropped per reason (a column per source when there are
        several), what is behind the reasons, problems per bucket and split."""
        lines = self._counts()
        if self.details:
            lines += ["", "details (rows, an example)"]
            for (source, reason, detail), n in self.details.items():
                lines.append(f"  {source:<14}{reason:<13}{n:>7}  {detail}")
                lines.append(f"  {'':<34}e.g. {_shorten(self.examples[(source, reason, detail)])}")
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

    def _counts(self) -> list[str]:
        names = list(self.sources) if len(self.sources) > 1 else []
        labels = ["rows read", "kept", "dropped", *(f"  {r}" for r in REASONS)]
        total = Counter({"rows_read": self.rows_read, "kept": self.kept, **self.dropped})
        columns = [_column(total)] + [_column(self.sources[n]) for n in names]
        head = [f"{'':<22}{'total':>9}" + "".join(f"{n[:14]:>15}" for n in names)] if names else []
        return head + [
            f"{label:<22}{columns[0][i]:>9}" + "".join(f"{c[i]:>15}" for c in columns[1:])
            for i, label in enumerate(labels)
        ]


def _column(c: Counter[str]) -> list[int]:
    """rows read, kept, dropped, then each reason, of one source (or of the whole run)."""
    return [c["rows_read"], c["kept"], sum(c[r] for r in REASONS), *(c[r] for r in REASONS)]


def _shorten(text: str, width: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _split_order(split: str) -> tuple[int, str]:
    order = {"train": 0, "valid": 1, "test": 2}
    return (order.get(split, 3), split)
