"""The sandbox's system-call filter: its switch and fallbacks (no libseccomp, a kernel that refuses the
filter), and a control for the attack tests of test_sandbox_adversarial.py: with the filter off, the
same program gets through on this kernel, so "blocked" there is the filter's doing. Real bubblewrap."""

from __future__ import annotations

import logging
import struct
import tempfile
from pathlib import Path

import pytest

from codefu.judge import Judge, JudgeConfig, seccomp
from codefu.judge import sandbox as sandbox_module
from codefu.judge.sandbox import Limits, Sandbox, SandboxConfig
from codefu.types import Problem, Status, TestCase
from helpers import syscall_attacks

LIMITS = Limits(cpu_s=5, wall_s=20, memory_bytes=256 << 20, file_size_bytes=1 << 20)


def seccomp_mode(sandbox: Sandbox) -> str:
    """The Seccomp: line of /proc/self/status of a program in the sandbox (0 none, 2 a filter)."""
    with tempfile.TemporaryDirectory() as tmp:
        out, err = Path(tmp) / "out", Path(tmp) / "err"
        r = sandbox.run(["/bin/sh", "-c", "cat /proc/self/status"], LIMITS, [], out, err)
        assert r.ok, (r, err.read_text())
        return next(line.split()[1] for line in out.read_text().splitlines() if line.startswith("Seccomp:"))


def test_without_the_filter_the_attacks_get_through():
    config = JudgeConfig(workers=1, sandbox=SandboxConfig(seccomp=False))
    tests = [TestCase(family, "blocked") for family in syscall_attacks.FAMILIES]
    with Judge(config) as judge:
        assert judge.sandbox.seccomp_program is None
        v = judge.judge(Problem("control", "", [], tests), syscall_attacks.RESPONSE)
        allowed = Problem("control", "", [], [TestCase("allowed", "works")])
        works = judge.judge(allowed, syscall_attacks.RESPONSE)
    results = zip(syscall_attacks.FAMILIES, v.tests, strict=True)
    opened = {f: t.message.strip() for f, t in results if t.status is not Status.ACCEPTED}
    # what any Linux lets an unprivileged process in a user namespace do; the rest depends on the
    # kernel's configuration and sysctls (io_uring_disabled, unprivileged_bpf_disabled, ...)
    for family in ("namespaces", "processes", "personality"):
        assert family in opened, (family, opened)
    assert works.status is Status.ACCEPTED, works.tests


def test_the_filter_is_on_by_default_and_off_by_config(caplog):
    filtered = Sandbox(SandboxConfig(runner=False))
    with caplog.at_level(logging.WARNING):
        unfiltered = Sandbox(SandboxConfig(runner=False, seccomp=False))
    try:
        assert filtered.seccomp_program is not None and seccomp_mode(filtered) == "2"
        assert unfiltered.seccomp_program is None and seccomp_mode(unfiltered) == "0"
        assert "judge.sandbox.seccomp is off" in caplog.text
    finally:
        filtered.close()
        unfiltered.close()


def test_without_libseccomp_the_sandbox_says_so_once_and_runs_unfiltered(monkeypatch, caplog):
    def missing():
        raise seccomp.SeccompUnavailable("libseccomp is not installed (simulated)")

    monkeypatch.setattr(seccomp, "libseccomp", missing)
    seccomp.sandbox_filter.cache_clear()
    sandboxes = []
    try:
        with caplog.at_level(logging.WARNING):
            sandboxes = [Sandbox(SandboxConfig(runner=False)) for _ in range(2)]
        assert caplog.text.count("no system-call filter in the sandbox") == 1
        assert "libseccomp is not installed (simulated)" in caplog.text
        assert all(s.seccomp_program is None for s in sandboxes)
        assert seccomp_mode(sandboxes[0]) == "0"
    finally:
        for s in sandboxes:
            s.close()
        seccomp.sandbox_filter.cache_clear()


def test_a_kernel_that_refuses_the_filter_is_said_and_the_sandbox_runs_without(monkeypatch, caplog):
    invalid = struct.pack("<HBBI", 0xFFFF, 0, 0, 0)  # no such instruction: prctl(PR_SET_SECCOMP) fails
    monkeypatch.setattr(sandbox_module, "sandbox_filter", lambda: invalid)
    with caplog.at_level(logging.WARNING):
        sb = Sandbox(SandboxConfig(runner=False))
    try:
        assert sb.seccomp_program is None
        assert "the kernel refused the sandbox's system-call filter" in caplog.text
        assert seccomp_mode(sb) == "0"
    finally:
        sb.close()


@pytest.mark.parametrize("runner", [True, False], ids=["runner", "per-test"])
def test_compilers_work_under_the_filter(runner):
    # the compile of the attack program itself (g++ with cc1plus, as, ld) runs under the same filter
    with Judge(JudgeConfig(workers=1, sandbox=SandboxConfig(runner=runner))) as judge:
        assert judge.sandbox.seccomp_program is not None
        v = judge.judge(Problem("c", "", [], [TestCase("allowed", "works")]), syscall_attacks.RESPONSE)
        assert v.status is Status.ACCEPTED, (v.compile_output[:500], v.tests)
