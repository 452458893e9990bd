#!/usr/bin/env python3
"""pylock: the typical home-made Redis lock wrapper, a peer in the distlock benchmark.

    python3 benches/pylock.py [--redis URL] KEY -- COMMAND [ARGS...]

It takes redis-py's Lock on `pylock:{KEY}` with timeout=30 (the key's TTL, never renewed)
and blocking_timeout=None (wait forever; redis-py polls SET NX every 0.1 s, its default),
runs the command with subprocess, releases the lock and exits with the command's status.
This is what a script written in an afternoon looks like; it is not a recommendation.
"""

import os
import subprocess
import sys

import redis
from redis.lock import Lock


def main(argv):
    url = os.environ.get("DISTLOCK_REDIS_URL", "redis://127.0.0.1:6379")
    if len(argv) >= 2 and argv[0] == "--redis":
        url, argv = argv[1], argv[2:]
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: pylock.py [--redis URL] KEY -- COMMAND [ARGS...]\n")
        return 64
    key, command = argv[0], argv[2:]
    client = redis.Redis.from_url(url)
    lock = Lock(client, f"pylock:{{{key}}}", timeout=30, blocking_timeout=None)
    lock.acquire()
    try:
        return subprocess.call(command)
    finally:
        lock.release()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
