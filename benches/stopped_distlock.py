#!/usr/bin/env python3
"""Issue 18's scenario, measured: `distlock run --ttl 3s` whose command writes a timestamp
every 100ms is stopped alone (SIGSTOP of distlock, not of its command) for 6s, while a second
`distlock run` on the same key waits (its command writes its start and end). Prints, per run:
how many of the first command's writes landed inside the second holder's section, and the
time from the lock's expiry (the first GET that no longer shows the first token, every ~2ms;
and the earliest expiry the last PTTL allowed) to the first command's death (polled in /proc),
with both runs' exits. Starts its own redis-server on a free loopback port.

usage: python3 benches/stopped_distlock.py PATH/TO/distlock [RUNS]    (needs redis-py)
"""
import os, signal, socket, subprocess, sys, tempfile, threading, time

import redis

BIN = sys.argv[1]
RUNS = int(sys.argv[2]) if len(sys.argv) > 2 else 1


def free_port():
    """A free port below the ephemeral range (as tests/integration/fixtures/server.rs picks them)."""
    import random
    while True:
        port = random.randrange(20000, 32000)
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", port))
            return port
        except OSError:
            continue
        finally:
            s.close()


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    except OSError:
        return False


def wait_for(what, cond, bound=20):
    end = time.monotonic() + bound
    while not cond():
        if time.monotonic() > end:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.002)


def one(port, tmp, n):
    r = redis.Redis(port=port)
    key = f"distlock:{{pause-test-{n}}}"
    log = os.path.join(tmp, f"log{n}")
    pid_a = os.path.join(tmp, f"pid{n}")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DISTLOCK_")}
    env["DISTLOCK_REDIS_URL"] = f"redis://127.0.0.1:{port}"
    a = subprocess.Popen(
        [BIN, "run", "-k", f"pause-test-{n}", "--ttl", "3s", "--", "sh", "-c",
         f'echo $$ > {pid_a}; while :; do echo "A $(date +%s%N)" >> {log}; sleep 0.1; done'],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_for("A's first write", lambda: os.path.exists(log) and os.path.getsize(log) > 0)
    cmd_a = int(open(pid_a).read())
    token_a = r.get(key)
    b = subprocess.Popen(
        [BIN, "run", "-k", f"pause-test-{n}", "--", "sh", "-c",
         f'echo "B start $(date +%s%N)" >> {log}; sleep 2; echo "B end $(date +%s%N)" >> {log}'],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_for("B in line", lambda: r.zcard(f"{key}:queue") == 1)
    # Let one renewal happen so the lock has its full TTL, as in the issue.
    wait_for("a renewal", lambda: r.pttl(key) > 2900, bound=5)
    seen = {"expiry": None, "dead": None, "bound": None}
    stop = threading.Event()

    def watch():
        m = redis.Redis(port=port)
        while not stop.is_set():
            sent = time.time_ns()
            pipe = m.pipeline(transaction=False)
            pipe.get(key)
            pipe.pttl(key)
            v, pttl = pipe.execute()
            if v == token_a and pttl > 0:
                seen["bound"] = sent + pttl * 1_000_000
            if seen["expiry"] is None and v != token_a:
                seen["expiry"] = time.time_ns()
            if seen["dead"] is None and not alive(cmd_a):
                seen["dead"] = time.time_ns()
            time.sleep(0.001)

    t = threading.Thread(target=watch)
    t.start()
    os.kill(a.pid, signal.SIGSTOP)
    stopped = time.monotonic()
    while time.monotonic() - stopped < 6.0:
        time.sleep(0.01)
    os.kill(a.pid, signal.SIGCONT)
    a_err = a.communicate(timeout=30)[1]
    b_err = b.communicate(timeout=30)[1]
    stop.set()
    t.join()
    lines = open(log).read().split("\n")
    a_writes = [int(l.split()[1]) for l in lines if l.startswith("A ")]
    b_start = next(int(l.split()[2]) for l in lines if l.startswith("B start"))
    b_end = next(int(l.split()[2]) for l in lines if l.startswith("B end"))
    inside = [w for w in a_writes if b_start <= w <= b_end]
    print(f"run {n}: A exit {a.returncode}, B exit {b.returncode}")
    print(f"  A stderr: {a_err.strip()}")
    print(f"  writes of A inside B's section: {len(inside)}"
          + (f" (last {(inside[-1] - b_start) / 1e9:.2f}s after B started)" if inside else ""))
    print(f"  A's last write {(a_writes[-1] - b_start) / 1e9:+.3f}s from B's start")
    exp, dead, bound = seen["expiry"], seen["dead"], seen["bound"]
    print(f"  A's command died {(dead - exp) / 1e6:+.0f}ms from the observed expiry "
          f"({(dead - bound) / 1e6:+.0f}ms from the earliest possible expiry by PTTL)")
    return len(inside), (dead - exp) / 1e6


def main():
    port = free_port()
    tmp = tempfile.mkdtemp()
    srv = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                            "--save", "", "--appendonly", "no", "--dir", tmp],
                           stdout=subprocess.DEVNULL)
    try:
        def up():
            try:
                return redis.Redis(port=port).ping()
            except redis.exceptions.ConnectionError:
                return False
        wait_for("redis", up)
        for n in range(RUNS):
            one(port, tmp, n)
    finally:
        srv.kill()


main()
