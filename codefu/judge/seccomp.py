"""The system-call filter of every sandboxed program (submissions, compilers, checkers, the runner).

A deny list over a default of "allow", compiled by libseccomp (the Debian package `libseccomp2`,
loaded with ctypes: no Python dependency) into the classic-BPF program that bubblewrap installs with
`--seccomp FD` right before it execs the sandbox's first program; every process of the sandbox
inherits it. A denied call fails with EPERM (the program may handle it) and is never executed; nothing
is killed, so the filter cannot turn a correct program into a runtime error by itself.

Why a deny list (the evidence, under strace on this project's machines): a C++ compile with g++ uses
35 distinct system calls, a threaded C++ program 24, a Python script importing the usual modules with
a thread, a subprocess and a one-worker `multiprocessing.Pool` 53, about 60 in all, and several of them
(clone3, rseq, faccessat2, close_range) are ones glibc started using in the last few releases. An
allow list would fail correct programs on every glibc, libstdc++ or CPython update that adopts a newer
call, and a false runtime error is a wrong reward, silently. The calls that matter for an escape are
few and known: the subsystems where most recent unprivileged kernel exploits live (io_uring, user
namespaces, keyrings, BPF, perf, userfaultfd, exotic socket families) and the privileged calls that
only fail today because of missing capabilities (defence in depth). The cost of a deny list: a system
call added to Linux after this list is allowed until it is listed here.

What is denied (`POLICY`):

- whole calls, EPERM: the families of `DENIED` below;
- `clone` with any namespace flag (CLONE_NEW*), EPERM; `clone` for threads and fork stays;
- `clone3`, ENOSYS: its flags are in memory, out of a filter's reach; glibc (and everything built on
  it) then falls back to `clone`, as on kernels older than 5.3;
- `personality` to anything but the default persona (PER_LINUX, 0) or the query (0xffffffff), EPERM;
- `socket` and `socketpair` of any family but AF_UNIX, AF_INET and AF_INET6, EPERM (AF_INET* stay
  unreachable in the sandbox's empty network namespace; AF_VSOCK is not namespaced at all);
- any other ABI: on x86_64 the i386 (`int 0x80`) and x32 calls, on aarch64 the 32-bit ARM ones get
  ENOSYS, as on a kernel built without them.

`compile_filter(policy, arch)` is a pure function of the policy (and libseccomp's syscall tables);
`sandbox_filter()` is the cached program for this machine, or None (logged once) where libseccomp is
missing. See it: `python -m codefu.judge.seccomp` prints the rules and libseccomp's pseudo-code of the
program (`--arch aarch64`, `--bpf FILE` for the raw program).
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import errno
import functools
import logging
import os
import platform
import sys
from dataclasses import dataclass

log = logging.getLogger(__name__)

# clone(2) and unshare(2) flags, from the kernel's include/uapi/linux/sched.h
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
NAMESPACE_FLAGS = (
    CLONE_NEWNS,
    CLONE_NEWCGROUP,
    CLONE_NEWUTS,
    CLONE_NEWIPC,
    CLONE_NEWUSER,
    CLONE_NEWPID,
    CLONE_NEWNET,
)  # CLONE_NEWTIME (0x80) is the exit-signal byte for clone(); only clone3 and unshare take it

# address families, from include/linux/socket.h
AF_UNIX, AF_INET, AF_INET6 = 1, 2, 10
ALLOWED_SOCKET_FAMILIES = (AF_UNIX, AF_INET, AF_INET6)
PER_LINUX, PERSONALITY_QUERY = 0, 0xFFFFFFFF

# AUDIT_ARCH_* (include/uapi/linux/audit.h), which libseccomp uses as its arch tokens
ARCHES = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}

# Whole system calls denied with EPERM, by family. Names are the kernel's (and libseccomp's); a name
# with no such call on an architecture (iopl on aarch64, say) is skipped there. Numbers come from
# libseccomp's tables, which follow the kernel's arch/x86/entry/syscalls/syscall_64.tbl and
# include/uapi/asm-generic/unistd.h (aarch64).
DENIED: dict[str, tuple[str, ...]] = {
    "io_uring": ("io_uring_setup", "io_uring_enter", "io_uring_register"),
    "keyrings": ("add_key", "request_key", "keyctl"),
    "userfaultfd": ("userfaultfd",),
    "bpf": ("bpf",),
    "perf": ("perf_event_open",),
    "namespaces": ("unshare", "setns"),
    "mounts": (
        "mount",
        "umount2",
        "pivot_root",
        "chroot",
        "open_tree",
        "move_mount",
        "fsopen",
        "fsconfig",
        "fsmount",
        "fspick",
        "mount_setattr",
        "quotactl",
        "quotactl_fd",
        "open_by_handle_at",
    ),
    "other processes": (
        "ptrace",
        "process_vm_readv",
        "process_vm_writev",
        "kcmp",
        "pidfd_getfd",
        "process_madvise",
    ),
    "kernel modules": ("init_module", "finit_module", "delete_module", "create_module"),
    "kexec and reboot": ("kexec_load", "kexec_file_load", "reboot"),
    "swap": ("swapon", "swapoff"),
    "clock": ("settimeofday", "clock_settime", "clock_adjtime", "adjtimex"),
    "system administration": ("acct", "syslog", "vhangup", "lookup_dcookie", "iopl", "ioperm", "uselib"),
}


@dataclass(frozen=True)
class Deny:
    """`syscall` fails with `errno` (it is not executed) when every condition holds; no condition:
    always. A condition (arg, mask, value) holds when `args[arg] & mask == value` (64-bit)."""

    syscall: str
    errno: int = errno.EPERM
    when: tuple[tuple[int, int, int], ...] = ()


@dataclass(frozen=True)
class Policy:
    rules: tuple[Deny, ...]
    """Several rules for one call: it is denied when any of them matches."""
    bad_arch_errno: int = errno.ENOSYS
    """The answer to every call of another ABI (i386 and x32 on x86_64, 32-bit ARM on aarch64)."""


def complement_cubes(allowed: set[int], bits: int = 32) -> list[tuple[int, int]]:
    """(mask, value) pairs such that a `bits`-bit number x is outside `allowed` exactly when
    `x & mask == value` for one of them: the empty branches of the binary trie of `allowed`, from the
    top bit down. What a filter needs for "this argument is none of these" with equality tests only:
    at most bits x len(allowed) pairs."""
    cubes: list[tuple[int, int]] = []

    def walk(values: set[int], bit: int, mask: int, prefix: int) -> None:
        if bit < 0:
            return
        for b in (0, 1):
            branch = {v for v in values if (v >> bit) & 1 == b}
            m, p = mask | (1 << bit), prefix | (b << bit)
            if not branch:
                cubes.append((m, p))
            else:
                walk(branch, bit - 1, m, p)

    if not allowed:
        return [(0, 0)]
    walk(set(allowed), bits - 1, 0, 0)
    return cubes


def _low32_not_in(syscall: str, arg: int, allowed: tuple[int, ...]) -> list[Deny]:
    """Deny `syscall` unless the low 32 bits of argument `arg` (an int or unsigned int parameter: the
    kernel ignores the high ones) are one of `allowed`."""
    return [Deny(syscall, when=((arg, mask, value),)) for mask, value in complement_cubes(set(allowed))]


def default_policy() -> Policy:
    rules = [Deny(name) for names in DENIED.values() for name in names]
    rules += [Deny("clone", when=((0, flag, flag),)) for flag in NAMESPACE_FLAGS]
    rules.append(Deny("clone3", errno.ENOSYS))
    rules += _low32_not_in("personality", 0, (PER_LINUX, PERSONALITY_QUERY))
    for call in ("socket", "socketpair"):
        rules += _low32_not_in(call, 0, ALLOWED_SOCKET_FAMILIES)
    return Policy(tuple(rules))


POLICY = default_policy()


class SeccompUnavailable(RuntimeError):
    pass


# ---- libseccomp through ctypes ------------------------------------------------------------------------
# Constants from libseccomp's include/seccomp.h (2.5).
SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_MASKED_EQ = 7
SCMP_FLTATR_ACT_BADARCH = 2
SCMP_FLTATR_CTL_OPTIMIZE = 8  # 2 = a binary tree over syscall numbers (libseccomp >= 2.5)
NR_SCMP_ERROR = -1


def scmp_act_errno(err: int) -> int:
    return 0x00050000 | (err & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint), ("minor", ctypes.c_uint), ("micro", ctypes.c_uint)]


@functools.cache
def libseccomp() -> ctypes.CDLL:
    """The loaded library; SeccompUnavailable when missing or older than 2.5."""
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name)
    except OSError as e:
        raise SeccompUnavailable(
            f"libseccomp is not installed ({e}): `sudo apt-get install libseccomp2`"
        ) from e
    lib.seccomp_version.restype = ctypes.POINTER(_Version)
    v = lib.seccomp_version().contents
    if (v.major, v.minor) < (2, 5):
        raise SeccompUnavailable(f"libseccomp {v.major}.{v.minor}.{v.micro} is older than 2.5")
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_arch_native.restype = ctypes.c_uint32
    lib.seccomp_arch_add.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    lib.seccomp_arch_remove.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
    lib.seccomp_attr_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_syscall_resolve_name_arch.argtypes = [ctypes.c_uint32, ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ArgCmp),
    ]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_export_pfc.argtypes = [ctypes.c_void_p, ctypes.c_int]
    return lib


def native_arch() -> str:
    machine = platform.machine()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)


def syscall_number(name: str, arch: str) -> int | None:
    """The number of `name` on `arch` by libseccomp's tables; None when the call does not exist there."""
    nr = libseccomp().seccomp_syscall_resolve_name_arch(ARCHES[arch], name.encode())
    return nr if nr >= 0 else None


def _check(rc: int, what: str) -> None:
    if rc < 0:
        raise SeccompUnavailable(f"libseccomp {what}: {os.strerror(-rc)}")


def _context(policy: Policy, arch: str) -> int:
    if arch not in ARCHES:
        raise ValueError(f"no system-call filter for architecture {arch!r} (known: {', '.join(ARCHES)})")
    lib = libseccomp()
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        raise SeccompUnavailable("seccomp_init failed")
    try:
        token, native = ARCHES[arch], lib.seccomp_arch_native()
        if token != native:  # a context starts with the native arch only
            _check(lib.seccomp_arch_add(ctx, token), f"cannot add arch {arch}")
            _check(lib.seccomp_arch_remove(ctx, native), "seccomp_arch_remove")
        bad_arch = scmp_act_errno(policy.bad_arch_errno)
        _check(lib.seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, bad_arch), "seccomp_attr_set badarch")
        _check(lib.seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2), "optimize")
        for rule in policy.rules:
            if syscall_number(rule.syscall, arch) is None:
                if lib.seccomp_syscall_resolve_name(rule.syscall.encode()) == NR_SCMP_ERROR:
                    raise ValueError(f"unknown system call {rule.syscall!r} in the seccomp policy")
                continue  # no such call on this arch
            # rules take the *native* arch's number (or libseccomp's pseudo number for a call the native
            # arch lacks); libseccomp translates it for the filter's arch by name
            nr = lib.seccomp_syscall_resolve_name(rule.syscall.encode())
            conds = (_ArgCmp * max(1, len(rule.when)))(
                *(_ArgCmp(arg, SCMP_CMP_MASKED_EQ, mask, value) for arg, mask, value in rule.when)
            )
            rc = lib.seccomp_rule_add_array(ctx, scmp_act_errno(rule.errno), nr, len(rule.when), conds)
            _check(rc, f"rule for {rule.syscall}")
    except BaseException:
        lib.seccomp_release(ctx)
        raise
    return ctx


def _export(policy: Policy, arch: str, how: str) -> bytes:
    lib = libseccomp()
    ctx = _context(policy, arch)
    fd = os.memfd_create("codefu-seccomp", os.MFD_CLOEXEC)
    try:
        _check(getattr(lib, f"seccomp_export_{how}")(ctx, fd), f"seccomp_export_{how}")
        size = os.lseek(fd, 0, os.SEEK_END)
        return os.pread(fd, size, 0)
    finally:
        os.close(fd)
        lib.seccomp_release(ctx)


def compile_filter(policy: Policy = POLICY, arch: str | None = None) -> bytes:
    """The classic-BPF program (struct sock_filter[], native byte order) for `arch` (default: this
    machine's), as bwrap's --seccomp reads it."""
    return _export(policy, arch or native_arch(), "bpf")


def pseudo_code(policy: Policy = POLICY, arch: str | None = None) -> str:
    """libseccomp's human-readable rendering of the same program."""
    return _export(policy, arch or native_arch(), "pfc").decode()


@functools.cache
def sandbox_filter() -> bytes | None:
    """The default policy compiled for this machine; None, said once per process, where it cannot be."""
    try:
        return compile_filter(POLICY)
    except (SeccompUnavailable, ValueError) as e:
        log.warning(
            "no system-call filter in the sandbox (%s): untrusted programs can reach io_uring, keyrings, "
            "nested user namespaces, BPF, perf and every socket family; the other layers still hold",
            e,
        )
        return None


def describe(policy: Policy = POLICY) -> list[str]:
    """One line per denied call (conditions shown), for people."""
    lines = []
    for rule in policy.rules:
        cond = " and ".join(f"arg{a} & {m:#x} == {v:#x}" for a, m, v in rule.when)
        lines.append(f"{rule.syscall}: {errno.errorcode[rule.errno]}" + (f" when {cond}" if cond else ""))
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Show the sandbox's system-call filter.")
    parser.add_argument("--arch", choices=sorted(ARCHES), default=None, help="default: this machine's")
    parser.add_argument("--bpf", metavar="FILE", help="write the raw BPF program here")
    args = parser.parse_args(argv)
    for line in describe():
        print(f"# {line}")
    print(f"# calls of other ABIs: {errno.errorcode[POLICY.bad_arch_errno]}")
    print(pseudo_code(POLICY, args.arch))
    if args.bpf:
        program = compile_filter(POLICY, args.arch)
        with open(args.bpf, "wb") as f:
            f.write(program)
        print(f"# {len(program) // 8} instructions written to {args.bpf}", file=sys.stderr)


if __name__ == "__main__":
    main()
