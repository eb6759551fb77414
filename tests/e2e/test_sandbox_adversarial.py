"""One hostile program per sandbox property: each gets the right verdict, the host is untouched, and
the judge keeps serving. Everything runs inside the real bubblewrap sandbox with real cgroups."""

from __future__ import annotations

import os
import shutil
import socket
import threading
from pathlib import Path

import pytest

from codefu.judge import Judge, JudgeConfig
from codefu.judge.languages import CompileConfig
from codefu.types import Problem, Status, TestCase
from helpers import syscall_attacks

ECHO_SUM = '```cpp\n#include <cstdio>\nint main(){long long a,b;scanf("%lld %lld",&a,&b);printf("%lld\\n",a+b);}\n```'


def problem(
    expected: str = "ok", time_limit_s: float = 1.0, memory: int = 64 << 20, stdin: str = ""
) -> Problem:
    return Problem("adversarial", "", [], [TestCase(stdin, expected)], time_limit_s, memory)


def cpp(body: str) -> str:
    return f"```cpp\n{body}\n```"


def py(body: str) -> str:
    return f"```python\n{body}\n```"


@pytest.fixture(scope="module", params=["runner", "per-test"])
def judge(request):
    """Both paths: one sandbox per submission with the runner as its pid 1, and a sandbox per test."""
    # a shorter compile limit than the default 10 s keeps compile bombs quick to judge
    config = JudgeConfig(workers=2, output_limit_bytes=8 << 20, compile=CompileConfig(time_s=5))
    config.sandbox.runner = request.param == "runner"
    j = Judge(config)
    assert (j.sandbox.runner_binary is not None) == config.sandbox.runner
    yield j
    j.close()


def leaked_processes(judge: Judge) -> list[str]:
    """Processes still inside this judge's cgroups (a sandboxed process cannot leave its cgroup: it has
    no cgroupfs), as 'pid comm'."""
    found = []
    assert judge.sandbox.cgroups is not None, "these tests need a cgroup (v1 or v2) to watch for leaks"
    marker = next(iter(judge.sandbox.cgroups.parents.values())).name
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and marker in (d / "cgroup").read_text():
                found.append(f"{d.name} {(d / 'comm').read_text().strip()}")
        except OSError:
            continue
    return found


def assert_host_clean_and_judge_serving(judge: Judge) -> None:
    judge.sandbox.cgroups.wait_idle()  # busy groups are removed in the background
    assert leaked_processes(judge) == []
    for parent in judge.sandbox.cgroups.parents.values():
        assert [p.name for p in parent.iterdir() if p.is_dir()] == []
    sanity = judge.judge(Problem("sum", "", [], [TestCase("2 3\n", "5")]), ECHO_SUM)
    assert sanity.status is Status.ACCEPTED, sanity


@pytest.fixture(autouse=True)
def _host_check(judge):
    yield
    assert_host_clean_and_judge_serving(judge)


def test_fork_bomb(judge):
    v = judge.judge(problem(), cpp("#include <unistd.h>\nint main(){ while(1) fork(); }"))
    # 63 processes retrying fork() can fill the 64 MiB group with kernel memory (page tables, slabs
    # of the failed forks): an OOM kill, on both paths, now and then under load
    assert v.status in (Status.TIME_LIMIT, Status.RUNTIME_ERROR, Status.MEMORY_LIMIT)
    assert v.tests[0].cpu_s < 5  # the pids cgroup stops it; CPU is counted over the whole tree


def test_shell_fork_bomb_from_python(judge):
    body = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"
    v = judge.judge(problem(), py(body))
    assert v.status in (Status.TIME_LIMIT, Status.RUNTIME_ERROR, Status.MEMORY_LIMIT)


def test_memory_bomb(judge):
    body = "#include <cstdlib>\n#include <cstring>\nint main(){ for(;;){ char*p=(char*)malloc(1<<20); memset(p,1,1<<20);} }"
    v = judge.judge(problem(memory=64 << 20), cpp(body))
    assert v.status is Status.MEMORY_LIMIT
    assert v.tests[0].memory_bytes >= 60 << 20


def test_python_memory_bomb(judge):
    v = judge.judge(problem(memory=64 << 20), py("a = bytearray(10**9)\nprint('ok')"))
    assert v.status in (Status.MEMORY_LIMIT, Status.RUNTIME_ERROR)  # MemoryError is a clean exit 1


def test_thread_bomb(judge):
    body = (
        "#include <thread>\n#include <vector>\n#include <chrono>\n"
        "int main(){ std::vector<std::thread> v; for(;;) v.emplace_back([]{"
        " std::this_thread::sleep_for(std::chrono::seconds(100)); }); }"
    )
    v = judge.judge(problem(), cpp(body))
    assert v.status in (Status.RUNTIME_ERROR, Status.MEMORY_LIMIT)


def test_infinite_loop_is_cpu_time_limit(judge):
    v = judge.judge(problem(time_limit_s=0.5), cpp("int main(){ volatile long x=0; for(;;) x++; }"))
    assert v.status is Status.TIME_LIMIT
    assert 0.5 <= v.tests[0].cpu_s < 2


def test_sleep_hits_wall_clock(judge):
    v = judge.judge(problem(time_limit_s=0.5), py("import time\ntime.sleep(60)"))
    assert v.status is Status.TIME_LIMIT
    assert "wall" in v.tests[0].message
    assert v.tests[0].cpu_s < 0.5 and v.tests[0].wall_s < 10


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_output_flood(judge, stream):
    body = f"import sys\nwhile True:\n    sys.{stream}.write('x' * 65536)"
    v = judge.judge(problem(), py(body))
    assert v.status is Status.OUTPUT_LIMIT


def test_filling_the_disk(judge, tmp_path):
    before = shutil.disk_usage("/").used
    body = (
        "#include <cstdio>\n#include <initializer_list>\nint main(){ static char buf[1<<20]; long long n=0;"
        ' for(const char* f : {"/tmp/fill", "fill", "/box/fill", "/fill"}) {'
        '  FILE* o=fopen(f,"w"); if(!o) continue;'
        "  while(fwrite(buf,1,sizeof buf,o)==sizeof buf) { n+=sizeof buf; if(fflush(o)) break; } fclose(o); }"
        ' printf("%lld\\n", n); }'
    )
    v = judge.judge(problem(expected="0"), cpp(body))
    # stopped by the output-file limit (SIGXFSZ) or the tmpfs size; never written to the host disk
    assert v.status in (Status.OUTPUT_LIMIT, Status.WRONG_ANSWER, Status.MEMORY_LIMIT)
    assert shutil.disk_usage("/").used - before < 32 << 20


def test_network_is_unreachable(judge):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    port = server.getsockname()[1]
    accepted = []

    def accept_loop():
        stop = threading.get_ident
        del stop
        for _ in range(25):
            try:
                conn, _ = server.accept()
                accepted.append(conn)
            except OSError:
                pass

    t = threading.Thread(target=accept_loop)
    t.start()
    body = (
        "import socket\nok = 'isolated'\n"
        f"for host in ('127.0.0.1', 'localhost', '10.0.2.2'):\n"
        "    try:\n"
        f"        socket.create_connection((host, {port}), timeout=1).close()\n"
        "        ok = 'connected ' + host\n"
        "    except OSError:\n"
        "        pass\n"
        "print(ok)"
    )
    v = judge.judge(problem(expected="isolated", time_limit_s=2), py(body))
    t.join()
    server.close()
    assert accepted == []
    assert v.status is Status.ACCEPTED, v


def test_host_files_are_invisible(judge, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("TOPSECRET")
    secret.chmod(0o644)
    home = Path.home() / ".codefu-test-secret"
    home.write_text("TOPSECRET")
    paths = [
        str(secret),
        str(home),
        "/etc/shadow",
        "/etc/passwd",
        "/root/.bashrc",
        os.getcwd() + "/README.md",
    ]
    body = (
        "found = []\n"
        f"for p in {paths!r}:\n"
        "    try:\n"
        "        found.append(open(p).read()[:20])\n"
        "    except OSError:\n"
        "        pass\n"
        "print('none' if not found else found)"
    )
    try:
        v = judge.judge(problem(expected="none"), py(body))
    finally:
        home.unlink()
    assert v.status is Status.ACCEPTED, v


def test_environment_does_not_leak(judge, monkeypatch):
    monkeypatch.setenv("CODEFU_TEST_API_KEY", "hunter2-secret")
    body = (
        "import os\nleak = 'hunter2' in str(dict(os.environ))\n"
        "for pid in os.listdir('/proc'):\n"
        "    try:\n"
        "        leak |= b'hunter2' in open(f'/proc/{pid}/environ', 'rb').read()\n"
        "    except (OSError, ValueError):\n"
        "        pass\n"
        "print('leak' if leak else 'clean')"
    )
    v = judge.judge(problem(expected="clean"), py(body))
    assert v.status is Status.ACCEPTED, v


def test_killing_parent_and_every_process(judge):
    body = "#include <signal.h>\n#include <unistd.h>\nint main(){ kill(getppid(), SIGKILL); kill(-1, SIGKILL); return 0; }"
    v = judge.judge(problem(), cpp(body))
    assert v.status in (Status.RUNTIME_ERROR, Status.WRONG_ANSWER)
    assert os.getpid() > 0  # we are still here; the fixture checks the judge still serves


def test_double_forked_orphans_are_killed(judge):
    body = (
        "#include <unistd.h>\n#include <cstdio>\n#include <sys/prctl.h>\n"
        'int main(){ if(fork()==0){ setsid(); if(fork()==0){ prctl(PR_SET_NAME,"codefu_orphan");'
        ' sleep(300); } return 0; } puts("ok"); return 0; }'
    )
    v = judge.judge(problem(), cpp(body))
    assert v.status is Status.ACCEPTED
    assert not [p for p in Path("/proc").glob("[0-9]*/comm") if _read(p) == "codefu_orphan"]


def test_cannot_raise_own_limits(judge):
    body = (
        "#include <sys/resource.h>\n#include <cstdio>\n#include <initializer_list>\n"
        "int main(){ rlimit r{RLIM_INFINITY, RLIM_INFINITY}; bool raised = false;"
        " for (int res : {RLIMIT_CPU, RLIMIT_FSIZE, RLIMIT_NOFILE}) raised |= setrlimit(res, &r) == 0;"
        ' FILE* f = fopen("/sys/fs/cgroup/pids/pids.max", "w");'
        ' puts(raised || f ? "escaped" : "contained"); volatile long x = 0; for(;;) x++; }'
    )
    v = judge.judge(problem(expected="contained", time_limit_s=0.5), cpp(body))
    assert v.status is Status.TIME_LIMIT


def test_deep_recursion_has_unlimited_stack(judge):
    body = (
        "#include <cstdio>\nlong long f(long long n){ volatile char pad[64]; pad[0]=n;"
        ' return n==0 ? pad[0] : 1 + f(n-1); }\nint main(){ printf("%lld\\n", f(2000000)); }'
    )
    v = judge.judge(problem(expected="2000000", memory=512 << 20, time_limit_s=2), cpp(body))
    assert v.status is Status.ACCEPTED, v


@pytest.mark.parametrize(
    "name,source",
    [
        ("urandom include", "#include </dev/urandom>\nint main(){}"),
        ("shadow include", '#include "/etc/shadow"\nint main(){}'),
        (
            "template explosion",
            "template<int N> struct F { static const int v = F<N-1>::v + F<N-2>::v; };\n"
            "template<> struct F<0>{static const int v=0;}; template<> struct F<1>{static const int v=1;};\n"
            "template<int N> struct G { G<N+1> g; };\nint main(){ G<0> g; return F<40>::v; }",
        ),
        (
            "macro explosion",
            "#define A(x) x x x x x x x x\n#define B(x) A(A(A(A(x))))\n#define C(x) B(B(B(x)))\n"
            "int main(){ C(;) }",
        ),
        ("1 GiB initialised array", "int a[1<<28] = {1};\nint main(){ return a[5]; }"),
    ],
)
@pytest.mark.slow
def test_compile_bombs(judge, name, source):
    v = judge.judge(problem(), cpp(source))
    assert v.status is Status.COMPILE_ERROR, (name, v.status, v.compile_output[:300])
    assert "root:" not in v.compile_output


def test_huge_source_is_refused_before_compiling(judge):
    v = judge.judge(problem(), cpp("int main(){}\n" + "// padding\n" * 1_000_000))
    assert v.status is Status.COMPILE_ERROR
    assert "over the" in v.compile_output


@pytest.mark.parametrize("family", syscall_attacks.FAMILIES)
def test_system_call_filter_blocks(judge, family):
    # io_uring, keyrings, userfaultfd, BPF, perf, nested namespaces (unshare, setns, clone and clone3 with
    # CLONE_NEWUSER), mounts, ptrace and friends, modules, kexec and reboot, swap, clock setting,
    # personality, socket families other than AF_UNIX/INET/INET6: each call fails as the filter answers
    v = judge.judge(problem(expected="blocked", stdin=family), syscall_attacks.RESPONSE)
    assert v.status is Status.ACCEPTED, (family, v.status, v.compile_output[:300], v.tests)


def test_system_call_filter_keeps_what_programs_need(judge):
    # threads (clone3 answers ENOSYS: glibc falls back to clone), fork, posix_spawn, files, mmap, AF_UNIX
    # and AF_INET sockets, the personality query
    v = judge.judge(problem(expected="works", stdin="allowed"), syscall_attacks.RESPONSE)
    assert v.status is Status.ACCEPTED, v.tests


def test_python_meets_the_filter_and_keeps_its_standard_library(judge):
    body = (
        "import concurrent.futures, os, socket, subprocess, sys\n"
        "blocked = []\n"
        "for name in ('AF_NETLINK', 'AF_VSOCK', 'AF_PACKET', 'AF_ALG'):\n"
        "    try:\n"
        "        socket.socket(getattr(socket, name), socket.SOCK_SEQPACKET).close()\n"
        "    except PermissionError:\n"
        "        blocked.append(name)\n"
        "a, b = socket.socketpair()\n"
        "socket.socket(socket.AF_INET6).close()\n"
        "with concurrent.futures.ThreadPoolExecutor(4) as ex:\n"
        "    threads = sum(ex.map(abs, range(10)))\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    os._exit(3)\n"
        "forked = os.waitpid(pid, 0)[1] >> 8\n"
        "sub = subprocess.run([sys.executable, '-c', 'print(6 * 7)'], capture_output=True, text=True)\n"
        "status = [line for line in open('/proc/self/status') if line.startswith('Seccomp:')]\n"
        "print(len(blocked), threads, forked, sub.stdout.strip(), status[0].split())"
    )
    v = judge.judge(problem(expected="4 45 3 42 ['Seccomp:', '2']", time_limit_s=5), py(body))
    assert v.status is Status.ACCEPTED, v.tests


def test_binary_garbage_response(judge):
    garbage = bytes(range(256)).decode("latin-1") * 4000
    assert judge.judge(problem(), garbage).status is Status.NO_CODE
    wrapped = judge.judge(problem(), "```cpp\n" + garbage + "\n```")
    assert wrapped.status is Status.COMPILE_ERROR


def _read(p: Path) -> str:
    try:
        return p.read_text().strip()
    except OSError:
        return ""
