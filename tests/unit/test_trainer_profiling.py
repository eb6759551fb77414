"""The profiler's tables: the kernels' summed time counts each kernel once (issue #42), and a CPU call's
table is written where `trainer.profile_dir` says."""

from __future__ import annotations

import torch
from torch.autograd.profiler_util import EventList, FunctionEvent
from torch.profiler import DeviceType

from codefu.trainer.profiling import CallProfiler, kernel_seconds, profile_table


def _cuda_call_events() -> EventList:
    """What torch.profiler's kineto parse makes of a matmul and an optimizer step on CUDA: the host
    operators carry the kernels they launched (`append_kernel`), and each kernel, and the device side of a
    user annotation, is an event of its own on the device."""

    def event(i: int, name: str, start_s: float, end_s: float, **kw: object) -> FunctionEvent:
        times = {"start_us": start_s * 1e6, "end_us": end_s * 1e6}
        return FunctionEvent(i, name, thread=0, **times, use_device="cuda", stack=[], input_shapes=[], **kw)

    mm = event(0, "aten::mm", 0.0, 0.1)
    mm.append_kernel("gemm", 0, 3e6)
    adam = event(1, "aten::_fused_adamw_", 0.1, 0.2)
    adam.append_kernel("multi_tensor_apply", 0, 1e6)
    events = EventList(
        [
            mm,
            adam,
            event(2, "gemm", 0.0, 3.0, device_type=DeviceType.CUDA),
            event(3, "multi_tensor_apply", 3.0, 4.0, device_type=DeviceType.CUDA),
            event(
                4, "Optimizer.step#AdamW.step", 3.0, 4.0, device_type=DeviceType.CUDA, is_user_annotation=True
            ),
        ],
        use_device="cuda",
    )
    events._build_tree()  # parents and children, as the profiler's parse does
    return events


class _Profile:
    """A finished profile's one method `profile_table` reads."""

    def __init__(self, events: EventList):
        self.events = events

    def key_averages(self) -> EventList:
        return self.events.key_averages()


def test_kernel_seconds_counts_each_kernel_once() -> None:
    rows = _cuda_call_events().key_averages()
    every_row = sum(e.self_device_time_total for e in rows) / 1e6  # the old sum
    assert every_row == 9.0  # each kernel twice (its row, its operator's), the annotation once
    assert kernel_seconds(rows) == 4.0


def test_cuda_table_header_sums_each_kernel_once() -> None:
    table = profile_table(_Profile(_cuda_call_events()), wall_s=5.0, cuda=True)
    assert table.splitlines()[:2] == ["wall 5.000 s", "kernels 4.000 s summed (80.0% of wall)"]
    assert "Self CUDA time total: 4.000s" in table  # torch's own total under the table agrees


def test_cpu_call_writes_a_table_without_kernels(tmp_path) -> None:
    profiler = CallProfiler(str(tmp_path), calls=[1], prefix="policy", rank=0, device=torch.device("cpu"))
    for _ in range(2):
        with profiler.call("update"):
            torch.ones(64, 64) @ torch.ones(64, 64)
    assert [p.name for p in tmp_path.iterdir()] == ["policy_update_1_rank0.txt"]
    table = (tmp_path / "policy_update_1_rank0.txt").read_text()
    assert table.startswith("wall ") and "kernels" not in table.splitlines()[1]
    assert "aten::mm" in table
