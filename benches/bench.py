#!/usr/bin/env python3
"""The distlock benchmark (issues 4, 9 and 10): distlock (notify and spin) against flock(1),
`etcdctl lock` and a home-made redis-py lock, and distlock over several servers (Redlock,
Sentinel, Cluster) against distlock over one, on servers of its own. Started by benches/run,
which installs the peers and builds distlock; see benches/README.md.

Nine measurements, each tool side by side:
  1. overhead   wall time of `LOCK -- true` uncontended (tools alternated round-robin), and the
                wrapper's own peak RSS (VmHWM read under ptrace at its exit: `stamp peakrss`)
  2. handoff    holder's child exit -> waiter's child start, both stamped with CLOCK_MONOTONIC
  3. waiting    10 waiters on a lock held 10 s: server requests (per waiter, by connection)
                and CPU per waiter
  4. contention 8 client loops of `LOCK -- true` on one key for 15 s: throughput and fairness
  5. scaling    contention with 2 and with 16 waiters (3 and 17 loops of a 5 ms critical
                section): Redis commands per critical section, which must not grow with the
                line, and throughput
  6. semaphore  distlock only: 8 loops whose critical section sleeps 20 ms, `--limit 4` against
                the mutex: throughput, and the most sections inside at once (stamped)
  7. topologies        as 1, distlock notify over Redlock (3 and 5 independent primaries),
                       Sentinel (a primary, a replica, 3 sentinels) and Cluster (3 primaries),
                       against distlock over one server and flock in the same rounds
  8. topology-handoff  as 2, over Redlock 3 and 5, against distlock over one server and flock
  9. down-minority     Redlock over 3 with one node SIGSTOPped, and with one killed (connection
                       refused), against the healthy 3: the extra time of `LOCK -- true`, next to
                       the --node-timeout given

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
import struct
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
TESTS = ["overhead", "handoff", "waiting", "contention", "scaling", "semaphore",
         "topologies", "topology-handoff", "down-minority"]
REDIS_TOOLS = ("distlock-notify", "distlock-spin", "pylock")
# The topologies of issue 10, each distlock (notify mode) over servers of its own, measured in
# tests 7-9 against single-node distlock notify and flock whatever --tools says.
TOPOLOGIES = ["redlock3", "redlock5", "sentinel", "cluster"]
TOPOLOGY_TESTS = ("topologies", "topology-handoff", "down-minority")
LABELS.update({
    "redlock3": "Redlock, 3 nodes",
    "redlock5": "Redlock, 5 nodes",
    "sentinel": "Sentinel",
    "cluster": "Cluster, 3 primaries",
})
SENTINEL_SERVICE = "distlock-bench"

# Settings of the full run and of --quick. Every measurement that yields a target's ratio is
# split into rounds (the tools taking turns), and the ratio is the median of the per-round ones.
# The waiting window is at least 5 s, so that a notify waiter's refresh (every 2 s) is seen at
# least twice and its rate is measured between two of its own requests.
FULL = dict(rounds=30, runs=10, rss_runs=5, hyperfine_runs=20, handoffs=60, handoff_rounds=3,
            breakdown=20, settle=0.1, waiters=10, window=10.0, clients=8, duration=15.0,
            contention_rounds=3, line_waiters=[2, 16], line_section_ms=5, line_duration=9.0, line_rounds=3,
            sem_limit=4, sem_clients=8, sem_section_ms=20, sem_duration=9.0, sem_rounds=3,
            node_timeout_ms=200, minority_rounds=10, minority_runs=3)
QUICK = dict(rounds=5, runs=4, rss_runs=2, hyperfine_runs=5, handoffs=12, handoff_rounds=2,
             breakdown=5, settle=0.1, waiters=10, window=5.0, clients=8, duration=4.0,
             contention_rounds=1, line_waiters=[2, 16], line_section_ms=5, line_duration=3.0, line_rounds=1,
             sem_limit=4, sem_clients=8, sem_section_ms=20, sem_duration=3.0, sem_rounds=1,
             node_timeout_ms=200, minority_rounds=3, minority_runs=2)
DISTLOCK_TTL_S = 30  # distlock's default --ttl, which every distlock run here uses
DISTLOCK_PREFIX = "distlock:"  # the default --prefix (DISTLOCK_PREFIX is unset for every run)


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


def ratio_stats(xs, ys):
    """The per-round ratios xs[i] / ys[i], and their median, min and max."""
    rr = [a / b if b else float("nan") for a, b in zip(xs, ys)]
    ok = [x for x in rr if not math.isnan(x)] or [float("nan")]
    return dict(ratios=rr, median=statistics.median(ok), min=min(ok), max=max(ok))


def max_inside(sections):
    """The most intervals (start_ns, end_ns) open at one instant (an end before a start at the
    same nanosecond: touching is not overlapping)."""
    events = sorted([(a, 1) for a, _ in sections] + [(b, -1) for _, b in sections],
                    key=lambda e: (e[0], e[1]))
    inside = most = 0
    for _, d in events:
        inside += d
        most = max(most, inside)
    return most


def socket_owners(pids):
    """{local TCP port: index in pids} of the loopback connections that the processes pids hold
    (their fds' socket inodes, looked up in /proc/net/tcp): whose connection a MONITOR line is."""
    inodes = {}
    for i, pid in enumerate(pids):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes[int(link[8:-1])] = i
    owners = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 9 and int(fields[9]) in inodes:
                owners[int(fields[1].rsplit(":", 1)[1], 16)] = inodes[int(fields[9])]
    return owners


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
        self.port = port
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


class LineSampler:
    """The length of a distlock line (ZCARD of its queue), sampled every `every` seconds on a
    connection of its own between start() and stop(); `sent` says how many ZCARDs that cost."""

    def __init__(self, port, queue_key, every=0.05):
        self.conn = Resp(port)
        self.key, self.every = queue_key, every
        self.samples, self.sent = [], 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self.done.wait(self.every):
            self.sent += 1
            self.samples.append(self.conn.cmd("ZCARD", self.key))

    def start(self):
        self.thread.start()

    def stop(self):
        self.done.set()
        self.thread.join(5)
        self.conn.close()


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
        self.topo_urls = {}   # topology name -> the --redis URLs of distlock over it
        self.topo_ports = {}  # topology name -> ports of the data nodes (where its keys live)
        self.topo_opts = {}   # topology name -> more global options (--node-timeout)
        self.node_conns = {}  # port -> the harness's own connection to that server
        self.stopped_node = None
        self.topo_started = False
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
        for c in self.node_conns.values():
            c.close()
        if self.stopped_node is not None and self.stopped_node.poll() is None:
            os.killpg(self.stopped_node.pid, signal.SIGCONT)  # so that it can take its SIGTERM
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

    def launch_redis(self, logname, args=(), conf=None, port=None, tries=5):
        """A redis-server of ours on a free loopback port (or `port`), no persistence, answering
        PING; returns (process, port). args: more options; conf: the text of a configuration file
        (written to its own directory; Sentinel needs one, and rewrites it). With `port` given,
        one attempt, and None if the server would not start there."""
        for _ in range(1 if port else tries):
            at = port or free_port()
            d = os.path.join(self.tmp, f"{logname}-{at}")
            os.makedirs(d, exist_ok=True)
            argv = ["redis-server"]
            if conf is not None:
                path = os.path.join(d, "sentinel.conf")
                with open(path, "w") as f:
                    f.write(conf)
                argv += [path, "--sentinel"]
            else:
                argv += ["--save", "", "--appendonly", "no", "--maxclients", "1000"]
            p = self.spawn(argv + ["--port", str(at), "--bind", "127.0.0.1", "--dir", d,
                                   "--logfile", "", "--daemonize", "no", *args], logname)

            def up():
                if p.poll() is not None:
                    return "dead"
                try:
                    c = Resp(at, timeout=1)
                    ok = c.cmd("PING") == "PONG"
                    c.close()
                    return ok
                except OSError:
                    return False

            if wait_until(up, 15, f"{logname} to answer") == "dead":
                continue
            return p, at
        if port:
            return None
        raise BenchError(f"{logname} would not start:\n" + self.log_tail(logname))

    def start_redis(self):
        p, port = self.launch_redis("redis-server")
        self.redis_port = port
        self.redis_proc = p
        self.redis_url = f"redis://127.0.0.1:{port}"
        self.rc = Resp(port)
        log(f"redis-server on 127.0.0.1:{port}")

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

    # -- topologies of several servers (issue 10) ------------------------------------------
    #
    # Ported from the Rust fixtures in tests/integration/fixtures/topology/: the same settings that make
    # them start in seconds. Every server is ours, on a free loopback port, stopped at cleanup.

    def start_topologies(self):
        """The servers of the rows of issue 10, once: independent primaries for Redlock (5, or 3
        when only Redlock over 3 is measured), one primary with a replica watched by three
        sentinels, a Cluster of three primaries; and, for the down-minority test, a node to be
        stopped and the port of a node killed."""
        if self.topo_started:
            return
        self.topo_started = True
        want, tests = self.args.topologies, self.args.tests
        t0 = time.monotonic()
        n = 5 if "redlock5" in want else 3 if ("redlock3" in want or "down-minority" in tests) else 0
        ports = [self.launch_redis(f"redlock-node{i}")[1] for i in range(n)]
        for k in (3, 5):
            if f"redlock{k}" in want:
                self.topo_ports[f"redlock{k}"] = ports[:k]
        if n:
            log(f"Redlock: {n} independent redis-servers on 127.0.0.1:" + ",".join(map(str, ports)))
        if "down-minority" in tests:
            # The healthy Redlock over 3, and the same with its third node replaced by one that
            # test 9 stops, or by the port of one killed here (which then refuses connections).
            self.topo_ports["redlock3"] = ports[:3]
            self.stopped_node, stopped = self.launch_redis("redlock-stopped")
            killed_node, killed = self.launch_redis("redlock-killed")
            self.kill_hard(killed_node)
            self.topo_ports["redlock3-stopped"] = ports[:2] + [stopped]
            self.topo_ports["redlock3-refused"] = ports[:2] + [killed]
            log(f"  down minority: a node to stop on :{stopped}, a node killed on :{killed}")
        for name, nodes in self.topo_ports.items():
            self.topo_urls[name] = [f"redis://127.0.0.1:{p}" for p in nodes]
        if "sentinel" in want:
            self.start_sentinel()
        if "cluster" in want:
            self.start_cluster()
        self.results.setdefault("topology_setup", {})["seconds"] = time.monotonic() - t0
        self.results["topology_setup"]["urls"] = dict(self.topo_urls)

    def kill_hard(self, p):
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        p.wait(10)

    def node(self, port):
        """A connection of the harness's own to the server on `port` (kept)."""
        if port not in self.node_conns:
            self.node_conns[port] = Resp(port)
        return self.node_conns[port]

    def role(self, port):
        """(role, primary port or None, replica link up) from ROLE."""
        r = self.node(port).cmd("ROLE")
        if r[0] == b"master":
            return "master", None, True
        return r[0].decode(), int(r[2]), r[3] == b"connected"

    def start_sentinel(self):
        """One primary, one replica (synced before the sentinels start), three sentinels with a
        quorum of 2 that start knowing each other and the replica (`known-sentinel`,
        `known-replica`: left to discover them, they would need a hello round and an INFO round
        first). Redis 7.0 waits `repl-diskless-sync-delay` (5 s) before a full sync: 0 here."""
        repl = ["--repl-diskless-sync-delay", "0"]
        _p, primary = self.launch_redis("sentinel-primary", repl)
        _p, replica = self.launch_redis("sentinel-replica", repl + ["--replicaof", "127.0.0.1", str(primary)])
        wait_until(lambda: self.role(replica) == ("slave", primary, True), 30,
                   "the Sentinel replica to sync", 0.02)
        svc = SENTINEL_SERVICE
        for _ in range(5):
            ports = set()
            while len(ports) < 3:
                ports.add(free_port())
            ports = sorted(ports)
            ids = ["".join(self.rng.choice("0123456789abcdef") for _ in range(40)) for _ in ports]
            started = []
            for i, port in enumerate(ports):
                conf = (f"sentinel resolve-hostnames no\nsentinel myid {ids[i]}\n"
                        f"sentinel monitor {svc} 127.0.0.1 {primary} 2\n"
                        f"sentinel down-after-milliseconds {svc} 5000\n"
                        f"sentinel known-replica {svc} 127.0.0.1 {replica}\n")
                for j in range(3):
                    if j != i:
                        conf += f"sentinel known-sentinel {svc} 127.0.0.1 {ports[j]} {ids[j]}\n"
                r = self.launch_redis("sentinel", conf=conf, port=port)
                if r is None:
                    break
                started.append(r[0])
            if len(started) == 3:
                break
            for p in started:
                self.kill(p)
        else:
            raise BenchError("could not start three sentinels:\n" + self.log_tail("sentinel"))

        def flat(xs):
            return {xs[i].decode(): xs[i + 1].decode() for i in range(0, len(xs) - 1, 2)}

        def agree():
            # Every sentinel names the primary, calls it a plain master (not down), sees the
            # replica with its link up, and is linked to both other sentinels.
            for port in ports:
                c = self.node(port)
                addr = c.cmd("SENTINEL", "GET-MASTER-ADDR-BY-NAME", svc)
                if not addr or int(addr[1]) != primary:
                    return False
                if flat(c.cmd("SENTINEL", "MASTER", svc)).get("flags") != "master":
                    return False
                reps = [flat(x) for x in c.cmd("SENTINEL", "REPLICAS", svc)]
                if not any(r.get("port") == str(replica) and r.get("flags") == "slave"
                           and r.get("master-link-status") == "ok" for r in reps):
                    return False
                peers = [flat(x) for x in c.cmd("SENTINEL", "SENTINELS", svc)]
                if sum(1 for x in peers if x.get("flags") == "sentinel") != 2:
                    return False
            return True

        wait_until(agree, 60, "the sentinels to see the primary, the replica and each other", 0.05)
        self.topo_urls["sentinel"] = [f"redis+sentinel://{','.join(f'127.0.0.1:{p}' for p in ports)}/{svc}"]
        self.topo_ports["sentinel"] = [primary]  # where the lock lives
        log(f"Sentinel: primary :{primary}, replica :{replica}, sentinels :" + ",:".join(map(str, ports)))

    def start_cluster(self):
        """Three primaries (no replicas), each with a cluster bus port of its own (the default,
        port + 10000, may be taken or out of range), joined by `redis-cli --cluster create`;
        ready when every node reports cluster_state:ok with all 16384 slots and sees the other
        two connected and not failing."""
        ports = []
        for i in range(3):
            for _ in range(5):
                port, bus = free_port(), free_port()
                if port == bus:
                    continue
                r = self.launch_redis("cluster-node", ["--cluster-enabled", "yes", "--cluster-config-file",
                                                       "nodes.conf", "--cluster-port", str(bus)], port=port)
                if r:
                    ports.append(port)
                    break
            else:
                raise BenchError("could not start a cluster node:\n" + self.log_tail("cluster-node"))
        p = self.spawn(["redis-cli", "--cluster", "create", *(f"127.0.0.1:{x}" for x in ports),
                        "--cluster-replicas", "0", "--cluster-yes"], "cluster-create")
        self.wait_ok(p, 60, "redis-cli --cluster create")

        def ok():
            for port in ports:
                info = self.node(port).cmd("CLUSTER", "INFO").decode()
                if "cluster_state:ok" not in info or "cluster_slots_ok:16384" not in info:
                    return False
                rows = self.node(port).cmd("CLUSTER", "NODES").decode().splitlines()
                good = [r for r in rows if r.strip() and "fail" not in r.split()[2] and " connected" in r]
                if len(good) != 3:
                    return False
            return True

        wait_until(ok, 60, "the cluster to be ok on every node", 0.05)
        self.cluster_slots = [(int(a), int(b), int(owner[1]))
                              for a, b, owner, *_replicas in self.node(ports[0]).cmd("CLUSTER", "SLOTS")]
        self.topo_urls["cluster"] = ["redis+cluster://" + ",".join(f"127.0.0.1:{x}" for x in ports)]
        self.topo_ports["cluster"] = ports
        log(f"Cluster: 3 primaries on 127.0.0.1:" + ",".join(map(str, ports)))

    def cluster_key(self, prefix, avoid):
        """A lock key, prefix and a number, whose slot (that of its hash tag, `{KEY}`) is not
        served by the node on port `avoid`."""
        for n in range(1000):
            key = prefix + str(n)
            slot = self.node(avoid).cmd("CLUSTER", "KEYSLOT", f"{DISTLOCK_PREFIX}{{{key}}}")
            owner = next(port for a, b, port in self.cluster_slots if a <= slot <= b)
            if owner != avoid:
                return key
        raise BenchError(f"no key {prefix}N whose slot is not on :{avoid}")

    # -- the tools ------------------------------------------------------------------------

    def argv(self, tool, key, cmd, holder_opts=()):
        if tool in self.topo_urls:  # distlock (notify) over a topology of several servers
            urls = [a for u in self.topo_urls[tool] for a in ("--redis", u)]
            return [self.distlock, *urls, *self.topo_opts.get(tool, ()), "-q", "run", "--key", key,
                    "--wait-mode", "notify", *holder_opts, "--", *cmd]
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
        if tool in self.topo_ports:
            return {(p, c["addr"]) for p in self.topo_ports[tool] for c in self.node(p).clients()}
        if tool in REDIS_TOOLS:
            return {c["addr"] for c in self.rc.clients()}
        return set()

    def queue_key(self, key):
        return f"{DISTLOCK_PREFIX}{{{key}}}:queue"

    def waiting_count(self, tool, key, known):
        """How many waiters are really waiting for `key` now."""
        if tool.startswith("redlock"):
            # A Redlock keeps no line: a notify waiter tries (busy), subscribes on the first
            # node that lets it, tries again and sleeps until a release is published. It is
            # waiting once subscribed (the settle time covers its second try).
            return sum(1 for p in self.topo_ports[tool] for c in self.node(p).clients()
                       if (p, c["addr"]) not in known and int(c.get("sub", 0)) > 0)
        if tool == "distlock-notify":
            # Its place in line: a notify waiter subscribes to its own wake-up channel first,
            # then joins the line (so a waiter in line can no longer miss its turn).
            return self.rc.cmd("ZCARD", self.queue_key(key))
        if tool in ("distlock-spin", "pylock"):
            n = 0
            for c in self.rc.clients():
                if c["addr"] in known or c.get("flags", "").find("O") >= 0:
                    continue
                if tool == "distlock-spin" and c.get("cmd") == "evalsha":
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

    def linkage(self):
        """How the measured binary is linked: 'statically linked' (no ELF interpreter, what
        `make static` and the release artifacts are) or 'dynamically linked'."""
        try:
            with open(self.distlock, "rb") as f:
                head = f.read(64)
                if head[:4] != b"\x7fELF" or head[4] != 2:
                    return "not a 64-bit ELF"
                phoff, = struct.unpack_from("<Q", head, 32)
                phentsize, phnum = struct.unpack_from("<HH", head, 54)
                f.seek(phoff)
                table = f.read(phentsize * phnum)
            interp = any(struct.unpack_from("<I", table, i * phentsize)[0] == 3 for i in range(phnum))
            return "dynamically linked" if interp else "statically linked"
        except (OSError, struct.error):
            return "linkage unknown"

    def versions(self):
        v = {
            "distlock": cmd_output(["git", "-C", ROOT, "describe", "--always", "--dirty"])
            + f" ({self.linkage()}: {self.distlock})",
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
        log(f"1/9 overhead: {rounds} rounds x {runs} runs of `LOCK -- true` per tool, round-robin")
        true = shutil.which("true") or "/bin/true"
        per_round = {t: [] for t in self.tools}   # median of each round, ns
        all_runs = {t: [] for t in self.tools}
        cpu = {t: [] for t in self.tools}
        faults = {t: [] for t in self.tools}

        def batch(tool, n, tag):
            return self.time_runs(self.argv(tool, f"oh-{tool}", [true]), n, f"overhead-{tool}-{tag}",
                                  f"overhead-{tool}", f"overhead runs of {tool}")

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

    def time_runs(self, argv, n, tag, logname, what):
        """Run argv n times in a row under `stamp time`: a row per run, [wall ns, CPU ns, minor
        faults]."""
        out = os.path.join(self.tmp, tag)
        p = self.spawn([self.stamp, "time", str(n), out, "--", *argv], logname)
        self.wait_ok(p, 60 + n * 10, what)
        with open(out) as f:
            rows = [[int(x) for x in line.split()] for line in f if line.strip()]
        os.unlink(out)
        return rows

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
        # holder's release and the waiter's winning acquire attempt (over a Redlock: on the
        # monitored node, followed, when the nodes granted different fences, by the round that
        # raises the smaller ones; a request of the waiter after its command started is its
        # release, not that round).
        time.sleep(0.02)
        mine = {self.rc.addr}
        redlock = tool in self.topo_ports
        if redlock:
            mine = {self.node(monitor.port).addr}
            known = {addr for port, addr in known if port == monitor.port}
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
        if redlock and len(acq) > 1 and acq[1] < st:
            f = acq[1]
            return t_start - t_exit, dict(exit_to_release_ms=(r - ex) * 1e3,
                                          release_to_acquire_ms=(a - r) * 1e3,
                                          acquire_to_fence_ms=(f - a) * 1e3,
                                          fence_to_start_ms=(st - f) * 1e3)
        return t_start - t_exit, dict(exit_to_release_ms=(r - ex) * 1e3,
                                      release_to_acquire_ms=(a - r) * 1e3,
                                      acquire_to_start_ms=(st - a) * 1e3)

    def test_handoff(self):
        n, settle = self.cfg["handoffs"], self.cfg["settle"]
        log(f"2/9 hand-off: {n} per tool, tools alternated; holder's child exit -> waiter's child start")
        lat = {t: [] for t in self.tools}
        for i in range(n):
            k = i % len(self.tools)
            for tool in self.tools[k:] + self.tools[:k]:
                lat[tool].append(self.one_handoff(tool, f"ho-{tool}", i, settle))
            if (i + 1) % 20 == 0 or i + 1 == n:
                log(f"  {i + 1}/{n}: " + ", ".join(
                    f"{t} p50 {percentile(lat[t], 50) / 1e6:.2f}ms" for t in self.tools))
        res = {}
        # Rounds: consecutive blocks of hand-offs; a p50 per round and tool, for the per-round
        # ratios (a p99 needs every sample: it is taken over all of them only).
        nr = max(1, min(self.cfg["handoff_rounds"], n))
        for tool in self.tools:
            ms = [x / 1e6 for x in lat[tool]]
            res[tool] = dict(p50_ms=percentile(ms, 50), p90_ms=percentile(ms, 90),
                             p99_ms=percentile(ms, 99), min_ms=min(ms), max_ms=max(ms),
                             mean_ms=statistics.mean(ms), n=len(ms), raw_ms=ms,
                             round_p50_ms=[percentile([x for i, x in enumerate(ms) if i * nr // n == r], 50)
                                           for r in range(nr)])
        for tool in self.tools:
            st = ratio_stats(res[tool]["round_p50_ms"], res["flock"]["round_p50_ms"])
            res[tool].update(p50_ratio_median=st["median"], p50_ratio_min=st["min"],
                             p50_ratio_max=st["max"], p50_round_ratios=st["ratios"])
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
        log(f"3/9 waiting cost: {nw} waiters on a lock held {window:g}s after they all wait")
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
            on_redis = tool in REDIS_TOOLS
            mon = Monitor(self.redis_port) if on_redis else None
            stats0 = self.rc.commandstats() if on_redis else {}
            etcd0 = self.etcd_msgs_received() if tool == "etcdctl" else None
            # Whose connection each request came on: index 0 is the holder (its renewal thread
            # may connect after its connections were noted, and renew once in the window).
            pids = [holder.pid] + [w.pid for w in waiters]
            owners = socket_owners(pids) if on_redis else {}
            t0, w0 = time.monotonic(), time.time()
            cpu0 = [task_cpu_ns(w.pid) for w in waiters]
            time.sleep(window)
            cpu1 = [task_cpu_ns(w.pid) for w in waiters]
            t1, w1 = time.monotonic(), time.time()
            if on_redis:  # and any connection made during the window
                owners.update(socket_owners(pids))
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
            if tool in REDIS_TOOLS:
                mine = {self.rc.addr}
                port = lambda addr: int(addr.rsplit(":", 1)[1])
                by_holder = [c for ts, addr, c in mon.seen if w0 <= ts <= w1 and owners.get(port(addr)) == 0]
                seen = [(ts, addr, c) for ts, addr, c in mon.seen
                        if w0 <= ts <= w1 and addr not in known and addr not in mine
                        and owners.get(port(addr)) != 0]
                by_cmd = {}
                for _ts, _addr, c in seen:
                    by_cmd[c] = by_cmd.get(c, 0) + 1
                d["requests"] = len(seen)
                d["requests_by_command"] = by_cmd
                d["requests_per_waiter_s"] = len(seen) / nw / elapsed
                d["holder_requests"] = len(by_holder)
                # Each waiter's own requests, by the connections its process holds. Its rate is
                # taken between its first and last request in the window ((n - 1) / span), which
                # a window that starts just before one refresh and ends just after another does
                # not inflate; a waiter with fewer than two requests counts n / window.
                times = [[] for _ in waiters]
                unattributed = 0
                for ts, addr, _c in seen:
                    i = owners.get(port(addr))
                    if i is None:
                        unattributed += 1
                    else:
                        times[i - 1].append(ts)
                rates, gaps = [], []
                for ts in times:
                    ts.sort()
                    gaps.extend(b - a for a, b in zip(ts, ts[1:]))
                    rates.append((len(ts) - 1) / (ts[-1] - ts[0]) if len(ts) > 1 and ts[-1] > ts[0]
                                 else len(ts) / elapsed)
                d["requests_per_waiter"] = [len(ts) for ts in times]
                d["waiter_rates_per_s"] = rates
                d["worst_waiter_per_s"] = max(rates)
                d["min_gap_s"] = min(gaps) if gaps else None
                d["unattributed_requests"] = unattributed
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
            log(f"  {tool}: {d['requests_per_waiter_s']:.3f} requests/waiter/s"
                + (f" (worst waiter {d['worst_waiter_per_s']:.3f}/s, shortest gap "
                   + ("—" if d["min_gap_s"] is None else f"{d['min_gap_s']:.3f}s") + ")"
                   if "worst_waiter_per_s" in d else "") + ", "
                f"CPU {d['cpu_ms_per_waiter_s']:.3f} ms/waiter/s in the window, "
                f"{d['life_cpu_ms_total']:.0f} ms CPU for all {nw} waiters' whole lives")
        self.results["waiting"] = res

    # -- 4. contention, 5. scaling, 6. semaphore -------------------------------------------

    def contention_segment(self, tool, dur, tag, nc=None, key=None, cmd_for=None, lock_opts=()):
        """nc loops of `LOCK -- CMD` on one key for dur seconds (CMD: `true`, or cmd_for(i) for
        loop i); the raw figures of that segment. For distlock notify, the length of the line is
        sampled every 50 ms (ZCARD on a connection of its own, taken out of the command counts)."""
        nc = nc or self.cfg["clients"]
        true = shutil.which("true") or "/bin/true"
        key = key or f"cont-{tool}"
        cmd_for = cmd_for or (lambda i: [true])
        start = time.monotonic_ns() + 500_000_000
        end = start + int(dur * 1e9)
        outs = [os.path.join(self.tmp, f"{key}-{tag}-{i}") for i in range(nc)]
        loops = [self.spawn([self.stamp, "loop", str(start), str(end), out, "--",
                             *self.argv(tool, key, cmd_for(i), lock_opts)], f"contention-{tool}")
                 for i, out in enumerate(outs)]
        server = {"etcdctl": getattr(self, "etcd_proc", None), "flock": None}.get(
            tool, getattr(self, "redis_proc", None))
        on_redis = tool in REDIS_TOOLS
        sampler = LineSampler(self.redis_port, self.queue_key(key)) if tool == "distlock-notify" else None
        time.sleep(max(0.0, (start - time.monotonic_ns()) / 1e9))
        stat0, srv0 = machine_cpu(), task_cpu_ns(server.pid) if server else None
        cs0 = self.rc.commandstats() if on_redis else {}
        if sampler:
            sampler.start()
        time.sleep(max(0.0, (end - time.monotonic_ns()) / 1e9))
        if sampler:
            sampler.stop()
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
        delta = None
        if on_redis:
            delta = {k: cs1.get(k, 0) - cs0.get(k, 0) for k in cs1 if cs1.get(k, 0) != cs0.get(k, 0)}
            delta.pop("info", None)  # the harness's INFO commandstats
            if sampler:  # and its ZCARD samples
                delta["zcard"] = delta.get("zcard", 0) - sampler.sent
                if not delta["zcard"]:
                    del delta["zcard"]
        return dict(counts=counts, late=late, busy=[b - a for a, b in zip(stat0, stat1)],
                    server_ns=(srv1 - srv0) if server and srv0 is not None and srv1 is not None else None,
                    commandstats=delta, line=sampler.samples if sampler else None)

    def summarize(self, tool, ss, dur):
        """The figures of a tool's segments ss (dur seconds in all)."""
        nc = len(ss[0]["counts"])
        seg = dur / len(ss)
        counts = [sum(s["counts"][i] for s in ss) for i in range(nc)]
        done = sum(counts) or 1
        mean = statistics.mean(counts)
        devs = [(c - mean) / mean * 100 if mean else 0.0 for c in counts]
        busy = [sum(s["busy"][j] for s in ss) for j in range(3)]
        d = dict(total_per_s=sum(counts) / dur, counts=counts, mean=mean,
                 min=min(counts), max=max(counts), devs_pct=devs,
                 max_abs_dev_pct=max(abs(x) for x in devs), late=sum(s["late"] for s in ss),
                 duration_s=dur, rounds=len(ss), clients=nc,
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
            # Redis's work per critical section: every command it ran, those run by the Lua
            # scripts included (INFO commandstats counts them), per round and in all; and the
            # requests that came over the network (scripts and (un)subscriptions).
            d["commands_per_cs"] = sum(delta.values()) / done
            d["round_commands_per_cs"] = [sum(s["commandstats"].values()) / max(sum(s["counts"]), 1)
                                          for s in ss]
            net = ("evalsha", "eval", "set", "subscribe", "unsubscribe", "psubscribe", "punsubscribe",
                   "hello", "client|setinfo", "script|load", "ping")
            if tool == "pylock":
                d["requests_per_cs"] = sum(delta.get(k, 0) for k in net) / done
            else:  # distlock's scripts SET too: its requests are its scripts and subscriptions
                d["requests_per_cs"] = sum(delta.get(k, 0) for k in net if k != "set") / done
            d["subscribes_per_cs"] = delta.get("subscribe", 0) / done
        lines = [x for s in ss for x in (s.get("line") or [])]
        if lines:
            d["line_mean"] = statistics.mean(lines)
            d["line_max"] = max(lines)
        return d

    def alternate(self, runs, rounds):
        """Run each (name, segment function) once per round, in an order rotating by round;
        returns {name: [segment results]}."""
        segs = {name: [] for name, _ in runs}
        for r in range(rounds):
            k = r % len(runs)
            for name, fn in runs[k:] + runs[:k]:
                segs[name].append(fn(r))
        return segs

    def test_contention(self):
        nc, dur, rounds = self.cfg["clients"], self.cfg["duration"], self.cfg["contention_rounds"]
        seg = dur / rounds
        log(f"4/9 contention: {nc} client loops of `LOCK -- true` on one key for {dur:g}s per tool "
            f"({rounds} rounds of {seg:g}s, tools alternated)")
        segs = self.alternate([(t, lambda r, t=t: self.contention_segment(t, seg, r)) for t in self.tools],
                              rounds)
        res = {tool: self.summarize(tool, segs[tool], dur) for tool in self.tools}
        for tool in self.tools:
            d = res[tool]
            st = ratio_stats(d["round_per_s"], res["flock"]["round_per_s"])
            d.update(ratio=d["total_per_s"] / res["flock"]["total_per_s"], round_ratios=st["ratios"],
                     ratio_median=st["median"], ratio_min=st["min"], ratio_max=st["max"])
            log(f"  {tool}: {d['total_per_s']:.1f} CS/s ({st['median']:.2f}x flock; rounds "
                + "/".join(f"{x:.2f}" for x in st["ratios"]) + f"), per client {d['min']}..{d['max']} "
                f"(max deviation {d['max_abs_dev_pct']:.1f}%), machine busy {d['machine_busy_pct']:.0f}%"
                + (f", {d['attempts_per_cs']:.2f} acquire attempts per CS" if "attempts_per_cs" in d else ""))
        self.results["contention"] = res

    def section_segment(self, tool, dur, tag, nc, key, ms, lock_opts=()):
        """A contention segment whose critical section is `stamp section FILE ms` (sleeps ms,
        stamped at both ends): also the most sections inside at once, and how many ran."""
        files = [os.path.join(self.tmp, f"{key}-{tag}-{i}.sections") for i in range(nc)]
        out = self.contention_segment(tool, dur, tag, nc=nc, key=key, lock_opts=lock_opts,
                                      cmd_for=lambda i: [self.stamp, "section", files[i], str(ms)])
        got = []
        for f in files:
            if os.path.exists(f):
                got.extend(tuple(int(x) for x in line.split()) for line in open(f) if line.strip())
                os.unlink(f)
        out.update(max_inside=max_inside(got), sections=len(got))
        return out

    def test_scaling(self):
        """Contention with 2 and with 16 waiters: a release that wakes every waiter costs Redis
        work in proportion to the line; a hand-off to the first costs the same whatever its
        length. The critical section sleeps a few ms, so that the waiters really are in line
        (with `true`, 3 loops on 2 CPUs spend most of their time starting processes, and the
        "2 waiters" would mostly be 0 or 1); the mean length of the line is measured."""
        waiters, dur, rounds = self.cfg["line_waiters"], self.cfg["line_duration"], self.cfg["line_rounds"]
        ms = self.cfg["line_section_ms"]
        seg = dur / rounds
        log(f"5/9 scaling: {' and '.join(map(str, waiters))} waiters ({'/'.join(str(w + 1) for w in waiters)} "
            f"loops of `LOCK -- stamp section {ms}`), {dur:g}s per tool and line length "
            f"({rounds} rounds of {seg:g}s, tools alternated)")
        runs = [((t, w), lambda r, t=t, w=w: self.section_segment(t, seg, r, w + 1, f"line{w}-{t}", ms))
                for w in waiters for t in self.tools]
        segs = self.alternate(runs, rounds)
        res = {}
        for w in waiters:
            rw = {}
            for tool in self.tools:
                d = rw[tool] = self.summarize(tool, segs[(tool, w)], dur)
                d.update(waiters=w, max_inside=max(x["max_inside"] for x in segs[(tool, w)]),
                         sections=sum(x["sections"] for x in segs[(tool, w)]))
            for tool in self.tools:
                d = rw[tool]
                st = ratio_stats(d["round_per_s"], rw["flock"]["round_per_s"])
                d.update(ratio_median=st["median"], ratio_min=st["min"], ratio_max=st["max"],
                         round_ratios=st["ratios"])
                log(f"  {w} waiters, {tool}: {d['total_per_s']:.1f} CS/s ({st['median']:.2f}x flock), "
                    f"worst client {d['max_abs_dev_pct']:.1f}% off the mean, at most {d['max_inside']} inside"
                    + (f", {d['commands_per_cs']:.1f} Redis commands ({d['requests_per_cs']:.2f} requests) "
                       f"per CS" if "commands_per_cs" in d else "")
                    + (f", line {d['line_mean']:.1f} on average (max {d['line_max']})" if "line_mean" in d else ""))
            res[str(w)] = rw
        lo, hi = str(min(waiters)), str(max(waiters))
        for tool in self.tools:
            a, b = res[lo][tool], res[hi][tool]
            if "commands_per_cs" in a:
                st = ratio_stats(b["round_commands_per_cs"], a["round_commands_per_cs"])
                b.update(commands_growth=b["commands_per_cs"] / a["commands_per_cs"],
                         commands_growth_median=st["median"], commands_growth_min=st["min"],
                         commands_growth_max=st["max"], commands_growth_rounds=st["ratios"])
        self.results["scaling"] = dict(waiters=waiters, section_ms=ms, by_waiters=res)

    def test_semaphore(self):
        tools = [t for t in self.tools if t.startswith("distlock")]
        if not tools:
            log("6/9 semaphore: no distlock tool selected: skipped")
            return
        n, nc, ms = self.cfg["sem_limit"], self.cfg["sem_clients"], self.cfg["sem_section_ms"]
        dur, rounds = self.cfg["sem_duration"], self.cfg["sem_rounds"]
        seg = dur / rounds
        log(f"6/9 semaphore: {nc} loops of `LOCK -- stamp section {ms}` (a {ms} ms critical section), "
            f"--limit {n} against the mutex, {dur:g}s each ({rounds} rounds of {seg:g}s, alternated)")
        runs = [((t, v), lambda r, t=t, v=v: self.section_segment(
                    t, seg, r, nc, f"sem-{v}-{t}", ms, ["--limit", str(n)] if v == "limit" else []))
                for t in tools for v in ("mutex", "limit")]
        segs = self.alternate(runs, rounds)
        res = {}
        for tool in tools:
            d = {}
            for v in ("mutex", "limit"):
                s = d[v] = self.summarize(tool, segs[(tool, v)], dur)
                s.update(max_inside=max(x["max_inside"] for x in segs[(tool, v)]),
                         sections=sum(x["sections"] for x in segs[(tool, v)]),
                         limit=n if v == "limit" else 1)
            st = ratio_stats(d["limit"]["round_per_s"], d["mutex"]["round_per_s"])
            d.update(ratio=d["limit"]["total_per_s"] / d["mutex"]["total_per_s"], ratio_median=st["median"],
                     ratio_min=st["min"], ratio_max=st["max"], round_ratios=st["ratios"])
            log(f"  {tool}: --limit {n} {d['limit']['total_per_s']:.1f} CS/s, mutex {d['mutex']['total_per_s']:.1f} "
                f"CS/s: {st['median']:.2f}x (rounds " + "/".join(f"{x:.2f}" for x in st["ratios"])
                + f"); at most {d['limit']['max_inside']} inside at once ({d['limit']['sections']} sections), "
                f"mutex {d['mutex']['max_inside']} ({d['mutex']['sections']})")
            res[tool] = d
        self.results["semaphore"] = dict(limit=n, clients=nc, section_ms=ms, tools=res)

    # -- 7. topologies, 8. hand-off over Redlock, 9. a down minority (issue 10) ---------------

    def test_topologies(self):
        """`LOCK -- true` uncontended over each topology, in the same rounds as single-node
        distlock (notify) and flock: the ratio to each, per round."""
        self.start_topologies()
        rounds, runs = self.cfg["rounds"], self.cfg["runs"]
        variants = ["distlock-notify", *self.args.topologies, "flock"]
        log(f"7/9 topologies: {rounds} rounds x {runs} runs of `LOCK -- true` over "
            + ", ".join(variants) + ", round-robin")
        true = shutil.which("true") or "/bin/true"
        per_round = {v: [] for v in variants}
        rows_of = {v: [] for v in variants}
        keys = {v: f"topo-{v}" for v in variants}
        if "cluster" in variants:
            # The usual case: the lock's slot is served by another node than the first seed.
            keys["cluster"] = self.cluster_key("topo-cluster-", avoid=self.topo_ports["cluster"][0])

        def batch(v, n, tag):
            return self.time_runs(self.argv(v, keys[v], [true]), n, f"topo-{v}-{tag}",
                                  f"topologies-{v}", f"overhead runs over {v}")

        for v in variants:  # warm-up (and a check that every topology answers)
            batch(v, 3, "warmup")
        for r in range(rounds):
            k = r % len(variants)
            order = variants[k:] + variants[:k]
            if r % 2:
                order.reverse()
            for v in order:
                rows = batch(v, runs, r)
                rows_of[v].extend(rows)
                per_round[v].append(statistics.median(row[0] for row in rows))
            if (r + 1) % 10 == 0 or r + 1 == rounds:
                log(f"  round {r + 1}/{rounds}: " + ", ".join(
                    f"{v} {per_round[v][-1] / 1e6:.2f}ms" for v in variants))
        res = {}
        for v in variants:
            xs = [row[0] for row in rows_of[v]]
            d = res[v] = dict(median_ms=statistics.median(xs) / 1e6, min_ms=min(xs) / 1e6,
                              max_ms=max(xs) / 1e6, p90_ms=percentile(xs, 90) / 1e6, runs=len(xs),
                              round_medians_ms=[x / 1e6 for x in per_round[v]],
                              cpu_median_ms=statistics.median(row[1] for row in rows_of[v]) / 1e6)
            for ref, name in (("distlock-notify", "single"), ("flock", "flock")):
                st = ratio_stats(per_round[v], per_round[ref])
                d.update({f"ratio_{name}_median": st["median"], f"ratio_{name}_min": st["min"],
                          f"ratio_{name}_max": st["max"], f"ratio_{name}_rounds": st["ratios"]})
            log(f"  {v}: {d['median_ms']:.2f} ms, {d['ratio_single_median']:.2f}x single-node distlock "
                f"({d['ratio_single_min']:.2f}–{d['ratio_single_max']:.2f}), {d['ratio_flock_median']:.2f}x flock, "
                f"CPU {d['cpu_median_ms']:.2f} ms")
        self.results["topologies"] = dict(variants=variants, by_variant=res, keys=keys,
                                          urls={v: self.topo_urls.get(v) for v in variants})

    def test_topology_handoff(self):
        """Hand-off latency over Redlock against single-node distlock and flock, as in 2."""
        self.start_topologies()
        redlocks = [t for t in self.args.topologies if t.startswith("redlock")]
        if not redlocks:
            log("8/9 topology hand-off: no Redlock selected: skipped")
            return
        variants = ["distlock-notify", *redlocks, "flock"]
        n, settle = self.cfg["handoffs"], self.cfg["settle"]
        log(f"8/9 topology hand-off: {n} per variant over " + ", ".join(variants) + ", alternated")
        lat = {v: [] for v in variants}
        for i in range(n):
            k = i % len(variants)
            for v in variants[k:] + variants[:k]:
                lat[v].append(self.one_handoff(v, f"tho-{v}", f"t{i}", settle))
            if (i + 1) % 20 == 0 or i + 1 == n:
                log(f"  {i + 1}/{n}: " + ", ".join(
                    f"{v} p50 {percentile(lat[v], 50) / 1e6:.2f}ms" for v in variants))
        nr = max(1, min(self.cfg["handoff_rounds"], n))
        res = {}
        for v in variants:
            ms = [x / 1e6 for x in lat[v]]
            res[v] = dict(p50_ms=percentile(ms, 50), p90_ms=percentile(ms, 90), p99_ms=percentile(ms, 99),
                          min_ms=min(ms), max_ms=max(ms), mean_ms=statistics.mean(ms), n=len(ms), raw_ms=ms,
                          round_p50_ms=[percentile([x for i, x in enumerate(ms) if i * nr // n == r], 50)
                                        for r in range(nr)])
        for v in variants:
            d = res[v]
            for ref, name in (("distlock-notify", "single"), ("flock", "flock")):
                st = ratio_stats(d["round_p50_ms"], res[ref]["round_p50_ms"])
                d.update({f"p50_ratio_{name}_median": st["median"], f"p50_ratio_{name}_min": st["min"],
                          f"p50_ratio_{name}_max": st["max"], f"p50_ratio_{name}_rounds": st["ratios"]})
            log(f"  {v}: p50 {d['p50_ms']:.2f} ms ({d['p50_ratio_single_median']:.2f}x single-node distlock, "
                f"{d['p50_ratio_flock_median']:.2f}x flock), p99 {d['p99_ms']:.2f} ms, max {d['max_ms']:.2f} ms")
        # Where a Redlock hand-off's time goes: a separate pass with MONITOR on its first node
        # (the one its waiters subscribe to), as test 2 does for one server.
        nb = self.cfg["breakdown"]
        for v in redlocks:
            mon = Monitor(self.topo_ports[v][0])
            stages = []
            try:
                for i in range(nb):
                    _lat, st = self.one_handoff(v, f"tho-{v}", f"bd{i}", settle, mon)
                    if st:
                        stages.append(st)
            finally:
                mon.stop()
            if stages:
                # Hand-offs without a fence round (the nodes agreed) and with one, apart.
                plain = [x for x in stages if "acquire_to_start_ms" in x]
                fenced = [x for x in stages if "fence_to_start_ms" in x]
                main = plain if len(plain) >= len(fenced) else fenced
                bd = res[v]["breakdown"] = {k: statistics.median(x[k] for x in main) for k in main[0]}
                bd["n"] = len(main)
                bd["with_fence_round"] = len(fenced)
                log(f"  {v} breakdown (median of {len(stages)}, MONITOR on its first node): " + ", ".join(
                    f"{k} {x:.2f}" for k, x in bd.items() if k not in ("n", "with_fence_round")))
        self.results["topology_handoff"] = dict(variants=variants, by_variant=res)

    def test_down_minority(self):
        """Redlock over 3 with one node SIGSTOPped (it accepts connections, answers nothing) and
        with one killed (connection refused), against the healthy 3: `LOCK -- true`
        uncontended, every variant with the same explicit --node-timeout, in rotating rounds.
        The extra time per run (a round's median minus the healthy one's) is what a down
        minority costs; the target is at most one node timeout."""
        self.start_topologies()
        nt = self.cfg["node_timeout_ms"]
        rounds, runs = self.cfg["minority_rounds"], self.cfg["minority_runs"]
        variants = {"healthy": "redlock3", "stopped": "redlock3-stopped", "refused": "redlock3-refused"}
        for v in variants.values():
            self.topo_opts[v] = ["--node-timeout", f"{nt}ms"]
        true = shutil.which("true") or "/bin/true"
        log(f"9/9 down minority: Redlock over 3, --node-timeout {nt}ms; healthy, one node SIGSTOPped, one "
            f"killed (connection refused); {rounds} rounds x {runs} runs of `LOCK -- true`")
        os.killpg(self.stopped_node.pid, signal.SIGSTOP)
        per_round = {v: [] for v in variants}
        walls = {v: [] for v in variants}
        try:
            names = list(variants)
            for v in names:  # warm-up
                self.time_runs(self.argv(variants[v], f"min-{v}", [true]), 1, f"min-{v}-warmup",
                               f"minority-{v}", f"down-minority runs ({v})")
            for r in range(rounds):
                k = r % len(names)
                for v in names[k:] + names[:k]:
                    rows = self.time_runs(self.argv(variants[v], f"min-{v}", [true]), runs, f"min-{v}-{r}",
                                          f"minority-{v}", f"down-minority runs ({v})")
                    xs = [row[0] for row in rows]
                    walls[v].extend(xs)
                    per_round[v].append(statistics.median(xs))
        finally:
            os.killpg(self.stopped_node.pid, signal.SIGCONT)
            for v in variants.values():
                self.topo_opts.pop(v, None)
        res = {}
        for v in variants:
            xs = walls[v]
            extra = [(a - b) / 1e6 for a, b in zip(per_round[v], per_round["healthy"])]
            res[v] = dict(median_ms=statistics.median(xs) / 1e6, min_ms=min(xs) / 1e6, max_ms=max(xs) / 1e6,
                          runs=len(xs), round_medians_ms=[x / 1e6 for x in per_round[v]],
                          extra_ms_median=statistics.median(extra), extra_ms_min=min(extra),
                          extra_ms_max=max(extra), extra_ms_rounds=extra,
                          extra_timeouts=statistics.median(extra) / nt)
            log(f"  {v}: {res[v]['median_ms']:.1f} ms per run, {res[v]['extra_ms_median']:+.1f} ms on the healthy "
                f"Redlock ({res[v]['extra_timeouts']:.2f} node timeouts; rounds "
                f"{res[v]['extra_ms_min']:+.1f}..{res[v]['extra_ms_max']:+.1f} ms)")
        self.results["down_minority"] = dict(node_timeout_ms=nt, nodes=3, variants=res)

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
        if any(t in self.tools for t in REDIS_TOOLS) or any(t in self.args.tests for t in TOPOLOGY_TESTS):
            self.start_redis()
        if "etcdctl" in self.tools:
            self.start_etcd()
        for test in self.args.tests:
            getattr(self, f"test_{test.replace('-', '_')}")()
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
    ap.add_argument("--quick", action="store_true", help="a short smoke run (~3 min)")
    ap.add_argument("--tools", default=",".join(TOOLS), help="comma-separated subset of " + ",".join(TOOLS))
    ap.add_argument("--tests", default=",".join(TESTS), help="comma-separated subset of " + ",".join(TESTS))
    ap.add_argument("--topologies", default=",".join(TOPOLOGIES),
                    help="for tests 7-9, comma-separated subset of " + ",".join(TOPOLOGIES))
    ap.add_argument("--out-dir", default=HERE, help="where results.md, results.json, chart.svg go")
    ap.add_argument("--keep-tmp", action="store_true", help="keep the temp dir (logs) for a look")
    ap.add_argument("--time-limit", type=int, default=1800, help="abort after this many seconds")
    args = ap.parse_args()
    args.tools = [t for t in args.tools.split(",") if t]
    args.tests = [t for t in args.tests.split(",") if t]
    args.topologies = [t for t in args.topologies.split(",") if t]
    for t in args.topologies:
        if t not in TOPOLOGIES:
            ap.error(f"unknown topology {t}")
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
