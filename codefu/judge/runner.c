/* codefu-runner: the trusted pid 1 of one submission's sandbox. It runs the submission's tests one after
 * another, each in a fresh process with its own limits, and removes whatever a test leaves behind
 * (processes, files in /tmp, System V IPC objects).
 *
 * usage: codefu-runner CTL_FD NOFILE AS_BYTES NPROC -- PROGRAM [ARG...]
 *   AS_BYTES, NPROC: 0 = not set (they are the weaker fallbacks used only without a cgroup).
 *
 * CTL_FD is an AF_UNIX SOCK_SEQPACKET socket to the judge; every message is one line of text:
 *   runner -> judge  "READY"
 *   judge -> runner  "RUN <cpu rlimit s> <wall ms> <file size bytes>" + 3 fds (stdin, stdout, stderr)
 *   judge -> runner  "KILL" while a test runs (the judge saw the cgroup's CPU time pass the limit)
 *   runner -> judge  "DONE <wait status> <cpu us> <max rss KiB> <wall us> <why> <clean>"
 *                    why: 0 the program exited, 1 wall-clock limit, 2 killed on request;
 *                    clean: 0 if /tmp or System V IPC could not be emptied (the judge then starts
 *                    a fresh sandbox)
 *   runner -> judge  "ERROR <message>" (a test could not be started; the runner carries on)
 * EOF from the judge: kill everything and exit.
 *
 * Why it is safe to share a uid with the program: the runner is not dumpable (no ptrace, no
 * /proc/1/fd, /proc/1/mem), its socket is close-on-exec, and as pid 1 of the pid namespace it ignores
 * every signal sent from inside it (it installs no handlers). The expected outputs never come in here.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/msg.h>
#include <sys/pidfd.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WIPE_MAX_DEPTH 16

static int ctl = -1;

static int transient(int err) { return err == EINTR || err == EAGAIN || err == ENOMEM || err == ENOBUFS; }

static void reply(const char *msg) {
    /* MSG_NOSIGNAL: a gone judge must not raise SIGPIPE; the next recv sees EOF. Kernel memory may be
     * short for a moment after a test filled the cgroup: retry for up to a second. */
    for (int i = 0; i < 1000; i++) {
        if (send(ctl, msg, strlen(msg), MSG_NOSIGNAL) >= 0 || !transient(errno)) return;
        usleep(1000);
    }
}

static void fail(const char *what) {
    char msg[256];
    snprintf(msg, sizeof msg, "ERROR %s: %s", what, strerror(errno));
    reply(msg);
}

/* One message; *nfds fds received (close-on-exec) into fds[0..2]. 0 = EOF (or a broken socket),
 * -1 = nothing received for now (kernel memory short: the cgroup is full). */
static ssize_t receive(char *buf, size_t size, int fds[3], int *nfds) {
    union {
        char space[CMSG_SPACE(3 * sizeof(int))];
        struct cmsghdr align;
    } control;
    struct iovec iov = {buf, size - 1};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = &control,
                         .msg_controllen = sizeof control};
    ssize_t n;
    do {
        n = recvmsg(ctl, &msg, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return transient(errno) ? -1 : 0;
    buf[n] = 0;
    *nfds = 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        int count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        int *received = (int *)CMSG_DATA(c);
        for (int i = 0; i < count; i++) {
            if (*nfds < 3) fds[(*nfds)++] = received[i];
            else close(received[i]);
        }
    }
    return n;
}

static void limit(int resource, rlim_t value) {
    struct rlimit r = {value, value};
    if (setrlimit(resource, &r) != 0) {
        dprintf(2, "codefu-runner: setrlimit(%d): %s\n", resource, strerror(errno));
        _exit(126);
    }
}

static void child(int fds[3], rlim_t cpu, rlim_t fsize, rlim_t nofile, rlim_t as, rlim_t nproc,
                  char **argv) {
    for (int i = 0; i < 3; i++)
        if (dup2(fds[i], i) < 0) _exit(126);
    close_range(3, ~0U, 0);
    /* When the cgroup runs out of memory the OOM killer must take the test's processes, not us: we
     * cannot lower our own score without CAP_SYS_RESOURCE, but anyone may raise theirs. /proc/self of
     * a non-dumpable process belongs to root, so become dumpable first (exec would make us so anyway;
     * no other process exists in the namespace between tests to take advantage). */
    int oom = -1;
    if (prctl(PR_SET_DUMPABLE, 1) == 0) oom = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
    if (oom < 0 || write(oom, "1000", 4) != 4) {
        dprintf(2, "codefu-runner: oom_score_adj: %s\n", strerror(errno));
        _exit(126);
    }
    close(oom);
    /* the CPU rlimit is a backstop (the judge watches the whole tree through the cgroup); the hard
     * limit a second above the soft one lets SIGXCPU arrive first. Every other hard limit = soft. */
    struct rlimit r = {cpu, cpu + 1};
    if (setrlimit(RLIMIT_CPU, &r) != 0) _exit(126);
    limit(RLIMIT_FSIZE, fsize);
    limit(RLIMIT_NOFILE, nofile);
    limit(RLIMIT_CORE, 0);
    getrlimit(RLIMIT_STACK, &r); /* as deep as allowed: correct deep recursion must not crash */
    limit(RLIMIT_STACK, r.rlim_max);
    if (as) limit(RLIMIT_AS, as);
    if (nproc) limit(RLIMIT_NPROC, nproc);
    execvp(argv[0], argv); /* PATH as bwrap set it, like the per-test path */
    dprintf(2, "codefu-runner: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

/* SIGKILL every other process of the namespace and reap them all. As pid 1 every orphan is our child,
 * so "no children left" means the namespace holds nobody but us. */
static void kill_all(long *maxrss) {
    for (;;) {
        kill(-1, SIGKILL); /* again each round: a process may have forked before it died */
        struct rusage ru;
        pid_t w = wait4(-1, NULL, __WALL, &ru);
        if (w < 0 && errno == ECHILD) return;
        if (w > 0 && maxrss && ru.ru_maxrss > *maxrss) *maxrss = ru.ru_maxrss;
    }
}

/* Remove everything inside the directory (a program may leave read-only subdirectories: we own them,
 * so make them writable first). Returns 0 when empty. Takes ownership of dirfd. */
static int wipe(int dirfd, int depth) {
    DIR *d = fdopendir(dirfd);
    if (!d) {
        close(dirfd);
        return -1;
    }
    int failed = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (unlinkat(dirfd, e->d_name, 0) == 0) continue;
        if (errno != EISDIR || depth >= WIPE_MAX_DEPTH) {
            failed = 1;
            continue;
        }
        fchmodat(dirfd, e->d_name, 0700, 0);
        int sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0 || wipe(sub, depth + 1) != 0 || unlinkat(dirfd, e->d_name, AT_REMOVEDIR) != 0)
            failed = 1;
    }
    closedir(d);
    return failed ? -1 : 0;
}

/* Remove the System V IPC objects a test left (they outlive processes); 0 if none is left. */
static int remove_ipc(void) {
    static const char *files[] = {"/proc/sysvipc/shm", "/proc/sysvipc/sem", "/proc/sysvipc/msg"};
    int failed = 0;
    for (int kind = 0; kind < 3; kind++) {
        FILE *f = fopen(files[kind], "re");
        if (!f) continue; /* no System V IPC in this kernel */
        char line[512];
        int id;
        if (!fgets(line, sizeof line, f)) line[0] = 0; /* the header */
        while (fgets(line, sizeof line, f)) {
            if (sscanf(line, "%*d %d", &id) != 1) continue;
            int r = kind == 0 ? shmctl(id, IPC_RMID, NULL)
                    : kind == 1 ? semctl(id, 0, IPC_RMID)
                                : msgctl(id, IPC_RMID, NULL);
            if (r != 0) failed = 1;
        }
        fclose(f);
    }
    return failed ? -1 : 0;
}

static long long usec(struct timeval t) { return t.tv_sec * 1000000LL + t.tv_usec; }

static long long cpu_usec(void) {
    struct rusage ru;
    getrusage(RUSAGE_CHILDREN, &ru);
    return usec(ru.ru_utime) + usec(ru.ru_stime);
}

static long long now_usec(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000LL + t.tv_nsec / 1000;
}

static void run_test(int fds[3], rlim_t cpu, long long wall_ms, rlim_t fsize, rlim_t nofile, rlim_t as,
                     rlim_t nproc, char **argv) {
    /* every process a test starts ends up reaped by us (directly, or through the parents we reap), so
     * the growth of our children's CPU time is the CPU time of the test's whole tree */
    long long cpu0 = cpu_usec(), start = now_usec();
    pid_t pid = fork();
    if (pid == 0) child(fds, cpu, fsize, nofile, as, nproc, argv);
    for (int i = 0; i < 3; i++) close(fds[i]);
    if (pid < 0) {
        fail("fork");
        return;
    }
    int pidfd = pidfd_open(pid, 0);
    if (pidfd < 0) {
        fail("pidfd_open");
        kill_all(NULL);
        return;
    }
    int why = 0;
    long long deadline = start + wall_ms * 1000;
    for (;;) {
        long long left = deadline - now_usec();
        if (left <= 0) {
            why = 1;
            break;
        }
        struct pollfd p[2] = {{pidfd, POLLIN, 0}, {ctl, POLLIN, 0}};
        struct timespec ts = {left / 1000000, (left % 1000000) * 1000};
        if (ppoll(p, 2, &ts, NULL) < 0) continue;
        if (p[0].revents) break;
        if (p[1].revents) {
            char buf[64];
            int got[3], n = 0;
            ssize_t r = receive(buf, sizeof buf, got, &n);
            if (r == 0) { /* the judge is gone: so are we */
                kill_all(NULL);
                _exit(0);
            }
            for (int i = 0; i < n; i++) close(got[i]);
            /* during a test the judge sends nothing but KILL: one we cannot read yet is one too */
            if (r < 0 || !strcmp(buf, "KILL")) {
                why = 2;
                break;
            }
        }
    }
    close(pidfd);
    if (why) kill(-1, SIGKILL);
    int status = 0;
    struct rusage ru = {0};
    while (wait4(pid, &status, __WALL, &ru) < 0 && errno == EINTR) {
    }
    long maxrss = ru.ru_maxrss;
    long long wall = now_usec() - start;
    kill_all(&maxrss); /* background processes, double-forked orphans, setsid escapes */
    long long cpu_used = cpu_usec() - cpu0;
    int tmp = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int clean = tmp >= 0 && wipe(tmp, 0) == 0;
    clean &= remove_ipc() == 0;
    char msg[160];
    snprintf(msg, sizeof msg, "DONE %d %lld %ld %lld %d %d", status, cpu_used, maxrss, wall, why, clean);
    reply(msg);
}

int main(int argc, char **argv) {
    if (argc < 7 || strcmp(argv[5], "--") != 0) {
        fprintf(stderr, "usage: codefu-runner CTL_FD NOFILE AS_BYTES NPROC -- PROGRAM [ARG...]\n");
        return 2;
    }
    ctl = atoi(argv[1]);
    rlim_t nofile = strtoull(argv[2], NULL, 10), as = strtoull(argv[3], NULL, 10);
    rlim_t nproc = strtoull(argv[4], NULL, 10);
    /* first: a program of the same uid must not ptrace us or open /proc/1/fd/CTL_FD */
    if (prctl(PR_SET_DUMPABLE, 0) != 0 || fcntl(ctl, F_SETFD, FD_CLOEXEC) != 0) {
        fail("setup");
        return 1;
    }
    if (getpid() != 1) {
        errno = EINVAL;
        fail("the runner must be pid 1 of its pid namespace");
        return 1;
    }
    reply("READY");
    for (;;) {
        char buf[256];
        int fds[3], n = 0;
        ssize_t r = receive(buf, sizeof buf, fds, &n);
        if (r == 0) break;
        if (r < 0) {
            usleep(1000);
            continue;
        }
        unsigned long long cpu, fsize;
        long long wall_ms;
        if (sscanf(buf, "RUN %llu %lld %llu", &cpu, &wall_ms, &fsize) != 3 || n != 3) {
            for (int i = 0; i < n; i++) close(fds[i]);
            if (strcmp(buf, "KILL") != 0) { /* a KILL that crossed a finished test's DONE is stale */
                errno = EINVAL;
                fail(buf);
            }
            continue;
        }
        run_test(fds, cpu, wall_ms, fsize, nofile, as, nproc, argv + 6);
    }
    kill_all(NULL);
    return 0;
}
