"""Run untrusted programs (model-written code and its compilation) in a bubblewrap sandbox.

Threat model
------------
The program is hostile: it may try to read secrets, reach the network, exhaust the host, escape its
limits, outlive its run, or forge its results. Every sandbox is a fresh `bwrap` with:

- all namespaces unshared (user, pid, net, ipc, uts, cgroup): no network interfaces but a down
  loopback, its own pid 1, no view of host processes;
- a filesystem of read-only binds of `/usr` (and the merged `/bin`, `/lib*` links) plus whatever the
  language needs (the compiled program, read-only), a private size-capped tmpfs `/tmp` as working
  directory, a minimal `/dev` (null, zero, full, random, urandom; no `/dev/shm`), a fresh `/proc`;
  nothing of the host's home, /tmp, the project or its secrets; nothing of the host writable;
- an empty environment (only PATH), so `/proc/1/environ` shows nothing of the judge's;
- when the judge runs as root: an unprivileged uid/gid (nobody) on the host, no supplementary groups,
  every capability dropped, a new session (no terminal injection), `--die-with-parent`;
- limits: CPU time over the whole process tree and peak memory and process count through the
  sandbox's cgroup (v1 or v2), a wall-clock cap (sleepers), RLIMIT_FSIZE on every file written (stdout
  and stderr are files the judge opened, so floods stop at the cap), open files, no core dumps,
  unlimited stack. Hard rlimits equal soft ones, so the program cannot raise them.
- teardown: killing the sandbox's pid 1 kills every process in its pid namespace (double-forked
  orphans included); the cgroup is then emptied and removed.
- a system-call filter (seccomp, `seccomp.py`), installed by bwrap right before the first exec and
  inherited by every process of the sandbox (the runner, programs, compilers, checkers): a deny list
  over a default of allow. EPERM for io_uring, keyrings (add_key, request_key, keyctl), userfaultfd,
  bpf, perf_event_open, unshare, setns, clone with any CLONE_NEW* flag, mount and the new mount API,
  pivot_root, chroot, ptrace, process_vm_readv/writev, kcmp, pidfd_getfd, module loading, kexec,
  reboot, swap, setting clocks, personality other than the default (or the query), and sockets of any
  family but AF_UNIX, AF_INET and AF_INET6; ENOSYS for clone3 (its flags are out of a filter's reach;
  glibc falls back to clone) and for every call of another ABI (i386 `int 0x80`, x32). Nothing is
  killed by the filter: a program may handle the error, and a correct program cannot become a
  runtime error through it. Why a deny list and not an allow list: programs, compilers and Python's
  standard library use ~60 distinct calls, some of them new to glibc (clone3, rseq, faccessat2,
  close_range); an allow list would turn every toolchain update that adopts a newer call into false
  runtime errors, that is wrong rewards, while the calls that matter for an escape are few and known.
  Without libseccomp, or on a kernel that refuses the filter, the judge says so once and runs with
  the other layers (`judge.sandbox.seccomp: false` turns it off, for debugging).

Tests run in one of two ways (`SandboxConfig.runner`). Per test: a sandbox per run, as above
(compilations and checker programs always run so). Per submission (the default): one sandbox whose
pid 1 is a trusted runner (`runner.c`, see `runner.py`) that runs the tests one after another. The
runner shares the program's uid, so what keeps it trusted is:

- the expected outputs never enter the sandbox; verdicts are computed outside from the output bytes,
  so a program can only "forge" an output it could have printed anyway. Results (exit status,
  rusage) come back on a socket that is close-on-exec, and the runner is not dumpable
  (PR_SET_DUMPABLE 0): the program cannot ptrace it, read its memory or open `/proc/1/fd/*`. As pid
  1 of its pid namespace it ignores every signal sent from inside (it installs no handlers).
- nothing survives a test: after the program exits (or hits a limit) the runner SIGKILLs every other
  process of the namespace and reaps them all (every orphan is its child), then empties `/tmp` and
  removes System V IPC objects; if it cannot (a tree too deep, say), the judge starts a fresh sandbox
  for the next test. Output files belong to the judge (root), so no sandboxed process can reopen one
  through /proc/<pid>/fd.
- the runner dies only by the OOM killer or from outside, and the test's processes start with
  oom_score_adj 1000, so a full cgroup loses them first (a program may lower its own back to 0; then
  the runner, the smallest process, is still the least likely victim). If the runner dies, the running
  test is MEMORY_LIMIT (after an OOM kill) or RUNTIME_ERROR, never ACCEPTED, and the next test gets a
  fresh sandbox; a runner that stops answering is killed at the wall limit plus a grace (TIME_LIMIT),
  so the judge never hangs.
- CPU time: while a test runs the judge reads the cgroup and has the runner kill the test when the
  tree passes the limit (a fork bomb's children included); the reported time is the growth of the
  runner's children's rusage, exact for the whole tree because everything is reaped before it is read.
- memory: the cgroup limit is the hard cap per test; the reported peak is the cgroup's watermark reset
  before each test (v1), or the largest process's ru_maxrss (v2 and no cgroup: v2's memory.peak is
  not resettable for all readers). The runner itself (~1 MiB) counts in the group.
- weaker than a sandbox per test: POSIX message queues a test creates (at most RLIMIT_MSGQUEUE, 800
  KiB by default) live on into the later tests of its submission; System V IPC objects are removed.

Not contained (yet): kernel bugs behind the system calls the filter allows (file systems, signals,
futexes, memory management, AF_UNIX and AF_INET sockets in the empty network namespace, ...), and
behind calls added to Linux after the filter's list (a deny list allows them until they are listed);
CPU cache and timing side channels; disk bandwidth. Without a usable cgroup the judge falls back to
per-process rlimits and logs what is weaker (fork bombs may then burn more CPU than the limit while
they run, and memory is RLIMIT_AS). Without root the sandbox runs as the judge's own uid: a program
could then reopen its stdin file (the judge's cached input) for writing through /proc/self/fd/0, in
either mode.
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
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from codefu.errors import SandboxUnavailable
from codefu.judge.cgroups import CgroupManager, RunCgroup
from codefu.judge.seccomp import sandbox_filter

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
    runner: bool = True
    """Tests of a submission run in one sandbox, one after another, by a trusted runner that is its pid 1
    (codefu/judge/runner.c); False: a fresh bwrap for every test (the older, ~2x slower path)."""
    seccomp: bool = True
    """The system-call filter of codefu/judge/seccomp.py on every sandboxed program; False: none (debugging
    only: io_uring, keyrings, nested user namespaces, BPF, perf and every socket family become reachable)."""


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
    note: str = ""  # what happened beyond the exit code (e.g. the sandbox's runner died)

    @property
    def ok(self) -> bool:
        return self.limit is None and self.exit_code == 0


class Sandbox:
    """Runs one command at a time per call; thread-safe, so a pool of threads can share one instance."""

    def __init__(self, config: SandboxConfig | None = None):
        self.config = config or SandboxConfig()
        self.runner_binary: Path | None = None  # set by runner.open_sandbox when the runner works here
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
        self.seccomp_program: bytes | None = None  # classic BPF that bwrap installs (--seccomp)
        if self.config.kind == "bwrap":
            if self.config.seccomp:
                self.seccomp_program = sandbox_filter()  # None (said once) without libseccomp
            else:
                log.warning(
                    "judge.sandbox.seccomp is off: sandboxed programs run WITHOUT a system-call filter"
                )
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
        cg = self.create_cgroup(limits)
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

    def _bwrap_argv(
        self,
        argv: list[str],
        mounts: list[Mount],
        cwd: str,
        info_fd: int,
        block_fd: int,
        as_pid_1: bool,
        seccomp_fd: int | None = None,
    ) -> list[str]:
        args = [self.bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
        if as_pid_1:  # the command itself is pid 1 (the runner reaps and kills), not bwrap's reaper
            args.append("--as-pid-1")
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
        if seccomp_fd is not None:  # installed right before the exec of argv[0], inherited by all it starts
            args += ["--seccomp", str(seccomp_fd)]
        args += ["--info-fd", str(info_fd), "--block-fd", str(block_fd), "--"]
        return args + argv

    def _run_bwrap(self, argv, limits, mounts, cwd, files, cg: RunCgroup | None) -> RunResult:
        start = time.monotonic()
        prefix = _rlimit_prefix(limits, self.config, cg is not None)
        proc, child = self.spawn_bwrap(prefix, argv, mounts, cwd, files, cg)
        if child is None:  # bwrap failed before starting the sandbox; its stderr says why
            proc.wait()
            return RunResult(proc.returncode if proc.returncode else 1, 0.0, 0.0, 0)
        return self._supervise(proc, child, limits, cg, start)

    def spawn_bwrap(
        self,
        prefix: list[str],
        argv: list[str],
        mounts: list[Mount],
        cwd: str,
        files,
        cg: RunCgroup | None,
        pass_fds: tuple[int, ...] = (),
        as_pid_1: bool = False,
    ) -> tuple[subprocess.Popen, int | None]:
        """Start `prefix + bwrap ... -- argv`; the sandbox's pid 1 (host pid, None if bwrap failed) is in
        the cgroup before it runs anything."""
        r_info, w_info = os.pipe()
        r_block, w_block = os.pipe()
        seccomp_fd = _seccomp_fd(self.seccomp_program)
        extra = (seccomp_fd,) if seccomp_fd is not None else ()
        user = {"user": self.config.uid, "group": self.config.uid, "extra_groups": []} if self.is_root else {}
        try:
            proc = subprocess.Popen(
                prefix + self._bwrap_argv(argv, mounts, cwd, w_info, r_block, as_pid_1, seccomp_fd),
                stdin=files[0],
                stdout=files[1],
                stderr=files[2],
                env={},
                pass_fds=(w_info, r_block, *extra, *pass_fds),
                close_fds=True,
                **user,
            )
        finally:
            os.close(w_info)
            os.close(r_block)
            if seccomp_fd is not None:
                os.close(seccomp_fd)
        try:
            child = _read_child_pid(r_info)
            if child is None:
                os.close(w_block)
                return proc, None
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
        return proc, child

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
        return RunResult(code, cpu_s, wall, mem, limit_hit(limit, oom, cpu_s, code, limits))

    # ---- no sandbox (debugging) -------------------------------------------------------------------

    def _run_unsandboxed(self, argv, limits, mounts, cwd, files, cg) -> RunResult:
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

    def create_cgroup(self, limits: Limits) -> RunCgroup | None:
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
        """A shell must run in a sandbox, under the system-call filter when there is one. A kernel that
        refuses the filter (no seccomp) is said once and the sandbox runs without it, as without a
        cgroup; a sandbox that cannot start at all is SandboxUnavailable."""
        error = self._probe()
        if error is not None and self.seccomp_program is not None:
            self.seccomp_program = None
            if self._probe() is None:
                log.warning(
                    "the kernel refused the sandbox's system-call filter (%s): sandboxed programs run "
                    "WITHOUT it (io_uring, keyrings, nested user namespaces, BPF, perf and every socket "
                    "family are reachable); the other layers still hold",
                    error,
                )
                return
        if error is not None:
            raise SandboxUnavailable(
                f"bubblewrap could not start a sandbox ({error}). "
                "Unprivileged user namespaces must be enabled: "
                "`sysctl kernel.unprivileged_userns_clone=1` (Debian) or "
                "`sysctl kernel.apparmor_restrict_unprivileged_userns=0` (Ubuntu 24.04+); inside a "
                "container, run it with --privileged or a seccomp profile allowing clone/unshare."
            )

    def _probe(self) -> str | None:
        """None when a shell runs in a sandbox and sees the filter it should (/proc/self/status), else
        what went wrong."""
        script = 'echo ok; while read -r k v; do [ "$k" = Seccomp: ] && echo "$v"; done </proc/self/status'
        with tempfile.TemporaryDirectory(prefix="codefu-sbx-check-") as tmp:
            out, err = Path(tmp) / "out", Path(tmp) / "err"
            limits = Limits(cpu_s=5, wall_s=20, memory_bytes=256 << 20, file_size_bytes=1 << 20)
            try:
                result = self.run(["/bin/sh", "-c", script + "; true"], limits, [], out, err)
            except OSError as e:
                raise SandboxUnavailable(f"cannot start bubblewrap: {e}") from e
            lines = out.read_text().split()
            if result.exit_code != 0 or lines[:1] != ["ok"]:
                msg = err.read_text(errors="replace").strip()[:500]
                return f"exit {result.exit_code}: {msg!r}"
            if self.seccomp_program is not None and lines[1:2] != ["2"]:  # 2: SECCOMP_MODE_FILTER
                return f"the sandboxed shell is not filtered (Seccomp: {lines[1:2]})"
            return None


def limit_hit(seen: str | None, oom: bool, cpu_s: float, code: int, limits: Limits) -> str | None:
    """Which limit ended a run: the one the supervisor saw hit (`seen`), else what the kernel's traces
    say (an OOM kill, CPU time over the limit or SIGXCPU, SIGXFSZ for the output size), else None."""
    if seen is not None:
        return seen
    if oom:
        return "memory"
    if cpu_s > limits.cpu_s or code == 128 + signal.SIGXCPU:
        return "cpu"
    if code == 128 + signal.SIGXFSZ:
        return "output"
    return None


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


def make_work_dir(configured: str | None) -> Path:
    """The judge's folder (default `$TMPDIR/codefu-judge-<uid>`): the sandbox user may traverse it to
    reach its binds, but not list it."""
    root = Path(configured) if configured else Path(tempfile.gettempdir()) / f"codefu-judge-{os.geteuid()}"
    root.mkdir(parents=True, exist_ok=True)
    st = root.stat()
    if st.st_uid != os.geteuid():
        raise PermissionError(f"judge work dir {root} belongs to uid {st.st_uid}, not to us")
    root.chmod(0o711)
    return root


def check_reachable(root: Path, config: SandboxConfig) -> None:
    """Under root, bwrap runs as `config.uid`, which must enter every folder above the judge's (the
    sources of its binds): a 0700 $TMPDIR would otherwise fail every run with an opaque "No such
    process" when the sandbox dies before joining its cgroup."""
    if config.kind != "bwrap" or os.geteuid() != 0:
        return
    for folder in [root, *root.parents]:
        mode = folder.stat().st_mode
        if not mode & stat.S_IXOTH:
            raise SandboxUnavailable(
                f"the judge's folder {root} is under {folder} (mode {stat.filemode(mode)}), which the "
                f"sandbox's user (uid {config.uid}) cannot enter: use a $TMPDIR or judge.work_dir that "
                "other users can traverse (chmod o+x)"
            )


def fallback_nproc(config: SandboxConfig) -> int:
    """RLIMIT_NPROC without a cgroup: it counts every process of the sandbox uid on the host (concurrent
    runs and their exiting zombies included), so it gets room for every CPU's runs."""
    return config.max_processes * 4 * (os.cpu_count() or 1)


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
        # weaker fallbacks: AS is per process, NPROC per host uid
        args += [f"--as={limits.memory_bytes}", f"--nproc={fallback_nproc(config)}"]
    return args + ["--"]


_PRLIMIT = shutil.which("prlimit") or "/usr/bin/prlimit"


def _seccomp_fd(program: bytes | None) -> int | None:
    """A fresh file holding the filter for one bwrap to read (`--seccomp FD` reads to its end): a memfd,
    not a pipe, which could not hold a large program before bwrap starts reading."""
    if program is None:
        return None
    fd = os.memfd_create("codefu-seccomp", os.MFD_CLOEXEC)  # pass_fds makes bwrap's copy inheritable
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _kill(pid: int) -> None:
    try:
        if pid < 0:
            os.killpg(-pid, signal.SIGKILL)
        else:
            os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
