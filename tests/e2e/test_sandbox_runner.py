"""Properties of one sandbox per submission, where a trusted runner (pid 1, same uid as the program)
runs the tests one after another: the program can neither reach nor kill the runner, nothing of one
test lives into the next, a dead runner fails only its test, and verdicts, CPU time and memory mean the
same as with a sandbox per test. Real bubblewrap, real cgroups, real programs."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from codefu.judge import Judge, JudgeConfig
from codefu.judge.extract import Program
from codefu.judge.judge import SANDBOX_ATTEMPTS
from codefu.judge.runner import RunnerSession
from codefu.judge.sandbox import Limits, Sandbox, SandboxConfig
from codefu.types import Problem, Status, TestCase


def cpp(body: str) -> str:
    return f"```cpp\n{body}\n```"


def py(body: str) -> str:
    return f"```python\n{body}\n```"


def doubling_problem(n: int, time_limit_s: float = 1.0, memory: int = 256 << 20) -> Problem:
    tests = [TestCase(f"{i}\n", f"{2 * i}\n") for i in range(1, n + 1)]
    return Problem("double", "", [], tests, time_limit_s, memory)


@pytest.fixture(scope="module")
def judge():
    """workers=1: every test of a submission runs in the same runner sandbox, one after another."""
    with Judge(JudgeConfig(workers=1)) as j:
        assert j.sandbox.runner_binary is not None
        yield j


@pytest.fixture(scope="module")
def per_test_judge():
    with Judge(JudgeConfig(workers=1, sandbox=SandboxConfig(runner=False))) as j:
        assert j.sandbox.runner_binary is None
        yield j


def runner_pids(judge: Judge) -> list[int]:
    """Host pids of this judge's runners (found by their cgroup, which a sandboxed process cannot leave)."""
    marker = next(iter(judge.sandbox.cgroups.parents.values())).name
    found = []
    for d in Path("/proc").iterdir():
        try:
            if (
                d.name.isdigit()
                and (d / "comm").read_text().strip() == "codefu-runner"
                and marker in (d / "cgroup").read_text()
            ):
                found.append(int(d.name))
        except OSError:
            continue
    return found


def processes_in_cgroups(judge: Judge) -> list[int]:
    marker = next(iter(judge.sandbox.cgroups.parents.values())).name
    found = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and marker in (d / "cgroup").read_text():
                found.append(int(d.name))
        except OSError:
            continue
    return found


def children_of(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def test_program_cannot_kill_or_stop_the_runner(judge):
    # pid 1 of a pid namespace ignores signals from inside it that it has no handler for
    body = (
        "#include <signal.h>\n#include <unistd.h>\n#include <cstdio>\n"
        'int main(){ int n; scanf("%d", &n); kill(1, SIGKILL); kill(getppid(), SIGSTOP);'
        ' kill(getppid(), SIGTERM); kill(-1, SIGKILL); printf("%d\\n", 2 * n); }'
    )
    v = judge.judge(doubling_problem(3), cpp(body))
    assert v.status is Status.ACCEPTED and v.passed == 3, v


def test_a_full_cgroup_kills_the_program_not_the_runner(judge):
    # the memory bombs of tests 1 and 3 are OOM-killed; the runner lives on and serves tests 2 and 4
    body = (
        "n = int(input())\n"
        "assert open('/proc/self/oom_score_adj').read().strip() == '1000'\n"
        "if n % 2:\n"
        "    hog = [bytearray(1 << 20) for _ in range(1 << 12)]\n"
        "print(2 * n)"
    )
    v = judge.judge(doubling_problem(4, memory=64 << 20), py(body))
    assert [t.status for t in v.tests] == [Status.MEMORY_LIMIT, Status.ACCEPTED] * 2, v
    assert "runner" not in v.tests[0].message


def test_program_cannot_reach_the_runners_fds_memory_or_socket(judge):
    # Same uid as the runner: only PR_SET_DUMPABLE=0 keeps /proc/1/fd, /proc/1/mem and ptrace closed,
    # and close-on-exec keeps the control socket out of the program's own fd table.
    body = (
        "#include <cstdio>\n#include <cstring>\n#include <fcntl.h>\n#include <unistd.h>\n"
        "#include <dirent.h>\n#include <initializer_list>\n#include <sys/ptrace.h>\n#include <sys/socket.h>\n"
        'int main(){ int n; scanf("%d", &n); const char* fake = "DONE 0 0 0 0 0 1"; int reached = 0;\n'
        "  for (int pid : {1, (int)getppid()}) { char p[64];\n"
        '    snprintf(p, sizeof p, "/proc/%d/fd", pid); DIR* d = opendir(p); if (d) { reached++; closedir(d); }\n'
        '    for (int fd = 0; fd < 64; fd++) { snprintf(p, sizeof p, "/proc/%d/fd/%d", pid, fd);\n'
        "      int f = open(p, O_WRONLY); if (f >= 0) { reached++; write(f, fake, strlen(fake)); close(f); } }\n"
        '    snprintf(p, sizeof p, "/proc/%d/mem", pid); if (open(p, O_RDWR) >= 0) reached++;\n'
        '    snprintf(p, sizeof p, "/proc/%d/environ", pid); if (open(p, O_RDONLY) >= 0) reached++;\n'
        "    if (ptrace(PTRACE_ATTACH, pid, 0, 0) == 0) reached++; }\n"
        "  for (int fd = 3; fd < 1024; fd++) if (send(fd, fake, strlen(fake), 0) >= 0) reached++;\n"
        '  printf("%d\\n", reached ? -1 : 2 * n); }'
    )
    v = judge.judge(doubling_problem(3), cpp(body))
    assert v.status is Status.ACCEPTED and v.passed == 3, v


LEFTOVER = """\
import os, sys, time
n = int(input())
if n == 1:
    DEEP
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            while True:
                os.write(1, b'GARBAGE\\n')  # into test 1's stdout, inherited
                for pid in os.listdir('/proc'):  # and any other it can open (the judge's own: no)
                    try:
                        with open(f'/proc/{pid}/fd/1', 'a') as f:
                            f.write('GARBAGE\\n')
                    except (OSError, ValueError):
                        pass
                open('/tmp/alive', 'w').close()
                time.sleep(0.01)
        os._exit(0)
    os.wait()
    while not os.path.exists('/tmp/alive'):  # the daemon has written at least once
        time.sleep(0.01)
else:
    time.sleep(0.3)  # time for a surviving daemon to write into our stdout and mark /tmp
    if os.listdir('/tmp'):
        print('tmp not empty:', os.listdir('/tmp'))
print(2 * n)
"""

DEEP_TREE = "path = '/tmp'\n    for i in range(40):\n        path += '/d'\n        os.mkdir(path)\n    os.chmod('/tmp/d', 0o500)"


@pytest.mark.parametrize("deep", [False, True], ids=["same sandbox", "fresh sandbox"])
def test_leftovers_of_a_test_do_not_survive_into_the_next(judge, deep):
    # Test 1 leaves a double-forked, setsid daemon that writes into every stdout it can open (same uid:
    # a later test's too) and marks /tmp. Tests 2 and 3 wait a little and look for any trace of it.
    # With a /tmp tree too deep for the runner to empty, the judge starts a fresh sandbox for test 2.
    body = LEFTOVER.replace("DEEP", DEEP_TREE if deep else "pass")
    v = judge.judge(doubling_problem(3, time_limit_s=2), py(body))
    # test 1's own stdout got its daemon's GARBAGE: a wrong answer, for test 1 only
    assert [t.status for t in v.tests] == [Status.WRONG_ANSWER, Status.ACCEPTED, Status.ACCEPTED], v
    judge.sandbox.cgroups.wait_idle()
    assert processes_in_cgroups(judge) == []


def test_a_runner_killed_from_outside_fails_only_its_test(judge):
    """Nothing inside can kill the runner; the host (or the OOM killer) can. That test is a runtime
    error, never accepted, and the next test gets a fresh sandbox."""
    body = "import time\nn = int(input())\nif n == 1:\n    time.sleep(60)\nprint(2 * n)"
    problem = doubling_problem(3, time_limit_s=10)  # wall limit 31 s: the kill comes long before
    killed = []

    def kill_runner_once_test_1_runs():
        while not killed:
            for pid in runner_pids(judge):
                if children_of(pid):  # the sleeping program of test 1
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
            time.sleep(0.005)

    t = threading.Thread(target=kill_runner_once_test_1_runs, daemon=True)
    t.start()
    v = judge.judge(problem, py(body))
    t.join(timeout=60)
    assert killed
    first, *rest = v.tests
    assert first.status is Status.RUNTIME_ERROR and "runner died" in first.message, first
    assert [r.status for r in rest] == [Status.ACCEPTED, Status.ACCEPTED]
    assert v.status is Status.RUNTIME_ERROR and v.passed == 2


def test_a_runner_dead_between_tests_is_replaced_and_the_test_judged(judge, monkeypatch):
    """A runner gone before its next test starts (killed from outside, as under memory pressure) ran
    nothing of that test: the test runs in a new sandbox and is judged, not SANDBOX_ERROR."""
    real_run = RunnerSession.run
    calls = []

    def run_after_the_runner_died(session, *args):
        calls.append(session)
        if len(calls) == 2:  # the second test: its runner served the first one, then died
            signal.pidfd_send_signal(session.pidfd, signal.SIGKILL)
            session.proc.wait(timeout=10)
        return real_run(session, *args)

    monkeypatch.setattr(RunnerSession, "run", run_after_the_runner_died)
    v = judge.judge(doubling_problem(3), py("print(2 * int(input()))"))
    assert v.status is Status.ACCEPTED and v.passed == 3, v
    # test 1 and the failed try of test 2 in the first sandbox, test 2 again and test 3 in a second one
    assert len(calls) == 4 and calls[0] is calls[1] and calls[2] is calls[3] and calls[1] is not calls[2]


def test_a_sandbox_that_fails_to_start_is_tried_again(judge, monkeypatch):
    """bwrap failing to start a runner sandbox once (fork's EAGAIN at a process limit, say) costs a retry,
    not the test; failing every time is SANDBOX_ERROR naming why, after SANDBOX_ATTEMPTS tries."""
    real_spawn = Sandbox.spawn_bwrap
    failures = {"left": 1, "made": 0}

    def spawn_failing(sandbox, *args, **kwargs):
        if kwargs.get("as_pid_1") and failures["left"] > 0:
            failures["left"] -= 1
            failures["made"] += 1
            raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
        return real_spawn(sandbox, *args, **kwargs)

    monkeypatch.setattr(Sandbox, "spawn_bwrap", spawn_failing)
    problem = doubling_problem(2)
    v = judge.judge(problem, py("print(2 * int(input()))"))
    assert failures["made"] == 1
    assert v.status is Status.ACCEPTED and v.passed == 2, v

    failures["left"] = 10**6
    v = judge.judge(problem, py("print(2 * int(input()))"))
    assert failures["made"] == 1 + SANDBOX_ATTEMPTS
    assert v.status is Status.SANDBOX_ERROR and "could not start" in v.tests[0].message, v

    failures["left"], failures["made"] = 1, 0  # /run_code's warm sessions too
    r = judge.run_once(
        Program("python", "print(int(input()) + 1)"), "41\n", Limits(5, 10, 256 << 20, 1 << 20)
    )
    assert failures["made"] == 1
    assert not r.error and r.run is not None and r.run.exit_code == 0 and r.stdout == "42\n", r


def test_cpu_time_of_orphans_and_the_memory_peak_are_per_test(judge, per_test_judge):
    # Test 1 leaves a grandchild that burns 0.3 s of CPU and is reaped by pid 1, not by its parent, and
    # allocates 100 MiB; test 2 does neither. Both paths must count the orphan's CPU in test 1 only,
    # and report test 2's own (small) memory peak, not test 1's.
    body = (
        "#include <cstdio>\n#include <cstdlib>\n#include <cstring>\n#include <ctime>\n"
        "#include <unistd.h>\n#include <sys/wait.h>\n"
        'int main(){ int n; scanf("%d", &n);\n'
        "  if (n == 1) { char* p = (char*)malloc(100 << 20); memset(p, 1, 100 << 20);\n"
        "    int fds[2]; pipe(fds);\n"
        "    if (fork() == 0) { if (fork() == 0) { close(fds[0]);\n"
        "        while (clock() < CLOCKS_PER_SEC * 3 / 10) {} _exit(0); } _exit(0); }\n"
        "    close(fds[1]); wait(nullptr); char c; read(fds[0], &c, 1); /* EOF: the orphan is done */\n"
        "    p[n] = 0; }\n"
        '  printf("%d\\n", 2 * n); }'
    )
    for j in (judge, per_test_judge):
        v = j.judge(doubling_problem(2, time_limit_s=2), cpp(body))
        assert v.status is Status.ACCEPTED, v
        first, second = v.tests
        assert first.cpu_s >= 0.3 and second.cpu_s < 0.3, (j.sandbox.runner_binary, v.tests)
        assert first.memory_bytes >= 100 << 20 and second.memory_bytes < 50 << 20, v.tests


VERDICT_PROGRAMS = {
    "accepted": py("print(2 * int(input()))"),
    "wrong": py("print(2 * int(input()) + 1)"),
    "exit 3": py("import sys\nint(input())\nsys.exit(3)"),
    "segfault": cpp("#include <csignal>\nint main(){ raise(SIGSEGV); }"),
    "cpu loop": cpp("int main(){ volatile long x = 0; for(;;) x++; }"),
    "two busy threads": cpp(
        "#include <thread>\nint main(){ std::thread t([]{ volatile long x = 0; for(;;) x++; });"
        " volatile long y = 0; for(;;) y++; }"
    ),
    "sleep": py("import time\ntime.sleep(60)"),
    "memory": cpp(
        "#include <cstdlib>\n#include <cstring>\n"
        "int main(){ for(;;){ char* p = (char*)malloc(1 << 20); memset(p, 1, 1 << 20); } }"
    ),
    "output flood": cpp('#include <cstdio>\nint main(){ for(;;) fputs("xxxxxxxxxxxxxxxx", stdout); }'),
    "closed stdout": cpp('#include <unistd.h>\n#include <cstdio>\nint main(){ close(1); puts("2"); }'),
}


@pytest.mark.parametrize("name", list(VERDICT_PROGRAMS))
@pytest.mark.slow
def test_verdicts_mean_the_same_on_both_paths(judge, per_test_judge, name):
    problem = doubling_problem(1, time_limit_s=0.5, memory=64 << 20)
    new, old = (j.judge(problem, VERDICT_PROGRAMS[name]) for j in (judge, per_test_judge))
    assert new.status is old.status, (new.tests, old.tests)
    assert new.tests[0].exit_code == old.tests[0].exit_code or new.status is Status.TIME_LIMIT
    if new.status is Status.TIME_LIMIT:
        assert new.tests[0].message == old.tests[0].message  # CPU vs wall-clock
        if "CPU" in new.tests[0].message:
            assert new.tests[0].cpu_s >= 0.5 and old.tests[0].cpu_s >= 0.5


def test_ipc_objects_of_a_test_are_removed_before_the_next(judge):
    # System V shared memory outlives its processes; a segment left by test 1 must be gone in test 2
    body = (
        "#include <cstdio>\n#include <sys/ipc.h>\n#include <sys/shm.h>\n"
        'int main(){ int n; scanf("%d", &n);\n'
        "  int id = shmget(0x5eed, 1 << 20, IPC_CREAT | IPC_EXCL | 0600);\n"
        '  printf("%d\\n", id >= 0 ? 2 * n : -1); }'
    )
    v = judge.judge(doubling_problem(3), cpp(body))
    assert v.status is Status.ACCEPTED and v.passed == 3, v


def test_without_a_c_compiler_the_judge_falls_back_to_a_sandbox_per_test():
    # on PATH: bwrap alone (prlimit is found at /usr/bin); not on it: gcc and cc. The sandbox user
    # runs bwrap from there, so the folder must be traversable (pytest's tmp_path is not).
    bin_dir = Path(tempfile.mkdtemp(prefix="codefu-nocc-"))
    bin_dir.chmod(0o755)
    (bin_dir / "bwrap").symlink_to(shutil.which("bwrap"))
    code = (
        "import logging\nlogging.basicConfig()\n"
        "from codefu.judge import Judge, JudgeConfig\nfrom codefu.types import Problem, TestCase\n"
        "with Judge(JudgeConfig(workers=1)) as j:\n"
        "    v = j.judge(Problem('d', '', [], [TestCase('3\\n', '6\\n')]), '```python\\nprint(2 * int(input()))\\n```')\n"
        "    print(j.sandbox.runner_binary, v.status)"
    )
    env = {**os.environ, "PATH": str(bin_dir)}
    try:
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    finally:
        shutil.rmtree(bin_dir)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["None", "ACCEPTED"]
    assert "sandbox runner unavailable" in r.stderr and "no C compiler" in r.stderr


def test_cancel_kills_the_running_test_at_once(judge):
    # the service's client left: a test with 30 s of CPU allowed ends as soon as `cancel` is set,
    # through /run_code's warm sandbox and through a submission's sandbox alike
    spin = "while True:\n    pass"
    limits = Limits(30, 91, 256 << 20, 1 << 20)
    for run in (
        lambda cancel: judge.run_once(Program("python", spin), "", limits, cancel=cancel),
        lambda cancel: judge.judge(
            Problem("spin", "", [], [TestCase("", "1\n")] * 3, time_limit_s=30), py(spin), cancel
        ),
    ):
        cancel = threading.Event()
        threading.Timer(1.0, cancel.set).start()
        start = time.monotonic()
        run(cancel)
        assert time.monotonic() - start < 5  # 1 s, the kill, the reply; not 30 s of CPU, nor 3 tests


def test_python_output_flood_is_the_output_limit_in_run_once(judge):
    # Python ignores SIGXFSZ: its write fails with EFBIG and it exits 1, which is still the output limit
    r = judge.run_once(
        Program("python", "while True:\n    print('x' * 1000)"), "", Limits(5, 16, 256 << 20, 1 << 20)
    )
    assert r.run is not None and r.run.limit == "output", r
