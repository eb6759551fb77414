"""Run untrusted programs (model-written code and its compilation) in a bubblewrap sandbox.

Threat model
------------
The program is hostile: it may try to read secrets, reach the network, exhaust the host, escape its
limits or outlive its run. Each run is a fresh `bwrap` with:

- all namespaces unshared (user, pid, net, ipc, uts, cgroup): no network interfaces but a down
  loopback, its own pid 1, no view of host processes;
- a filesystem of read-only binds of `/usr` (and the merged `/bin`, `/lib*` links) plus whatever the
  language needs (the compiled program, read-only), a private size-capped tmpfs `/tmp` as working
  directory, a minimal `/dev` (null, zero, full, random, urandom; no `/dev/shm`), a fresh `/proc`;
  nothing of the host's home, /tmp, the project or its secrets;
- an empty environment (only PATH), so `/proc/1/environ` shows nothing of the judge's;
- when the judge runs as root: an unprivileged uid/gid (nobody) on the host, no supplementary groups,
  every capability dropped, a new session (no terminal injection), `--die-with-parent`;
- limits: CPU time over the whole process tree and peak memory and process count through a per-run
  cgroup (v1 or v2), a wall-clock cap (sleepers), RLIMIT_FSIZE on every file written (stdout and
  stderr are files, so floods stop at the cap), open files, no core dumps, unlimited stack. Hard
  rlimits equal soft ones, so the program cannot raise them.
- teardown: killing the sandbox's pid 1 kills every process in its pid namespace (double-forked
  orphans included); the cgroup is then emptied and removed.

Not contained (yet): no seccomp filter, so every system call the kernel allows an unprivileged user
in a user namespace is reachable (kernel bugs there are the residual risk); CPU cache and timing side
channels; disk bandwidth. Without a usable cgroup the judge falls back to per-process rlimits and
logs what is weaker (fork bombs may then burn more CPU than the limit and memory is RLIMIT_AS).
`kind="none"` runs programs directly on the host: for debugging trusted code only.
"""

from __future__ import annotations

import json
import logging
import os
import resource
import select
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from codefu.errors import SandboxUnavailable
from codefu.judge.cgroups import CgroupManager, RunCgroup

log = logging.getLogger(__name__)

NOBODY = 65534
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclass
class SandboxConfig:
    kind: Literal["bwrap", "none"] = "bwrap"
    """"none" runs programs on the host without isolation: unsafe, for debugging trusted code only."""
    uid: int = NOBODY
    """Host uid (and gid) the sandbox runs as when the judge is root."""
    cgroup: Literal["auto", "v1", "v2", "off"] = "auto"
    """Which cgroup hierarchy bounds CPU, memory and processes; "off" uses rlimits only (weaker)."""
    cgroup_root: str | None = None
    """A writable (delegated) cgroup v2 group to nest run groups under; default: the judge's own group."""
    tmp_size_bytes: int = 64 << 20
    """Size of the private /tmp each run gets (its memory also counts against the memory limit)."""
    max_processes: int = 64
    """Processes plus threads per run (the pids cgroup)."""
    open_files: int = 256
    extra_ro_binds: list[str] = field(default_factory=list)
    """More host paths to expose read-only at the same place (e.g. a toolchain outside /usr)."""


@dataclass
class Limits:
    cpu_s: float
    wall_s: float
    memory_bytes: int
    file_size_bytes: int  # any single file written, stdout and stderr included


@dataclass(frozen=True)
class Mount:
    host: Path
    dest: str
    writable: bool = False


@dataclass
class RunResult:
    exit_code: int | None  # bwrap reports a signal N as 128 + N
    cpu_s: float
    wall_s: float
    memory_bytes: int
    limit: Literal["cpu", "wall", "memory", "output"] | None = None  # the limit that stopped it

    @property
    def ok(self) -> bool:
        return self.limit is None and self.exit_code == 0


class Sandbox:
    """Runs one command at a time per call; thread-safe, so a pool of threads can share one instance."""

    def __init__(self, config: SandboxConfig | None = None):
        self.config = config or SandboxConfig()
        self.is_root = os.geteuid() == 0
        self.cgroups: CgroupManager | None = None
        if self.config.kind == "none":
            log.warning("sandbox kind 'none': programs run on the host WITHOUT isolation (debugging only)")
        else:
            self.bwrap = shutil.which("bwrap")
            if self.bwrap is None:
                raise SandboxUnavailable(
                    "bubblewrap (bwrap) is not installed: `sudo apt-get install bubblewrap` "
                    "(or set judge.sandbox.kind=none to run WITHOUT isolation, for debugging only)"
                )
        self.cgroups = CgroupManager.detect(self.config.cgroup, self.config.cgroup_root)
        if self.cgroups is None:
            log.warning(
                "no cgroup: CPU time and memory are limited per process (RLIMIT_CPU, RLIMIT_AS), so a "
                "program with many processes or threads can use several times the limits"
            )
        self._ro_binds = self._base_binds()
        if self.config.kind == "bwrap":
            self._self_test()

    # ---- public -------------------------------------------------------------------------------------

    def run(
        self,
        argv: list[str],
        limits: Limits,
        mounts: list[Mount],
        stdout: Path,
        stderr: Path,
        stdin: Path | None = None,
        cwd: str = "/tmp",
    ) -> RunResult:
        cg = self._create_cgroup(limits)
        try:
            with (
                open(stdin or os.devnull, "rb") as fin,
                open(stdout, "wb") as fout,
                open(stderr, "wb") as ferr,
            ):
                if self.config.kind == "none":
                    return self._run_unsandboxed(argv, limits, mounts, cwd, (fin, fout, ferr), cg)
                return self._run_bwrap(argv, limits, mounts, cwd, (fin, fout, ferr), cg)
        finally:
            if cg is not None:
                self.cgroups.release(cg)

    def close(self) -> None:
        if self.cgroups is not None:
            self.cgroups.close()
            self.cgroups = None

    # ---- bubblewrap -------------------------------------------------------------------------------

    def _bwrap_argv(self, argv: list[str], mounts: list[Mount], cwd: str, info_fd: int, block_fd: int):
        args = [self.bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
        args += ["--hostname", "sandbox"]
        for src, link in self._ro_binds:
            args += ["--symlink", link, src] if link else ["--ro-bind", src, src]
        args += ["--proc", "/proc", "--dir", "/dev"]
        for dev in DEVICES:
            if os.path.exists(dev):
                args += ["--dev-bind", dev, dev]
        args += ["--size", str(self.config.tmp_size_bytes), "--perms", "1777", "--tmpfs", "/tmp"]
        for m in mounts:
            args += ["--bind" if m.writable else "--ro-bind", str(m.host), m.dest]
        args += ["--chdir", cwd, "--setenv", "PATH", SANDBOX_PATH]
        args += ["--info-fd", str(info_fd), "--block-fd", str(block_fd), "--"]
        return args + argv

    def _run_bwrap(self, argv, limits, mounts, cwd, files, cg: RunCgroup | None) -> RunResult:
        r_info, w_info = os.pipe()
        r_block, w_block = os.pipe()
        user = {"user": self.config.uid, "group": self.config.uid, "extra_groups": []} if self.is_root else {}
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                _rlimit_prefix(limits, self.config, cg is not None)
                + self._bwrap_argv(argv, mounts, cwd, w_info, r_block),
                stdin=files[0],
                stdout=files[1],
                stderr=files[2],
                env={},
                pass_fds=(w_info, r_block),
                close_fds=True,
                **user,
            )
        finally:
            os.close(w_info)
            os.close(r_block)
        try:
            child = _read_child_pid(r_info)
            if child is None:  # bwrap failed before starting the sandbox; its stderr says why
                proc.wait()
                os.close(w_block)
                return RunResult(proc.returncode if proc.returncode else 1, 0.0, 0.0, 0)
            # The sandbox's pid 1 waits on block_fd until it has joined the cgroup: nothing it forks
            # can escape accounting.
            if cg is not None:
                cg.add(child)
            os.write(w_block, b"1")
        except BaseException:
            _kill(proc.pid)
            proc.wait()
            raise
        finally:
            os.close(r_info)
            try:
                os.close(w_block)
            except OSError:
                pass
        return self._supervise(proc, child, limits, cg, start)

    def _supervise(
        self, proc, kill_pid: int, limits: Limits, cg: RunCgroup | None, start: float
    ) -> RunResult:
        limit = None
        pidfd = os.pidfd_open(proc.pid)
        try:
            poller = select.poll()
            poller.register(pidfd, select.POLLIN)
            ncpu = os.cpu_count() or 1
            while True:
                now = time.monotonic()
                if now - start >= limits.wall_s:
                    limit = "wall"
                    break
                wait = limits.wall_s - (now - start)
                if cg is not None:
                    cpu = cg.cpu_s()
                    if cpu > limits.cpu_s:
                        limit = "cpu"
                        break
                    # the tree can burn at most ncpu CPU-seconds per second: sleep until it might have
                    wait = min(wait, max(0.002, (limits.cpu_s - cpu) / ncpu), 0.25)
                if poller.poll(wait * 1000):
                    break
        finally:
            os.close(pidfd)
        if limit is not None:
            _kill(kill_pid)
            if cg is not None:
                cg.kill_all()
        # wait4 gives this child's own resource usage (its reaped descendants included), which
        # getrusage(RUSAGE_CHILDREN) cannot when several runs share the process
        _, status, ru = os.wait4(proc.pid, 0)
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        if code < 0:  # killed by a signal: report it as a shell (and bwrap) would
            code = 128 - code
        wall = time.monotonic() - start
        if cg is not None:
            usage = cg.usage()
            cpu_s, mem, oom = usage.cpu_s, usage.memory_peak_bytes, usage.oom_killed
        else:
            cpu_s, mem, oom = ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024, False
        if limit is None:
            if oom:
                limit = "memory"
            elif cpu_s > limits.cpu_s or code == 128 + signal.SIGXCPU:
                limit = "cpu"
            elif code == 128 + signal.SIGXFSZ:
                limit = "output"
        return RunResult(code, cpu_s, wall, mem, limit)

    # ---- no sandbox (debugging) -------------------------------------------------------------------

    def _run_unsandboxed(self, argv, limits, mounts, cwd, files, cg) -> RunResult:
        import tempfile

        translate = {m.dest: str(m.host) for m in mounts}

        def host_path(p: str) -> str:
            for dest, host in translate.items():
                if p == dest or p.startswith(dest + "/"):
                    return host + p[len(dest) :]
            return p

        with tempfile.TemporaryDirectory(prefix="codefu-nosandbox-") as tmp:
            workdir = host_path(cwd) if cwd != "/tmp" else tmp
            start = time.monotonic()
            proc = subprocess.Popen(
                _rlimit_prefix(limits, self.config, cg is not None) + [host_path(a) for a in argv],
                stdin=files[0],
                stdout=files[1],
                stderr=files[2],
                cwd=workdir,
                env={"PATH": SANDBOX_PATH},
                start_new_session=True,
            )
            if cg is not None:  # racy without bwrap's block-fd: a debugging mode only
                cg.add(proc.pid)
            return self._supervise(proc, -proc.pid, limits, cg, start)

    # ---- setup ------------------------------------------------------------------------------------

    def _create_cgroup(self, limits: Limits) -> RunCgroup | None:
        if self.cgroups is None:
            return None
        cg = self.cgroups.create()
        try:
            cg.set_limits(limits.memory_bytes, self.config.max_processes)
        except OSError:
            self.cgroups.release(cg)
            raise
        return cg

    def _base_binds(self) -> list[tuple[str, str | None]]:
        """(path, symlink target or None for a read-only bind) for /usr and the usual top-level links."""
        binds: list[tuple[str, str | None]] = [("/usr", None)]
        for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
            if os.path.islink(top):
                binds.append((top, os.readlink(top)))
            elif os.path.isdir(top):
                binds.append((top, None))
        if os.path.exists("/etc/ld.so.cache"):
            binds.append(("/etc/ld.so.cache", None))
        binds += [(p, None) for p in self.config.extra_ro_binds]
        return binds

    def _self_test(self) -> None:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="codefu-sbx-check-") as tmp:
            out, err = Path(tmp) / "out", Path(tmp) / "err"
            limits = Limits(cpu_s=5, wall_s=20, memory_bytes=256 << 20, file_size_bytes=1 << 20)
            try:
                result = self.run(["/bin/sh", "-c", "echo ok"], limits, [], out, err)
            except OSError as e:
                raise SandboxUnavailable(f"cannot start bubblewrap: {e}") from e
            if result.exit_code != 0 or out.read_text().strip() != "ok":
                msg = err.read_text(errors="replace").strip()[:500]
                raise SandboxUnavailable(
                    f"bubblewrap could not start a sandbox (exit {result.exit_code}): {msg!r}. "
                    "Unprivileged user namespaces must be enabled: "
                    "`sysctl kernel.unprivileged_userns_clone=1` (Debian) or "
                    "`sysctl kernel.apparmor_restrict_unprivileged_userns=0` (Ubuntu 24.04+); inside a "
                    "container, run it with --privileged or a seccomp profile allowing clone/unshare."
                )


def _read_child_pid(fd: int) -> int | None:
    buf = b""
    while True:
        chunk = os.read(fd, 4096)
        if not chunk:
            return None
        buf += chunk
        try:
            return int(json.loads(buf)["child-pid"])
        except ValueError:
            continue  # partial JSON; read on


def _rlimit_prefix(limits: Limits, config: SandboxConfig, cgroup: bool) -> list[str]:
    """util-linux `prlimit` as the first program of the run, so the limits hold from the first exec.

    Set from outside (prlimit(2) on the sandbox's pid) needs CAP_SYS_RESOURCE over a process of another
    uid, which containers often drop; lowering one's own limits needs nothing. Hard = soft, so the
    program cannot raise them again.
    """
    cpu = int(limits.cpu_s) + 1  # a backstop: the cgroup, when present, is the precise limit
    stack_hard = resource.getrlimit(resource.RLIMIT_STACK)[1]
    stack = "unlimited" if stack_hard == resource.RLIM_INFINITY else str(stack_hard)
    args = [
        _PRLIMIT,
        f"--cpu={cpu}:{cpu + 1}",
        f"--fsize={limits.file_size_bytes}",
        f"--nofile={config.open_files}",
        "--core=0",
        f"--stack={stack}",
    ]
    if not cgroup:
        # Weaker fallbacks: AS is per process; NPROC counts every process of the sandbox uid on the host
        # (concurrent runs and their exiting zombies included), so it gets room for every CPU's runs.
        nproc = config.max_processes * 4 * (os.cpu_count() or 1)
        args += [f"--as={limits.memory_bytes}", f"--nproc={nproc}"]
    return args + ["--"]


_PRLIMIT = shutil.which("prlimit") or "/usr/bin/prlimit"


def _kill(pid: int) -> None:
    try:
        if pid < 0:
            os.killpg(-pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
