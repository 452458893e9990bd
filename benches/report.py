"""results.md and chart.svg of the distlock benchmark, from the results dict of bench.py.

Also usable alone to redraw them from a results.json:  python3 benches/report.py benches/results.json
"""

import json
import math
import os
import sys
from html import escape

REDIS_TOOLS = ("distlock-notify", "distlock-spin", "pylock")


def fmt(v, unit=""):
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    a = abs(v)
    s = f"{v:.0f}" if a >= 100 else f"{v:.1f}" if a >= 10 else f"{v:.2f}" if a >= 0.995 or a == 0 else f"{v:.3f}"
    return s + unit


def _rounds(d, key="ratio"):
    """' (3 rounds: min–max)' of a per-round ratio, when there was more than one round."""
    rr = [x for x in (d.get("round_ratios") if key == "ratio" else d.get(f"{key}_rounds")) or []
          if not math.isnan(x)]
    if len(rr) < 2:
        return ""
    return f" ({len(rr)} rounds: {min(rr):.2f}–{max(rr):.2f}x)"


def targets(r):
    """[(target, measured, threshold, met)] for distlock notify (issue 9 §7). Ratios are medians
    of per-round ratios when the results have them (older results: ratios of the totals)."""
    out = []
    n = "distlock-notify"
    oh, ho, wt, ct = (r.get(k, {}) for k in ("overhead", "handoff", "waiting", "contention"))
    sc, sem = r.get("scaling"), r.get("semaphore")
    if n in oh and "ratio_median" in oh[n]:
        d = oh[n]
        out.append(("overhead of an uncontended `run -- true` within 1.5x of flock's",
                    f"{d['ratio_median']:.2f}x ({len(d['ratios'])} rounds: "
                    f"{d['ratio_min']:.2f}–{d['ratio_max']:.2f}x); {fmt(d['median_ms'])} ms vs "
                    f"{fmt(oh['flock']['median_ms'])} ms", "≤ 1.50x", d["ratio_median"] <= 1.5))
    if n in oh and "rss_median_mib" in oh[n]:
        d = oh[n]
        out.append(("wrapper peak RSS under 6 MiB", f"{d['rss_median_mib']:.2f} MiB (max {d['rss_max_mib']:.2f})",
                    "< 6 MiB", d["rss_max_mib"] < 6))
    if n in ho and "flock" in ho:
        a, b = ho[n]["p50_ms"], ho["flock"]["p50_ms"]
        x = ho[n].get("p50_ratio_median", a / b)
        rounds = ""
        if len(ho[n].get("p50_round_ratios") or []) > 1:
            rounds = (f" ({len(ho[n]['p50_round_ratios'])} rounds: "
                      f"{ho[n]['p50_ratio_min']:.2f}–{ho[n]['p50_ratio_max']:.2f}x)")
        out.append(("hand-off p50 within 1.25x of flock's", f"{x:.2f}x{rounds}; {fmt(a)} ms vs {fmt(b)} ms",
                    "≤ 1.25x", x <= 1.25))
    if n in ho and "etcdctl" in ho:
        a, b = ho[n]["p99_ms"], ho["etcdctl"]["p99_ms"]
        out.append(("hand-off p99 no worse than etcdctl lock's (over all hand-offs)", f"{fmt(a)} ms vs {fmt(b)} ms",
                    f"≤ {fmt(b)} ms", a <= b))
    if n in ct and "flock" in ct:
        d = ct[n]
        a, b = d["total_per_s"], ct["flock"]["total_per_s"]
        x = d.get("ratio_median", a / b)
        out.append((f"contention throughput at least 0.7x flock's ({d.get('clients', r['config']['clients'])} loops "
                    "of `LOCK -- true`)", f"{x:.2f}x{_rounds(d)}; {fmt(a)}/s vs {fmt(b)}/s", "≥ 0.70x", x >= 0.7))
        dev = d["max_abs_dev_pct"]
        out.append(("every client within 5% of the mean", f"worst client {dev:.1f}% off the mean",
                    "≤ 5%", dev <= 5))
    if sc:
        by = sc["by_waiters"]
        lo, hi = str(min(sc["waiters"])), str(max(sc["waiters"]))
        if n in by.get(hi, {}) and "commands_growth_median" in by[hi][n]:
            a, b = by[lo][n], by[hi][n]
            out.append((f"Redis commands per critical section constant in the number of waiters "
                        f"({lo} and {hi} waiters)",
                        f"{hi} waiters: {b['commands_per_cs']:.1f}, {lo}: {a['commands_per_cs']:.1f} = "
                        f"{b['commands_growth_median']:.2f}x{_rounds(b, 'commands_growth')}",
                        "≤ 1.25x", b["commands_growth_median"] <= 1.25))
    if n in wt:
        d = wt[n]
        if "worst_waiter_per_s" in d:
            gap = "" if d.get("min_gap_s") is None else f", shortest gap between two requests of one waiter {d['min_gap_s']:.3f} s"
            out.append(("a waiting process sends at most 0.5 requests per second (keeping its place included)",
                        f"worst of {d['waiters']} waiters {d['worst_waiter_per_s']:.4f}/s{gap}; "
                        f"{d['requests']} requests in {d['window_s']:.1f} s in all",
                        "≤ 0.50/s", d["worst_waiter_per_s"] <= 0.5))
        else:  # results from before issue 9: all waiters' requests over the window
            out.append(("a waiting process sends at most 0.5 requests per second",
                        f"{d['requests_per_waiter_s']:.3f}/waiter/s ({d['requests']} requests from "
                        f"{d['waiters']} waiters in {d['window_s']:.1f} s)",
                        "≤ 0.50/s", d["requests_per_waiter_s"] <= 0.5))
    if sem and n in sem["tools"]:
        d = sem["tools"][n]
        N = sem["limit"]
        out.append((f"semaphore N={N}, {sem['clients']} clients, {sem['section_ms']} ms sections: throughput "
                    "at least 3x the mutex's", f"{d['ratio_median']:.2f}x{_rounds(d)}; "
                    f"{fmt(d['limit']['total_per_s'])}/s vs {fmt(d['mutex']['total_per_s'])}/s", "≥ 3.00x",
                    d["ratio_median"] >= 3))
        out.append((f"semaphore N={N}: never more than {N} inside at once (stamped sections)",
                    f"at most {d['limit']['max_inside']} inside ({d['limit']['sections']} sections); "
                    f"mutex: at most {d['mutex']['max_inside']} ({d['mutex']['sections']})",
                    f"≤ {N} (mutex ≤ 1)", d["limit"]["max_inside"] <= N and d["mutex"]["max_inside"] <= 1))
    return out


def _ratio_rounds(d):
    """'0.45x (0.47, 0.42, 0.47)': the median of the per-round ratios (older results: the ratio of
    the totals) and the rounds."""
    rr = d.get("round_ratios") or []
    x = d.get("ratio_median", d.get("ratio", float("nan")))
    return f"{x:.2f}x" + (" (" + ", ".join(f"{y:.2f}" for y in rr) + ")" if len(rr) > 1 else "")


def _topo_label(r, v):
    """A variant's name in tests 7-9: the reference is distlock over one server."""
    if v == "distlock-notify":
        return "distlock, one server"
    return r["labels"].get(v, v)


def _span(d, key, unit="x", sign=False):
    """'1.40x (5 rounds: 0.91–1.78x)' of d[key_median], d[key_min], d[key_max], d[key_rounds];
    signed: '+3.1 ms (5 rounds: -0.8 to +4.0 ms)'."""
    f, to = ("{:+.1f}", " to ") if sign else ("{:.2f}", "–")
    med = f.format(d[f"{key}_median"]) + unit
    n = len(d.get(f"{key}_rounds") or [])
    if n < 2:
        return med
    return f"{med} ({n} rounds: " + f.format(d[f"{key}_min"]) + to + f.format(d[f"{key}_max"]) + f"{unit})"


TARGET_NAMES = {"redlock3": "a 3-node Redlock", "redlock5": "a 5-node Redlock",
                "sentinel": "Sentinel", "cluster": "Cluster"}


def topology_targets(r):
    """[(target, measured, threshold, met)] of issue 10's Performance section: distlock notify
    over several servers against distlock over one, ratios of the same run (medians of the
    per-round ratios)."""
    out = []
    tp = (r.get("topologies") or {}).get("by_variant", {})
    one = tp.get("distlock-notify")
    for v, limit in (("redlock3", 1.3), ("sentinel", 1.25), ("cluster", 1.25)):
        if v in tp and one:
            d = tp[v]
            out.append((f"uncontended `run -- true` over {TARGET_NAMES[v]} within {limit:.2f}x of distlock over "
                        "one server", f"{_span(d, 'ratio_single')}; {fmt(d['median_ms'])} ms vs "
                        f"{fmt(one['median_ms'])} ms", f"≤ {limit:.2f}x", d["ratio_single_median"] <= limit))
    th = (r.get("topology_handoff") or {}).get("by_variant", {})
    if "distlock-notify" in th:
        for v in ("redlock3", "redlock5"):
            if v in th:
                d = th[v]
                out.append((f"hand-off p50 over {TARGET_NAMES[v]} within 1.5x of distlock over one server",
                            f"{_span(d, 'p50_ratio_single')}; {fmt(d['p50_ms'])} ms vs "
                            f"{fmt(th['distlock-notify']['p50_ms'])} ms", "≤ 1.50x", d["p50_ratio_single_median"] <= 1.5))
    dm = r.get("down_minority")
    if dm:
        nt = dm["node_timeout_ms"]
        healthy = dm["variants"]["healthy"]
        for v, what in (("stopped", "SIGSTOPped (accepts connections, answers nothing)"),
                        ("refused", "killed (connection refused)")):
            d = dm["variants"][v]
            out.append((f"a down minority adds at most one per-node timeout: Redlock over 3, one node {what}",
                        f"{_span(d, 'extra_ms', ' ms', sign=True)} per run = {d['extra_timeouts']:.2f} node "
                        f"timeouts; {fmt(d['median_ms'])} ms vs {fmt(healthy['median_ms'])} ms healthy",
                        f"≤ {nt} ms (`--node-timeout {nt}ms`)", d["extra_ms_median"] <= nt))
    return out


def topology_sections(r):
    """The Markdown of tests 7-9 (issue 10), and their raw figures: (sections, raw)."""
    L, R = [], []
    cfg = r["config"]
    tp = r.get("topologies")
    if tp:
        vs, by = tp["variants"], tp["by_variant"]
        L.append("## 7. Overhead over several servers: `LOCK -- true`, uncontended (issue 10)\n")
        L.append("distlock in notify mode over each topology, with distlock over one server and flock(1) in the same "
                 f"rounds, as in 1: {cfg['rounds']} rounds, each variant {cfg['runs']} runs in a row per round, the "
                 "variants taking turns in a rotating order (reversed every other round), after 3 warm-up runs "
                 "each; wall time by `stamp time`. *Redlock*: `--redis` given 3 or 5 times, independent "
                 "`redis-server`s (the default `--node-timeout`). *Sentinel*: "
                 "`redis+sentinel://S1,S2,S3/SERVICE`, one primary, one replica, three sentinels (quorum 2). "
                 "*Cluster*: `redis+cluster://` with the three primaries of a cluster made by `redis-cli --cluster "
                 "create` as seeds (no replicas), and a key whose slot another node than the first seed serves (the "
                 "usual case: distlock reads the slot map from the first seed, then connects to the owner). The ratios are per round (a variant's round median over the "
                 "reference's), median (min–max) over the rounds.\n")
        L.append("| over | median ms | min ms | max ms | p90 ms | ratio to distlock over one server, median "
                 "(min–max) | ratio to flock, median (min–max) | CPU ms / run |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|")
        for v in vs:
            d = by[v]
            L.append(f"| {_topo_label(r, v)} | {fmt(d['median_ms'])} | {fmt(d['min_ms'])} | {fmt(d['max_ms'])} | "
                     f"{fmt(d['p90_ms'])} | {d['ratio_single_median']:.2f}x ({d['ratio_single_min']:.2f}–"
                     f"{d['ratio_single_max']:.2f}) | {d['ratio_flock_median']:.2f}x ({d['ratio_flock_min']:.2f}–"
                     f"{d['ratio_flock_max']:.2f}) | {fmt(d['cpu_median_ms'])} |")
        L.append("")
        R.append("### Overhead over several servers: median of each round (ms)\n")
        R.append("| round | " + " | ".join(_topo_label(r, v) for v in vs) + " |")
        R.append("|---:|" + "---:|" * len(vs))
        for i in range(len(by[vs[0]]["round_medians_ms"])):
            R.append(f"| {i + 1} | " + " | ".join(f"{by[v]['round_medians_ms'][i]:.3f}" for v in vs) + " |")
        R.append("")
    th = r.get("topology_handoff")
    if th:
        vs, by = th["variants"], th["by_variant"]
        L.append("## 8. Hand-off latency over Redlock (issue 10)\n")
        L.append("As in 2 (holder's child exit → waiter's child start, a fresh holder and waiter each time, "
                 f"{cfg['handoffs']} per variant, the variants taking turns), distlock notify over Redlock against "
                 "distlock notify over one server and flock(1). A Redlock keeps no line: its waiter counts as "
                 "waiting once it has subscribed to release notifications (a connection other than the holder's "
                 "with `sub=1` in CLIENT LIST of a node); the random settle time covers the attempt it makes "
                 "right after subscribing. The ratio is that of the p50s of each round (consecutive blocks of "
                 "hand-offs). *Where the time goes*: a further "
                 f"{cfg['breakdown']} hand-offs per Redlock with MONITOR on its first node (the one its waiters "
                 "subscribe to): holder's child exit → its release there → the waiter's acquire there → "
                 "(only when the nodes granted different fences) the waiter's second round there, which raises "
                 "the smaller ones → the waiter's child start (medians of the hand-offs without a second round, "
                 "or of those with one if they are the majority; wall-clock microsecond timestamps of MONITOR).\n")
        L.append("| over | p50 ms | p50 ratio to distlock over one server, median (min–max) | p50 ratio to flock | "
                 "p90 ms | p99 ms | min ms | max ms | n |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for v in vs:
            d = by[v]
            L.append(f"| {_topo_label(r, v)} | {fmt(d['p50_ms'])} | {d['p50_ratio_single_median']:.2f}x "
                     f"({d['p50_ratio_single_min']:.2f}–{d['p50_ratio_single_max']:.2f}) | "
                     f"{d['p50_ratio_flock_median']:.2f}x | {fmt(d['p90_ms'])} | {fmt(d['p99_ms'])} | "
                     f"{fmt(d['min_ms'])} | {fmt(d['max_ms'])} | {d['n']} |")
        L.append("")
        bds = [(v, by[v]["breakdown"]) for v in vs if "breakdown" in by[v]]
        if bds:
            L.append("| over | exit → release | release → acquire round | acquire round → fence round | "
                     "→ child start | hand-offs | of which with a fence round |")
            L.append("|---|---:|---:|---:|---:|---:|---:|")
            for v, b in bds:
                fence = f"{fmt(b['acquire_to_fence_ms'])} ms" if "acquire_to_fence_ms" in b else "—"
                last = b.get("fence_to_start_ms", b.get("acquire_to_start_ms", 0.0))
                L.append(f"| {_topo_label(r, v)} | {fmt(b['exit_to_release_ms'])} ms | "
                         f"{fmt(b['release_to_acquire_ms'])} ms | {fence} | "
                         f"{fmt(last)} ms | {b['n']} | {b.get('with_fence_round', b['n'])} |")
            L.append("")
        R.append("### Hand-off latencies over Redlock, sorted (ms)\n")
        for v in vs:
            R.append(f"- {_topo_label(r, v)}: " + " ".join(f"{x:.2f}" for x in sorted(by[v]["raw_ms"])))
        R.append("")
    dm = r.get("down_minority")
    if dm:
        nt, vs = dm["node_timeout_ms"], dm["variants"]
        L.append("## 9. A down minority: Redlock over 3 with one node down (issue 10)\n")
        L.append(f"`LOCK -- true` uncontended over Redlock with 3 nodes and `--node-timeout {nt}ms` (each node's "
                 "time to answer one request), in three variants taking turns in a rotating order: *healthy*; "
                 "*stopped*, its third node SIGSTOPped for the whole test (the kernel still accepts its "
                 "connections; it answers nothing: the per-node timeout runs out); *refused*, its third node "
                 "killed (connect fails at once). "
                 f"{cfg['minority_rounds']} rounds of {cfg['minority_runs']} runs per variant; *extra* is a round's "
                 "median minus the healthy variant's in the same round, median (min–max) over the rounds, also in "
                 "node timeouts. A run asks every node twice (acquire, release), a third time when the nodes "
                 "granted different fences; a node whose acquire got no reply gets its release written behind "
                 "that request instead of being waited for again, so it costs one timeout per run.\n")
        L.append("| variant | median ms | min ms | max ms | extra per run, median (min–max) | in node timeouts | runs |")
        L.append("|---|---:|---:|---:|---:|---:|---:|")
        for v in ("healthy", "stopped", "refused"):
            d = vs[v]
            extra = "—" if v == "healthy" else _span(d, "extra_ms", " ms", sign=True)
            L.append(f"| {v} | {fmt(d['median_ms'])} | {fmt(d['min_ms'])} | {fmt(d['max_ms'])} | {extra} | "
                     f"{'—' if v == 'healthy' else format(d['extra_timeouts'], '.2f')} | {d['runs']} |")
        L.append("")
        R.append("### Down minority: median of each round (ms)\n")
        R.append("| round | healthy | stopped | refused |\n|---:|---:|---:|---:|")
        for i in range(len(vs["healthy"]["round_medians_ms"])):
            R.append(f"| {i + 1} | " + " | ".join(f"{vs[v]['round_medians_ms'][i]:.2f}"
                                                 for v in ("healthy", "stopped", "refused")) + " |")
        R.append("")
    return L, R


def markdown(r):
    L = []
    tools = r["tools"]
    lab = r["labels"]
    m, v, cfg = r["machine"], r["versions"], r["config"]
    L.append("# distlock benchmark results\n")
    if r.get("quick"):
        L.append("> **Quick smoke run (`--quick`)**: fewer rounds and shorter windows; figures are indicative only.\n")
    L.append("Produced by `benches/run` (issues 4, 9 and 10). Every figure below comes from one run, all tools side by "
             "side on the same machine, against servers the run started itself on loopback ports; every ratio "
             "is taken between figures of that run, per round where the measurement has rounds (the tools "
             "taking turns), and the median of the rounds is the one judged against its target. "
             "The machine may be shared and busy: the load average is given for that reason.\n")
    L.append("![chart](chart.svg)\n")
    L.append("## Machine\n")
    L.append("| | |\n|---|---|")
    L.append(f"| `nproc` | {m['nproc']} |")
    L.append(f"| CPU (`/proc/cpuinfo`) | {m['cpu']} |")
    L.append(f"| kernel | {m['kernel']} |")
    L.append(f"| OS | {m['os']} |")
    L.append(f"| memory | {m['memory']} |")
    L.append(f"| date | {m['date']} |")
    L.append(f"| load average (1/5/15 min) at start → end | {' '.join(m['loadavg_start'])} → {' '.join(m.get('loadavg_end', []))} |")
    L.append(f"| run time | {r.get('elapsed_s', 0):.0f} s |")
    L.append("")
    L.append("| software | version |\n|---|---|")
    for k, val in v.items():
        L.append(f"| {k} | {escape(val)} |")
    L.append("")
    tt = targets(r)
    if tt or not topology_targets(r):
        L.append("## Targets (distlock notify mode; issue 9 §7)\n")
        L.append("| target | measured | threshold | met |\n|---|---|---|---|")
        for name, meas, thr, ok in tt:
            L.append(f"| {name} | {meas} | {thr} | {'**yes**' if ok else '**NO**'} |")
        L.append("")
    tt = topology_targets(r)
    if tt:
        L.append("## Targets over several servers (distlock notify mode; issue 10, Performance)\n")
        L.append("| target | measured | threshold | met |\n|---|---|---|---|")
        for name, meas, thr, ok in tt:
            L.append(f"| {name} | {meas} | {thr} | {'**yes**' if ok else '**NO**'} |")
        L.append("")

    oh = r.get("overhead")
    if oh:
        L.append("## 1. Per-invocation overhead: `LOCK -- true`, uncontended\n")
        L.append(f"{cfg['rounds']} rounds; in each round every tool runs {cfg['runs']} times in a row, the tools "
                 "taking turns in a rotating order (reversed every other round), after 3 warm-up runs each. "
                 "Wall time is spawn → reaped, timed by `stamp time` (posix_spawn, CLOCK_MONOTONIC). "
                 "The ratio to flock is computed per round (tool's round median / flock's round median). "
                 "Peak RSS is the wrapper process alone: `stamp peakrss` runs it under ptrace with "
                 "PTRACE_O_TRACEEXIT and reads VmHWM from /proc/PID/status when the wrapper itself exits "
                 f"(its memory is still mapped then), {cfg['rss_runs']} runs per tool; the command `true` "
                 f"it runs is not counted (alone it peaks at {r.get('rss_true_kb', 0) / 1024:.2f} MiB). "
                 "hyperfine's mean (`hyperfine -N`, runs consecutive, not interleaved) is a cross-check. "
                 "CPU and minor page faults per run are wait4's figures for the whole `LOCK -- true` "
                 "(wrapper and `true`), medians.\n")
        L.append("| tool | median ms | min ms | max ms | p90 ms | ratio to flock, median (min–max over rounds) "
                 "| hyperfine mean ms | CPU ms / run | page faults / run | peak RSS MiB, median (max) |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for t in tools:
            d = oh[t]
            L.append(f"| {lab[t]} | {fmt(d['median_ms'])} | {fmt(d['min_ms'])} | {fmt(d['max_ms'])} | "
                     f"{fmt(d['p90_ms'])} | {d['ratio_median']:.2f}x ({d['ratio_min']:.2f}–{d['ratio_max']:.2f}) | "
                     f"{fmt(d.get('hyperfine_mean_ms'))} | {fmt(d.get('cpu_median_ms'))} | "
                     f"{d.get('minflt_median', 0):.0f} | "
                     f"{d.get('rss_median_mib', float('nan')):.2f} ({d.get('rss_max_mib', float('nan')):.2f}) |")
        L.append("")

    ho = r.get("handoff")
    if ho:
        L.append("## 2. Hand-off latency\n")
        L.append("A holder runs `stamp mark` under the lock, which stamps CLOCK_MONOTONIC and blocks on a FIFO. "
                 "A waiter is started with `stamp mark` as its command; once it is really waiting — "
                 "distlock notify: it has its place in line (`ZCARD distlock:{KEY}:queue`; it subscribed to its "
                 "own wake-up channel before joining); distlock spin and redis-py: its connection has sent its first, failed, "
                 "attempt (CLIENT LIST cmd=evalsha / cmd=set); etcdctl: its key is queued under the lock prefix; "
                 f"flock: its request is blocked in /proc/locks — the harness waits a further random "
                 f"{cfg['settle'] * 1000:.0f}–{cfg['settle'] * 2000:.0f} ms (random, so that a poller's phase is not "
                 "locked to the harness's) and tells the holder's child to go; the child stamps and exits. "
                 "Latency = waiter's child start stamp − holder's child exit stamp. "
                 f"{cfg['handoffs']} hand-offs per tool, a fresh holder and waiter each time, the tools taking turns. "
                 "Both stamps include the cost of a process exit/start, the same for every tool. "
                 "The ratio to flock is that of the p50s of each round (consecutive blocks of hand-offs); "
                 "a p99 is taken over all hand-offs only.\n")
        L.append("| tool | p50 ms | p50 ratio to flock, median (min–max over rounds) | p90 ms | p99 ms | min ms | "
                 "max ms | mean ms | n |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for t in tools:
            d = ho[t]
            if "p50_ratio_median" in d:
                ratio = f"{d['p50_ratio_median']:.2f}x ({d['p50_ratio_min']:.2f}–{d['p50_ratio_max']:.2f})"
            else:
                ratio = f"{d['p50_ms'] / ho['flock']['p50_ms']:.2f}x" if "flock" in ho else "—"
            L.append(f"| {lab[t]} | {fmt(d['p50_ms'])} | {ratio} | {fmt(d['p90_ms'])} | {fmt(d['p99_ms'])} | "
                     f"{fmt(d['min_ms'])} | {fmt(d['max_ms'])} | {fmt(d['mean_ms'])} | {d['n']} |")
        L.append("")
        bd = [(t, ho[t]["breakdown"]) for t in tools if ho[t].get("breakdown")]
        if bd:
            L.append("Where a distlock hand-off goes: a separate pass with Redis MONITOR on (not among the figures "
                     "above; MONITOR slows Redis slightly), stages split at the MONITOR timestamps of the holder's "
                     "release EVALSHA and the waiter's winning acquire EVALSHA (wall clock, converted to the "
                     "monotonic stamps' clock; medians). In notify mode the release already hands the lock to "
                     "the waiter and wakes it; its \"acquire\" is the attempt that takes the lock up.\n")
            L.append("| tool | hand-offs | holder's child exit → release at Redis | release → waiter's acquire "
                     "at Redis | acquire → waiter's child start |")
            L.append("|---|---:|---:|---:|---:|")
            for t, b in bd:
                L.append(f"| {lab[t]} | {b['n']} | {b['exit_to_release_ms']:.3f} ms | "
                         f"{b['release_to_acquire_ms']:.3f} ms | {b['acquire_to_start_ms']:.3f} ms |")
            L.append("")

    wt = r.get("waiting")
    if wt:
        L.append("## 3. Waiting cost\n")
        L.append(f"A holder takes the lock; {cfg['waiters']} waiters (`LOCK -- true`) are started and, once all of "
                 f"them are really waiting (same tests as above), the harness watches them for {cfg['window']:g} s, "
                 "then the holder's child exits. *Requests*: for the Redis tools, top-level commands seen by MONITOR "
                 "during the window from any connection but the holder's and the harness's (commands run inside Lua "
                 "scripts excluded; `INFO commandstats` deltas, which do count them, are in the raw figures); for "
                 "etcdctl, the delta of etcd's `grpc_server_msg_received_total` (all methods), which also counts the "
                 "holder's lease keep-alives; flock waits in the kernel. A distlock notify waiter keeps its place "
                 "in line with one request every 2 s. *Worst waiter*: each request is attributed to the waiter "
                 "whose process holds its connection (socket inodes of /proc/PID/fd looked up in /proc/net/tcp); "
                 "a waiter's rate is (n − 1) / (time between its first and last request in the window), which a "
                 "window that happens to catch one request more does not inflate (n / window below two "
                 "requests); *shortest gap*: between two requests of one waiter. *CPU in the window*: sum over the waiters' "
                 "threads of /proc/PID/task/TID/schedstat (ns on CPU). *Whole life*: user+sys from wait4 of each "
                 "waiter (start-up, waiting, `true`, release). distlock's holder is given `--renew-every 20s`, so "
                 "that only its first renewal (the one that extends its short claim to the TTL, about a second after "
                 "it took the lock) may fall in the window; the holder's requests are not counted (its connections "
                 "are known); the waiters run with the defaults (`--ttl 30s`).\n")
        L.append("| tool | server requests / waiter / s | worst waiter, requests / s | shortest gap s | "
                 "requests in window (by command) | CPU ms / waiter / s in window | whole-life CPU ms, all waiters "
                 "| window s |")
        L.append("|---|---:|---:|---:|---|---:|---:|---:|")
        for t in tools:
            d = wt[t]
            by = d.get("requests_by_command")
            bys = f"{d['requests']:.0f}" + (" (" + ", ".join(f"{k} {n}" for k, n in sorted(by.items())) + ")" if by else "")
            if d["server"] == "etcd":
                bys += " gRPC messages"
            elif d["server"].startswith("none"):
                bys = "— (kernel)"
            worst = f"{d['worst_waiter_per_s']:.4f}" if "worst_waiter_per_s" in d else "—"
            gap = f"{d['min_gap_s']:.3f}" if d.get("min_gap_s") is not None else "—"
            L.append(f"| {lab[t]} | {d['requests_per_waiter_s']:.3f} | {worst} | {gap} | {bys} | "
                     f"{d['cpu_ms_per_waiter_s']:.3f} | {d['life_cpu_ms_total']:.0f} | {d['window_s']:.2f} |")
        L.append("")

    ct = r.get("contention")
    if ct:
        L.append("## 4. Contention throughput and fairness\n")
        nr = cfg.get("contention_rounds", 1)
        split = (f" in {nr} rounds of {cfg['duration'] / nr:g} s, the tools taking turns in a rotating order "
                 "(so that a burst of load elsewhere on the machine does not fall on one tool only); "
                 "per-client counts are summed over the rounds" if nr > 1 else "")
        L.append(f"{cfg['clients']} client loops (`stamp loop`), started together, each running `LOCK -- true` "
                 f"again and again on one key, {cfg['duration']:g} s per tool{split}; a critical section counts if it "
                 "completed (exit 0) within the window. *Machine busy*: all CPUs, from /proc/stat over the "
                 "window. *Server CPU*: the redis-server or etcd process, per critical section. *Acquire attempts*: "
                 "Redis tools only, from `INFO commandstats` (distlock: EVALSHA calls minus one release per "
                 "critical section, so a notify waiter's try, its joining the line and its taking up the lock "
                 "handed to it count three; redis-py: SET NX calls); *Redis commands*: every command Redis ran, "
                 "those inside Lua scripts included, per critical section (as in 5).\n")
        L.append("| tool | critical sections / s | ratio to flock, median (per round) | per client min | per client max "
                 "| mean | worst deviation from mean | machine busy | server CPU ms / CS | acquire attempts / CS "
                 "| Redis commands / CS |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for t in tools:
            d = ct[t]
            busy = d.get("machine_busy_pct")
            L.append(f"| {lab[t]} | {fmt(d['total_per_s'])} | {_ratio_rounds(d)} | {d['min']} | "
                     f"{d['max']} | {d['mean']:.1f} | "
                     f"{d['max_abs_dev_pct']:.1f}% | {'—' if busy is None else f'{busy:.0f}%'} | "
                     f"{fmt(d.get('server_cpu_ms_per_cs'))} | {fmt(d.get('attempts_per_cs'))} | "
                     f"{fmt(d.get('commands_per_cs'))} |")
        L.append("")

    sc = r.get("scaling")
    if sc:
        by = sc["by_waiters"]
        ws = [str(w) for w in sc["waiters"]]
        lo, hi = ws[0], ws[-1]
        nr = cfg.get("line_rounds", 1)
        L.append("## 5. Contention with 2 and 16 waiters: Redis work per critical section as the line grows\n")
        L.append(f"As in 4, with {' and '.join(str(int(w) + 1) for w in ws)} loops ({' and '.join(ws)} waiters "
                 f"besides the holder), {cfg['line_duration']:g} s per tool and line length"
                 + (f" in {nr} rounds, all tools and line lengths taking turns" if nr > 1 else "")
                 + f"; the critical section is `stamp section FILE {sc['section_ms']}`, which sleeps "
                 f"{sc['section_ms']} ms stamped at both ends on CLOCK_MONOTONIC, so that the waiters are really "
                 "waiting (with `true`, 3 loops on 2 CPUs spend most of their time starting processes and the "
                 "line is mostly empty). *Line*: distlock notify only, `ZCARD` of its queue sampled every 50 ms "
                 "(mean and max; those ZCARDs are taken out of the counts). *Redis commands / CS*: `INFO "
                 "commandstats` delta over the window, every command Redis ran, those run inside the Lua scripts "
                 "included (the harness's own INFO and ZCARD excluded), per critical section; *requests / CS*: "
                 "those that came over the network (scripts, SET NX, (UN)SUBSCRIBE, HELLO, CLIENT SETINFO, SCRIPT "
                 f"LOAD); *growth*: {hi} waiters' figure over {lo} waiters', median of the per-round ratios. "
                 "*At most inside*: the most stamped sections open at one instant (must be 1).\n")
        L.append("| tool | waiters | line, mean (max) | critical sections / s | ratio to flock, median (per round) "
                 "| worst deviation from mean | at most inside | Redis commands / CS | growth | requests / CS "
                 "| subscriptions / CS | server CPU ms / CS |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for t in tools:
            for w in ws:
                d = by[w][t]
                line = f"{d['line_mean']:.1f} ({d['line_max']})" if "line_mean" in d else "—"
                growth = (f"{d['commands_growth_median']:.2f}x" if "commands_growth_median" in d else "")
                L.append(f"| {lab[t]} | {w} | {line} | {fmt(d['total_per_s'])} | {_ratio_rounds(d)} | "
                         f"{d['max_abs_dev_pct']:.1f}% | {d['max_inside']} | {fmt(d.get('commands_per_cs'))} | "
                         f"{growth} | {fmt(d.get('requests_per_cs'))} | {fmt(d.get('subscribes_per_cs'))} | "
                         f"{fmt(d.get('server_cpu_ms_per_cs'))} |")
        L.append("")

    sem = r.get("semaphore")
    if sem:
        N, nr = sem["limit"], cfg.get("sem_rounds", 1)
        L.append(f"## 6. Semaphore (`--limit {N}`) against the mutex\n")
        L.append(f"distlock only: {sem['clients']} loops (`stamp loop`) of `distlock run --key K [--limit {N}] -- "
                 f"stamp section FILE {sem['section_ms']}`, a critical section that sleeps {sem['section_ms']} ms "
                 "and stamps its start and end on CLOCK_MONOTONIC, for "
                 f"{cfg['sem_duration']:g} s per variant"
                 + (f" in {nr} rounds, the variants taking turns" if nr > 1 else "")
                 + ". *Ratio*: the semaphore's critical sections per second over the mutex's, median of the "
                 f"per-round ratios (ideally about {N}x: {N} sections at once instead of one; a little more is "
                 "possible, as one slot's hand-off no longer stalls the others). *At most inside*: the "
                 "most stamped sections open at one instant, over every section of the variant (those that "
                 "ended after the window included). A section's stamps lie within its holder's hold of the "
                 "lock, so more than N would be a violation; the hold itself is a little longer.\n")
        L.append("| tool | variant | critical sections / s | ratio to the mutex, median (per round) | at most inside "
                 "| sections stamped | worst deviation from mean | Redis commands / CS |")
        L.append("|---|---|---:|---:|---:|---:|---:|---:|")
        for t in tools:
            if t not in sem["tools"]:
                continue
            d = sem["tools"][t]
            for v, name in (("mutex", "mutex"), ("limit", f"--limit {N}")):
                x = d[v]
                ratio = _ratio_rounds(d) if v == "limit" else "1.00x"
                L.append(f"| {lab[t]} | {name} | {fmt(x['total_per_s'])} | {ratio} | {x['max_inside']} | "
                         f"{x['sections']} | {x['max_abs_dev_pct']:.1f}% | {fmt(x.get('commands_per_cs'))} |")
        L.append("")

    topo, topo_raw = topology_sections(r)
    L.extend(topo)

    L.append("## Raw figures\n")
    if oh:
        L.append("### Overhead: median of each round (ms)\n")
        L.append("| round | " + " | ".join(lab[t] for t in tools) + " |")
        L.append("|---:|" + "---:|" * len(tools))
        for i in range(len(oh[tools[0]]["round_medians_ms"])):
            L.append(f"| {i + 1} | " + " | ".join(f"{oh[t]['round_medians_ms'][i]:.3f}" for t in tools) + " |")
        L.append("")
        L.append("Peak RSS per run, kB (VmHWM at the wrapper's exit / wait4 ru_maxrss, which includes `true`):\n")
        for t in tools:
            L.append(f"- {lab[t]}: " + ", ".join(f"{a}/{b}" for a, b in oh[t].get("rss_raw_kb", [])))
        L.append("")
    if ho:
        L.append("### Hand-off latencies, sorted (ms)\n")
        for t in tools:
            L.append(f"- {lab[t]}: " + " ".join(f"{x:.2f}" for x in sorted(ho[t]["raw_ms"])))
        L.append("")
    if ct:
        L.append("### Contention: critical sections per client (deviation from the mean)\n")
        for t in tools:
            d = ct[t]
            L.append(f"- {lab[t]}: " + ", ".join(f"{c} ({x:+.1f}%)" for c, x in zip(d["counts"], d["devs_pct"]))
                     + (f"; {d['late']} more finished after the window (not counted)" if d.get("late") else ""))
        L.append("")
    if sc:
        L.append("### Contention with 2 and 16 waiters: critical sections per client\n")
        for w in ws:
            for t in tools:
                d = by[w][t]
                L.append(f"- {w} waiters, {lab[t]}: " + ", ".join(str(c) for c in d["counts"])
                         + (f"; {d['late']} more finished after the window" if d.get("late") else ""))
        L.append("")
        L.append("### Contention with 2 and 16 waiters: `INFO commandstats` deltas (Lua-internal calls included)\n")
        for w in ws:
            for t in tools:
                cs = by[w][t].get("commandstats_delta")
                if cs is not None:
                    L.append(f"- {w} waiters, {lab[t]}: " + (", ".join(f"{k} {n}" for k, n in sorted(cs.items())) or "none"))
        L.append("")
    if sem:
        L.append("### Semaphore: critical sections per client\n")
        for t in tools:
            if t in sem["tools"]:
                for v in ("mutex", "limit"):
                    d = sem["tools"][t][v]
                    L.append(f"- {lab[t]}, {'mutex' if v == 'mutex' else '--limit ' + str(sem['limit'])}: "
                             + ", ".join(str(c) for c in d["counts"])
                             + (f"; {d['late']} more finished after the window" if d.get("late") else ""))
        L.append("")
    for results, title in (
            (ct, "Contention: `INFO commandstats` deltas over the run (Lua-internal calls included)"),
            (wt, "Waiting: `INFO commandstats` deltas over the window (all clients, Lua-internal calls included)")):
        if not results:
            continue
        L.append(f"### {title}\n")
        for t in tools:
            cs = results[t].get("commandstats_delta")
            if cs is not None:
                L.append(f"- {lab[t]}: " + (", ".join(f"{k} {n}" for k, n in sorted(cs.items())) or "none"))
        L.append("")
    L.extend(topo_raw)
    L.append("All numbers, unrounded, are in `results.json`.\n")
    return "\n".join(L)


# ---------------------------------------------------------------------------------------------
# SVG chart: four panels, one per measurement, one bar per tool

def _log_ticks(lo, hi):
    ticks = []
    e = math.floor(math.log10(lo))
    while 10 ** e <= hi * 1.0001:
        for mlt in (1, 2, 5):
            t = mlt * 10 ** e
            if lo * 0.9999 <= t <= hi * 1.0001:
                ticks.append(t)
        e += 1
    return ticks


def _lin_ticks(hi):
    if hi <= 0:
        return [0, 1], 1
    raw = hi / 5
    mag = 10 ** math.floor(math.log10(raw))
    step = min((s * mag for s in (1, 2, 2.5, 5, 10) if s * mag >= raw), default=10 * mag)
    top = step * math.ceil(hi / step)
    n = int(round(top / step))
    return [i * step for i in range(n + 1)], top


def _tick_label(t):
    if t >= 1:
        return f"{t:g}"
    return f"{t:.3g}"


def _panel(out, x0, y0, w, h, title, rows, log, unit, target=None, note=None, label_w=118):
    """rows: [(label, color, value, whisker_lo, whisker_hi, text, tick)] ."""
    out.append(f'<text x="{x0}" y="{y0 + 16}" font-size="14" font-weight="bold">{escape(title)}</text>')
    if note:
        out.append(f'<text x="{x0}" y="{y0 + 32}" font-size="11" fill="#555">{escape(note)}</text>')
    right_pad = 190
    px0, px1 = x0 + label_w, x0 + w - right_pad
    top, bottom = y0 + 62, y0 + h - 36
    vals = [v for row in rows for v in (row[2], row[3], row[4], row[6]) if v is not None]
    if target:
        vals.append(target[0])
    if log:
        pos = [v for v in vals if v > 0] or [1]
        lo = 10 ** math.floor(math.log10(min(pos) * 0.7))
        hi = 10 ** math.ceil(math.log10(max(pos) * 1.3))
        ticks = _log_ticks(lo, hi)
        if len(ticks) > 9:
            ticks = [t for t in ticks if f"{t:g}".lstrip("0.").startswith("1")]

        def X(v):
            v = max(v, lo)
            return px0 + (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * (px1 - px0)
    else:
        ticks, hi = _lin_ticks(max(vals) * 1.05 if vals else 1)

        def X(v):
            return px0 + max(v, 0) / hi * (px1 - px0)
    for t in ticks:
        xx = X(t)
        out.append(f'<line x1="{xx:.1f}" y1="{top - 4}" x2="{xx:.1f}" y2="{bottom}" stroke="#e3e3e3"/>')
        out.append(f'<text x="{xx:.1f}" y="{bottom + 14}" font-size="10" text-anchor="middle" fill="#555">'
                   f'{_tick_label(t)}</text>')
    out.append(f'<text x="{(px0 + px1) / 2:.1f}" y="{bottom + 29}" font-size="11" text-anchor="middle" '
               f'fill="#333">{escape(unit)}</text>')
    out.append(f'<line x1="{px0}" y1="{top - 4}" x2="{px0}" y2="{bottom}" stroke="#999"/>')
    if target:
        tv, tl = target
        xt = X(tv)
        out.append(f'<line x1="{xt:.1f}" y1="{top - 12}" x2="{xt:.1f}" y2="{bottom}" stroke="#c00" '
                   f'stroke-dasharray="5,3" stroke-width="1.4"/>')
        out.append(f'<text x="{xt + 3:.1f}" y="{top - 4}" font-size="10" fill="#c00">{escape(tl)}</text>')
    band = (bottom - top) / max(len(rows), 1)
    bh = min(band * 0.62, 26)
    for i, (label, color, value, wlo, whi, text, tick) in enumerate(rows):
        cy = top + band * (i + 0.5)
        out.append(f'<text x="{px0 - 6}" y="{cy + 4:.1f}" font-size="12" text-anchor="end">{escape(label)}</text>')
        if value is None:
            out.append(f'<text x="{px0 + 4}" y="{cy + 4:.1f}" font-size="11" fill="#777">{escape(text)}</text>')
            continue
        xv = X(value)
        out.append(f'<rect x="{px0}" y="{cy - bh / 2:.1f}" width="{max(xv - px0, 1):.1f}" height="{bh:.1f}" '
                   f'fill="{color}"/>')
        if wlo is not None and whi is not None:
            a, b = X(wlo), X(whi)
            out.append(f'<line x1="{a:.1f}" y1="{cy:.1f}" x2="{b:.1f}" y2="{cy:.1f}" stroke="#222" stroke-width="1.2"/>')
            for xx in (a, b):
                out.append(f'<line x1="{xx:.1f}" y1="{cy - 5:.1f}" x2="{xx:.1f}" y2="{cy + 5:.1f}" stroke="#222" stroke-width="1.2"/>')
        end = xv
        if tick is not None:
            xt = X(tick)
            out.append(f'<line x1="{xt:.1f}" y1="{cy - bh / 2 - 3:.1f}" x2="{xt:.1f}" y2="{cy + bh / 2 + 3:.1f}" '
                       f'stroke="#111" stroke-width="2.5"/>')
            end = max(end, xt)
        if whi is not None:
            end = max(end, X(whi))
        out.append(f'<text x="{end + 5:.1f}" y="{cy + 4:.1f}" font-size="11" stroke="white" stroke-width="3" '
                   f'paint-order="stroke">{escape(text)}</text>')


def svg(r):
    tools, lab = r["tools"], r["labels"]
    colors = {"distlock-notify": "#1f6fb4", "distlock-spin": "#8fbfe6", "flock": "#2e9e44",
              "etcdctl": "#f08a1c", "pylock": "#d0393b", "redlock3": "#7b4fb0", "redlock5": "#b39ddb",
              "sentinel": "#c2185b", "cluster": "#00897b"}
    W, H = 1240, 1122
    pw, ph = 600, 340
    topo = r.get("topologies") or r.get("topology_handoff") or r.get("down_minority")
    if topo:
        H = 1826  # issue 10: two more rows of panels
    elif not (r.get("scaling") or r.get("semaphore")):
        H = 770  # results from before issue 9: four panels
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
           'font-family="DejaVu Sans, Helvetica, Arial, sans-serif">',
           f'<rect width="{W}" height="{H}" fill="white"/>']
    m = r["machine"]
    quick = " — QUICK SMOKE RUN" if r.get("quick") else ""
    out.append(f'<text x="20" y="28" font-size="18" font-weight="bold">distlock benchmark{quick}</text>')
    out.append(f'<text x="20" y="48" font-size="12" fill="#444">{escape(m["date"])} · {m["nproc"]} CPU '
               f'({escape(m["cpu"])}) · kernel {escape(m["kernel"].split()[0])} · load '
               f'{escape(" ".join(m["loadavg_start"]))} · red dashed line: distlock notify target</text>')
    pos = [(20, 66), (635, 66), (20, 418), (635, 418), (20, 770), (635, 770), (20, 1122), (635, 1122),
           (20, 1474)]

    oh = r.get("overhead")
    if oh:
        rows = []
        for t in tools:
            d = oh[t]
            rows.append((lab[t], colors[t], d["median_ms"], min(d["round_medians_ms"]), max(d["round_medians_ms"]),
                         f"{fmt(d['median_ms'])} ms · {d['ratio_median']:.2f}x · {d.get('rss_median_mib', 0):.1f} MiB",
                         None))
        _panel(out, *pos[0], pw, ph, "1. Overhead of LOCK -- true, uncontended",
               rows, True, "ms (log)", (1.5 * oh["flock"]["median_ms"], "1.5x flock"),
               "lower is better · median wall ms (whisker: min–max of round medians) · ratio to flock · peak RSS")
    ho = r.get("handoff")
    if ho:
        rows = [(lab[t], colors[t], ho[t]["p50_ms"], None, None,
                 f"p50 {fmt(ho[t]['p50_ms'])} · p99 {fmt(ho[t]['p99_ms'])} ms", ho[t]["p99_ms"]) for t in tools]
        _panel(out, *pos[1], pw, ph, "2. Hand-off latency (holder's child exit → waiter's child start)",
               rows, True, "ms (log)", (1.25 * ho["flock"]["p50_ms"], "1.25x flock p50"),
               "lower is better · bar: p50 · black tick: p99")
    wt = r.get("waiting")
    if wt:
        rows = []
        for t in tools:
            d = wt[t]
            req = "kernel" if d["server"].startswith("none") else (
                f"{d['worst_waiter_per_s']:.2f} req/s (worst waiter)" if "worst_waiter_per_s" in d
                else f"{d['requests_per_waiter_s']:.2f} req/s")
            rows.append((lab[t], colors[t], d["cpu_ms_per_waiter_s"], None, None,
                         f"{d['cpu_ms_per_waiter_s']:.3f} ms CPU/s · {req}", None))
        _panel(out, *pos[2], pw, ph, f"3. Waiting cost: {r['config']['waiters']} waiters, lock held "
               f"{r['config']['window']:g} s", rows, False, "ms CPU / waiter / s", None,
               "lower is better · bar: CPU per waiter per second · text: server requests per waiter per second")
    ct = r.get("contention")
    if ct:
        rows = [(lab[t], colors[t], ct[t]["total_per_s"], None, None,
                 f"{fmt(ct[t]['total_per_s'])}/s · clients ±{ct[t]['max_abs_dev_pct']:.1f}%", None) for t in tools]
        _panel(out, *pos[3], pw, ph, f"4. Contention: {r['config']['clients']} loops on one key, "
               f"{r['config']['duration']:g} s", rows, False, "critical sections / s",
               (0.7 * ct["flock"]["total_per_s"], "0.7x flock"),
               "higher is better · bar: total per second · text: worst client's deviation from the mean")
    sc = r.get("scaling")
    if sc:
        by = sc["by_waiters"]
        ws = [str(w) for w in sc["waiters"]]
        rows = []
        for t in tools:
            for w in ws:
                d = by[w][t]
                if "commands_per_cs" not in d:
                    continue
                rows.append((f"{lab[t]}, {w}", colors[t], d["commands_per_cs"], None, None,
                             f"{d['commands_per_cs']:.0f} commands/CS · {fmt(d['total_per_s'])} CS/s", None))
        n = by[ws[0]].get("distlock-notify", {})
        target = (1.25 * n["commands_per_cs"], f"1.25x notify at {ws[0]}") if "commands_per_cs" in n else None
        if rows:
            _panel(out, *pos[4], pw, ph, f"5. Redis work per critical section, {' and '.join(ws)} waiters",
                   rows, False, "Redis commands / critical section (Lua-internal included)", target,
                   f"lower is better, and flat · {sc['section_ms']} ms sections · text: commands and throughput",
                   label_w=150)
    sem = r.get("semaphore")
    if sem:
        rows = []
        for t in tools:
            if t not in sem["tools"]:
                continue
            d = sem["tools"][t]
            for v in ("mutex", "limit"):
                x = d[v]
                name = "mutex" if v == "mutex" else f"limit {sem['limit']}"
                extra = f" · {d['ratio_median']:.2f}x" if v == "limit" else ""
                rows.append((f"{lab[t]}, {name}", colors[t], x["total_per_s"], None, None,
                             f"{fmt(x['total_per_s'])}/s · max {x['max_inside']} inside{extra}", None))
        n = sem["tools"].get("distlock-notify")
        target = (3 * n["mutex"]["total_per_s"], "3x notify mutex") if n else None
        _panel(out, *pos[5], pw, ph, f"6. Semaphore --limit {sem['limit']} vs mutex: {sem['clients']} loops, "
               f"{sem['section_ms']} ms sections", rows, False, "critical sections / s", target,
               "higher is better · text: throughput, most sections inside at once, ratio to the mutex",
               label_w=170)
    _topology_panels(out, r, colors, pos[6:], pw, ph)
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _topology_panels(out, r, colors, pos, pw, ph):
    """Panels 7-9 (issue 10): distlock over several servers against distlock over one."""
    tp = r.get("topologies")
    if tp:
        by = tp["by_variant"]
        rows = [(_topo_label(r, v), colors.get(v, "#777"), by[v]["median_ms"], min(by[v]["round_medians_ms"]),
                 max(by[v]["round_medians_ms"]), f"{fmt(by[v]['median_ms'])} ms · {by[v]['ratio_single_median']:.2f}x "
                 "one server", None) for v in tp["variants"]]
        one = by["distlock-notify"]["median_ms"]
        _panel(out, *pos[0], pw, ph, "7. Overhead of LOCK -- true over several servers", rows, True, "ms (log)",
               (1.25 * one, "1.25x one server"),
               "lower is better · median ms (whisker: round medians) · ratio to one server; Redlock 3: ≤ 1.3x",
               label_w=150)
    th = r.get("topology_handoff")
    if th:
        by = th["by_variant"]
        rows = [(_topo_label(r, v), colors.get(v, "#777"), by[v]["p50_ms"], None, None,
                 f"p50 {fmt(by[v]['p50_ms'])} · p99 {fmt(by[v]['p99_ms'])} ms · {by[v]['p50_ratio_single_median']:.2f}x",
                 by[v]["p99_ms"]) for v in th["variants"]]
        _panel(out, *pos[1], pw, ph, "8. Hand-off latency over Redlock", rows, True, "ms (log)",
               (1.5 * by["distlock-notify"]["p50_ms"], "1.5x one server p50"),
               "lower is better · bar: p50 · black tick: p99 · text: p50 ratio to one server", label_w=150)
    dm = r.get("down_minority")
    if dm:
        vs, nt = dm["variants"], dm["node_timeout_ms"]
        shades = {"healthy": "#7b4fb0", "stopped": "#8d6e63", "refused": "#bdbdbd"}
        rows = [(f"Redlock 3, {v}", shades[v], vs[v]["median_ms"], min(vs[v]["round_medians_ms"]),
                 max(vs[v]["round_medians_ms"]), f"{fmt(vs[v]['median_ms'])} ms"
                 + ("" if v == "healthy" else f" · {vs[v]['extra_ms_median']:+.0f} ms = "
                    f"{vs[v]['extra_timeouts']:.2f} node timeouts"), None)
                for v in ("healthy", "stopped", "refused")]
        _panel(out, *pos[2], pw, ph, f"9. A down minority: Redlock over 3, --node-timeout {nt}ms", rows, True,
               "ms per LOCK -- true (log)", (vs["healthy"]["median_ms"] + nt, "healthy + one node timeout"),
               "lower is better · one node SIGSTOPped, or killed (connection refused)", label_w=150)


if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                              "results.json")
    with open(path) as f:
        res = json.load(f)
    d = os.path.dirname(os.path.abspath(path))
    with open(os.path.join(d, "results.md"), "w") as f:
        f.write(markdown(res))
    with open(os.path.join(d, "chart.svg"), "w") as f:
        f.write(svg(res))
    print(f"wrote {d}/results.md and {d}/chart.svg")
