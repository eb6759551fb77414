"""The front's memory for request bodies (codefu.serve.app.BodyMemory) and the sweep of run folders a
killed judge left (codefu.judge.judge.sweep_run_dirs)."""

from __future__ import annotations

import asyncio
import os
import subprocess

import pytest

from codefu.judge.judge import sweep_run_dirs
from codefu.serve.app import BodyMemory


def test_bodies_share_the_memory_first_come_first_served():
    async def scenario() -> list[str]:
        memory = BodyMemory(100)
        order: list[str] = []

        async def body(name: str, size: int, hold_s: float) -> None:
            async with memory.hold(size, timeout_s=5):
                order.append(f"{name}+")
                await asyncio.sleep(hold_s)
            order.append(f"{name}-")

        # a (60) holds; b (60) waits; c (10) would fit now but comes after b: no overtaking
        a = asyncio.create_task(body("a", 60, 0.2))
        await asyncio.sleep(0.01)
        b = asyncio.create_task(body("b", 60, 0.1))
        await asyncio.sleep(0.01)
        c = asyncio.create_task(body("c", 10, 0.0))
        await asyncio.gather(a, b, c)
        assert memory.free == 100
        return order

    order = asyncio.run(scenario())
    assert order.index("a-") < order.index("b+") < order.index("c+"), order


def test_a_body_that_waits_too_long_gives_up_and_returns_nothing_it_did_not_get():
    async def scenario() -> None:
        memory = BodyMemory(100)
        async with memory.hold(80, timeout_s=1):
            with pytest.raises(TimeoutError):
                async with memory.hold(50, timeout_s=0.05):
                    pass
            assert memory.free == 20 and memory._waiters == []
            async with memory.hold(20, timeout_s=0.05):
                assert memory.free == 0
        assert memory.free == 100
        async with memory.hold(10**12, timeout_s=0.05):  # more than the total: takes the total
            assert memory.free == 0
        assert memory.free == 100

    asyncio.run(scenario())


def test_sweep_removes_only_the_folders_of_dead_judges(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    (tmp_path / f"run-{dead.pid}-abc").mkdir()
    (tmp_path / f"run-{dead.pid}-abc" / "cache").write_text("x")
    (tmp_path / f"run-{os.getpid()}-def").mkdir()
    (tmp_path / "pch").mkdir()
    sweep_run_dirs(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([f"run-{os.getpid()}-def", "pch"])
