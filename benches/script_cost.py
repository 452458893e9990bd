#!/usr/bin/env python3
"""What each of distlock's Lua scripts costs Redis, step by step through one contended hand-off.

    python3 benches/script_cost.py [--keys 1000] [--rounds 5]

Starts its own redis-server (`--save '' --appendonly no`) on a free loopback port, loads the
acquire and release scripts as distlock builds them (src/lock/lua: protocol.lua, history.lua,
common.lua and the script itself, see `script!` in src/lock/protocol.rs), and walks --keys locks
through the steps of a hand-off, one step at a time over all keys, with the same KEYS (the twelve
of `LockName::keys`) and ARGV shapes as distlock's: A takes the free lock; B tries (busy), joins
the line; A releases (handing the lock to B, who is woken); B takes it up; B releases (nobody
waits). For each step: Redis's own time per EVALSHA (INFO commandstats: the script and the
commands it runs, not the network), median of --rounds rounds with min and max. Needs only the
standard library and redis-server.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench import Resp, free_port  # noqa: E402 (the benchmark's own RESP client)
LUA = os.path.join(HERE, "..", "src", "lock", "lua")


def script(name):
    parts = ["protocol.lua", "history.lua", "common.lua", name]
    return "".join(open(os.path.join(LUA, p)).read() for p in parts)


def evalsha_stats(c):
    fields = dict(kv.split("=") for kv in c.info("commandstats").get("cmdstat_evalsha", "").split(",") if kv)
    return int(fields.get("calls", 0)), int(fields.get("usec", 0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", type=int, default=1000, help="locks walked through per round")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    if not shutil.which("redis-server"):
        sys.exit("redis-server not found (apt-get install redis-server)")
    tmp = tempfile.mkdtemp(prefix="distlock-script-cost-")
    port = free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", tmp],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                c = Resp(port)
                c.cmd("PING")
                break
            except OSError:
                if time.monotonic() > deadline or server.poll() is not None:
                    sys.exit("redis-server did not start")
                time.sleep(0.02)
        acquire = c.cmd("SCRIPT", "LOAD", script("acquire.lua"))
        release = c.cmd("SCRIPT", "LOAD", script("release.lua"))
        meta = ["host", "bench", "pid", "1", "user", "root", "command", "true", "kind", "run",
                "version", "0.1.0", "ttl_ms", "30000"]

        def keys(tag, i):
            k = f"distlock:{{{tag}{i}}}"
            return [k, k + ":owner"] + [k + s for s in (
                ":fence", ":queue", ":waiters", ":alive", ":slots", ":holders", ":superseded",
                ":protocol", ":history", ":history:held")]

        def acq(tag, i, token, mode):
            ks = keys(tag, i)
            return c.cmd("EVALSHA", acquire, len(ks), *ks, token, "30000", "1", mode, "6000",
                          "3000", *meta)

        def rel(tag, i, token):
            ks = keys(tag, i)
            return c.cmd("EVALSHA", release, len(ks), *ks, token, "1", "outcome", "exit 0")

        steps = [
            ("A takes the free lock (try)", lambda t, i: acq(t, i, f"A{i}", "try"), 1),
            ("B tries: busy", lambda t, i: acq(t, i, f"B{i}", "try"), 0),
            ("B joins the line", lambda t, i: acq(t, i, f"B{i}", "join"), 2),
            ("A releases: hands over to B", lambda t, i: rel(t, i, f"A{i}"), 1),
            ("B takes it up", lambda t, i: acq(t, i, f"B{i}", "join"), 1),
            ("B releases: nobody waits", lambda t, i: rel(t, i, f"B{i}"), 1),
        ]
        per_step = {name: [] for name, _, _ in steps}
        for r in range(args.rounds):
            tag = f"r{r}-"
            for name, step, expect in steps:
                calls0, usec0 = evalsha_stats(c)
                for i in range(args.keys):
                    reply = step(tag, i)
                    if reply[0] != expect:
                        sys.exit(f"{name}: unexpected reply {reply!r}")
                calls1, usec1 = evalsha_stats(c)
                # The INFO call itself is no EVALSHA: the difference is the step's alone.
                per_step[name].append((usec1 - usec0) / max(1, calls1 - calls0))
        print(f"Redis time per script call, {args.keys} locks per round, median of "
              f"{args.rounds} rounds (min-max):")
        for name, _, _ in steps:
            v = per_step[name]
            print(f"  {name:32s} {statistics.median(v):6.1f} us ({min(v):.1f}-{max(v):.1f})")
        on_path = [statistics.median(per_step[n]) for n in
                   ("A releases: hands over to B", "B takes it up")]
        contended = [statistics.median(per_step[n]) for n in
                     ("B tries: busy", "B joins the line", "B takes it up",
                      "A releases: hands over to B")]
        print(f"  on a hand-off's path (release + take-up): {sum(on_path):.0f} us; "
              f"per contended critical section (try, join, take-up, release): "
              f"{sum(contended):.0f} us")
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
