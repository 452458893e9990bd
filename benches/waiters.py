#!/usr/bin/env python3
"""One connection per waiter (issue 26): what a waiter in line costs Redis, before and after the
doorbell, measured in the same run with two distlock binaries. See benches/README.md, section
"One connection per waiter (issue 26)".

  waiters.py --before OLD/distlock --after NEW/distlock scale [--runs 3] [--waiters 100,1000]
      One holder and N waiters on one lock, on one server, on Sentinel (a primary, a replica,
      three sentinels) and on a Redis Cluster of three primaries (started as bench.py starts
      them): connections per waiter (INFO clients: connected_clients minus the baseline with the
      holder alone, summed over every server a waiter may talk to, / N), blocked_clients, the
      subscribed clients (CLIENT LIST: flag P or sub>0), and Redis memory per waiter
      (used_memory delta / N). The binaries take turns (order rotating by run).

  waiters.py --before OLD --after NEW fifo [--fifo-waiters 5000] [--which after]
      N waiters on one lock of one server under Redis's default maxclients (10000): how many
      join, how many are refused (a waiter exiting before the release, rejected_connections),
      then the release: every waiter's command appends its index to a file, which must list
      them in the order of their tickets (the join order, `ZRANGE queue`, pid from the waiters
      hash), and the time from the release to the last waiter's exit.

  waiters.py --before OLD --after NEW perf [--quick]
      bench.py's hand-off, waiting and contention tests with both binaries (notify mode) side by
      side with flock(1) (and etcdctl lock if etcd is installed) in the same rounds.

Writes JSON (--out FILE) and prints a summary. Needs redis-server, redis-cli, gcc (bench.py's
stamp helper); no redis-py. Run it with a high open-file limit (`ulimit -n 20000`): the servers it
starts inherit it (maxclients 10000 needs about 10032 descriptors).
"""

import argparse
import json
import os
import resource
import signal
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench  # noqa: E402
from bench import Bench, BenchError, Resp, log, nonempty, wait_until  # noqa: E402


def mmm(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return None
    return dict(median=statistics.median(xs), min=min(xs), max=max(xs), n=len(xs))


class Waiters(Bench):
    def __init__(self, args):
        args.tools = args.tools if hasattr(args, "tools") else ["flock"]
        args.tests = args.tests if hasattr(args, "tests") else []
        args.topologies = args.topologies if hasattr(args, "topologies") else []
        args.quick = getattr(args, "quick", False)
        args.distlock = args.after
        super().__init__(args)
        self.bins = {"before": args.before, "after": args.after}

    def launch_redis(self, logname, args=(), conf=None, port=None, tries=5):
        # bench.py's servers take --maxclients 1000; here Redis's default (10000) unless told:
        # 1,000 waiters of before the doorbell hold 2,000 connections. A later option wins.
        if conf is None:
            args = list(args) + ["--maxclients", str(self.args.maxclients)]
        return super().launch_redis(logname, args, conf, port, tries)

    # distlock over a topology ("single", "sentinel", "cluster"), binary "before" or "after"
    def dl(self, which, topo, key, cmd, opts=()):
        urls = [self.redis_url] if topo == "single" else self.topo_urls[topo]
        return [self.bins[which], *(a for u in urls for a in ("--redis", u)), "-q", "run", "--key", key,
                "--wait-mode", "notify", *opts, "--", *cmd]

    def watched(self, topo):
        """The servers a waiter may hold connections to: (port, role)."""
        if topo == "single":
            return [(self.redis_port, "data")]
        if topo == "sentinel":
            sents = [int(hp.rsplit(":", 1)[1]) for hp in
                     self.topo_urls["sentinel"][0].split("://", 1)[1].split("/", 1)[0].split(",")]
            return [(self.topo_ports["sentinel"][0], "data")] + [(p, "sentinel") for p in sents]
        return [(p, "data") for p in self.topo_ports["cluster"]]

    def lock_node(self, topo, key):
        if topo == "single":
            return self.redis_port
        if topo == "sentinel":
            return self.topo_ports["sentinel"][0]
        slot = self.node(self.topo_ports["cluster"][0]).cmd("CLUSTER", "KEYSLOT", f"distlock:{{{key}}}")
        return next(port for a, b, port in self.cluster_slots if a <= slot <= b)

    def snapshot(self, nodes):
        out = {}
        for port, role in nodes:
            c = self.node(port)
            info = c.info("clients")
            mem = c.info("memory")
            rows = c.clients()
            out[port] = dict(
                role=role,
                connected=int(info["connected_clients"]),
                blocked=int(info.get("blocked_clients", 0)),
                used_memory=int(mem.get("used_memory", 0)),
                subscribed=sum(1 for r in rows if "P" in r.get("flags", "") or int(r.get("sub", 0)) > 0
                               or int(r.get("psub", 0)) > 0),
                flag_b=sum(1 for r in rows if "b" in r.get("flags", "")),
                cmds={},
            )
            for r in rows:
                out[port]["cmds"][r.get("cmd", "?")] = out[port]["cmds"].get(r.get("cmd", "?"), 0) + 1
        return out

    def hold(self, which, topo, key, tag):
        base = os.path.join(self.tmp, f"hold-{tag}")
        start_h, go = base + ".hs", base + ".go"
        os.mkfifo(go)
        holder = self.spawn(self.dl(which, topo, key, [self.stamp, "mark", start_h, "--go", go,
                                                       "--timeout", "900"]), f"holder-{tag}")
        wait_until(lambda: nonempty(start_h) or holder.poll() is not None, 30, f"holder {tag}")
        if holder.poll() is not None:
            self.wait_ok(holder, 1, f"holder {tag}")
        return holder, go

    def release(self, go):
        fd = os.open(go, os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, b"x")
        os.close(fd)

    # -- scale: connections and memory per waiter --------------------------------------------

    def one_scale(self, which, topo, n, run):
        key = f"w{run}-{which}-{n}"
        if topo == "cluster":
            key = self.cluster_key(key + "-", self.topo_ports["cluster"][0])
        nodes = self.watched(topo)
        lport = self.lock_node(topo, key)
        tag = f"{topo}-{which}-{n}-{run}"
        holder, go = self.hold(which, topo, key, tag)
        time.sleep(0.5)
        base = self.snapshot(nodes)
        t0 = time.monotonic()
        lc = self.node(lport)
        qkey = f"distlock:{{{key}}}:queue"
        ws = []
        for i in range(n):
            ws.append(self.spawn(self.dl(which, topo, key, ["true"]), f"waiter-{tag}"))
            if self.args.batch and (i + 1) % self.args.batch == 0:  # as in fifo
                wait_until(lambda: lc.cmd("ZCARD", qkey) + sum(1 for w in ws if w.poll() is not None)
                           >= len(ws), 300, f"batch {i + 1} to join", 0.05)
        t_spawned = time.monotonic() - t0
        wait_until(lambda: lc.cmd("ZCARD", qkey) >= n or any(w.poll() is not None for w in ws[:50]),
                   300, f"{n} waiters to join ({tag})", 0.1)
        t_joined = time.monotonic() - t0
        early = [w for w in ws if w.poll() is not None]
        if early:
            raise BenchError(f"{tag}: {len(early)} waiters exited before the release\n" + self.log_tail(f"waiter-{tag}"))
        time.sleep(2.5)  # a refresh period: every waiter past its join and into its wait
        samples = []
        for _ in range(5):
            samples.append(self.snapshot(nodes))
            time.sleep(0.5)
        queue = lc.cmd("ZCARD", qkey)
        self.release(go)
        t1 = time.monotonic()
        for w in ws:
            self.wait_ok(w, 300, f"waiter {tag}")
        drain = time.monotonic() - t1
        self.wait_ok(holder, 30, f"holder {tag}")
        os.unlink(go)

        def per_sample(s):
            conn = sum(s[p]["connected"] - base[p]["connected"] for p, _ in nodes)
            data = sum(s[p]["connected"] - base[p]["connected"] for p, r in nodes if r == "data")
            return dict(
                conn_per_waiter=conn / n,
                data_conn_per_waiter=data / n,
                lock_node_conn_per_waiter=(s[lport]["connected"] - base[lport]["connected"]) / n,
                blocked=sum(s[p]["blocked"] for p, _ in nodes),
                flag_b=sum(s[p]["flag_b"] for p, _ in nodes),
                subscribed=sum(s[p]["subscribed"] - base[p]["subscribed"] for p, _ in nodes),
                mem_per_waiter_kb=sum(s[p]["used_memory"] - base[p]["used_memory"] for p, r in nodes
                                      if r == "data") / n / 1024,
                lock_node_mem_per_waiter_kb=(s[lport]["used_memory"] - base[lport]["used_memory"]) / n / 1024,
            )

        ps = [per_sample(s) for s in samples]
        d = {k: statistics.median(x[k] for x in ps) for k in ps[0]}
        d.update(min_conn_per_waiter=min(x["conn_per_waiter"] for x in ps),
                 max_conn_per_waiter=max(x["conn_per_waiter"] for x in ps),
                 queue=queue, spawn_s=t_spawned, join_s=t_joined, drain_s=drain,
                 lock_node_cmds=samples[-1][lport]["cmds"], base_connected={p: base[p]["connected"] for p, _ in nodes})
        log(f"  {tag}: {d['conn_per_waiter']:.3f} conn/waiter ({d['min_conn_per_waiter']:.3f}-"
            f"{d['max_conn_per_waiter']:.3f}; data nodes {d['data_conn_per_waiter']:.3f}), blocked {d['blocked']:.0f}, "
            f"subscribed {d['subscribed']:.0f}, {d['mem_per_waiter_kb']:.1f} KB/waiter, queue {queue}, "
            f"joined in {t_joined:.1f}s, drained in {drain:.1f}s; cmds {d['lock_node_cmds']}")
        return d

    def scale(self):
        self.build_stamp()
        self.start_redis()
        self.args.topologies = [t for t in ("sentinel", "cluster") if t in self.args.topos]
        self.start_topologies()
        res = {}
        whiches = self.args.which if len(self.args.which) > 1 else ["before", "after"]
        if self.args.which == ["after"] and self.args.only:
            whiches = ["after"]
        turn = 0
        for run in range(self.args.runs):
            for n in self.args.waiters:
                for topo in self.args.topos:
                    order = whiches if turn % 2 == 0 else whiches[::-1]  # who goes first alternates
                    turn += 1
                    for which in order:
                        k = f"{topo}/{n}/{which}"
                        res.setdefault(k, []).append(self.one_scale(which, topo, n, run))
        summary = {}
        for k, runs in res.items():
            summary[k] = {f: mmm([r[f] for r in runs]) for f in
                          ("conn_per_waiter", "data_conn_per_waiter", "lock_node_conn_per_waiter",
                           "blocked", "flag_b", "subscribed", "mem_per_waiter_kb",
                           "lock_node_mem_per_waiter_kb", "drain_s", "join_s")}
            summary[k]["min_sample_conn_per_waiter"] = min(r["min_conn_per_waiter"] for r in runs)
            summary[k]["max_sample_conn_per_waiter"] = max(r["max_conn_per_waiter"] for r in runs)
        for k, s in summary.items():
            log(f"{k}: conn/waiter {s['conn_per_waiter']['median']:.3f} (samples {s['min_sample_conn_per_waiter']:.3f}-"
                f"{s['max_sample_conn_per_waiter']:.3f}), subscribed {s['subscribed']['median']:.0f}, blocked "
                f"{s['blocked']['median']:.0f}, {s['mem_per_waiter_kb']['median']:.2f} KB/waiter "
                f"({s['mem_per_waiter_kb']['min']:.2f}-{s['mem_per_waiter_kb']['max']:.2f}), n={s['conn_per_waiter']['n']}")
        return dict(raw=res, summary=summary)

    # -- fifo: 5,000 waiters under the default maxclients ------------------------------------

    def fifo_one(self, which, n):
        p, port = self.launch_redis(f"redis-fifo-{which}")
        c = Resp(port)
        maxclients = int(c.cmd("CONFIG", "GET", "maxclients")[1])
        key = f"fifo-{which}"
        qkey, wkey = f"distlock:{{{key}}}:queue", f"distlock:{{{key}}}:waiters"
        self.redis_url = f"redis://127.0.0.1:{port}"
        out = os.path.join(self.tmp, f"fifo-{which}.order")
        holder, go = self.hold(which, "single", key, f"fifo-{which}")
        time.sleep(0.5)
        base = c.info("clients")
        sub0 = sum(1 for r in c.clients() if "P" in r.get("flags", "") or int(r.get("sub", 0)) > 0)
        mem0 = int(c.info("memory")["used_memory"])
        t0 = time.monotonic()
        ws = []
        for i in range(n):
            ws.append(self.spawn(self.dl(which, "single", key, ["sh", "-c", f"echo {i} >> {out}"]),
                                 f"fifo-{which}"))
            if self.args.batch and (i + 1) % self.args.batch == 0:
                # Arrivals in batches: the next batch starts once this one has joined (or
                # failed), so that 2 CPUs do not start thousands of processes at once.
                wait_until(lambda: c.cmd("ZCARD", qkey) + sum(1 for w in ws if w.poll() is not None)
                           >= len(ws), 300, f"batch {i + 1} to join", 0.05)
        t_spawned = time.monotonic() - t0
        log(f"  fifo {which}: {n} waiters spawned in {t_spawned:.1f}s (maxclients {maxclients})")

        def settled():
            exited = sum(1 for w in ws if w.poll() is not None)
            return c.cmd("ZCARD", qkey) + exited >= n

        wait_until(settled, 600, f"{n} waiters to join or fail", 0.2)
        t_joined = time.monotonic() - t0
        time.sleep(2.5)
        exited = [(i, w.returncode) for i, w in enumerate(ws) if w.poll() is not None]
        info = c.info("clients")
        stats = c.info("stats")
        mem1 = int(c.info("memory")["used_memory"])
        rows = c.clients()
        joined = c.cmd("ZCARD", qkey)
        # join order: tickets, and each token's pid
        q = c.cmd("ZRANGE", qkey, 0, -1, "WITHSCORES")
        tokens = [q[i] for i in range(0, len(q), 2)]
        meta = c.cmd("HGETALL", wkey)
        pid_of = {meta[i]: int(json.loads(meta[i + 1]).get("pid") or 0) for i in range(0, len(meta), 2)}
        index_of_pid = {w.pid: i for i, w in enumerate(ws)}
        expected = [index_of_pid.get(pid_of.get(t)) for t in tokens]
        d = dict(which=which, waiters=n, maxclients=maxclients, spawn_s=t_spawned, join_s=t_joined,
                 joined=joined, exited_before_release=len(exited),
                 exit_codes_before_release=sorted({rc for _, rc in exited}),
                 rejected_connections=int(stats.get("rejected_connections", 0)),
                 connected_clients=int(info["connected_clients"]),
                 connected_delta=int(info["connected_clients"]) - int(base["connected_clients"]),
                 blocked_clients=int(info.get("blocked_clients", 0)),
                 subscribed=sum(1 for r in rows if "P" in r.get("flags", "") or int(r.get("sub", 0)) > 0) - sub0,
                 mem_per_waiter_kb=(mem1 - mem0) / max(joined, 1) / 1024,
                 unmapped_tokens=sum(1 for e in expected if e is None))
        log(f"  fifo {which}: joined {joined}/{n} in {t_joined:.1f}s, exited before release {len(exited)} "
            f"(codes {d['exit_codes_before_release']}), rejected_connections {d['rejected_connections']}, "
            f"connected +{d['connected_delta']}, blocked {d['blocked_clients']}, subscribed {d['subscribed']}, "
            f"{d['mem_per_waiter_kb']:.1f} KB/waiter")
        self.release(go)
        t1 = time.monotonic()
        rcs = []
        for w in ws:
            t = self._watchdog(w, 900)
            try:
                rc = w.wait()
            finally:
                t.cancel()
            rcs.append(rc)
        drain = time.monotonic() - t1
        self.wait_ok(holder, 30, f"fifo holder {which}")
        got = [int(x) for x in open(out).read().split()] if os.path.exists(out) else []
        d.update(drain_s=drain, ran=len(got), distinct=len(set(got)),
                 nonzero_exits=sum(1 for r in rcs if r != 0),
                 in_ticket_order=(got == [e for e in expected if e is not None]),
                 drain_per_s=len(got) / drain if drain else None)
        if not d["in_ticket_order"]:
            exp = [e for e in expected if e is not None]
            first = next((i for i, (a, b) in enumerate(zip(got, exp)) if a != b), min(len(got), len(exp)))
            d["first_mismatch"] = dict(at=first, got=got[first:first + 5], expected=exp[first:first + 5])
        log(f"  fifo {which}: drained {len(got)} commands in {drain:.1f}s ({d['drain_per_s']:.0f}/s), "
            f"in ticket order: {d['in_ticket_order']}, non-zero exits {d['nonzero_exits']}")
        self.kill(p)
        c.close()
        return d

    def fifo(self):
        self.build_stamp()
        return {w: self.fifo_one(w, self.args.fifo_waiters) for w in self.args.which}


class Perf(Bench):
    """bench.py's tests with the binary of before the doorbell as one more tool."""

    def __init__(self, args):
        super().__init__(args)
        self.before = args.before

    def argv(self, tool, key, cmd, holder_opts=()):
        if tool == "distlock-before":
            return [self.before, "--redis", self.redis_url, "-q", "run", "--key", key,
                    "--wait-mode", "notify", *holder_opts, "--", *cmd]
        return super().argv(tool, key, cmd, holder_opts)

    def waiting_count(self, tool, key, known):
        if tool == "distlock-before":
            tool = "distlock-notify"
        return super().waiting_count(tool, key, known)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["scale", "fifo", "perf"])
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--waiters", default="100,1000")
    ap.add_argument("--topos", default="single,sentinel,cluster")
    ap.add_argument("--fifo-waiters", type=int, default=5000)
    ap.add_argument("--which", default="after", help="fifo: after, before or both (before,after)")
    ap.add_argument("--maxclients", type=int, default=10000)
    ap.add_argument("--only", action="store_true", help="scale: only the binaries --which names")
    ap.add_argument("--batch", type=int, default=100, help="fifo: start waiters in batches of this many, "
                    "each once the previous one has joined (0: all at once)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--tests", default="handoff,waiting,contention")
    ap.add_argument("--out", default=None)
    ap.add_argument("--keep-tmp", action="store_true")
    args = ap.parse_args()
    args.waiters = [int(x) for x in args.waiters.split(",")]
    args.topos = args.topos.split(",")
    args.which = args.which.split(",")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < args.maxclients + 64:
        log(f"warning: open-file limit {resource.getrlimit(resource.RLIMIT_NOFILE)[0]} < maxclients + 64: "
            "redis-server will lower maxclients")
    if args.what == "perf":
        bench.REDIS_TOOLS = bench.REDIS_TOOLS + ("distlock-before",)
        bench.LABELS["distlock-before"] = "distlock notify, before the doorbell (f1d9815)"
        bench.LABELS["distlock-notify"] = "distlock notify, doorbell"
        tools = ["distlock-notify", "flock"] if args.only else ["distlock-notify", "distlock-before", "flock"]
        if bench.shutil.which("etcd") and bench.shutil.which("etcdctl"):
            tools.append("etcdctl")
        args.tools, args.tests = tools, args.tests.split(",")
        args.topologies, args.distlock = [], args.after
        b = Perf(args)
    else:
        b = Waiters(args)

    def on_signal(signum, _frame):
        raise SystemExit(f"stopped by signal {signum}")

    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, on_signal)
    load0 = open("/proc/loadavg").read().split()[:3]
    t0 = time.monotonic()
    try:
        if args.what == "perf":
            b.results["machine"] = b.machine()
            b.build_stamp()
            b.start_redis()
            if "etcdctl" in b.tools:
                b.start_etcd()
            for t in args.tests:
                getattr(b, f"test_{t}")()
            res = b.results
        else:
            res = getattr(b, args.what)()
    except BenchError as e:
        log(f"FAILED: {e}")
        args.keep_tmp = True
        return 1
    finally:
        b.cleanup()
    res = dict(what=args.what, before=args.before, after=args.after, loadavg_start=load0,
               loadavg_end=open("/proc/loadavg").read().split()[:3], elapsed_s=time.monotonic() - t0,
               date=time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), results=res)
    log(f"load average {' '.join(load0)} -> {' '.join(res['loadavg_end'])}, {res['elapsed_s']:.0f}s")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
