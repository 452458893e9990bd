#!/usr/bin/env python3
"""Lock sets and shared keys (issue 27): the issue's three numbers, on one server.

  locksets.py --distlock BIN orders [--pairs 100] [--section-ms 50]
      Opposite orders: PAIRS pairs of `run -k a -k b` and `run -k b -k a`, started together,
      each running a SECTION-MS critical section (stamp section). Every run must exit 0, the
      two sections of a pair must never overlap, and neither may wait (its launch to its
      section's start) longer than its partner's section plus 1 s.

  locksets.py --distlock BIN uncontended [--rounds 20] [--runs 20]
      `run -k a -k b -- true` against `run -k a -- true`, taking turns (ROUNDS rounds of RUNS
      runs each, order rotating): the median of the per-round ratios of the median wall time,
      with min and max over rounds. Target: at most 1.5x.

  locksets.py --distlock BIN writer [--readers 100]
      A writer among readers (--shared): readers arrive every 0.3 s and hold 1 s each; a writer
      joins after 1.5 s and must start within 0.2 s of the end of the last reader that came
      before it, and no reader that came after it may start before it ends. Then READERS
      readers queue behind a holding writer: once it ends they must all start within 1 s, each
      within 50 ms of the one before.

Writes JSON (--out FILE) and prints a summary. Starts its own redis-server on a free loopback
port (bench.py's harness); needs redis-server and gcc (bench.py's stamp helper).
"""

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench import Bench, BenchError, log, nonempty, wait_until  # noqa: E402
from waiters import mmm  # noqa: E402 (median, min, max of a list)


def read_sections(path):
    """stamp section lines: (start ns, end ns)."""
    out = []
    with open(path) as f:
        for line in f:
            a, b = line.split()
            out.append((int(a), int(b)))
    return out


class Sets(Bench):
    def __init__(self, args):
        args.tools, args.tests, args.topologies, args.quick = ["distlock-notify"], [], [], False
        super().__init__(args)

    def dl(self, keys, cmd, opts=()):
        ks = [a for k in keys for a in ("-k", k)]
        return [self.distlock, "--redis", self.redis_url, "-q", "run", *ks, *opts, "--", *cmd]

    def section(self, keys, out, ms, opts=(), tag="run"):
        return self.spawn(self.dl(keys, [self.stamp, "section", out, str(ms)], opts), tag)

    # -- opposite orders ----------------------------------------------------------------------
    def orders(self):
        pairs, ms = self.args.pairs, self.args.section_ms
        overlaps, late, waits = 0, [], []
        for i in range(pairs):
            fa = os.path.join(self.tmp, f"pair{i}-ab")
            fb = os.path.join(self.tmp, f"pair{i}-ba")
            t0 = time.monotonic_ns()
            pa = self.section(["a", "b"], fa, ms, tag=f"pair{i}-ab")
            pb = self.section(["b", "a"], fb, ms, tag=f"pair{i}-ba")
            self.wait_ok(pa, 60, f"pair {i}: -k a -k b")
            self.wait_ok(pb, 60, f"pair {i}: -k b -k a")
            (sa, ea), (sb, eb) = read_sections(fa)[0], read_sections(fb)[0]
            if sa < eb and sb < ea:
                overlaps += 1
            for start, partner in ((sa, (sb, eb)), (sb, (sa, ea))):
                wait = (start - t0) / 1e6
                waits.append(wait)
                bound = (partner[1] - partner[0]) / 1e6 + 1000
                if wait > bound:
                    late.append(dict(pair=i, wait_ms=wait, bound_ms=bound))
        res = dict(pairs=pairs, section_ms=ms, overlaps=overlaps, late=late,
                   wait_ms=mmm(waits), wait_p99_ms=sorted(waits)[int(len(waits) * 0.99) - 1])
        log(f"orders: {pairs} pairs, all exited 0, {overlaps} overlapping, {len(late)} late; "
            f"wait median {res['wait_ms']['median']:.1f} ms, max {res['wait_ms']['max']:.1f} ms")
        return res

    # -- uncontended ---------------------------------------------------------------------------
    def uncontended(self):
        rounds, runs = self.args.rounds, self.args.runs
        variants = {"one": ["a1"], "two": ["a1", "b1"]}
        per = {k: [] for k in variants}
        ratios = []
        for r in range(rounds):
            order = list(variants) if r % 2 == 0 else list(reversed(variants))
            med = {}
            for name in order:
                out = os.path.join(self.tmp, f"unc-{name}-{r}")
                p = self.spawn([self.stamp, "time", str(runs), out, "--", *self.dl(variants[name], ["true"])],
                               f"unc-{name}")
                self.wait_ok(p, 120, f"uncontended {name}")
                with open(out) as f:
                    walls = [int(line.split()[0]) / 1e6 for line in f]
                med[name] = statistics.median(walls)
                per[name].append(med[name])
            ratios.append(med["two"] / med["one"])
        res = dict(rounds=rounds, runs=runs, one_ms=mmm(per["one"]), two_ms=mmm(per["two"]), ratio=mmm(ratios))
        log(f"uncontended: -k a {res['one_ms']['median']:.2f} ms, -k a -k b {res['two_ms']['median']:.2f} ms: "
            f"{res['ratio']['median']:.2f}x ({res['ratio']['min']:.2f}-{res['ratio']['max']:.2f})")
        return res

    # -- a writer among readers ----------------------------------------------------------------
    def writer(self):
        key = "rw"
        readers = []
        t0 = time.monotonic_ns()
        wfile = os.path.join(self.tmp, "writer")
        writer = None
        writer_join = None
        for i in range(12):  # every 0.3 s for 3.6 s
            at = t0 + int(i * 0.3e9)
            while time.monotonic_ns() < at:
                time.sleep(0.002)
            if i == 5:
                writer_join = time.monotonic_ns()
                writer = self.section([key], wfile, 500, tag="writer")
                time.sleep(0.05)  # (the writer's join is ordered against the next reader by this gap)
            f = os.path.join(self.tmp, f"reader{i}")
            readers.append((time.monotonic_ns(), f, self.section([key], f, 1000, opts=("--shared",),
                                                                 tag=f"reader{i}")))
        for _, _, p in readers:
            self.wait_ok(p, 60, "reader")
        self.wait_ok(writer, 60, "writer")
        ws, we = read_sections(wfile)[0]
        before = [read_sections(f)[0] for joined, f, _ in readers if joined < writer_join]
        after = [read_sections(f)[0] for joined, f, _ in readers if joined > writer_join]
        queued_after = [read_sections(f)[0] for joined, f, _ in readers
                        if writer_join < joined < read_sections(wfile)[0][1]]
        last_end = max(e for _, e in before)
        start_after_ms = (ws - last_end) / 1e6
        passed = sum(1 for s, _ in after if s < we)
        overlapped = sum(1 for s, e in before + after if s < we and ws < e)
        # Readers that came after the writer and were in line when it ended start as a batch.
        batch = sorted(s for s, _ in queued_after)
        gaps = [(b - a) / 1e6 for a, b in zip(batch, batch[1:])]
        res = dict(writer_start_after_last_earlier_reader_ms=start_after_ms, later_readers_before_writer=passed,
                   overlaps=overlapped, batch=len(batch), batch_gap_max_ms=max(gaps) if gaps else 0.0)
        log(f"writer: started {start_after_ms:.1f} ms after the last earlier reader ended (bound 200 ms); "
            f"{passed} later readers passed it; {overlapped} overlaps; the {len(batch)} readers in line behind it "
            f"started at most {res['batch_gap_max_ms']:.1f} ms apart")

        # READERS readers behind a holding writer.
        go = os.path.join(self.tmp, "go")
        os.mkfifo(go)
        hs = os.path.join(self.tmp, "holder-start")
        holder = self.spawn(self.dl([key], [self.stamp, "mark", hs, "--go", go, "--timeout", "120"]), "holder")
        wait_until(lambda: nonempty(hs) or holder.poll() is not None, 30, "the writer to hold")
        rfiles, procs = [], []
        for i in range(self.args.readers):
            f = os.path.join(self.tmp, f"queued{i}")
            rfiles.append(f)
            procs.append(self.section([key], f, 200, opts=("--shared",), tag="queued"))
        line = f"distlock:{{{key}}}:queue"

        def queued():
            return self.rc.cmd("ZCARD", line) >= self.args.readers

        wait_until(queued, 60, f"{self.args.readers} readers in line")
        end_ns = time.monotonic_ns()
        with open(go, "w") as g:
            g.write("x")
        self.wait_ok(holder, 30, "the writer")
        for p in procs:
            self.wait_ok(p, 60, "a queued reader")
        starts = sorted(read_sections(f)[0][0] for f in rfiles)
        gaps = [(b - a) / 1e6 for a, b in zip(starts, starts[1:])]
        res["queued"] = dict(readers=self.args.readers, spread_ms=(starts[-1] - starts[0]) / 1e6,
                             gap_max_ms=max(gaps) if gaps else 0.0,
                             first_after_release_ms=(starts[0] - end_ns) / 1e6)
        log(f"writer: {self.args.readers} readers behind it started within {res['queued']['spread_ms']:.1f} ms "
            f"(bound 1000 ms), largest gap {res['queued']['gap_max_ms']:.1f} ms (bound 50 ms)")
        return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("what", choices=["orders", "uncontended", "writer", "all"])
    ap.add_argument("--distlock", required=True)
    ap.add_argument("--pairs", type=int, default=100)
    ap.add_argument("--section-ms", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--readers", type=int, default=100)
    ap.add_argument("--out", default=None)
    ap.add_argument("--keep-tmp", action="store_true")
    args = ap.parse_args()
    b = Sets(args)
    results = {}
    try:
        b.build_stamp()
        b.start_redis()
        whats = ["orders", "uncontended", "writer"] if args.what == "all" else [args.what]
        for w in whats:
            results[w] = getattr(b, w)()
    except BenchError as e:
        log(f"error: {e}")
        return 1
    finally:
        b.cleanup()
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
