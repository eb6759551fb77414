"""Where the per-step metrics go: JSONL and TensorBoard files in the run directory, the console, or several.

Every sink takes one flat ``dict[str, float]`` per step (already reduced, see `reduce_step_metrics`):

    sink = MultiSink([JsonlSink(run_dir, resume_step), TensorBoardSink(run_dir, resume_step), ConsoleSink(n)])
    sink.write(step, metrics)
    ...
    sink.close()

Resuming: pass `resume_step` = the step of the checkpoint the run resumes from. The JSONL file is rewritten
to keep only steps <= resume_step, and TensorBoard hides the events after it, so the steps redone after a
crash are neither duplicated nor missing.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, Self, runtime_checkable

METRICS_FILE = "metrics.jsonl"
TENSORBOARD_DIR = "tensorboard"
_RESERVED = ("step", "time")  # the JSONL record's own fields


@runtime_checkable
class MetricsSink(Protocol):
    def write(self, step: int, metrics: Mapping[str, float]) -> None: ...

    def close(self) -> None: ...


class SinkBase:
    """`with Sink(...) as s:` closes on exit."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:  # pragma: no cover - overridden
        pass


def _load(path: Path) -> tuple[list[dict[str, Any]], bool, list[int]]:
    """The records of a metrics file by step (the last of duplicate steps wins), whether the file was
    clean (every line a JSON object with an integer `step`, in increasing order, ending with a newline),
    and the numbers (from 1) of the lines skipped as unreadable, a torn last line left out."""
    if not path.exists():
        return [], True, []
    data = path.read_bytes()
    clean = not data or data.endswith(b"\n")
    lines = data.split(b"\n")
    by_step: dict[int, dict[str, Any]] = {}
    skipped: list[int] = []
    last = None
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            rec = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            rec = None
        step = rec.get("step") if isinstance(rec, dict) else None
        if not isinstance(step, int) or isinstance(step, bool):
            clean = False
            if number < len(lines):  # the last line has no newline: a write cut short by a kill
                skipped.append(number)
            continue
        if last is not None and step <= last:
            clean = False
        last = step
        by_step[step] = rec
    return [by_step[s] for s in sorted(by_step)], clean, skipped


def read_metrics(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The records of a `metrics.jsonl` (or a run directory holding one), in step order; a torn or
    malformed line is skipped, and of duplicate steps the last written is kept. Non-finite values were
    written as null and read back as None."""
    return read_metrics_checked(path)[0]


def read_metrics_checked(path: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], list[int]]:
    """`read_metrics`, and the numbers (from 1) of the lines it skipped as unreadable (not counting a torn
    last line, which a run still writing may show)."""
    p = Path(path)
    if p.is_dir():
        p = p / METRICS_FILE
    records, _, skipped = _load(p)
    return records, skipped


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _json_value(value: float) -> float | None:
    v = float(value)
    return v if math.isfinite(v) else None


class JsonlSink(SinkBase):
    """Appends one JSON object per step to `run_dir/metrics.jsonl`:

        {"step": 12, "time": 1718000000.123, "judge/pass_rate": 0.375, ..., "reward/mean": 0.412}

    `time` is the Unix time of the write; metrics follow in sorted order, as floats (NaN and inf as null,
    keeping the file strict JSON). Each line is written in one call, flushed and fsync'd, so a kill leaves
    at most one torn last line, which the next construction drops.

    resume_step: None for a new run (an existing file is appended to, after dropping a torn line);
    N to continue after a checkpoint of step N (the file is rewritten, through a temporary file and an
    atomic rename, to keep only steps <= N). Steps must increase: writing a step <= the last one in the
    file raises ValueError, so the file never holds a step twice.
    """

    def __init__(self, run_dir: str | os.PathLike[str], resume_step: int | None = None) -> None:
        self.path = Path(run_dir) / METRICS_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        records, clean, _ = _load(self.path)
        if resume_step is not None:
            records = [r for r in records if r["step"] <= resume_step]
        if resume_step is not None or not clean:
            self._rewrite(records)
        self.last_step: int | None = records[-1]["step"] if records else None
        self._file = open(self.path, "a", encoding="utf-8")  # closed in close()

    def _rewrite(self, records: Sequence[Mapping[str, Any]]) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            for rec in records:
                f.write(json.dumps(rec, allow_nan=False) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        _fsync_dir(self.path.parent)

    def write(self, step: int, metrics: Mapping[str, float]) -> None:
        step = int(step)
        if self.last_step is not None and step <= self.last_step:
            raise ValueError(f"step {step} written after step {self.last_step}: steps must increase")
        clash = [k for k in _RESERVED if k in metrics]
        if clash:
            raise ValueError(f"metric names reserved by the JSONL record: {clash}")
        rec: dict[str, Any] = {"step": step, "time": round(time.time(), 3)}
        rec.update((k, _json_value(metrics[k])) for k in sorted(metrics))
        self._file.write(json.dumps(rec, allow_nan=False) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())
        self.last_step = step

    def close(self) -> None:
        if not self._file.closed:
            self._file.close()


class TensorBoardSink(SinkBase):
    """Scalars to TensorBoard event files under `run_dir/tensorboard/` (one tag per metric key, the step as
    the global step), flushed every step. With `resume_step` = N the events after step N are purged (hidden
    from TensorBoard) before new ones are written. Needs the `tensorboard` package (imported here, lazily).
    """

    def __init__(self, run_dir: str | os.PathLike[str], resume_step: int | None = None) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.log_dir = Path(run_dir) / TENSORBOARD_DIR
        purge = None if resume_step is None else resume_step + 1
        self.writer = SummaryWriter(log_dir=str(self.log_dir), purge_step=purge)

    def write(self, step: int, metrics: Mapping[str, float]) -> None:
        for key, value in metrics.items():
            self.writer.add_scalar(key, float(value), global_step=int(step))
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class MultiSink(SinkBase):
    """Fans every step out to several sinks. Every sink is written (and closed) even if an earlier one
    raises; the first error is then re-raised."""

    def __init__(self, sinks: Sequence[MetricsSink]) -> None:
        self.sinks = list(sinks)

    def _each(self, call: str, *args: Any) -> None:
        error: BaseException | None = None
        for sink in self.sinks:
            try:
                getattr(sink, call)(*args)
            except Exception as e:  # re-raised below, after the other sinks
                error = error or e
        if error is not None:
            raise error

    def write(self, step: int, metrics: Mapping[str, float]) -> None:
        self._each("write", step, metrics)

    def close(self) -> None:
        self._each("close")
