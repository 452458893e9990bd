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


def targets(r):
    """[(target, measured, threshold, met)] for distlock notify."""
    out = []
    n = "distlock-notify"
    oh, ho, wt, ct = (r.get(k, {}) for k in ("overhead", "handoff", "waiting", "contention"))
    if n in oh and "ratio_median" in oh[n]:
        d = oh[n]
        out.append(("overhead within 1.5x of flock (median of per-round ratios)",
                    f"{d['ratio_median']:.2f}x (rounds: {d['ratio_min']:.2f}–{d['ratio_max']:.2f}x); "
                    f"{fmt(d['median_ms'])} ms vs {fmt(oh['flock']['median_ms'])} ms",
                    "≤ 1.50x", d["ratio_median"] <= 1.5))
    if n in oh and "rss_median_mib" in oh[n]:
        d = oh[n]
        out.append(("wrapper peak RSS under 6 MiB", f"{d['rss_median_mib']:.2f} MiB (max {d['rss_max_mib']:.2f})",
                    "< 6 MiB", d["rss_max_mib"] < 6))
    if n in ho and "flock" in ho:
        a, b = ho[n]["p50_ms"], ho["flock"]["p50_ms"]
        out.append(("hand-off p50 within 1.25x of flock's", f"{fmt(a)} ms vs {fmt(b)} ms = {a / b:.2f}x",
                    "≤ 1.25x", a <= 1.25 * b))
    if n in ho and "etcdctl" in ho:
        a, b = ho[n]["p99_ms"], ho["etcdctl"]["p99_ms"]
        out.append(("hand-off p99 no worse than etcdctl lock's", f"{fmt(a)} ms vs {fmt(b)} ms",
                    f"≤ {fmt(b)} ms", a <= b))
    if n in ct and "flock" in ct:
        a, b = ct[n]["total_per_s"], ct["flock"]["total_per_s"]
        rr = ct[n].get("round_ratios") or []
        rounds = f" (rounds: {min(rr):.2f}–{max(rr):.2f}x)" if len(rr) > 1 else ""
        out.append(("contention throughput at least 0.7x flock's",
                    f"{fmt(a)}/s vs {fmt(b)}/s = {a / b:.2f}x{rounds}", "≥ 0.70x", a >= 0.7 * b))
        dev = ct[n]["max_abs_dev_pct"]
        out.append(("every client within 10% of the mean", f"worst client {dev:.1f}% off the mean",
                    "≤ 10%", dev <= 10))
    if n in wt:
        d = wt[n]
        ttl = r.get("distlock_ttl_s", 30)
        allowed = d["waiters"] * math.ceil(d["window_s"] / ttl)
        out.append((f"waiters send no request beyond one per holder TTL ({ttl} s) while notifications work",
                    f"{d['requests']} requests from {d['waiters']} waiters in {d['window_s']:.1f} s "
                    f"({d['requests_per_waiter_s']:.3f}/waiter/s)",
                    f"≤ {allowed} (1 per waiter per TTL)", d["requests"] <= allowed))
    return out


def markdown(r):
    L = []
    tools = r["tools"]
    lab = r["labels"]
    m, v, cfg = r["machine"], r["versions"], r["config"]
    L.append("# distlock benchmark results\n")
    if r.get("quick"):
        L.append("> **Quick smoke run (`--quick`)**: fewer rounds and shorter windows; figures are indicative only.\n")
    L.append("Produced by `benches/run` (issue 4). Every figure below comes from one run, all tools side by side "
             "on the same machine, against servers the run started itself on loopback ports. "
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
    L.append("## Targets (distlock notify mode)\n")
    L.append("| target | measured | threshold | met |\n|---|---|---|---|")
    for name, meas, thr, ok in targets(r):
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
                 "distlock notify: its connection is subscribed to `distlock:{KEY}:released` (CLIENT LIST sub=1, "
                 "as PUBSUB NUMSUB shows); distlock spin and redis-py: its connection has sent its first, failed, "
                 "attempt (CLIENT LIST cmd=evalsha / cmd=set); etcdctl: its key is queued under the lock prefix; "
                 f"flock: its request is blocked in /proc/locks — the harness waits a further random "
                 f"{cfg['settle'] * 1000:.0f}–{cfg['settle'] * 2000:.0f} ms (random, so that a poller's phase is not "
                 "locked to the harness's) and tells the holder's child to go; the child stamps and exits. "
                 "Latency = waiter's child start stamp − holder's child exit stamp. "
                 f"{cfg['handoffs']} hand-offs per tool, a fresh holder and waiter each time, the tools taking turns. "
                 "Both stamps include the cost of a process exit/start, the same for every tool.\n")
        L.append("| tool | p50 ms | p90 ms | p99 ms | min ms | max ms | mean ms | n |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|")
        for t in tools:
            d = ho[t]
            L.append(f"| {lab[t]} | {fmt(d['p50_ms'])} | {fmt(d['p90_ms'])} | {fmt(d['p99_ms'])} | "
                     f"{fmt(d['min_ms'])} | {fmt(d['max_ms'])} | {fmt(d['mean_ms'])} | {d['n']} |")
        L.append("")
        bd = [(t, ho[t]["breakdown"]) for t in tools if ho[t].get("breakdown")]
        if bd:
            L.append("Where a distlock hand-off goes: a separate pass with Redis MONITOR on (not among the figures "
                     "above; MONITOR slows Redis slightly), stages split at the MONITOR timestamps of the holder's "
                     "release EVALSHA and the waiter's winning acquire EVALSHA (wall clock, converted to the "
                     "monotonic stamps' clock; medians).\n")
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
                 "holder's lease keep-alives; flock waits in the kernel. *CPU in the window*: sum over the waiters' "
                 "threads of /proc/PID/task/TID/schedstat (ns on CPU). *Whole life*: user+sys from wait4 of each "
                 "waiter (start-up, waiting, `true`, release). distlock's holder is given `--renew-every 20s` so that "
                 "no renewal of its own falls in the window; the waiters run with the defaults (`--ttl 30s`).\n")
        L.append("| tool | server requests / waiter / s | requests in window (by command) | "
                 "CPU ms / waiter / s in window | whole-life CPU ms, all waiters | window s |")
        L.append("|---|---:|---|---:|---:|---:|")
        for t in tools:
            d = wt[t]
            by = d.get("requests_by_command")
            bys = f"{d['requests']:.0f}" + (" (" + ", ".join(f"{k} {n}" for k, n in sorted(by.items())) + ")" if by else "")
            if d["server"] == "etcd":
                bys += " gRPC messages"
            elif d["server"].startswith("none"):
                bys = "— (kernel)"
            L.append(f"| {lab[t]} | {d['requests_per_waiter_s']:.3f} | {bys} | {d['cpu_ms_per_waiter_s']:.3f} | "
                     f"{d['life_cpu_ms_total']:.0f} | {d['window_s']:.2f} |")
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
                 "critical section; redis-py: SET NX calls).\n")
        L.append("| tool | critical sections / s | ratio to flock (per round) | per client min | per client max | mean "
                 "| worst deviation from mean | machine busy | server CPU ms / CS | acquire attempts / CS |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for t in tools:
            d = ct[t]
            busy = d.get("machine_busy_pct")
            rr = d.get("round_ratios") or []
            rounds = " (" + ", ".join(f"{x:.2f}" for x in rr) + ")" if len(rr) > 1 else ""
            L.append(f"| {lab[t]} | {fmt(d['total_per_s'])} | {d.get('ratio', 0):.2f}x{rounds} | {d['min']} | "
                     f"{d['max']} | {d['mean']:.1f} | "
                     f"{d['max_abs_dev_pct']:.1f}% | {'—' if busy is None else f'{busy:.0f}%'} | "
                     f"{fmt(d.get('server_cpu_ms_per_cs'))} | {fmt(d.get('attempts_per_cs'))} |")
        L.append("")

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


def _panel(out, x0, y0, w, h, title, rows, log, unit, target=None, note=None):
    """rows: [(label, color, value, whisker_lo, whisker_hi, text, tick)] ."""
    out.append(f'<text x="{x0}" y="{y0 + 16}" font-size="14" font-weight="bold">{escape(title)}</text>')
    if note:
        out.append(f'<text x="{x0}" y="{y0 + 32}" font-size="11" fill="#555">{escape(note)}</text>')
    label_w, right_pad = 118, 190
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
              "etcdctl": "#f08a1c", "pylock": "#d0393b"}
    W, H = 1240, 770
    pw, ph = 600, 340
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
           'font-family="DejaVu Sans, Helvetica, Arial, sans-serif">',
           f'<rect width="{W}" height="{H}" fill="white"/>']
    m = r["machine"]
    quick = " — QUICK SMOKE RUN" if r.get("quick") else ""
    out.append(f'<text x="20" y="28" font-size="18" font-weight="bold">distlock benchmark{quick}</text>')
    out.append(f'<text x="20" y="48" font-size="12" fill="#444">{escape(m["date"])} · {m["nproc"]} CPU '
               f'({escape(m["cpu"])}) · kernel {escape(m["kernel"].split()[0])} · load '
               f'{escape(" ".join(m["loadavg_start"]))} · red dashed line: distlock notify target</text>')
    pos = [(20, 66), (635, 66), (20, 418), (635, 418)]

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
            req = "kernel" if d["server"].startswith("none") else f"{d['requests_per_waiter_s']:.2f} req/s"
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
    out.append("</svg>")
    return "\n".join(out) + "\n"


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
