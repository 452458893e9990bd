/*
 * stamp: the tiny helper of the distlock benchmark (benches/run compiles it with gcc).
 *
 *   stamp mark OUT [--go FIFO] [--exit-out FILE] [--timeout SEC]
 *       Appends clock_gettime(CLOCK_MONOTONIC) in ns ("<ns>\n") to OUT, first thing.
 *       With --go: then blocks until one byte can be read from FIFO (or SEC seconds pass,
 *       default 120), appends a second stamp to --exit-out (default OUT) and exits at once.
 *       It is the command run under each lock in the hand-off test: "holder's child exits"
 *       and "waiter's child starts" are both stamped by it.
 *
 *   stamp time N OUT -- CMD [ARGS...]
 *       Runs CMD N times in a row (posix_spawn, stdin/stdout on /dev/null, stderr inherited)
 *       and appends one line per run to OUT: "<wall ns, spawn to reaped> <user+sys ns>
 *       <minor page faults>" (the last two from wait4, so CMD's own children are included).
 *       Exit 1 if any run failed.
 *
 *   stamp loop START_NS END_NS OUT -- CMD [ARGS...]
 *       Sleeps until CLOCK_MONOTONIC reaches START_NS, then runs CMD again and again; a run
 *       counts if it exited 0 before END_NS. Writes "<counted> <failed> <late>" to OUT.
 *
 *   stamp section OUT MS
 *       Stamps CLOCK_MONOTONIC, sleeps MS milliseconds (clock_nanosleep), stamps again and
 *       appends "<start ns> <end ns>\n" to OUT in one write. The critical section of the
 *       scaling and semaphore tests: the harness computes from these lines how many were
 *       inside at once.
 *
 *   stamp peakrss OUT -- CMD [ARGS...]
 *       Runs CMD under ptrace with PTRACE_O_TRACEEXIT: when the process itself exits, its
 *       memory is still mapped, and VmHWM of /proc/PID/status is its own peak RSS, its
 *       children excluded (wait4's ru_maxrss would include the command it ran).
 *       Appends "<VmHWM kB> <wait4 ru_maxrss kB> <exit status>" to OUT.
 *
 * All clocks are CLOCK_MONOTONIC, the same clock as Python's time.monotonic_ns() on Linux.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "stamp: %s: %s\n", what, strerror(errno));
    exit(2);
}

static void append_line(const char *path, const char *line) {
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) die(path);
    size_t len = strlen(line);
    if (write(fd, line, len) != (ssize_t)len) die("write");
    close(fd);
}

static void append_ns(const char *path, int64_t ns) {
    char buf[32];
    snprintf(buf, sizeof buf, "%lld\n", (long long)ns);
    append_line(path, buf);
}

static int usage(void) {
    fprintf(stderr,
            "usage: stamp mark OUT [--go FIFO] [--exit-out FILE] [--timeout SEC]\n"
            "       stamp time N OUT -- CMD...\n"
            "       stamp loop START_NS END_NS OUT -- CMD...\n"
            "       stamp section OUT MS\n"
            "       stamp peakrss OUT -- CMD...\n");
    return 64;
}

static int cmd_mark(int argc, char **argv) {
    int64_t t0 = now_ns();
    if (argc < 1) return usage();
    const char *out = argv[0], *go = NULL, *exit_out = NULL;
    double timeout = 120;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--go") && i + 1 < argc) go = argv[++i];
        else if (!strcmp(argv[i], "--exit-out") && i + 1 < argc) exit_out = argv[++i];
        else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) timeout = atof(argv[++i]);
        else return usage();
    }
    append_ns(out, t0);
    if (!go) return 0;
    /* O_RDWR on a FIFO never blocks on Linux, and poll() then waits for the writer's byte. */
    int fd = open(go, O_RDWR | O_CLOEXEC);
    if (fd < 0) die(go);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r;
    do r = poll(&p, 1, (int)(timeout * 1000));
    while (r < 0 && errno == EINTR);
    int64_t t1 = now_ns();
    append_ns(exit_out ? exit_out : out, t1);
    _exit(r > 0 ? 0 : 3); /* 3: nobody said go in time */
}

static int spawn_quiet(pid_t *pid, char **cmd) {
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    int e = posix_spawnp(pid, cmd[0], &fa, NULL, cmd, environ);
    posix_spawn_file_actions_destroy(&fa);
    return e;
}

static int wait_status(pid_t pid) {
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) die("waitpid");
    return st;
}

static char **after_dashes(int argc, char **argv, int fixed) {
    if (argc < fixed + 2 || strcmp(argv[fixed], "--")) return NULL;
    return argv + fixed + 1;
}

static int cmd_time(int argc, char **argv) {
    char **cmd = after_dashes(argc, argv, 2);
    if (!cmd) return usage();
    long n = atol(argv[0]);
    const char *out = argv[1];
    int failed = 0;
    char *buf = malloc((size_t)n * 72 + 1);
    if (!buf) die("malloc");
    size_t off = 0;
    for (long i = 0; i < n; i++) {
        pid_t pid;
        struct rusage ru;
        int st;
        int64_t t0 = now_ns();
        int e = spawn_quiet(&pid, cmd);
        if (e) {
            errno = e;
            die(cmd[0]);
        }
        while (wait4(pid, &st, 0, &ru) < 0)
            if (errno != EINTR) die("wait4");
        int64_t t1 = now_ns();
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "stamp: %s: run %ld ended with status 0x%x\n", cmd[0], i, st);
            failed = 1;
        }
        long long cpu = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
                        (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
        off += (size_t)sprintf(buf + off, "%lld %lld %ld\n", (long long)(t1 - t0), cpu,
                               ru.ru_minflt);
    }
    append_line(out, buf);
    return failed;
}

static void sleep_until(int64_t ns) {
    struct timespec ts = {.tv_sec = ns / 1000000000LL, .tv_nsec = ns % 1000000000LL};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

static int cmd_loop(int argc, char **argv) {
    char **cmd = after_dashes(argc, argv, 3);
    if (!cmd) return usage();
    int64_t start = atoll(argv[0]), end = atoll(argv[1]);
    const char *out = argv[2];
    long counted = 0, failed = 0, late = 0;
    sleep_until(start);
    while (now_ns() < end) {
        pid_t pid;
        int e = spawn_quiet(&pid, cmd);
        if (e) {
            errno = e;
            die(cmd[0]);
        }
        int st = wait_status(pid);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) failed++;
        else if (now_ns() <= end) counted++;
        else late++;
    }
    char line[96];
    snprintf(line, sizeof line, "%ld %ld %ld\n", counted, failed, late);
    append_line(out, line);
    return 0;
}

static int cmd_section(int argc, char **argv) {
    int64_t t0 = now_ns();
    if (argc != 2) return usage();
    sleep_until(t0 + (int64_t)(atof(argv[1]) * 1e6));
    int64_t t1 = now_ns();
    char line[64];
    snprintf(line, sizeof line, "%lld %lld\n", (long long)t0, (long long)t1);
    append_line(argv[0], line);
    return 0;
}

static long vmhwm_kb(pid_t pid) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f) return -1;
    long kb = -1;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "VmHWM:", 6)) kb = atol(line + 6);
    fclose(f);
    return kb;
}

static int cmd_peakrss(int argc, char **argv) {
    char **cmd = after_dashes(argc, argv, 1);
    if (!cmd) return usage();
    const char *out = argv[0];
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) < 0) _exit(125);
        execvp(cmd[0], cmd);
        _exit(127);
    }
    long hwm = -1;
    int st;
    struct rusage ru;
    int options_set = 0;
    for (;;) {
        pid_t r = wait4(pid, &st, __WALL, &ru);
        if (r < 0) {
            if (errno == EINTR) continue;
            die("wait4");
        }
        if (WIFEXITED(st) || WIFSIGNALED(st)) break;
        if (!WIFSTOPPED(st)) continue;
        int sig = WSTOPSIG(st), deliver = 0;
        if (!options_set && sig == SIGTRAP) {
            /* the stop after execve */
            ptrace(PTRACE_SETOPTIONS, pid, NULL,
                   (void *)(long)(PTRACE_O_TRACEEXIT | PTRACE_O_EXITKILL));
            options_set = 1;
        } else if (sig == SIGTRAP && (st >> 16) == PTRACE_EVENT_EXIT) {
            hwm = vmhwm_kb(pid);
        } else {
            deliver = sig; /* an ordinary signal: pass it on */
        }
        ptrace(PTRACE_CONT, pid, NULL, (void *)(long)deliver);
    }
    char line[96];
    snprintf(line, sizeof line, "%ld %ld %d\n", hwm, ru.ru_maxrss, st);
    append_line(out, line);
    return (WIFEXITED(st) && WEXITSTATUS(st) == 0 && hwm > 0) ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc < 2) return usage();
    const char *sub = argv[1];
    argc -= 2;
    argv += 2;
    if (!strcmp(sub, "mark")) return cmd_mark(argc, argv);
    if (!strcmp(sub, "time")) return cmd_time(argc, argv);
    if (!strcmp(sub, "loop")) return cmd_loop(argc, argv);
    if (!strcmp(sub, "section")) return cmd_section(argc, argv);
    if (!strcmp(sub, "peakrss")) return cmd_peakrss(argc, argv);
    return usage();
}
