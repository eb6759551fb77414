"""One sandbox per submission: its tests run one after another under a trusted runner that is pid 1.

A fresh bwrap per test costs ~10 ms (namespaces, mounts, a uid change, teardown); the runner
(`runner.c`, a ~300-line C program built once per machine like the precompiled header) pays that once
per submission and then costs about a fork and an exec per test. The judge talks to it over a
SOCK_SEQPACKET socket, handing it the test's stdin, stdout and stderr as file descriptors: no path of
the judge's is mounted writable into the sandbox, and the expected outputs never enter it.

What the runner guarantees per test, and what the judge adds from outside (see the threat model in
`sandbox.py`):

- limits: the runner sets the rlimits on the test's process (lowering needs no capability), enforces
  the wall clock, and after the program exits SIGKILLs every other process of the namespace (as pid 1
  it can, and every orphan is its child) and reaps them, so nothing of one test lives into the next;
  it empties `/tmp` and removes System V IPC objects too (if it cannot, the judge starts a fresh
  sandbox for the next test);
- CPU time: the growth of the runner's RUSAGE_CHILDREN over the test, exact for the whole tree once all
  of it is reaped; while the test runs, the judge watches the sandbox's cgroup and asks the runner to
  kill the test when the tree passes the CPU limit (a fork bomb's children included);
- memory: the cgroup's limit is the hard cap; the per-test peak is the cgroup's watermark, reset before
  each test (cgroup v1), or the largest process's ru_maxrss (cgroup v2, no cgroup);
- a runner that dies (only OOM or something from outside can kill it: pid 1 ignores signals sent from
  inside its namespace, and the test's processes get oom_score_adj 1000) fails the running test as
  RUNTIME_ERROR (MEMORY_LIMIT after an OOM kill) and the next test gets a fresh sandbox; a runner that
  stops answering is killed after the wall limit plus a grace period (TIME_LIMIT). Neither is ever
  ACCEPTED, neither can hang the judge.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import os
import select
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path

from codefu.judge.sandbox import (
    Limits,
    Mount,
    RunResult,
    Sandbox,
    SandboxConfig,
    fallback_nproc,
    limit_hit,
    make_work_dir,
)

SOURCE = Path(__file__).with_name("runner.c")
RUNNER_PATH = "/codefu-runner"  # where the binary appears inside the sandbox
START_TIMEOUT_S = 30.0  # bwrap plus the runner's first message; seconds under load, not minutes
GRACE_S = 2.0  # past the wall limit, a runner that has not answered is considered hung
CLOSE_TIMEOUT_S = 5.0
CANCEL_POLL_S = 0.1  # how soon a cancelled test is killed

Cancel = threading.Event | None

log = logging.getLogger(__name__)
_build_lock = threading.Lock()


def open_sandbox(config: SandboxConfig | None = None, work_dir: Path | None = None) -> Sandbox:
    """A Sandbox, with the runner built and self-tested when `config.runner` asks for it (bwrap only);
    a runner that cannot work here is logged and the sandbox runs a fresh bwrap per test instead."""
    sandbox = Sandbox(config)
    if sandbox.config.kind == "bwrap" and sandbox.config.runner:
        try:
            sandbox.runner_binary = build_runner(work_dir or make_work_dir(None))
            self_test(sandbox)
        except Exception as e:  # noqa: BLE001 - the per-test path still works: slower, not weaker
            log.warning("sandbox runner unavailable, one sandbox per test instead (slower): %s", e)
            sandbox.runner_binary = None
    return sandbox


def open_session(sandbox: Sandbox, argv: list[str], mounts: list[Mount], limits: Limits):
    """Something with `run(stdin, stdout, stderr, limits) -> RunResult` and `close()` that runs argv once
    per call: a runner sandbox when the sandbox has a runner, else a fresh sandbox per call."""
    if sandbox.runner_binary is None:
        return PerRunSession(sandbox, argv, mounts)
    return RunnerSession(sandbox, argv, mounts, limits)


def build_runner(work_dir: Path) -> Path:
    """Compile runner.c (trusted: outside the sandbox) into work_dir/runner/<hash>/, once per source and
    compiler; concurrent builders each rename a finished binary into place."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        raise OSError("no C compiler (gcc) to build the sandbox runner")
    source = SOURCE.read_bytes()
    version = subprocess.run([cc, "--version"], capture_output=True, timeout=30).stdout
    digest = hashlib.sha256(source + b"\0" + os.path.realpath(cc).encode() + b"\0" + version).hexdigest()
    directory = work_dir / "runner" / digest[:16]
    binary = directory / "codefu-runner"
    with _build_lock:
        if binary.exists():
            return binary
        directory.mkdir(parents=True, exist_ok=True)
        for d in (directory.parent, directory):  # the sandbox user must reach the binary to bind it
            d.chmod(0o755)
        with tempfile.TemporaryDirectory(dir=directory) as tmp:
            out = Path(tmp) / "codefu-runner"
            r = subprocess.run(
                [cc, "-O2", "-Wall", "-o", str(out), str(SOURCE)], capture_output=True, text=True, timeout=120
            )
            if r.returncode != 0:
                raise OSError(f"cannot build the sandbox runner: {r.stderr.strip()[:1000]}")
            out.chmod(0o755)
            out.rename(binary)
    return binary


def self_test(sandbox: Sandbox) -> None:
    """Two tests in one runner sandbox, the second must not see the first's /tmp; raises if not."""
    with tempfile.TemporaryDirectory(prefix="codefu-runner-check-") as tmp:
        out, err = Path(tmp) / "out", Path(tmp) / "err"
        limits = Limits(cpu_s=5, wall_s=20, memory_bytes=256 << 20, file_size_bytes=1 << 20)
        argv = ["/bin/sh", "-c", "ls /tmp; echo ok > /tmp/left; echo ok"]
        session = RunnerSession(sandbox, argv, [], limits)
        try:
            for _ in range(2):
                r = session.run(None, out, err, limits)
                if not r.ok or out.read_text() != "ok\n":
                    raise RuntimeError(
                        f"runner self-test: {r}, stdout {out.read_text()[:200]!r}, "
                        f"stderr {err.read_text()[:200]!r}"
                    )
        finally:
            session.close()


class PerRunSession:
    """The older path behind the same interface: a fresh sandbox for every run."""

    def __init__(self, sandbox: Sandbox, argv: list[str], mounts: list[Mount]):
        self.sandbox, self.argv, self.mounts = sandbox, argv, mounts
        self.dead = False

    def run(
        self, stdin: Path | None, stdout: Path, stderr: Path, limits: Limits, cancel: Cancel = None
    ) -> RunResult:
        """`cancel` is not watched here: a run ends within its limits."""
        return self.sandbox.run(self.argv, limits, self.mounts, stdout, stderr, stdin=stdin)

    def close(self) -> None:
        pass


class RunnerSession:
    """A bwrap sandbox whose pid 1 is the runner, for the tests of one submission. One test at a time;
    `dead` once the sandbox is gone (the caller then opens a new session for the remaining tests)."""

    def __init__(self, sandbox: Sandbox, argv: list[str], mounts: list[Mount], limits: Limits):
        self.sandbox = sandbox
        self.dead = False
        self.proc: subprocess.Popen | None = None
        self.pidfd: int | None = None
        self.cg = sandbox.create_cgroup(limits)
        self.ctl, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._start(argv, mounts, limits, theirs)
        except BaseException:
            self.close()
            raise
        finally:
            theirs.close()

    def _start(self, argv: list[str], mounts: list[Mount], limits: Limits, theirs: socket.socket) -> None:
        cfg = self.sandbox.config
        # without a cgroup the runner sets the weaker per-process fallbacks on each test
        fallback = ["0", "0"] if self.cg else [str(limits.memory_bytes), str(fallback_nproc(cfg))]
        runner_argv = [RUNNER_PATH, str(theirs.fileno()), str(cfg.open_files), *fallback, "--", *argv]
        mounts = [*mounts, Mount(self.sandbox.runner_binary, RUNNER_PATH)]
        files = (subprocess.DEVNULL, subprocess.DEVNULL, subprocess.PIPE)  # stderr: bwrap's own errors
        self.proc, child = self.sandbox.spawn_bwrap(
            [], runner_argv, mounts, "/tmp", files, self.cg, pass_fds=(theirs.fileno(),), as_pid_1=True
        )
        if child is not None:
            try:  # a pidfd, not the pid: once the runner is gone its pid may belong to someone else
                self.pidfd = os.pidfd_open(child)
            except ProcessLookupError:
                pass
        theirs.close()  # now only the runner holds its end: its death is our EOF
        reply = self._receive(START_TIMEOUT_S)
        if reply != b"READY":
            self._kill()
            detail = self.proc.stderr.read(2000).decode(errors="replace").strip()
            raise RuntimeError(f"sandbox runner did not start ({reply!r}): {detail}")

    def run(
        self, stdin: Path | None, stdout: Path, stderr: Path, limits: Limits, cancel: Cancel = None
    ) -> RunResult:
        """The test's run; `cancel` set while it runs (its client left) has the runner kill it at once."""
        if self.dead:
            raise RuntimeError("this runner sandbox is gone")
        cg = self.cg
        cpu0, oom0 = 0.0, 0
        peak_resettable = False
        if cg is not None:
            cpu0, oom0 = cg.cpu_s(), cg.oom_events()
            peak_resettable = cg.reset_peak()
        with open(stdin or os.devnull, "rb") as fin, open(stdout, "wb") as fout, open(stderr, "wb") as ferr:
            wall_ms = math.ceil(limits.wall_s * 1000)
            command = f"RUN {int(limits.cpu_s) + 1} {wall_ms} {limits.file_size_bytes}"
            try:
                socket.send_fds(self.ctl, [command.encode()], [fin.fileno(), fout.fileno(), ferr.fileno()])
            except OSError:  # the runner died between tests: nothing ran, so this is our error
                self._kill()
                raise
        start = time.monotonic()
        limit = None
        reply: bytes | None = None
        ncpu = os.cpu_count() or 1
        killed = False
        while reply is None:
            left = limits.wall_s + GRACE_S - (time.monotonic() - start)
            if left <= 0:
                break
            wait = left
            if cancel is not None and not killed:
                if cancel.is_set():
                    killed = True
                    self._send(b"KILL")
                wait = min(wait, CANCEL_POLL_S)
            if cg is not None and limit is None:
                cpu = cg.cpu_s() - cpu0
                if cpu > limits.cpu_s:  # the whole tree, children of a fork bomb included
                    limit = "cpu"
                    self._send(b"KILL")
                else:  # the tree burns at most ncpu CPU-seconds per second: sleep until it might have
                    wait = min(wait, max(0.002, (limits.cpu_s - cpu) / ncpu), 0.25)
            reply = self._receive(wait)
        wall = time.monotonic() - start
        if reply is None or not reply.startswith(b"DONE "):
            return self._failed(reply, cg, cpu0, oom0, wall, limits)
        status, cpu_us, rss_kb, wall_us, why, clean = (int(x) for x in reply.split()[1:])
        code = os.waitstatus_to_exitcode(status)
        if code < 0:  # killed by signal N: reported as 128 + N, as by a shell (and the per-test path)
            code = 128 - code
        cpu_s = cpu_us / 1e6
        memory = cg.memory_peak() if peak_resettable else rss_kb * 1024
        oom = cg is not None and cg.oom_events() > oom0
        if why == 1:
            limit = "wall"
        elif why == 2:
            limit = limit or "cpu"
        limit = limit_hit(limit, oom, cpu_s, code, limits)
        if not clean:  # the test left something (in /tmp, or IPC) the runner could not remove
            self.close()
        return RunResult(code, cpu_s, wall_us / 1e6, memory, limit)

    def _failed(self, reply: bytes | None, cg, cpu0: float, oom0: int, wall: float, limits: Limits):
        """The runner died (EOF), hung (None) or could not start the test (ERROR): the sandbox is done."""
        self._kill()
        if reply is not None and reply.startswith(b"ERROR"):
            raise RuntimeError(f"sandbox runner: {reply[:300].decode(errors='replace')}")
        cpu = cg.cpu_s() - cpu0 if cg is not None else 0.0
        memory = cg.memory_peak() if cg is not None else 0
        if reply is None:
            note = f"the sandbox's runner did not answer within {limits.wall_s + GRACE_S:.1f} s"
            return RunResult(128 + signal.SIGKILL, cpu, wall, memory, "wall", note)
        oom = cg is not None and cg.oom_events() > oom0
        # the kernel SIGKILLs every process of a pid namespace whose pid 1 died
        note = "the sandbox's runner died during this test"
        return RunResult(128 + signal.SIGKILL, cpu, wall, memory, "memory" if oom else None, note)

    def _send(self, message: bytes) -> None:
        try:
            self.ctl.send(message)
        except OSError:
            pass  # the runner is gone: the next receive says so

    def _receive(self, timeout: float) -> bytes | None:
        """The next message; b"" once the runner is gone; None on timeout."""
        poller = select.poll()  # not select(): the judge may hold more than 1024 fds
        poller.register(self.ctl, select.POLLIN)
        if not poller.poll(max(timeout, 0) * 1000):
            return None
        try:
            return self.ctl.recv(256)
        except OSError:
            return b""

    def _kill(self) -> None:
        self.dead = True
        if self.pidfd is not None:  # pid 1 dies: the kernel kills the rest of its pid namespace
            try:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc is not None:
            try:
                self.proc.wait(timeout=CLOSE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def close(self) -> None:
        """Close the socket: the runner kills what is left, exits, and the sandbox goes with it."""
        if self.proc is not None and self.proc.returncode is None:
            self.ctl.close()
            try:
                self.proc.wait(timeout=CLOSE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._kill()
        self.dead = True
        self.ctl.close()
        if self.proc is not None and self.proc.stderr is not None:
            self.proc.stderr.close()
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None
        if self.cg is not None:
            if self.sandbox.cgroups is not None:
                self.sandbox.cgroups.release(self.cg)
            self.cg = None


class WarmSessions:
    """Idle sandboxes kept per (program, memory limit) for repeated single runs of the same program: the
    service's /run_code, which clients such as verl's call once per test case. Each session serves one
    run at a time; at most `max_idle` are kept, the least recently used closed first.

    A session is keyed by its program folder's inode, not only its path: a program evicted from the
    compile cache and built again gets a new folder, which a sandbox started earlier cannot see."""

    def __init__(self, sandbox: Sandbox, max_idle: int):
        self.sandbox = sandbox
        self.max_idle = max_idle
        self._lock = threading.Lock()
        self._idle: OrderedDict[tuple, list] = OrderedDict()
        self._count = 0

    @contextlib.contextmanager
    def session(self, argv: list[str], mounts: list[Mount], directory: Path, limits: Limits) -> Iterator:
        key = (str(directory), directory.stat().st_ino, tuple(argv), limits.memory_bytes)
        with self._lock:
            idle = self._idle.get(key)
            session = idle.pop() if idle else None
            if session is not None:
                self._count -= 1
                if not idle:
                    del self._idle[key]
        if session is None:
            session = open_session(self.sandbox, argv, mounts, limits)
        try:
            yield session
        finally:
            self._put_back(key, session)

    def _put_back(self, key: tuple, session) -> None:
        if session.dead or self.max_idle <= 0:
            session.close()
            return
        evicted = []
        with self._lock:
            self._idle.setdefault(key, []).append(session)
            self._idle.move_to_end(key)
            self._count += 1
            while self._count > self.max_idle:
                oldest = next(iter(self._idle))
                sessions = self._idle[oldest]
                evicted.append(sessions.pop(0))
                self._count -= 1
                if not sessions:
                    del self._idle[oldest]
        for s in evicted:
            s.close()

    def close(self) -> None:
        with self._lock:
            sessions = [s for group in self._idle.values() for s in group]
            self._idle.clear()
            self._count = 0
        for s in sessions:
            s.close()
