#!/usr/bin/env python3
"""What an acquire + release cycle costs the Redis server: the time its
commands ran (INFO commandstats `usec`, summed over every command, nested
script calls included once through EVALSHA) per cycle, for fencelock's
acquire and release scripts and for the floor (SET NX PX, then an EVALSHA
compare-and-delete), on 64 reused names, pipelined so that client and
network time stay out of it. Variants alternate, 5 rounds, median shown.

    .build/bench-venv/bin/python bench/tools/script_cost.py redis://127.0.0.1:PORT/0 [--against REV]

--against REV adds fencelock's scripts as they were at git revision REV.
Use an otherwise idle server: the figures are the whole server's.
"""
import argparse
import os
import statistics
import subprocess
import sys

import redis

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from bench import SCRIPTS, on_disk, script_text  # noqa: E402

NAMES, PIPELINES = 64, 200
TOKEN = "0123456789abcdef0123456789abcdef0123"
FLOOR_RELEASE = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0"


def at_revision(rev):
    """`bench.script_text`'s reader for core/src/scripts/ at git revision `rev`."""
    def read(path):
        return subprocess.run(["git", "-C", SCRIPTS, "show", f"{rev}:./{path}"],
                              capture_output=True, check=True).stdout
    return read


def fencelock(r, read):
    acquire, release = (r.script_load(script_text(n, read)) for n in ("acquire", "release"))

    def cycle(p, i):
        p.evalsha(acquire, 2, f"fencelock:{{cost:{i}}}", f"fencelock:{{cost:{i}}}:fence", TOKEN, 10000, 70000)
        p.evalsha(release, 2, f"fencelock:{{cost:{i}}}", f"fencelock:{{cost:{i}}}:release", TOKEN)
    return cycle


def floor(r):
    release = r.script_load(FLOOR_RELEASE)

    def cycle(p, i):
        p.set(f"floor:cost:{i}", TOKEN, nx=True, px=10000)
        p.evalsha(release, 1, f"floor:cost:{i}", TOKEN)
    return cycle


def server_us_per_cycle(r, cycle, pipelines):
    r.config_resetstat()
    for _ in range(pipelines):
        p = r.pipeline(transaction=False)
        for i in range(NAMES):
            cycle(p, i)
        p.execute()
    stats = r.info("commandstats")
    usec = sum(s["usec"] for k, s in stats.items() if k not in ("cmdstat_config", "cmdstat_info"))
    return usec / (pipelines * NAMES)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--against", help="a git revision whose scripts to measure too")
    a = ap.parse_args()
    r = redis.Redis.from_url(a.url)
    variants = {"floor: SET NX PX + EVALSHA": floor(r), "fencelock": fencelock(r, on_disk)}
    if a.against:
        variants[f"fencelock at {a.against}"] = fencelock(r, at_revision(a.against))
    for cycle in variants.values():
        server_us_per_cycle(r, cycle, 10)  # warm: the keys' counters exist, as in a running app
    got = {name: [] for name in variants}
    for _ in range(5):
        for name, cycle in variants.items():
            got[name].append(server_us_per_cycle(r, cycle, PIPELINES))
    for name, xs in got.items():
        print(f"{statistics.median(xs):6.2f} µs/cycle (min {min(xs):.2f}, max {max(xs):.2f})  {name}")


if __name__ == "__main__":
    main()
