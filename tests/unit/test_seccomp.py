"""The sandbox's system-call filter as a program: libseccomp's BPF for the policy is well formed, and a
small classic-BPF interpreter (below) gives the decision the policy means for (arch, nr, args) tuples,
on x86_64 and aarch64. The sandboxed behaviour is in tests/e2e/test_sandbox_adversarial.py."""

from __future__ import annotations

import errno
import operator
import re
import struct
from pathlib import Path

import pytest

from codefu.judge import seccomp
from codefu.judge.seccomp import (
    ARCHES,
    DENIED,
    NAMESPACE_FLAGS,
    POLICY,
    Deny,
    Policy,
    SeccompUnavailable,
    compile_filter,
    complement_cubes,
    syscall_number,
)

try:
    seccomp.libseccomp()
except SeccompUnavailable as e:  # pragma: no cover - the project's machines have libseccomp2
    pytest.skip(f"libseccomp unavailable: {e}", allow_module_level=True)

# ---- a classic-BPF interpreter (the subset seccomp allows; linux/filter.h, seccomp_data in seccomp.h) --

RET_ALLOW, RET_KILL_PROCESS, RET_ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
AUDIT_ARCH_I386, AUDIT_ARCH_ARM = 0x40000003, 0x40000028
X32_SYSCALL_BIT = 0x40000000


ALU = {
    0x00: operator.add,
    0x10: operator.sub,
    0x20: operator.mul,
    0x40: operator.or_,
    0x50: operator.and_,
    0x60: operator.lshift,
    0x70: operator.rshift,
    0x80: lambda a, _: -a,
    0xA0: operator.xor,
}


def seccomp_data(arch: int, nr: int, args: tuple[int, ...] = ()) -> bytes:
    """struct seccomp_data { int nr; u32 arch; u64 instruction_pointer; u64 args[6]; }"""
    full = (*args, *[0] * (6 - len(args)))
    return struct.pack("<iIQ6Q", nr, arch, 0x401000, *full)


def run_bpf(program: bytes, data: bytes) -> int:
    insns = [struct.unpack_from("<HBBI", program, i) for i in range(0, len(program), 8)]
    a = x = 0
    mem = [0] * 16
    pc = 0
    for _ in range(len(insns) + 1):  # forward jumps only: at most one pass
        code, jt, jf, k = insns[pc]
        cls = code & 0x07
        if cls == 0x00:  # BPF_LD
            mode = code & 0xE0
            if mode == 0x20:  # BPF_ABS, word
                assert code & 0x18 == 0x00 and k % 4 == 0 and k + 4 <= len(data), (pc, code, k)
                a = struct.unpack_from("<I", data, k)[0]
            elif mode == 0x00:  # BPF_IMM
                a = k
            elif mode == 0x60:  # BPF_MEM
                a = mem[k]
            else:
                raise AssertionError(f"unsupported load {code:#x} at {pc}")
        elif cls == 0x01:  # BPF_LDX
            x = k if code & 0xE0 == 0x00 else mem[k]
        elif cls == 0x02:  # BPF_ST
            mem[k] = a
        elif cls == 0x03:  # BPF_STX
            mem[k] = x
        elif cls == 0x04:  # BPF_ALU
            op, src = code & 0xF0, (x if code & 0x08 else k)
            a = ALU[op](a, src) & 0xFFFFFFFF
        elif cls == 0x05:  # BPF_JMP
            op, src = code & 0xF0, (x if code & 0x08 else k)
            if op == 0x00:  # BPF_JA
                pc += 1 + k
                continue
            taken = {0x10: a == src, 0x20: a > src, 0x30: a >= src, 0x40: bool(a & src)}[op]
            pc += 1 + (jt if taken else jf)
            continue
        elif cls == 0x06:  # BPF_RET
            return a if code & 0x18 == 0x10 else k
        elif cls == 0x07:  # BPF_MISC
            if code == 0x07:
                x = a
            elif code == 0x87:
                a = x
            else:
                raise AssertionError(f"unsupported misc {code:#x}")
        pc += 1
    raise AssertionError("the program did not return")


def decide(program: bytes, arch: int, nr: int, *args: int) -> str:
    ret = run_bpf(program, seccomp_data(arch, nr, args))
    if ret == RET_ALLOW:
        return "allow"
    if ret & 0xFFFF0000 == RET_ERRNO:
        return errno.errorcode[ret & 0xFFFF]
    return f"{ret:#x}"


@pytest.fixture(scope="module", params=sorted(ARCHES))
def target(request):
    arch = request.param
    return arch, ARCHES[arch], compile_filter(POLICY, arch)


def nr(name: str, arch: str) -> int:
    n = syscall_number(name, arch)
    assert n is not None, (name, arch)
    return n


# ---- the program's shape ------------------------------------------------------------------------------


def test_program_is_well_formed_and_checks_the_arch_first(target):
    arch, token, program = target
    assert len(program) % 8 == 0 and 0 < len(program) // 8 <= 4096  # BPF_MAXINSNS
    insns = [struct.unpack_from("<HBBI", program, i) for i in range(0, len(program), 8)]
    for pc, (code, jt, jf, k) in enumerate(insns):
        if code & 0x07 == 0x05:  # every jump lands inside the program
            targets = [pc + 1 + k] if code & 0xF0 == 0x00 else [pc + 1 + jt, pc + 1 + jf]
            assert all(t < len(insns) for t in targets), (pc, code, jt, jf, k)
    assert insns[-1][0] & 0x07 == 0x06  # falls off nowhere
    # first: load seccomp_data.arch (offset 4) and compare it with this arch's AUDIT_ARCH
    assert insns[0][0] == 0x20 and insns[0][3] == 4
    assert insns[1][0] == 0x15 and insns[1][3] == token
    assert decide(program, token ^ 0x1, 0) == "ENOSYS"


def test_syscall_numbers_match_the_kernel_tables():
    # from the kernel's arch/x86/entry/syscalls/syscall_64.tbl and include/uapi/asm-generic/unistd.h
    known = {
        "x86_64": {"clone": 56, "socket": 41, "ptrace": 101, "personality": 135, "keyctl": 250,
                   "unshare": 272, "bpf": 321, "io_uring_setup": 425, "clone3": 435, "mount": 165},
        "aarch64": {"clone": 220, "socket": 198, "ptrace": 117, "personality": 92, "keyctl": 219,
                    "unshare": 97, "bpf": 280, "io_uring_setup": 425, "clone3": 435, "mount": 40},
    }  # fmt: skip
    for arch, table in known.items():
        assert {name: syscall_number(name, arch) for name in table} == table
    # and every call of the policy against the headers of this machine, where installed
    headers = {
        "x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
        "aarch64": Path("/usr/include/asm-generic/unistd.h"),
    }
    checked = 0
    for arch, header in headers.items():
        if not header.exists():
            continue
        numbers = dict(re.findall(r"#define __NR_(\w+) (\d+)\n", header.read_text()))
        for rule in POLICY.rules:
            if rule.syscall in numbers:
                assert syscall_number(rule.syscall, arch) == int(numbers[rule.syscall]), (arch, rule)
                checked += 1
    assert checked > 0 or not any(h.exists() for h in headers.values())


# ---- its decisions --------------------------------------------------------------------------------------


def test_every_listed_call_is_denied_with_eperm(target):
    arch, token, program = target
    names = [name for family in DENIED.values() for name in family]
    present = [name for name in names if syscall_number(name, arch) is not None]
    assert len(present) >= len(names) - 6  # iopl, ioperm, uselib, create_module... are x86-only
    for name in present:
        assert decide(program, token, nr(name, arch), 0, 0, 0) == "EPERM", name
    for must in ("io_uring_setup", "keyctl", "add_key", "request_key", "bpf", "perf_event_open",
                 "userfaultfd", "unshare", "setns", "mount", "pivot_root", "chroot", "ptrace",
                 "process_vm_readv", "process_vm_writev", "kcmp", "init_module", "finit_module",
                 "kexec_load", "reboot", "swapon", "clock_settime", "settimeofday"):  # fmt: skip
        assert must in present


def test_everything_else_is_allowed(target):
    arch, token, program = target
    conditional = {"clone", "clone3", "personality", "socket", "socketpair"}
    denied = {nr(r.syscall, arch) for r in POLICY.rules if syscall_number(r.syscall, arch) is not None}
    denied_always = denied - {nr(name, arch) for name in conditional}
    for n in range(0, 512):
        if n not in denied:
            assert decide(program, token, n, 0, 0, 0) == "allow", n
        elif n in denied_always:
            assert decide(program, token, n) == "EPERM", n


def test_clone_for_threads_and_fork_but_not_for_namespaces(target):
    arch, token, program = target
    clone = nr("clone", arch)
    thread = 0x3D0F00  # what glibc's pthread_create passes: VM|FS|FILES|SIGHAND|THREAD|SYSVSEM|SETTLS|...
    fork = 0x01200011  # SIGCHLD|CHILD_SETTID|CHILD_CLEARTID
    vfork = 0x4111  # SIGCHLD|VM|VFORK, posix_spawn
    for flags in (thread, fork, vfork, 0):
        assert decide(program, token, clone, flags) == "allow", hex(flags)
    for ns in NAMESPACE_FLAGS:
        for flags in (ns, ns | fork, ns | thread, ns | 0xFFFFFFFF_00000000):
            assert decide(program, token, clone, flags) == "EPERM", hex(flags)
    assert decide(program, token, clone, 0xFFFFFFFF_00000000 | fork) == "allow"  # the kernel reads 32 bits
    # clone3 cannot be inspected: ENOSYS, on which glibc falls back to clone
    assert decide(program, token, nr("clone3", arch), 0, 88) == "ENOSYS"


def test_personality_only_default_or_query(target):
    arch, token, program = target
    personality = nr("personality", arch)
    for persona in (0, 0xFFFFFFFF, 0xFFFFFFFF_FFFFFFFF, 0x1_00000000):  # the kernel takes 32 bits
        assert decide(program, token, personality, persona) == "allow", hex(persona)
    # ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC, MMAP_PAGE_ZERO, PER_LINUX32, PER_BSD, the query but one bit
    for persona in (0x0040000, 0x0400000, 0x0100000, 0x0008, 0x0006, 0xFFFFFFFE, 0x7FFFFFFF, 0x80000000,
                    0x1_00040000):  # fmt: skip
        assert decide(program, token, personality, persona) == "EPERM", hex(persona)


def test_sockets_only_unix_and_inet(target):
    arch, token, program = target
    for call in ("socket", "socketpair"):
        n = nr(call, arch)
        for family in (1, 2, 10, 0xFFFFFFFF_00000001):
            assert decide(program, token, n, family, 1, 0) == "allow", (call, family)
        # AF_UNSPEC, NETLINK, PACKET, ALG, VSOCK, BLUETOOTH, XDP, TIPC, RDS, anything
        for family in (0, 16, 17, 38, 40, 31, 44, 30, 21, 3, 9, 11, 0xFFFFFFFF, 0x1_00000028, 1 << 20):
            assert decide(program, token, n, family, 1, 0) == "EPERM", (call, family)


def test_other_abis_get_enosys():
    x86 = compile_filter(POLICY, "x86_64")
    read = 0
    assert decide(x86, ARCHES["x86_64"], read) == "allow"
    assert decide(x86, ARCHES["x86_64"], X32_SYSCALL_BIT | read) == "ENOSYS"  # x32 ABI
    assert decide(x86, ARCHES["x86_64"], X32_SYSCALL_BIT | 321) == "ENOSYS"
    assert decide(x86, AUDIT_ARCH_I386, 1) == "ENOSYS"  # int 0x80
    arm = compile_filter(POLICY, "aarch64")
    assert decide(arm, AUDIT_ARCH_ARM, 63) == "ENOSYS"
    assert decide(arm, ARCHES["x86_64"], 63) == "ENOSYS"


def test_complement_cubes_cover_exactly_the_outside():
    for allowed, bits in [({1, 2, 10}, 5), ({0, 31}, 5), ({7}, 3), (set(), 4), (set(range(16)), 4)]:
        cubes = complement_cubes(allowed, bits)
        for value in range(1 << bits):
            matches = sum(value & m == v for m, v in cubes)
            assert matches == (0 if value in allowed else 1), (allowed, value)  # disjoint, too


def test_a_policy_naming_an_unknown_call_is_refused():
    with pytest.raises(ValueError, match="no_such_call"):
        compile_filter(Policy((Deny("no_such_call"),)))
    with pytest.raises(ValueError, match="sparc"):
        compile_filter(POLICY, "sparc")


def test_describe_and_pseudo_code():
    lines = seccomp.describe()
    assert "io_uring_setup: EPERM" in lines and "clone3: ENOSYS" in lines
    assert any(line.startswith("clone: EPERM when arg0 & 0x10000000") for line in lines)
    assert "io_uring_setup" in seccomp.pseudo_code(POLICY, "x86_64")
