#!/usr/bin/env python3
"""The distlock benchmark (issue 4): distlock (notify and spin) against flock(1), `etcdctl lock`
and a home-made redis-py lock, on servers of its own. Started by benches/run, which installs the
peers and builds distlock; see benches/README.md.

Four measurements, each tool side by side:
  1. overhead   wall time of `LOCK -- true` uncontended (tools alternated round-robin), and the
                wrapper's own peak RSS (VmHWM read under ptrace at its exit: `stamp peakrss`)
  2. handoff    holder's child exit -> waiter's child start, both stamped with CLOCK_MONOTONIC
  3. waiting    10 waiters on a lock held 10 s: server requests and CPU per waiter
  4. contention 8 client loops of `LOCK -- true` on one key for 15 s: throughput and fairness

Writes results.md, results.json and chart.svg (next to this file unless --out-dir).
"""

import argparse
import base64
import ctypes
import datetime
import json
import math
import os
import platform
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

TOOLS = ["distlock-notify", "distlock-spin", "flock", "etcdctl", "pylock"]
LABELS = {
    "distlock-notify": "distlock notify",
    "distlock-spin": "distlock spin",
    "flock": "flock(1)",
    "etcdctl": "etcdctl lock",
    "pylock": "redis-py Lock",
}
COLORS = {
    "distlock-notify": "#1f6fb4",
    "distlock-spin": "#8fbfe6",
    "flock": "#2e9e44",
    "etcdctl": "#f08a1c",
    "pylock": "#d0393b",
}
TESTS = ["overhead", "handoff", "waiting", "contention"]

# Settings of the full run and of --quick.
FULL = dict(rounds=30, runs=10, rss_runs=5, hyperfine_runs=20, handoffs=60, breakdown=20, settle=0.1,
            waiters=10, window=10.0, clients=8, duration=15.0, contention_rounds=3)
QUICK = dict(rounds=5, runs=4, rss_runs=2, hyperfine_runs=5, handoffs=12, breakdown=5, settle=0.1,
             waiters=10, window=3.0, clients=8, duration=4.0, contention_rounds=1)
DISTLOCK_TTL_S = 30  # distlock's default --ttl, which every distlock run here uses


class BenchError(Exception):
    pass


def log(msg):
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# ---------------------------------------------------------------------------------------------
# small utilities

def percentile(xs, p):
    s = sorted(xs)
    if not s:
        return float("nan")
    k = (len(s) - 1) * p / 100.0
    f = int(math.floor(k))
    c = min(f + 1, len(s) - 1)
    return s[f] + (s[c] - s[f]) * (k - f)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(pred, timeout, what, interval=0.005):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise BenchError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


def read_ns(path):
    with open(path) as f:
        return [int(x) for x in f.read().split()]


def nonempty(path):
    try:
        return os.path.getsize(path) > 0
    except OSError:
        return False


def cmd_output(argv, default="?"):
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=20)
        return (out.stdout + out.stderr).strip() or default
    except (OSError, subprocess.SubprocessError):
        return default


_libc = ctypes.CDLL(None, use_errno=True)


def _die_with_parent():
    # PR_SET_PDEATHSIG: whatever happens to the harness, nothing it started outlives it.
    _libc.prctl(1, signal.SIGKILL)


def machine_cpu():
    """(busy, total, steal) jiffies of all CPUs, from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    total = sum(v[:8])  # user nice system idle iowait irq softirq steal (guest is in user)
    return total - v[3] - v[4], total, v[7] if len(v) > 7 else 0


def task_cpu_ns(pid):
    """CPU time (ns) of every thread of pid that is still alive (schedstat), or None."""
    total = 0
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for t in tasks:
        try:
            with open(f"/proc/{pid}/task/{t}/schedstat") as f:
                total += int(f.read().split()[0])
        except (OSError, ValueError, IndexError):
            try:  # no schedstat: utime+stime in clock ticks
                with open(f"/proc/{pid}/task/{t}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                total += (int(fields[11]) + int(fields[12])) * 10**9 // os.sysconf("SC_CLK_TCK")
            except (OSError, ValueError, IndexError):
                pass
    return total


# ---------------------------------------------------------------------------------------------
# a minimal RESP client (the harness needs no redis-py of its own)

class RespError(Exception):
    pass


class Resp:
    def __init__(self, port, timeout=10):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.sock.makefile("rb")

    @property
    def addr(self):
        h, p = self.sock.getsockname()[:2]
        return f"{h}:{p}"

    def send(self, *args):
        parts = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            parts.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.sock.sendall(b"".join(parts))

    def cmd(self, *args):
        self.send(*args)
        return self.read()

    def read(self):
        line = self.f.readline()
        if not line:
            raise ConnectionError("redis closed the connection")
        t, rest = line[:1], line[1:-2]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            raise RespError(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            return None if n < 0 else self.f.read(n + 2)[:-2]
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RespError(f"bad reply {line!r}")

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def info(self, section):
        out = {}
        for line in self.cmd("INFO", section).decode().splitlines():
            if ":" in line and not line.startswith("#"):
                k, v = line.split(":", 1)
                out[k] = v
        return out

    def commandstats(self):
        stats = {}
        for k, v in self.info("commandstats").items():
            m = re.search(r"calls=(\d+)", v)
            if k.startswith("cmdstat_") and m:
                stats[k[len("cmdstat_"):]] = int(m.group(1))
        return stats

    def clients(self):
        rows = []
        for line in self.cmd("CLIENT", "LIST").decode().splitlines():
            rows.append(dict(kv.split("=", 1) for kv in line.split() if "=" in kv))
        return rows


class Monitor:
    """Top-level commands seen by MONITOR (Lua-internal ones are marked `lua` and dropped)."""

    LINE = re.compile(r'^\+(\d+\.\d+) \[\d+ ([^\]]+)\] "([^"]*)"')

    def __init__(self, port):
        self.conn = Resp(port, timeout=None)
        self.conn.cmd("MONITOR")
        self.seen = []  # (unix time, client addr, command)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        try:
            for raw in self.conn.f:
                m = self.LINE.match(raw.decode("utf-8", "replace"))
                if m and m.group(2) != "lua":
                    self.seen.append((float(m.group(1)), m.group(2), m.group(3).lower()))
        except (OSError, ValueError):
            pass

    def stop(self):
        try:
            self.conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.conn.close()
        self.thread.join(5)


# ---------------------------------------------------------------------------------------------
# the harness

class Bench:
    def __init__(self, args):
        self.args = args
        self.cfg = dict(QUICK if args.quick else FULL)
        self.tools = args.tools
        self.tmp = tempfile.mkdtemp(prefix="distlock-bench.")
        self.logdir = os.path.join(self.tmp, "logs")
        os.makedirs(self.logdir)
        self.procs = []
        self.redis_port = None
        self.etcd_port = None
        self.results = {"tools": self.tools, "labels": LABELS, "config": self.cfg,
                        "quick": bool(args.quick), "distlock_ttl_s": DISTLOCK_TTL_S}
        self.stamp = None
        self.rng = random.Random(4)
        self.distlock = args.distlock
        self.env = dict(os.environ, ETCDCTL_API="3")
        for k in ("DISTLOCK_WAIT_MODE", "DISTLOCK_TTL", "DISTLOCK_WAIT", "DISTLOCK_RENEW_EVERY",
                  "DISTLOCK_PREFIX", "DISTLOCK_QUIET", "ETCDCTL_ENDPOINTS"):
            self.env.pop(k, None)

    # -- processes ------------------------------------------------------------------------

    def spawn(self, argv, logname, **kw):
        logf = open(os.path.join(self.logdir, logname + ".log"), "ab")
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                             start_new_session=True, preexec_fn=_die_with_parent,
                             env=kw.pop("env", self.env), **kw)
        logf.close()
        p.logname = logname
        self.procs.append(p)
        return p

    def kill(self, p):
        if p.poll() is None:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(p.pid, sig)
                except OSError:
                    pass
                try:
                    p.wait(3)
                    break
                except subprocess.TimeoutExpired:
                    pass

    def log_tail(self, logname, n=15):
        path = os.path.join(self.logdir, logname + ".log")
        try:
            with open(path, errors="replace") as f:
                lines = f.read().splitlines()[-n:]
        except OSError:
            return ""
        return "\n".join("    | " + line for line in lines)

    def _watchdog(self, p, timeout):
        """A timer that kills p's process group if it is still running after timeout seconds:
        the harness itself then blocks in wait() instead of polling (no CPU taken from the
        processes it measures)."""
        p.expired = False

        def expire():
            p.expired = True
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except OSError:
                pass

        t = threading.Timer(timeout, expire)
        t.daemon = True
        t.start()
        return t

    def _check(self, p, rc, what, timeout):
        if p.expired:
            raise BenchError(f"{what}: still running after {timeout:g}s (killed)\n{self.log_tail(p.logname)}")
        if rc != 0:
            raise BenchError(f"{what}: exit status {rc}\n{self.log_tail(p.logname)}")

    def wait_ok(self, p, timeout, what):
        t = self._watchdog(p, timeout)
        try:
            rc = p.wait()
        finally:
            t.cancel()
        self._check(p, rc, what, timeout)

    def reap_rusage(self, p, timeout, what):
        """Wait for p with wait4, returning its rusage (and failing on a non-zero exit)."""
        t = self._watchdog(p, timeout)
        try:
            _pid, st, ru = os.wait4(p.pid, 0)
        finally:
            t.cancel()
        p.returncode = os.waitstatus_to_exitcode(st)
        self._check(p, p.returncode, what, timeout)
        return ru

    def cleanup(self):
        for p in reversed(self.procs):
            self.kill(p)
        self.procs = []
        if self.args.keep_tmp:
            log(f"kept {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # -- setup ----------------------------------------------------------------------------

    def build_stamp(self):
        src = os.path.join(HERE, "stamp.c")
        out = os.path.join(self.tmp, "stamp")
        for flags in (["-static"], []):
            r = subprocess.run(["gcc", "-O2", "-Wall", *flags, "-o", out, src],
                               capture_output=True, text=True)
            if r.returncode == 0:
                self.results["stamp_static"] = bool(flags)
                self.stamp = out
                return
        raise BenchError(f"cannot compile {src}:\n{r.stderr}")

    def start_redis(self):
        for _ in range(5):
            port = free_port()
            d = os.path.join(self.tmp, "redis")
            os.makedirs(d, exist_ok=True)
            p = self.spawn(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                            "--save", "", "--appendonly", "no", "--dir", d, "--logfile", "",
                            "--daemonize", "no", "--maxclients", "1000"], "redis-server")

            def up():
                if p.poll() is not None:
                    return "dead"
                try:
                    c = Resp(port, timeout=1)
                    ok = c.cmd("PING") == "PONG"
                    c.close()
                    return ok
                except OSError:
                    return False

            if wait_until(up, 15, "redis-server to answer") == "dead":
                continue
            self.redis_port = port
            self.redis_proc = p
            self.redis_url = f"redis://127.0.0.1:{port}"
            self.rc = Resp(port)
            log(f"redis-server on 127.0.0.1:{port}")
            return
        raise BenchError("redis-server would not start:\n" + self.log_tail("redis-server"))

    def start_etcd(self):
        env = dict(self.env)
        if platform.machine() in ("aarch64", "arm64"):
            env["ETCD_UNSUPPORTED_ARCH"] = "arm64"
        for _ in range(5):
            cport, pport = free_port(), free_port()
            if cport == pport:
                continue
            data = os.path.join(self.tmp, f"etcd-{cport}")
            p = self.spawn(["etcd", "--name", "bench", "--data-dir", data,
                            "--listen-client-urls", f"http://127.0.0.1:{cport}",
                            "--advertise-client-urls", f"http://127.0.0.1:{cport}",
                            "--listen-peer-urls", f"http://127.0.0.1:{pport}",
                            "--initial-advertise-peer-urls", f"http://127.0.0.1:{pport}",
                            "--initial-cluster", f"bench=http://127.0.0.1:{pport}",
                            "--initial-cluster-state", "new", "--log-level", "warn"],
                           "etcd", env=env)

            def up():
                if p.poll() is not None:
                    return "dead"
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{cport}/health", timeout=1) as r:
                        return json.load(r).get("health") == "true"
                except (OSError, ValueError):
                    return False

            if wait_until(up, 30, "etcd to be healthy", 0.05) == "dead":
                continue
            self.etcd_port = cport
            self.etcd_proc = p
            log(f"etcd on 127.0.0.1:{cport} (peer port {pport}, data in {data})")
            return
        raise BenchError("etcd would not start:\n" + self.log_tail("etcd"))

    def etcd_post(self, path, body):
        req = urllib.request.Request(f"http://127.0.0.1:{self.etcd_port}{path}",
                                     data=json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.load(r)

    def etcd_count_prefix(self, prefix):
        b64 = lambda s: base64.b64encode(s.encode()).decode()
        end = prefix[:-1] + chr(ord(prefix[-1]) + 1)
        r = self.etcd_post("/v3/kv/range", {"key": b64(prefix), "range_end": b64(end),
                                             "count_only": True})
        return int(r.get("count", 0))

    def etcd_msgs_received(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.etcd_port}/metrics", timeout=5) as r:
            text = r.read().decode()
        total = 0.0
        for line in text.splitlines():
            if line.startswith("grpc_server_msg_received_total{"):
                total += float(line.rsplit(" ", 1)[1])
        return total

    # -- the tools ------------------------------------------------------------------------

    def argv(self, tool, key, cmd, holder_opts=()):
        if tool.startswith("distlock-"):
            mode = tool.split("-", 1)[1]
            return [self.distlock, "--redis", self.redis_url, "-q", "run", "--key", key,
                    "--wait-mode", mode, *holder_opts, "--", *cmd]
        if tool == "flock":
            return ["flock", self.flock_path(key), *cmd]
        if tool == "etcdctl":
            return ["etcdctl", f"--endpoints=127.0.0.1:{self.etcd_port}", "lock", key, "--", *cmd]
        if tool == "pylock":
            return [sys.executable, os.path.join(HERE, "pylock.py"), "--redis", self.redis_url,
                    key, "--", *cmd]
        raise ValueError(tool)

    def flock_path(self, key):
        return os.path.join(self.tmp, f"flock-{key}.lock")

    def holders_snapshot(self, tool):
        """What identifies the holder before waiters start (its Redis connections)."""
        if tool in ("distlock-notify", "distlock-spin", "pylock"):
            return {c["addr"] for c in self.rc.clients()}
        return set()

    def waiting_count(self, tool, key, known):
        """How many waiters are really waiting for `key` now."""
        if tool in ("distlock-notify", "distlock-spin", "pylock"):
            n = 0
            for c in self.rc.clients():
                if c["addr"] in known or c.get("flags", "").find("O") >= 0:
                    continue
                if tool == "distlock-notify" and int(c.get("sub", "0")) > 0:
                    n += 1  # subscribed to the release channel
                elif tool == "distlock-spin" and c.get("cmd") == "evalsha":
                    n += 1  # has made a (failed) acquire attempt
                elif tool == "pylock" and c.get("cmd") == "set":
                    n += 1  # has made a (failed) SET NX
            return n
        if tool == "etcdctl":
            return self.etcd_count_prefix(key + "/") - 1  # the holder's key is there too
        if tool == "flock":
            ino = os.stat(self.flock_path(key)).st_ino
            with open("/proc/locks") as f:
                return sum(1 for line in f if "->" in line and line.split()[-3].endswith(f":{ino}"))
        raise ValueError(tool)

    def versions(self):
        v = {
            "distlock": cmd_output(["git", "-C", ROOT, "describe", "--always", "--dirty"]),
            "redis-server": cmd_output(["redis-server", "--version"]).split(" sha=")[0],
            "etcd": cmd_output(["etcd", "--version"]).splitlines()[0],
            "etcdctl": cmd_output(["etcdctl", "version"]).splitlines()[0],
            "flock": cmd_output(["flock", "--version"]),
            "python": platform.python_version() + f" ({sys.executable})",
        }
        try:
            import redis  # noqa: F401 (only its version is wanted)
            v["redis-py"] = redis.__version__
        except ImportError:
            v["redis-py"] = "not installed"
        return v

    # -- 1. overhead ----------------------------------------------------------------------

    def test_overhead(self):
        cfg = self.cfg
        rounds, runs = cfg["rounds"], cfg["runs"]
        log(f"1/4 overhead: {rounds} rounds x {runs} runs of `LOCK -- true` per tool, round-robin")
        true = shutil.which("true") or "/bin/true"
        per_round = {t: [] for t in self.tools}   # median of each round, ns
        all_runs = {t: [] for t in self.tools}
        cpu = {t: [] for t in self.tools}
        faults = {t: [] for t in self.tools}

        def batch(tool, n, tag):
            out = os.path.join(self.tmp, f"overhead-{tool}-{tag}")
            p = self.spawn([self.stamp, "time", str(n), out, "--",
                            *self.argv(tool, f"oh-{tool}", [true])], f"overhead-{tool}")
            self.wait_ok(p, 60 + n * 10, f"overhead runs of {tool}")
            with open(out) as f:
                rows = [[int(x) for x in line.split()] for line in f if line.strip()]
            os.unlink(out)
            return rows

        for tool in self.tools:  # warm-up: page cache, Redis script cache, etcd
            batch(tool, 3, "warmup")
        for r in range(rounds):
            k = r % len(self.tools)
            order = self.tools[k:] + self.tools[:k]
            if r % 2:
                order.reverse()
            for tool in order:
                rows = batch(tool, runs, r)
                xs = [row[0] for row in rows]
                all_runs[tool].extend(xs)
                cpu[tool].extend(row[1] for row in rows)
                faults[tool].extend(row[2] for row in rows)
                per_round[tool].append(statistics.median(xs))
            if (r + 1) % 10 == 0 or r + 1 == rounds:
                log(f"  round {r + 1}/{rounds}: " + ", ".join(
                    f"{t} {per_round[t][-1] / 1e6:.2f}ms" for t in self.tools))
        res = {}
        for tool in self.tools:
            xs = all_runs[tool]
            d = dict(median_ms=statistics.median(xs) / 1e6, min_ms=min(xs) / 1e6,
                     max_ms=max(xs) / 1e6, p90_ms=percentile(xs, 90) / 1e6,
                     round_medians_ms=[x / 1e6 for x in per_round[tool]], runs=len(xs),
                     cpu_median_ms=statistics.median(cpu[tool]) / 1e6,
                     minflt_median=statistics.median(faults[tool]))
            if "flock" in self.tools:
                ratios = [a / b for a, b in zip(per_round[tool], per_round["flock"])]
                d.update(ratio_median=statistics.median(ratios), ratio_min=min(ratios),
                         ratio_max=max(ratios), ratios=ratios)
            res[tool] = d
        self.results["overhead"] = res
        self.test_rss(true)
        self.test_hyperfine(true)

    def test_rss(self, true):
        n = self.cfg["rss_runs"]
        log(f"  peak RSS: {n} runs per tool under `stamp peakrss` (ptrace, VmHWM at the wrapper's exit)")
        raw = {t: [] for t in self.tools}
        for i in range(n):
            for tool in self.tools:
                out = os.path.join(self.tmp, f"rss-{tool}")
                p = self.spawn([self.stamp, "peakrss", out, "--",
                                *self.argv(tool, f"oh-{tool}", [true])], f"rss-{tool}")
                self.wait_ok(p, 60, f"peak RSS run of {tool}")
                hwm, maxrss, _st = (int(x) for x in open(out).read().split())
                os.unlink(out)
                raw[tool].append((hwm, maxrss))
        p = self.spawn([self.stamp, "peakrss", os.path.join(self.tmp, "rss-true"), "--", true],
                       "rss-true")
        self.wait_ok(p, 30, "peak RSS of true")
        true_kb = int(open(os.path.join(self.tmp, "rss-true")).read().split()[0])
        for tool in self.tools:
            hwms = [h for h, _ in raw[tool]]
            self.results["overhead"][tool].update(
                rss_median_mib=statistics.median(hwms) / 1024, rss_max_mib=max(hwms) / 1024,
                rss_raw_kb=raw[tool])
        self.results["rss_true_kb"] = true_kb

    def test_hyperfine(self, true):
        if not shutil.which("hyperfine"):
            log("  hyperfine not found: cross-check skipped")
            return
        n = self.cfg["hyperfine_runs"]
        log(f"  cross-check: hyperfine -N, {n} runs per tool (consecutive, not interleaved)")
        out = os.path.join(self.tmp, "hyperfine.json")
        cmds = [" ".join(self.argv(t, f"oh-{t}", [true])) for t in self.tools]
        p = self.spawn(["hyperfine", "-N", "--warmup", "3", "--runs", str(n), "--style", "none",
                        "--export-json", out, *cmds], "hyperfine")
        try:
            self.wait_ok(p, 600, "hyperfine")
        except BenchError as e:
            log(f"  hyperfine failed, cross-check skipped: {e}")
            return
        with open(out) as f:
            data = json.load(f)["results"]
        for tool, r in zip(self.tools, data):
            self.results["overhead"][tool]["hyperfine_mean_ms"] = r["mean"] * 1e3
            self.results["overhead"][tool]["hyperfine_median_ms"] = r["median"] * 1e3

    # -- 2. hand-off ----------------------------------------------------------------------

    def start_holder(self, tool, key, start_h, go, mark_opts, lock_opts, logname):
        """A holder whose command (`stamp mark`) stamps `start_h` and waits for a byte on `go`;
        returns it, once it holds the lock, with what identifies it (see holders_snapshot)."""
        holder = self.spawn(self.argv(tool, key, [self.stamp, "mark", start_h, "--go", go, *mark_opts],
                                      lock_opts), logname)
        wait_until(lambda: nonempty(start_h) or holder.poll() is not None, 30,
                   f"{tool} holder to take the lock")
        if holder.poll() is not None:
            self.wait_ok(holder, 1, f"{tool} holder")
        return holder, self.holders_snapshot(tool)

    def one_handoff(self, tool, key, tag, settle, monitor=None):
        """One hand-off; returns the latency in ns, or (latency, stages) with a monitor."""
        base = os.path.join(self.tmp, f"ho-{tool}-{tag}")
        start_h, exit_h, go, start_w = base + ".hs", base + ".he", base + ".go", base + ".ws"
        os.mkfifo(go)
        holder, known = self.start_holder(tool, key, start_h, go, ["--exit-out", exit_h, "--timeout", "60"],
                                          (), f"handoff-{tool}")
        waiter = self.spawn(self.argv(tool, key, [self.stamp, "mark", start_w]), f"handoff-{tool}")
        wait_until(lambda: waiter.poll() is not None or self.waiting_count(tool, key, known) >= 1,
                   30, f"{tool} waiter to wait")
        # A random settle time, so that a poller's phase is not locked to the harness's.
        time.sleep(settle * (1 + self.rng.random()))
        if nonempty(start_w) or waiter.poll() is not None:
            raise BenchError(f"{tool}: the waiter ran or exited while the holder held the lock\n"
                             + self.log_tail(f"handoff-{tool}"))
        offset = time.time_ns() - time.monotonic_ns()  # CLOCK_REALTIME - CLOCK_MONOTONIC
        fd = os.open(go, os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, b"x")
        os.close(fd)
        self.wait_ok(waiter, 30, f"{tool} waiter")
        self.wait_ok(holder, 30, f"{tool} holder")
        t_exit, t_start = read_ns(exit_h)[0], read_ns(start_w)[0]
        for f in (start_h, exit_h, go, start_w):
            os.unlink(f)
        if monitor is None:
            return t_start - t_exit
        # Where the time went, from MONITOR's (wall-clock, microsecond) timestamps of the
        # holder's release and the waiter's winning acquire attempt.
        time.sleep(0.02)
        mine = {self.rc.addr}
        ex, st = (t_exit + offset) / 1e9, (t_start + offset) / 1e9
        rel = [ts for ts, addr, c in monitor.seen if addr in known and addr not in mine
               and c == "evalsha" and ts >= ex - 0.0005]
        if not rel:
            return t_start - t_exit, None
        r = rel[0]
        # the waiter's first attempt after the release is the one that took the lock
        acq = [ts for ts, addr, c in monitor.seen if addr not in known and c == "evalsha" and ts >= r]
        if not acq:
            return t_start - t_exit, None
        a = acq[0]
        return t_start - t_exit, dict(exit_to_release_ms=(r - ex) * 1e3,
                                      release_to_acquire_ms=(a - r) * 1e3,
                                      acquire_to_start_ms=(st - a) * 1e3)

    def test_handoff(self):
        n, settle = self.cfg["handoffs"], self.cfg["settle"]
        log(f"2/4 hand-off: {n} per tool, tools alternated; holder's child exit -> waiter's child start")
        lat = {t: [] for t in self.tools}
        for i in range(n):
            k = i % len(self.tools)
            for tool in self.tools[k:] + self.tools[:k]:
                lat[tool].append(self.one_handoff(tool, f"ho-{tool}", i, settle))
            if (i + 1) % 20 == 0 or i + 1 == n:
                log(f"  {i + 1}/{n}: " + ", ".join(
                    f"{t} p50 {percentile(lat[t], 50) / 1e6:.2f}ms" for t in self.tools))
        res = {}
        for tool in self.tools:
            ms = [x / 1e6 for x in lat[tool]]
            res[tool] = dict(p50_ms=percentile(ms, 50), p90_ms=percentile(ms, 90),
                             p99_ms=percentile(ms, 99), min_ms=min(ms), max_ms=max(ms),
                             mean_ms=statistics.mean(ms), n=len(ms), raw_ms=ms)
        # A separate pass for distlock with MONITOR on (it slows Redis a little, so these
        # hand-offs are not among the figures above): where does a hand-off's time go?
        nb = self.cfg["breakdown"]
        for tool in [t for t in self.tools if t.startswith("distlock")]:
            mon = Monitor(self.redis_port)
            stages = []
            try:
                for i in range(nb):
                    _lat, st = self.one_handoff(tool, f"ho-{tool}", f"bd{i}", settle, mon)
                    if st:
                        stages.append(st)
            finally:
                mon.stop()
            if stages:
                res[tool]["breakdown"] = {k: statistics.median(s[k] for s in stages) for k in stages[0]}
                res[tool]["breakdown"]["n"] = len(stages)
                log(f"  {tool} breakdown (median of {len(stages)}): " + ", ".join(
                    f"{k} {v:.2f}" for k, v in res[tool]["breakdown"].items() if k != "n"))
        self.results["handoff"] = res

    # -- 3. waiting cost ------------------------------------------------------------------

    def test_waiting(self):
        nw, window = self.cfg["waiters"], self.cfg["window"]
        log(f"3/4 waiting cost: {nw} waiters on a lock held {window:g}s after they all wait")
        res = {}
        for tool in self.tools:
            key = f"wait-{tool}"
            base = os.path.join(self.tmp, f"wait-{tool}")
            start_h, go = base + ".hs", base + ".go"
            os.mkfifo(go)
            # distlock's holder renews every 20s instead of ttl/3 so that no renewal of its own
            # falls in the window; the waiters use the defaults (ttl 30s).
            opts = ["--renew-every", "20s"] if tool.startswith("distlock") else []
            holder, known = self.start_holder(tool, key, start_h, go, ["--timeout", "120"], opts,
                                              f"waiting-{tool}-holder")
            waiters = [self.spawn(self.argv(tool, key, ["true"]), f"waiting-{tool}")
                       for _ in range(nw)]
            wait_until(lambda: self.waiting_count(tool, key, known) >= nw
                       or any(w.poll() is not None for w in waiters), 60,
                       f"{nw} {tool} waiters to wait")
            if any(w.poll() is not None for w in waiters):
                raise BenchError(f"{tool}: a waiter exited while the lock was held\n"
                                 + self.log_tail(f"waiting-{tool}"))
            time.sleep(0.2)
            on_redis = tool in ("distlock-notify", "distlock-spin", "pylock")
            mon = Monitor(self.redis_port) if on_redis else None
            stats0 = self.rc.commandstats() if on_redis else {}
            etcd0 = self.etcd_msgs_received() if tool == "etcdctl" else None
            t0, w0 = time.monotonic(), time.time()
            cpu0 = [task_cpu_ns(w.pid) for w in waiters]
            time.sleep(window)
            cpu1 = [task_cpu_ns(w.pid) for w in waiters]
            t1, w1 = time.monotonic(), time.time()
            etcd1 = self.etcd_msgs_received() if tool == "etcdctl" else None
            stats1 = self.rc.commandstats() if on_redis else {}
            if mon:
                mon.stop()
            elapsed = t1 - t0
            fd = os.open(go, os.O_WRONLY | os.O_NONBLOCK)
            os.write(fd, b"x")
            os.close(fd)
            rusages = [self.reap_rusage(w, 120, f"{tool} waiter") for w in waiters]
            self.wait_ok(holder, 30, f"{tool} holder")
            os.unlink(go)
            d = dict(waiters=nw, window_s=elapsed)
            cpu = [b - a for a, b in zip(cpu0, cpu1) if a is not None and b is not None]
            d["window_cpu_ms_total"] = sum(cpu) / 1e6
            d["cpu_ms_per_waiter_s"] = sum(cpu) / 1e6 / nw / elapsed
            d["life_cpu_ms_total"] = sum(r.ru_utime + r.ru_stime for r in rusages) * 1e3
            if tool in ("distlock-notify", "distlock-spin", "pylock"):
                mine = {self.rc.addr}
                cmds = [c for ts, addr, c in mon.seen
                        if w0 <= ts <= w1 and addr not in known and addr not in mine]
                by_cmd = {}
                for c in cmds:
                    by_cmd[c] = by_cmd.get(c, 0) + 1
                d["requests"] = len(cmds)
                d["requests_by_command"] = by_cmd
                d["requests_per_waiter_s"] = len(cmds) / nw / elapsed
                d["commandstats_delta"] = {k: stats1.get(k, 0) - stats0.get(k, 0)
                                           for k in stats1 if stats1.get(k, 0) != stats0.get(k, 0)}
                d["server"] = "redis"
            elif tool == "etcdctl":
                d["requests"] = etcd1 - etcd0
                d["requests_per_waiter_s"] = (etcd1 - etcd0) / nw / elapsed
                d["server"] = "etcd"
            else:
                d["requests"] = 0
                d["requests_per_waiter_s"] = 0.0
                d["server"] = "none (kernel)"
            res[tool] = d
            log(f"  {tool}: {d['requests_per_waiter_s']:.3f} requests/waiter/s, "
                f"CPU {d['cpu_ms_per_waiter_s']:.3f} ms/waiter/s in the window, "
                f"{d['life_cpu_ms_total']:.0f} ms CPU for all {nw} waiters' whole lives")
        self.results["waiting"] = res

    # -- 4. contention --------------------------------------------------------------------

    def contention_segment(self, tool, dur, tag):
        """nc loops of `LOCK -- true` on one key for dur seconds; raw figures of that segment."""
        nc = self.cfg["clients"]
        true = shutil.which("true") or "/bin/true"
        key = f"cont-{tool}"
        start = time.monotonic_ns() + 500_000_000
        end = start + int(dur * 1e9)
        outs = [os.path.join(self.tmp, f"cont-{tool}-{tag}-{i}") for i in range(nc)]
        loops = [self.spawn([self.stamp, "loop", str(start), str(end), out, "--",
                             *self.argv(tool, key, [true])], f"contention-{tool}")
                 for out in outs]
        server = {"etcdctl": getattr(self, "etcd_proc", None), "flock": None}.get(
            tool, getattr(self, "redis_proc", None))
        on_redis = tool in ("distlock-notify", "distlock-spin", "pylock")
        time.sleep(max(0.0, (start - time.monotonic_ns()) / 1e9))
        stat0, srv0 = machine_cpu(), task_cpu_ns(server.pid) if server else None
        cs0 = self.rc.commandstats() if on_redis else {}
        time.sleep(max(0.0, (end - time.monotonic_ns()) / 1e9))
        stat1, srv1 = machine_cpu(), task_cpu_ns(server.pid) if server else None
        cs1 = self.rc.commandstats() if on_redis else {}
        for p in loops:
            self.wait_ok(p, 120, f"{tool} contention loop")
        counts, failed, late = [], 0, 0
        for out in outs:
            c, f, lt = (int(x) for x in open(out).read().split())
            counts.append(c)
            failed += f
            late += lt
        if failed:
            raise BenchError(f"{tool}: {failed} runs failed under contention\n"
                             + self.log_tail(f"contention-{tool}"))
        return dict(counts=counts, late=late, busy=[b - a for a, b in zip(stat0, stat1)],
                    server_ns=(srv1 - srv0) if server and srv0 is not None and srv1 is not None else None,
                    commandstats={k: cs1.get(k, 0) - cs0.get(k, 0) for k in cs1
                                  if cs1.get(k, 0) != cs0.get(k, 0)} if on_redis else None)

    def test_contention(self):
        nc, dur, rounds = self.cfg["clients"], self.cfg["duration"], self.cfg["contention_rounds"]
        seg = dur / rounds
        log(f"4/4 contention: {nc} client loops of `LOCK -- true` on one key for {dur:g}s per tool "
            f"({rounds} rounds of {seg:g}s, tools alternated)")
        segs = {t: [] for t in self.tools}
        for r in range(rounds):
            k = r % len(self.tools)
            for tool in self.tools[k:] + self.tools[:k]:
                segs[tool].append(self.contention_segment(tool, seg, r))
        res = {}
        for tool in self.tools:
            ss = segs[tool]
            counts = [sum(s["counts"][i] for s in ss) for i in range(nc)]
            done = sum(counts) or 1
            mean = statistics.mean(counts)
            devs = [(c - mean) / mean * 100 if mean else 0.0 for c in counts]
            busy = [sum(s["busy"][j] for s in ss) for j in range(3)]
            d = dict(total_per_s=sum(counts) / dur, counts=counts, mean=mean,
                     min=min(counts), max=max(counts), devs_pct=devs,
                     max_abs_dev_pct=max(abs(x) for x in devs), late=sum(s["late"] for s in ss),
                     duration_s=dur, rounds=rounds,
                     round_per_s=[sum(s["counts"]) / seg for s in ss],
                     machine_busy_pct=100.0 * busy[0] / busy[1] if busy[1] else None,
                     machine_steal_pct=100.0 * busy[2] / busy[1] if busy[1] else None)
            if all(s["server_ns"] is not None for s in ss):
                d["server_cpu_ms_per_cs"] = sum(s["server_ns"] for s in ss) / 1e6 / done
            if ss[0]["commandstats"] is not None:
                delta = {}
                for s in ss:
                    for key, n in s["commandstats"].items():
                        delta[key] = delta.get(key, 0) + n
                d["commandstats_delta"] = delta
                if tool == "pylock":  # SET NX per acquisition (the release is a Lua script)
                    d["attempts_per_cs"] = delta.get("set", 0) / done
                else:  # EVALSHA: acquire attempts + one release per critical section
                    d["attempts_per_cs"] = (delta.get("evalsha", 0) - done) / done
            res[tool] = d
        for tool in self.tools:
            d = res[tool]
            ratios = [a / b for a, b in zip(d["round_per_s"], res["flock"]["round_per_s"])]
            d.update(ratio=d["total_per_s"] / res["flock"]["total_per_s"], round_ratios=ratios)
            log(f"  {tool}: {d['total_per_s']:.1f} CS/s ({d['ratio']:.2f}x flock; rounds "
                + "/".join(f"{x:.2f}" for x in ratios) + f"), per client {d['min']}..{d['max']} "
                f"(max deviation {d['max_abs_dev_pct']:.1f}%), machine busy {d['machine_busy_pct']:.0f}%"
                + (f", {d['attempts_per_cs']:.2f} acquire attempts per CS" if "attempts_per_cs" in d else ""))
        self.results["contention"] = res

    # -- run ------------------------------------------------------------------------------

    def machine(self):
        cpu = "?"
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
        mem = "?"
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    mem = f"{int(line.split()[1]) / 1024 / 1024:.1f} GiB"
        return {"nproc": cmd_output(["nproc"]), "cpu": cpu, "kernel": " ".join(platform.uname()[2:5]),
                "memory": mem, "os": cmd_output(["sh", "-c", ". /etc/os-release && echo $PRETTY_NAME"]),
                "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC"),
                "loadavg_start": open("/proc/loadavg").read().split()[:3]}

    def run(self):
        t_start = time.monotonic()
        self.results["machine"] = self.machine()
        self.results["versions"] = self.versions()
        self.build_stamp()
        if any(t in self.tools for t in ("distlock-notify", "distlock-spin", "pylock")):
            self.start_redis()
        if "etcdctl" in self.tools:
            self.start_etcd()
        for test in self.args.tests:
            getattr(self, f"test_{test}")()
        self.results["machine"]["loadavg_end"] = open("/proc/loadavg").read().split()[:3]
        self.results["elapsed_s"] = time.monotonic() - t_start
        out = self.args.out_dir
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "results.json"), "w") as f:
            json.dump(self.results, f, indent=1)
        import report  # next to this file
        with open(os.path.join(out, "results.md"), "w") as f:
            f.write(report.markdown(self.results))
        with open(os.path.join(out, "chart.svg"), "w") as f:
            f.write(report.svg(self.results))
        log(f"done in {self.results['elapsed_s']:.0f}s: {out}/results.md, results.json, chart.svg")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--distlock", required=True, help="the distlock binary (release build)")
    ap.add_argument("--quick", action="store_true", help="a short smoke run (~1.5 min)")
    ap.add_argument("--tools", default=",".join(TOOLS), help="comma-separated subset of " + ",".join(TOOLS))
    ap.add_argument("--tests", default=",".join(TESTS), help="comma-separated subset of " + ",".join(TESTS))
    ap.add_argument("--out-dir", default=HERE, help="where results.md, results.json, chart.svg go")
    ap.add_argument("--keep-tmp", action="store_true", help="keep the temp dir (logs) for a look")
    ap.add_argument("--time-limit", type=int, default=1800, help="abort after this many seconds")
    args = ap.parse_args()
    args.tools = [t for t in args.tools.split(",") if t]
    args.tests = [t for t in args.tests.split(",") if t]
    for t in args.tools:
        if t not in TOOLS:
            ap.error(f"unknown tool {t}")
    for t in args.tests:
        if t not in TESTS:
            ap.error(f"unknown test {t}")
    if "flock" not in args.tools:
        ap.error("flock is the reference of every ratio: keep it in --tools")

    bench = Bench(args)

    def on_signal(signum, _frame):
        raise SystemExit(f"stopped by signal {signum}")

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGALRM):
        signal.signal(s, on_signal)
    signal.alarm(args.time_limit)
    try:
        bench.run()
    except BenchError as e:
        log(f"FAILED: {e}")
        log(f"logs of every process it started are in {bench.logdir} (kept)")
        args.keep_tmp = True
        return 1
    finally:
        signal.alarm(0)
        bench.cleanup()
    return 0


if __name__ == "__main__":
    sys.path.insert(0, HERE)
    sys.exit(main())
