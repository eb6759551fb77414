"""Per-run control groups: memory, process count and CPU time of a whole process tree.

rlimits are per process: a fork bomb multiplies RLIMIT_CPU and RLIMIT_AS by its process count, and
RLIMIT_NPROC does nothing for root. A cgroup counts the tree. Both hierarchies are supported:

- v1 (separate `memory`, `pids`, `cpuacct` mounts; what this project's build machines have),
- v2 (one unified mount; what most current distributions have).

Each judge process makes one parent group `codefu-<pid>` inside its own cgroup (so the host's limits on
the judge still bound its sandboxes) and one child group per sandbox under it: per run (compilations,
checkers, the per-test path) or per submission (the runner path, which reads CPU time, OOM kills and,
on v1, the peak memory before and after each test).
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

CGROUP_MOUNT = Path("/sys/fs/cgroup")
V1_CONTROLLERS = ("memory", "pids", "cpuacct")


@dataclass
class CgroupUsage:
    cpu_s: float
    memory_peak_bytes: int
    oom_killed: bool


def _write(path: Path, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _own_cgroup_paths(proc_cgroup_text: str) -> dict[str, str]:
    """Map controller name ('' for v2) to this process's cgroup path, from /proc/self/cgroup."""
    paths: dict[str, str] = {}
    for line in proc_cgroup_text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        for c in controllers.split(",") if controllers else [""]:
            paths[c] = path
    return paths


def parse_v2_cpu_stat(text: str) -> float:
    """Seconds of CPU from a v2 `cpu.stat` file (`usage_usec N`)."""
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec":
            return int(value) / 1e6
    raise ValueError("cpu.stat has no usage_usec line")


def parse_oom_kills(text: str) -> int:
    """The `oom_kill N` counter of a v2 `memory.events` or a v1 `memory.oom_control` file (0 if absent)."""
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "oom_kill":
            return int(value)
    return 0


class RunCgroup:
    """One run's group(s). `add(pid)` before the process runs anything; `remove()` after it is gone."""

    def __init__(self, dirs: dict[str, Path], version: int):
        self.dirs = dirs  # controller -> directory (v2: one directory under key "")
        self.version = version

    def set_limits(self, memory_bytes: int, max_processes: int) -> None:
        if self.version == 1:
            mem = self.dirs["memory"]
            _write(mem / "memory.limit_in_bytes", str(memory_bytes))
            if (mem / "memory.memsw.limit_in_bytes").exists():
                try:  # swap accounting: memory+swap may not exceed the memory limit
                    _write(mem / "memory.memsw.limit_in_bytes", str(memory_bytes))
                except OSError:
                    pass
            _write(self.dirs["pids"] / "pids.max", str(max_processes))
        else:
            d = self.dirs[""]
            _write(d / "memory.max", str(memory_bytes))
            if (d / "memory.swap.max").exists():
                _write(d / "memory.swap.max", "0")
            _write(d / "pids.max", str(max_processes))

    def add(self, pid: int) -> None:
        for d in self.dirs.values():
            _write(d / "cgroup.procs", str(pid))

    def usage(self) -> CgroupUsage:
        return CgroupUsage(self.cpu_s(), self.memory_peak(), self.oom_events() > 0)

    def memory_peak(self) -> int:
        if self.version == 1:
            return int((self.dirs["memory"] / "memory.max_usage_in_bytes").read_text())
        d = self.dirs[""]
        peak_file = d / "memory.peak"  # kernel 5.19+
        return int(peak_file.read_text()) if peak_file.exists() else int((d / "memory.current").read_text())

    def reset_peak(self) -> bool:
        """Restart the peak-memory watermark, so one group can measure several runs in turn.

        v1 only: v2's memory.peak is reset per open file (kernel 6.12+), not for every reader; callers
        measure per-process peaks (ru_maxrss) instead and keep the group's limit as the hard cap.
        """
        if self.version != 1:
            return False
        try:
            _write(self.dirs["memory"] / "memory.max_usage_in_bytes", "0")
        except OSError:  # e.g. a delegated hierarchy that does not let us write it
            return False
        return True

    def oom_events(self) -> int:
        """A counter that grows with every OOM kill in the group (compare before and after a run)."""
        if self.version == 1:
            mem = self.dirs["memory"]
            oom_control = (mem / "memory.oom_control").read_text()
            if "oom_kill " in oom_control:
                return parse_oom_kills(oom_control)
            # kernels before 4.13 have no oom_kill counter; hitting the limit is the sign
            return int((mem / "memory.failcnt").read_text())
        return parse_oom_kills((self.dirs[""] / "memory.events").read_text())

    def cpu_s(self) -> float:
        if self.version == 1:
            return int((self.dirs["cpuacct"] / "cpuacct.usage").read_text()) / 1e9
        return parse_v2_cpu_stat((self.dirs[""] / "cpu.stat").read_text())

    def kill_all(self) -> None:
        """SIGKILL every process still in the group (v2 has cgroup.kill; v1 walks the pid list)."""
        if self.version == 2 and (self.dirs[""] / "cgroup.kill").exists():
            _write(self.dirs[""] / "cgroup.kill", "1")
            return
        procs = self.dirs["pids"] if self.version == 1 else self.dirs[""]
        try:
            pids = (procs / "cgroup.procs").read_text().split()
        except FileNotFoundError:  # already removed
            return
        for line in pids:
            try:
                os.kill(int(line), 9)
            except ProcessLookupError:
                pass

    def remove(self) -> None:
        for d in self.dirs.values():
            try:
                d.rmdir()
            except OSError as e:  # still busy: processes are exiting; log, the parent is swept at close
                log.debug("cgroup %s not removed: %s", d, e)


class CgroupManager:
    """Creates run groups under a parent group owned by this judge process."""

    def __init__(self, version: int, parents: dict[str, Path]):
        self.version = version
        self.parents = parents
        # A group stays busy for a moment after its last process died (the kernel is still tearing the
        # pid namespace down); a background thread removes such groups so runs do not wait for it.
        self._busy: queue.Queue[RunCgroup | None] = queue.Queue()
        self._reaper = threading.Thread(target=self._reap, name="cgroup-reaper", daemon=True)
        self._reaper.start()

    @classmethod
    def detect(cls, mode: str = "auto", root: str | None = None) -> CgroupManager | None:
        """A manager for the first hierarchy that works, or None (the caller then falls back to rlimits).

        mode: "auto", "v1", "v2" or "off"; root: a writable (delegated) v2 group to nest under.
        """
        if mode == "off":
            return None
        own = _own_cgroup_paths(Path("/proc/self/cgroup").read_text())
        tried: list[str] = []
        if mode in ("auto", "v1"):
            mgr = cls._try_v1(own, tried)
            if mgr:
                return mgr
        if mode in ("auto", "v2"):
            mgr = cls._try_v2(own, root, tried)
            if mgr:
                return mgr
        log.warning("no usable cgroup (%s)", "; ".join(tried))
        return None

    @classmethod
    def _try_v1(cls, own: dict[str, str], tried: list[str]) -> CgroupManager | None:
        parents: dict[str, Path] = {}
        try:
            for c in V1_CONTROLLERS:
                mount = CGROUP_MOUNT / c
                if not (mount / "cgroup.procs").exists() or c not in own:
                    tried.append(f"v1 {c}: not mounted at {mount}")
                    return None
                parent = mount / own[c].lstrip("/") / f"codefu-{os.getpid()}-{uuid.uuid4().hex[:6]}"
                parent.mkdir()
                parents[c] = parent
        except OSError as e:
            tried.append(f"v1: {e}")
            for p in parents.values():
                p.rmdir()
            return None
        return cls(1, parents)

    @classmethod
    def _try_v2(cls, own: dict[str, str], root: str | None, tried: list[str]) -> CgroupManager | None:
        mount = next(
            (m for m in (CGROUP_MOUNT, CGROUP_MOUNT / "unified") if (m / "cgroup.controllers").exists()), None
        )
        if mount is None:
            tried.append("v2: no unified hierarchy mounted")
            return None
        base = Path(root) if root else mount / own.get("", "/").lstrip("/")
        needed = {"memory", "pids", "cpu"}
        available = set((base / "cgroup.controllers").read_text().split()) if base.exists() else set()
        if not needed <= available:
            tried.append(f"v2: {base} lacks controllers {sorted(needed - available)}")
            return None
        parent = base / f"codefu-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        try:
            # Controllers can only be enabled for children of a group without processes of its own
            # (except the root), so the judge nests under a delegated group or runs at the root.
            _write(base / "cgroup.subtree_control", " ".join(f"+{c}" for c in sorted(needed)))
            parent.mkdir()
            _write(parent / "cgroup.subtree_control", " ".join(f"+{c}" for c in sorted(needed)))
        except OSError as e:
            tried.append(f"v2 at {base}: {e} (set judge.cgroup_root to a delegated group)")
            if parent.exists():
                parent.rmdir()
            return None
        return cls(2, {"": parent})

    def create(self) -> RunCgroup:
        name = uuid.uuid4().hex[:12]
        dirs: dict[str, Path] = {}
        try:
            for c, parent in self.parents.items():
                d = parent / name
                d.mkdir()
                dirs[c] = d
        except OSError:
            RunCgroup(dirs, self.version).remove()
            raise
        return RunCgroup(dirs, self.version)

    def release(self, cg: RunCgroup) -> None:
        """Remove a run's group now if it is empty, else soon, in the background."""
        cg.remove()
        if any(d.exists() for d in cg.dirs.values()):
            self._busy.put(cg)

    def _reap(self) -> None:
        while (cg := self._busy.get()) is not None:
            for attempt in range(500):
                cg.kill_all()
                cg.remove()
                if not any(d.exists() for d in cg.dirs.values()):
                    break
                time.sleep(0.002 * min(attempt + 1, 10))
            else:
                log.warning("cgroup %s still busy long after its run", cg.dirs)
            self._busy.task_done()

    def wait_idle(self) -> None:
        """Until every released group has been removed (or given up on)."""
        self._busy.join()

    def close(self) -> None:
        self._busy.put(None)
        self._reaper.join()
        for parent in self.parents.values():
            for child in parent.iterdir() if parent.exists() else []:
                if child.is_dir():
                    try:
                        child.rmdir()
                    except OSError:
                        pass
            try:
                parent.rmdir()
            except OSError as e:
                log.warning("cgroup %s not removed: %s", parent, e)
