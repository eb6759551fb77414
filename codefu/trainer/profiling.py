"""torch.profiler around chosen trainer calls (`trainer.profile_dir`, `trainer.profile_calls`): where an
update's or a forward-only pass's time goes, as a table of operators and kernels per call and rank."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from torch.autograd.profiler_util import EventList
from torch.profiler import DeviceType, ProfilerActivity, profile

#: rows of the operator table: the kernels and operators that take the most time
TABLE_ROWS = 40


class CallProfiler:
    """Counts the calls of each kind ("update", "forward") from 0 and profiles those in `calls`."""

    def __init__(self, out_dir: str | None, calls: list[int], prefix: str, rank: int, device: torch.device):
        self.out_dir = Path(out_dir) if out_dir else None
        self.calls = set(calls)
        self.prefix = prefix
        self.rank = rank
        self.device = device
        self.counts: dict[str, int] = defaultdict(int)

    @contextmanager
    def call(self, kind: str) -> Iterator[None]:
        index = self.counts[kind]
        self.counts[kind] += 1
        if self.out_dir is None or index not in self.calls:
            yield
            return
        cuda = self.device.type == "cuda"
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        t0 = time.perf_counter()
        with profile(activities=activities) as prof:
            yield
            if cuda:  # the call's last kernels inside the window
                torch.cuda.synchronize(self.device)
        wall = time.perf_counter() - t0
        path = self.out_dir / f"{self.prefix}_{kind}_{index}_rank{self.rank}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(profile_table(prof, wall, cuda))


def profile_table(prof: profile, wall_s: float, cuda: bool) -> str:
    """A header (wall time; on CUDA, the kernels' time summed: well under the wall, the GPU waited for the
    host; kernels of several streams may overlap, so it can also exceed it) and the operators by their own
    time on the device (CUDA) or the host (CPU)."""
    events = prof.key_averages()
    lines = [f"wall {wall_s:.3f} s"]
    if cuda:
        kernel_s = kernel_seconds(events)
        lines.append(f"kernels {kernel_s:.3f} s summed ({kernel_s / max(wall_s, 1e-9):.1%} of wall)")
    sort_by = "self_device_time_total" if cuda else "self_cpu_time_total"
    lines.append(events.table(sort_by=sort_by, row_limit=TABLE_ROWS))
    return "\n".join(lines) + "\n"


def kernel_seconds(events: EventList) -> float:
    """The device's time in `events`, each kernel (and copy) once: the rows that are device events. A host
    operator's row reports as its own device time that of the kernels it launched, which are rows of their
    own, and a user annotation on the device (e.g. the optimizer's step) spans kernels: summing every row
    counted each kernel at least twice (issue #42). The table's "Self CUDA time total" sums the same rows."""
    kernels = (e for e in events if e.device_type != DeviceType.CPU and not e.is_user_annotation)
    return sum(e.self_device_time_total for e in kernels) / 1e6
