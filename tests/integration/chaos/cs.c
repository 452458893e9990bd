/* The chaos test's critical section (tests/integration/chaos/mod.rs explains the design).
 *
 * usage: cs LOG ID COUNTER HOLD_MS
 *
 * Stamps every step on CLOCK_MONOTONIC into LOG, one write(2) per line on an O_APPEND
 * descriptor: S (start: pid, process group, DISTLOCK_TOKEN, DISTLOCK_FENCE), R n (read
 * COUNTER), H (every 10ms while holding for HOLD_MS), P (about to write), W n+1 (written and
 * renamed into place), E (end). The read-modify-write of COUNTER is deliberately not atomic:
 * only the lock keeps two sections from losing an update.
 *
 * COUNTER "-" makes a stamp-only section (S, H..., E): the semaphore's, where up to N sections
 * run at once by design, so a shared counter would lose updates without anything being wrong.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int log_fd = -1;
static const char *id;

static unsigned long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

/* One stamp, one write(2) on an O_APPEND descriptor. */
static void stamp(const char *kind, const char *rest) {
    char line[512];
    int n = snprintf(line, sizeof line, "%llu %s %s %s\n", now_ns(), id, kind, rest);
    if (n <= 0 || n >= (int)sizeof line || write(log_fd, line, (size_t)n) != n) {
        perror("chaos-cs: log");
        _exit(3);
    }
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

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: cs LOG ID COUNTER HOLD_MS\n");
        return 2;
    }
    id = argv[2];
    const char *counter = argv[3];
    long hold_ms = atol(argv[4]);
    log_fd = open(argv[1], O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (log_fd < 0) {
        perror("chaos-cs: open log");
        return 3;
    }
    const char *token = getenv("DISTLOCK_TOKEN");
    const char *fence = getenv("DISTLOCK_FENCE");
    char rest[256];
    snprintf(rest, sizeof rest, "%d %d %s %s", (int)getpid(), (int)getpgrp(),
             token && *token ? token : "-", fence && *fence ? fence : "-");
    stamp("S", rest);

    if (strcmp(counter, "-") == 0) {
        hold(hold_ms);
        stamp("E", "");
        return 0;
    }

    char buf[64];
    int fd = open(counter, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        perror("chaos-cs: open counter");
        return 3;
    }
    ssize_t got = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (got <= 0) {
        fprintf(stderr, "chaos-cs: empty counter\n");
        return 3;
    }
    buf[got] = 0;
    long n = strtol(buf, NULL, 10);
    snprintf(rest, sizeof rest, "%ld", n);
    stamp("R", rest);

    hold(hold_ms);

    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.%d", counter, (int)getpid());
    stamp("P", "");
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        perror("chaos-cs: open tmp");
        return 3;
    }
    int len = snprintf(buf, sizeof buf, "%ld\n", n + 1);
    if (write(fd, buf, (size_t)len) != len) {
        perror("chaos-cs: write");
        return 3;
    }
    close(fd);
    if (rename(tmp, counter) != 0) {
        perror("chaos-cs: rename");
        return 3;
    }
    snprintf(rest, sizeof rest, "%ld", n + 1);
    stamp("W", rest);
    stamp("E", "");
    return 0;
}
