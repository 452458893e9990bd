#!/usr/bin/env python3
"""Lock history overhead (issue 17): an uncontended `distlock run -k KEY -- true`, with
`--history 1h` and without, against one redis-server started on a free loopback port.

Rounds alternate the two (the order rotates each round, so a burst of load on a shared machine
does not fall on one side only); each round times RUNS runs of each, one after the other, and
takes their median. The ratio on/off is computed per round; the summary is the median of the
rounds' ratios, with their min and max, and each side's median time.

    benches/history.py [--bin target/release/distlock] [--rounds 7] [--runs 200]
"""

import argparse
import socket
import statistics
import subprocess
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/distlock")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--runs", type=int, default=200)
    args = ap.parse_args()
    port = free_port()
    tmp = tempfile.mkdtemp()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", tmp],
        stdout=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            if subprocess.run(["redis-cli", "-p", str(port), "PING"], capture_output=True, text=True).stdout.strip() == "PONG":
                break
            time.sleep(0.05)
        url = f"redis://127.0.0.1:{port}"
        sides = {
            "off": [args.bin, "--redis", url, "run", "-k", "bench-off", "--", "true"],
            "on": [args.bin, "--redis", url, "--history", "1h", "run", "-k", "bench-on", "--", "true"],
        }
        for cmd in sides.values():  # warm up: scripts loaded, history created
            for _ in range(5):
                subprocess.run(cmd, check=True)
        ratios, medians = [], {"on": [], "off": []}
        for r in range(args.rounds):
            order = ["off", "on"] if r % 2 == 0 else ["on", "off"]
            times = {}
            for side in order:
                samples = []
                for _ in range(args.runs):
                    t = time.perf_counter()
                    subprocess.run(sides[side], check=True)
                    samples.append(time.perf_counter() - t)
                times[side] = statistics.median(samples)
                medians[side].append(times[side])
            ratios.append(times["on"] / times["off"])
            print(f"round {r + 1}: off {times['off'] * 1000:.2f} ms, on {times['on'] * 1000:.2f} ms, ratio {ratios[-1]:.3f}")
        events = subprocess.run(["redis-cli", "-p", str(port), "XLEN", "distlock:{bench-on}:history"], capture_output=True, text=True).stdout.strip()
        print(
            f"median of {args.rounds} rounds x {args.runs} runs: off {statistics.median(medians['off']) * 1000:.2f} ms, "
            f"on {statistics.median(medians['on']) * 1000:.2f} ms; ratio on/off {statistics.median(ratios):.3f} "
            f"(min {min(ratios):.3f}, max {max(ratios):.3f}); history length {events}"
        )
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
