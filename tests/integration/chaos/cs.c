/* The chaos test's critical section (tests/integration/chaos/mod.rs explains the design).
 *
 * usage: cs LOG ID COUNTER HOLD_MS [ID2 COUNTER2]
 *
 * Stamps every step on CLOCK_MONOTONIC into LOG, one write(2) per line on an O_APPEND
 * descriptor: S (start: pid, process group, DISTLOCK_TOKEN, DISTLOCK_FENCE), R n (read
 * COUNTER), H (every 10ms while holding for HOLD_MS), P (about to write), W n+1 (written and
 * renamed into place), E (end). The read-modify-write of COUNTER is deliberately not atomic:
 * only the lock keeps two sections from losing an update.
 *
 * COUNTER "-" makes a stamp-only section (S, H..., E): the semaphore's, where up to N sections
 * run at once by design, so a shared counter would lose updates without anything being wrong.
 *
 * ID2 COUNTER2: the command of a lock set (`run -k A -k B`) is a section on each key: every
 * stamp is written for ID (key A, the first typed: DISTLOCK_TOKEN0, DISTLOCK_FENCE0) and for
 * ID2 (key B: DISTLOCK_TOKEN1, DISTLOCK_FENCE1), each with its own counter, one line each.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int log_fd = -1;
/* One section per key: ids[0] always, ids[1] for a lock set's second key. */
static const char *ids[2];
static int nids = 1;

static unsigned long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

/* One stamp of section i, one write(2) on an O_APPEND descriptor. */
static void stamp_one(int i, const char *kind, const char *rest) {
    char line[512];
    int n = snprintf(line, sizeof line, "%llu %s %s %s\n", now_ns(), ids[i], kind, rest);
    if (n <= 0 || n >= (int)sizeof line || write(log_fd, line, (size_t)n) != n) {
        perror("chaos-cs: log");
        _exit(3);
    }
}

/* The same stamp for every section (a lock set's command is in both at once). */
static void stamp(const char *kind, const char *rest) {
    for (int i = 0; i < nids; i++) stamp_one(i, kind, rest);
}

/* Hold for hold_ms, stamping H every 10ms: what a killed section did after its last stamp is
 * invisible, so the stamps must be dense. */
static void hold(long hold_ms) {
    unsigned long long end = now_ns() + (unsigned long long)hold_ms * 1000000ull;
    for (;;) {
        unsigned long long t = now_ns();
        if (t >= end) break;
        unsigned long long left = end - t;
        unsigned long long slice = left < 10000000ull ? left : 10000000ull;
        struct timespec ts = { (time_t)(slice / 1000000000ull), (long)(slice % 1000000000ull) };
        nanosleep(&ts, NULL);
        stamp("H", "");
    }
}

/* Read the counter at path, or exit 3. */
static long read_counter(const char *path) {
    char buf[64];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        perror("chaos-cs: open counter");
        _exit(3);
    }
    ssize_t got = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (got <= 0) {
        fprintf(stderr, "chaos-cs: empty counter\n");
        _exit(3);
    }
    buf[got] = 0;
    return strtol(buf, NULL, 10);
}

/* Write n into path (a temporary file renamed into place), or exit 3. */
static void write_counter(const char *path, long n) {
    char buf[64];
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        perror("chaos-cs: open tmp");
        _exit(3);
    }
    int len = snprintf(buf, sizeof buf, "%ld\n", n);
    if (write(fd, buf, (size_t)len) != len) {
        perror("chaos-cs: write");
        _exit(3);
    }
    close(fd);
    if (rename(tmp, path) != 0) {
        perror("chaos-cs: rename");
        _exit(3);
    }
}

/* The start stamp of section i: pid, process group, its token and fence. One key:
 * DISTLOCK_TOKEN, DISTLOCK_FENCE; a lock set: DISTLOCK_TOKEN<i>, DISTLOCK_FENCE<i>. */
static void start(int i) {
    char tname[32] = "DISTLOCK_TOKEN", fname[32] = "DISTLOCK_FENCE";
    if (nids > 1) {
        snprintf(tname, sizeof tname, "DISTLOCK_TOKEN%d", i);
        snprintf(fname, sizeof fname, "DISTLOCK_FENCE%d", i);
    }
    const char *token = getenv(tname);
    const char *fence = getenv(fname);
    char rest[256];
    snprintf(rest, sizeof rest, "%d %d %s %s", (int)getpid(), (int)getpgrp(),
             token && *token ? token : "-", fence && *fence ? fence : "-");
    stamp_one(i, "S", rest);
}

int main(int argc, char **argv) {
    if (argc != 5 && argc != 7) {
        fprintf(stderr, "usage: cs LOG ID COUNTER HOLD_MS [ID2 COUNTER2]\n");
        return 2;
    }
    const char *counters[2] = { argv[3], NULL };
    ids[0] = argv[2];
    if (argc == 7) {
        ids[1] = argv[5];
        counters[1] = argv[6];
        nids = 2;
    }
    long hold_ms = atol(argv[4]);
    log_fd = open(argv[1], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (log_fd < 0) {
        perror("chaos-cs: open log");
        return 3;
    }
    for (int i = 0; i < nids; i++) start(i);

    if (strcmp(counters[0], "-") == 0) {
        hold(hold_ms);
        stamp("E", "");
        return 0;
    }

    long n[2];
    char rest[64];
    for (int i = 0; i < nids; i++) {
        n[i] = read_counter(counters[i]);
        snprintf(rest, sizeof rest, "%ld", n[i]);
        stamp_one(i, "R", rest);
    }

    hold(hold_ms);

    for (int i = 0; i < nids; i++) {
        stamp_one(i, "P", "");
        write_counter(counters[i], n[i] + 1);
        snprintf(rest, sizeof rest, "%ld", n[i] + 1);
        stamp_one(i, "W", rest);
    }
    stamp("E", "");
    return 0;
}
