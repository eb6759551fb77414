"""A program that tries the system calls the sandbox's filter denies (codefu/judge/seccomp.py), one family
per run: the family's name on stdin, "blocked" on stdout when every call failed as the filter answers
(EPERM; ENOSYS for clone3), else an "open <call>: <result>" line per call that got through (on stderr
too). "allowed" instead exercises what programs need (threads, fork, posix_spawn, files, mmap, AF_UNIX
and AF_INET sockets, the personality query) and prints "works"."""

FAMILIES = [
    "io_uring",
    "keyrings",
    "userfaultfd",
    "bpf",
    "perf",
    "namespaces",
    "mounts",
    "processes",
    "modules",
    "kexec_reboot",
    "swap",
    "clock",
    "personality",
    "sockets",
]

SOURCE = r"""#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/timex.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int opened = 0;
// got through unless it failed with `want`: the filter's answer (the kernel's own checks often say
// EPERM too; the control run with the filter off tells the two apart)
static void check(const char* name, long r, int want = EPERM) {
    int e = errno;
    if (r == -1 && e == want) return;
    opened++;
    printf("open %s: %ld %s\n", name, r, r == -1 ? strerror(e) : "");
    fprintf(stderr, "open %s: %ld %s\n", name, r, r == -1 ? strerror(e) : "");
}
static void reap(long pid) {
    if (pid == 0) _exit(0);  // a child that got through
    int st;
    if (pid > 0) while (waitpid(pid, &st, __WALL) > 0 && !WIFEXITED(st) && !WIFSIGNALED(st)) kill(pid, SIGKILL);
}
static long personality_(unsigned long p) { return syscall(SYS_personality, p); }

int main() {
    char family[64] = {0};
    if (scanf("%63s", family) != 1) return 2;
    std::string f = family;
    errno = 0;
    if (f == "io_uring") {
        unsigned char params[120] = {0};  // struct io_uring_params
        check("io_uring_setup", syscall(SYS_io_uring_setup, 4, params));
        check("io_uring_enter", syscall(SYS_io_uring_enter, 0, 0, 0, 0, nullptr, 0));
        check("io_uring_register", syscall(SYS_io_uring_register, 0, 0, nullptr, 0));
    } else if (f == "keyrings") {
        check("add_key", syscall(SYS_add_key, "user", "codefu", "v", 1, -2 /* process keyring */));
        check("keyctl", syscall(SYS_keyctl, 1 /* KEYCTL_JOIN_SESSION_KEYRING */, nullptr));
        check("request_key", syscall(SYS_request_key, "user", "codefu", nullptr, 0));
    } else if (f == "userfaultfd") {
        check("userfaultfd", syscall(SYS_userfaultfd, O_CLOEXEC | 1 /* UFFD_USER_MODE_ONLY */));
    } else if (f == "bpf") {
        uint32_t attr[32] = {1 /* hash */, 4, 4, 1};  // BPF_MAP_CREATE
        check("bpf", syscall(SYS_bpf, 0, attr, sizeof attr));
    } else if (f == "perf") {
        uint64_t attr[16] = {0};  // perf_event_attr: software task clock of this process, user only
        attr[0] = 1 | (128ull << 32);
        attr[1] = 1;
        attr[5] = (1 << 5) | (1 << 6);
        check("perf_event_open", syscall(SYS_perf_event_open, attr, 0, -1, -1, 0));
    } else if (f == "namespaces") {
        check("unshare(CLONE_NEWUSER)", unshare(CLONE_NEWUSER));
        check("unshare(CLONE_NEWNET)", unshare(CLONE_NEWNET));
        check("setns", setns(0, 0));
        long pid = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
        reap(pid);
        check("clone(CLONE_NEWUSER)", pid);
        uint64_t args[8] = {CLONE_NEWUSER | CLONE_NEWNS, 0, 0, 0, SIGCHLD, 0, 0, 0};  // struct clone_args
        pid = syscall(SYS_clone3, args, sizeof args);
        reap(pid);
        check("clone3(CLONE_NEWUSER)", pid, ENOSYS);
    } else if (f == "mounts") {
        check("mount", syscall(SYS_mount, "none", "/tmp", "tmpfs", 0, nullptr));
        check("umount2", syscall(SYS_umount2, "/tmp", 2 /* MNT_DETACH */));
        check("pivot_root", syscall(SYS_pivot_root, "/tmp", "/tmp"));
        check("chroot", syscall(SYS_chroot, "/tmp"));
        check("fsopen", syscall(SYS_fsopen, "tmpfs", 0));
        check("open_tree", syscall(SYS_open_tree, AT_FDCWD, "/tmp", 0));
    } else if (f == "processes") {
        long child = fork();
        if (child == 0) { pause(); _exit(0); }
        check("ptrace(PTRACE_ATTACH)", syscall(SYS_ptrace, 16 /* PTRACE_ATTACH */, child, 0, 0));
        kill(child, SIGKILL);
        reap(child);
        char buf[8], secret[8] = "secret";
        struct iovec local = {buf, sizeof buf}, remote = {secret, sizeof secret};
        check("process_vm_readv", syscall(SYS_process_vm_readv, getpid(), &local, 1, &remote, 1, 0));
        check("process_vm_writev", syscall(SYS_process_vm_writev, getpid(), &local, 1, &remote, 1, 0));
        check("kcmp", syscall(SYS_kcmp, getpid(), getpid(), 0 /* KCMP_FILE */, 0, 0));
        long pidfd = syscall(SYS_pidfd_open, getpid(), 0);
        check("pidfd_getfd", syscall(SYS_pidfd_getfd, pidfd, 0, 0));
    } else if (f == "modules") {
        check("init_module", syscall(SYS_init_module, nullptr, 0, ""));
        check("finit_module", syscall(SYS_finit_module, 0, "", 0));
        check("delete_module", syscall(SYS_delete_module, "codefu", 0));
    } else if (f == "kexec_reboot") {
        check("kexec_load", syscall(SYS_kexec_load, 0, 0, nullptr, 0));
        check("kexec_file_load", syscall(SYS_kexec_file_load, 0, 0, 0, "", 0));
        check("reboot", syscall(SYS_reboot, 0xfee1dead, 672274793, 0 /* CAD off */, nullptr));
    } else if (f == "swap") {
        check("swapon", syscall(SYS_swapon, "/tmp/swap", 0));
        check("swapoff", syscall(SYS_swapoff, "/tmp/swap"));
    } else if (f == "clock") {
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        struct timeval tv = {now.tv_sec, 0};
        struct timex tx = {};
        check("clock_settime", syscall(SYS_clock_settime, CLOCK_REALTIME, &now));
        check("settimeofday", syscall(SYS_settimeofday, &tv, nullptr));
        check("adjtimex", syscall(SYS_adjtimex, &tx));
        check("clock_adjtime", syscall(SYS_clock_adjtime, CLOCK_REALTIME, &tx));
    } else if (f == "personality") {
        check("personality(ADDR_NO_RANDOMIZE)", personality_(0x0040000));
        check("personality(READ_IMPLIES_EXEC)", personality_(0x0400000));
        check("personality(PER_LINUX32)", personality_(0x0008));
    } else if (f == "sockets") {
        int sv[2];
        check("socket(AF_VSOCK)", socket(40, SOCK_STREAM, 0));
        check("socket(AF_NETLINK)", socket(AF_NETLINK, SOCK_RAW, 0));
        check("socket(AF_PACKET)", socket(AF_PACKET, SOCK_DGRAM, 0));
        check("socket(AF_ALG)", socket(38, SOCK_SEQPACKET, 0));
        check("socketpair(AF_NETLINK)", socketpair(AF_NETLINK, SOCK_DGRAM, 0, sv));
    } else if (f == "allowed") {  // what programs need must keep working under the filter
        std::vector<std::thread> threads;
        int sum = 0;
        for (int i = 0; i < 4; i++) threads.emplace_back([&sum, i] { __atomic_add_fetch(&sum, i, __ATOMIC_SEQ_CST); });
        for (auto& t : threads) t.join();
        if (sum != 6) { puts("broken threads"); return 1; }
        long child = fork();
        if (child == 0) _exit(7);
        int st = 0;
        if (child < 0 || waitpid(child, &st, 0) != child || WEXITSTATUS(st) != 7) { puts("broken fork"); return 1; }
        pid_t pid;
        char* argv[] = {(char*)"true", nullptr};
        if (posix_spawn(&pid, "/bin/true", nullptr, nullptr, argv, nullptr) != 0 || waitpid(pid, &st, 0) != pid || st != 0) {
            puts("broken posix_spawn"); return 1; }
        FILE* out = fopen("/tmp/data", "w");
        if (!out || fputs("hello", out) < 0 || fclose(out) != 0) { puts("broken files"); return 1; }
        int fd = open("/tmp/data", O_RDONLY);
        char* p = (char*)mmap(nullptr, 5, PROT_READ, MAP_PRIVATE, fd, 0);
        char* q = (char*)mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED || q == MAP_FAILED || memcmp(p, "hello", 5) != 0) { puts("broken mmap"); return 1; }
        q[12345] = 1;
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 || socket(AF_INET, SOCK_STREAM, 0) < 0 ||
            socket(AF_INET6, SOCK_DGRAM, 0) < 0) { puts("broken sockets"); return 1; }
        if (personality_(0xffffffff) != 0 || personality_(0) != 0) { puts("broken personality"); return 1; }
        puts("works");
        return 0;
    } else {
        printf("unknown family %s\n", family);
        return 2;
    }
    if (!opened) puts("blocked");
    return 0;
}"""

RESPONSE = f"```cpp\n{SOURCE}\n```"
