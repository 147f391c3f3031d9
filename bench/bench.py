"""Orchestrates `make bench` (called by bench/run.sh, which builds everything,
installs the peers outside the tree and starts the redis-servers).

Runs every scenario for every implementation in rounds, rotating the order of
the implementations each round so machine noise is spread over all of them,
then writes the results table (markdown) and the raw JSON lines.

    python bench.py --url URL --urls U1,...,U5 --out results.md [--quick]
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import time

import redis

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "..", "core", "src", "scripts")

# (lang, scenario, implementations). The first one is fencelock's.
GROUPS = [
    ("rust", "s1", ["fencelock", "floor", "floor-hop"]),
    ("python", "s1", ["fencelock", "redis-py", "pottery", "floor"]),
    ("python-async", "s1", ["fencelock-async", "redis-py-async", "floor-async"]),
    ("node", "s1", ["fencelock", "fencelock-wasm:ioredis", "fencelock-wasm:node-redis", "redlock", "semaphore", "floor"]),
    ("rust", "s2", ["fencelock", "floor"]),
    ("python", "s2", ["fencelock", "redis-py", "pottery", "floor"]),
    ("python-async", "s2", ["fencelock-async", "redis-py-async", "floor-async"]),
    ("node", "s2", ["fencelock", "fencelock-wasm:ioredis", "fencelock-wasm:node-redis", "redlock", "semaphore", "floor"]),
    ("rust", "s3", ["fencelock"]),
    ("python", "s3", ["fencelock", "redis-py", "redis-py:tuned", "pottery", "pottery:tuned"]),
    ("python-async", "s3", ["fencelock-async", "redis-py-async", "redis-py-async:tuned"]),
    ("node", "s3", ["fencelock", "fencelock-wasm:ioredis", "fencelock-wasm:node-redis", "redlock", "redlock:tuned", "semaphore",
                    "semaphore:tuned"]),
    # Issue 16 item 5: S3 with each worker a process of its own (fair=True against the default).
    ("python", "s3p", ["fencelock:fair", "fencelock", "redis-py:tuned"]),
    ("rust", "s4", ["fencelock", "floor"]),
    ("rust", "s1r", ["fencelock", "fencelock-replicas1"]),
    ("python", "s4", ["fencelock", "pottery"]),
    ("python-async", "s4", ["fencelock-async"]),
    ("node", "s4", ["fencelock", "fencelock-wasm:ioredis", "fencelock-wasm:node-redis", "redlock", "semaphore"]),
    # Issue 16: a semaphore and a read-write lock against redis-semaphore (bench_node.js).
    ("node", "sem", ["fencelock", "fencelock-wasm:ioredis", "semaphore", "semaphore:tuned"]),
    ("node", "rw", ["fencelock", "fencelock-wasm:ioredis", "semaphore", "semaphore:tuned"]),
]
MEM_GROUPS = [
    ("rust", ["fencelock"]),
    ("python", ["fencelock", "redis-py", "pottery"]),
    # No peer: redis-py's asyncio pool refuses 256 acquires at once.
    ("python-async", ["fencelock-async"]),
    ("node", ["fencelock", "fencelock-wasm:ioredis", "fencelock-wasm:node-redis", "redlock", "semaphore"]),
]
FLOOR_OF = {"rust": "floor", "python": "floor", "python-async": "floor-async", "node": "floor"}
LANG_LABEL = {
    "rust": "Rust",
    "python": "Python (threads)",
    "python-async": "Python asyncio",
    "node": "Node",
}
IMPL_LABEL = {
    "fencelock": "**fencelock**",
    "fencelock-async": "**fencelock**",
    "fencelock:fair": "**fencelock**, fair=True",
    "fencelock-replicas1": "**fencelock**, replicas=1",
    "fencelock-wasm:ioredis": "**fencelock/wasm** over ioredis",
    "fencelock-wasm:node-redis": "**fencelock/wasm** over node-redis",
    "redis-py": "redis-py Lock",
    "redis-py:tuned": "redis-py Lock, sleep=1 ms",
    "redis-py-async": "redis-py asyncio Lock",
    "redis-py-async:tuned": "redis-py asyncio Lock, sleep=1 ms",
    "pottery": "pottery Redlock",
    "pottery:tuned": "pottery Redlock, retry ≤2 ms",
    "redlock": "node-redlock",
    "redlock:tuned": "node-redlock, retry ∞ × 1±1 ms",
    "semaphore": "redis-semaphore",
    "semaphore:tuned": "redis-semaphore, retry 1 ms",
    "floor": "floor: SET NX PX + EVALSHA",
    "floor-async": "floor: SET NX PX + EVALSHA",
    "floor-hop": "floor, each operation in a spawned task (prices one task hop)",
}


# Every run that failed (a runner's non-zero exit, a timeout, an implementation
# that reported nothing): main() exits non-zero when there is any, after the
# table is written. A missed speed target is only reported, never a failure.
FAILURES: list[str] = []


def failed(what: str) -> None:
    FAILURES.append(what)
    print(f"  FAILED: {what}", file=sys.stderr)


def runner_cmd(lang: str, scenario: str, impls: list[str], a) -> list[str]:
    common = ["--impls", ",".join(impls), "--url", a.url, "--urls", a.urls]
    if scenario == "s1r":
        common += ["--replica-url", a.replica_url]
    if scenario == "s2":
        common += ["--workers", "64"]
    elif scenario in ("s3", "s3p", "sem", "rw"):
        common += ["--workers", "8"]
    secs = a.secs * (2 if scenario in ("s3", "s3p", "sem", "rw") else 1)
    common += ["--secs", str(secs), "--leases", str(a.leases)]
    if lang == "rust":
        return [a.rust_bin, scenario] + common
    if lang.startswith("python"):
        return [sys.executable, os.path.join(HERE, "python", "bench_py.py"), scenario] + common
    gc = ["--expose-gc"] if scenario == "mem" else []  # RSS after a full GC
    return ["node", *gc, os.path.join(HERE, "node", "bench_node.js"), scenario] + common


def run_group(lang, scenario, impls, a, timeout) -> list[dict]:
    cmd = runner_cmd(lang, scenario, impls, a)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        failed(f"{lang} {scenario}: timeout after {timeout:.0f} s")
        return []
    if p.returncode != 0:
        failed(f"{lang} {scenario}: runner exited with {p.returncode}")
        print(p.stderr[-2000:], file=sys.stderr)
    out = []
    for line in p.stdout.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            r["lang"] = lang
            out.append(r)
    missing = [i for i in impls if i not in {r.get("impl") for r in out}]
    if missing and p.returncode == 0:
        failed(f"{lang} {scenario}: no result for {', '.join(missing)}")
    return out


def redis_benchmark(port: int, n: int) -> float:
    p = subprocess.run(
        ["redis-benchmark", "-h", "127.0.0.1", "-p", str(port), "-c", "1", "-t", "set", "-n", str(n), "-q"],
        capture_output=True, text=True, timeout=120,
    )
    m = re.findall(r"SET: ([0-9.]+) requests per second", p.stdout.replace("\r", "\n"))
    if not m:
        failed(f"redis-benchmark: exited with {p.returncode}, no SET rate")
    return float(m[-1]) if m else float("nan")


def measure_memory(a, lang: str, impls: list[str]) -> list[dict]:
    """Each runner holds a.leases locks and waits; we read Redis meanwhile.
    One process per implementation: in a shared one, whichever ran later
    found the heap (V8's, malloc's) already grown by the one before, and
    its RSS growth read as about nothing."""
    r = redis.Redis.from_url(a.url)
    out = []
    for kind in impls:
        r.flushall()
        rec = hold_and_measure(a, lang, kind, r)
        if rec is not None:
            out.append(rec)
    r.flushall()
    return out


def hold_and_measure(a, lang: str, kind: str, r) -> dict | None:
    p = subprocess.Popen(runner_cmd(lang, "mem", [kind], a), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    rec = None
    try:
        line = p.stdout.readline()
        if not line.startswith("{"):
            failed(f"mem {lang} {kind}: the runner ended early")
            return None
        rec = json.loads(line)
        marker = f"bench:mem:{'py' if lang.startswith('python') else lang}-{kind}:"
        keys = [k for k in r.scan_iter(count=1000) if marker.encode() in k]
        pipe = r.pipeline(transaction=False)
        for k in keys:
            pipe.memory_usage(k, samples=0)
        usage = pipe.execute()
        n = rec["leases"]
        rec["lang"] = lang
        rec["keys_per_lock"] = len(keys) / n
        rec["redis_bytes_per_lock"] = sum(u or 0 for u in usage) / n
        rec["key_name_bytes_per_lock"] = sum(len(k) for k in keys) / n
        rec["redis_bytes_beyond_names"] = rec["redis_bytes_per_lock"] - rec["key_name_bytes_per_lock"]
        p.stdin.write("\n")
        p.stdin.flush()
        p.stdin.close()
        if p.wait(timeout=120) != 0:
            failed(f"mem {lang} {kind}: runner exited with {p.returncode}")
    finally:
        if p.poll() is None:
            p.kill()
    return rec


def on_disk(path: str) -> bytes:
    """A file of core/src/scripts/, as it is in the working tree."""
    with open(os.path.join(SCRIPTS, path), "rb") as f:
        return f.read()


def script_text(name: str, read=on_disk) -> bytes:
    """The script's text as core/src/scripts.rs builds it: its `script!` line
    names the prelude fragments prepended to the body. `read(path)` reads a
    path relative to core/src/scripts/ (tools/script_cost.py reads another
    revision's)."""
    m = re.search(r'script!\(\[([^\]]*)\],\s*"' + re.escape(name) + r'"\)', read("../scripts.rs").decode())
    if not m:
        raise RuntimeError(f"no script!(..., \"{name}\") in core/src/scripts.rs")
    parts = [f"prelude/{p}.lua" for p in re.findall(r'"(\w+)"', m.group(1))]
    return b"".join(read(part) for part in parts + [name + ".lua"])


def script_sha(name: str) -> str:
    return hashlib.sha1(script_text(name)).hexdigest()


QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')


def measure_write_back(a, lang: str, kind: str, log_dir: str) -> dict | None:
    """How often a Redlock acquire needs the fence write-back.

    One extra S4 run of `kind` alone, with `redis-cli MONITOR` on each of the
    5 nodes (kept out of the timed rounds: MONITOR costs the servers a little
    per command). From the command streams: every acquire round is one token
    sent with the acquire script's SHA (same token to every node); every
    write-back is the raise-fence script's SHA with the lease's fence M, sent
    to each node of the majority that reported less than M. So

        write-back rate = distinct (fence key, M) among raise-fence calls
                          / distinct (fence key, token) among acquire calls.
    """
    acquire_sha, raise_sha = script_sha("acquire"), script_sha("raise_fence")
    nodes = []
    for u in a.urls.split(","):
        m = re.match(r"redis://([^:/]+):(\d+)", u)
        nodes.append((m.group(1), int(m.group(2))))
    # Loaded up front: a NOSCRIPT + EVAL fallback would hide a call from the SHA count.
    for host, port in nodes:
        r = redis.Redis(host=host, port=port)
        for name in ("acquire", "release", "raise_fence"):
            r.script_load(script_text(name))
        r.close()
    tag = f"{lang}-{kind.replace(':', '-')}"
    mons, files = [], []
    try:
        for i, (host, port) in enumerate(nodes):
            path = os.path.join(log_dir, f"monitor-{tag}-{i}.log")
            f = open(path, "w")
            files.append(path)
            mons.append((subprocess.Popen(["redis-cli", "-h", host, "-p", str(port), "monitor"],
                                          stdout=f, stderr=subprocess.DEVNULL), f))
        deadline = time.time() + 10
        while time.time() < deadline and not all(os.path.getsize(p) >= 2 for p in files):
            time.sleep(0.05)  # redis-cli prints OK once the server accepted MONITOR
        wb_a = argparse.Namespace(**vars(a))
        wb_a.secs = 2 * a.secs
        res = run_group(lang, "s4", [kind], wb_a, timeout=60 + 8 * a.secs)
    finally:
        for p, f in mons:
            p.terminate()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
            f.close()
    if not res:
        return None
    acquires, raised, raise_calls, other_eval = set(), set(), 0, 0
    for path in files:
        with open(path, errors="replace") as f:
            for line in f:
                if "lua]" in line:
                    continue  # commands a script ran
                args = QUOTED.findall(line)
                if len(args) < 2:
                    continue
                cmd = args[0].upper()
                if cmd == "EVAL":
                    other_eval += 1
                if cmd != "EVALSHA":
                    continue
                sha = args[1].lower()
                if sha == acquire_sha and len(args) >= 6:   # 2 keys: lock, fence; ARGV[1] token
                    acquires.add((args[4], args[5]))
                elif sha == raise_sha and len(args) >= 5:   # 1 key: fence; ARGV[1] fence
                    raised.add((args[3], args[4]))
                    raise_calls += 1
    for path in files:
        os.remove(path)
    return {"writeback": True, "lang": lang, "impl": kind, "acquires": len(acquires),
            "write_backs": len(raised), "raise_calls": raise_calls, "eval_calls": other_eval,
            "cycles": res[0]["cycles"], "rate": res[0]["rate"]}


def med(xs):
    xs = [x for x in xs if x is not None and x == x]
    return statistics.median(xs) if xs else float("nan")


def aggregate(records: list[dict]) -> dict:
    by: dict = {}
    for r in records:
        by.setdefault((r["lang"], r["scenario"], r["impl"]), []).append(r)
    agg = {}
    for key, rs in by.items():
        agg[key] = {
            "rounds": len(rs),
            "cycles": sum(r["cycles"] for r in rs),
            "rate": med([r["rate"] for r in rs]),
            "p50_us": med([r["p50_us"] for r in rs]),
            "p99_us": med([r["p99_us"] for r in rs]),
            # Runs recorded before p99.9 was measured have none.
            "p999_us": med([r.get("p999_us") for r in rs]),
            "cpu": med([r["cpu_us_per_cycle"] for r in rs]),
            "errors": sum(r["errors"] for r in rs),
            "fair": med([(r["min_per_worker"] / r["max_per_worker"]) if r["max_per_worker"] else 0 for r in rs]),
        }
    return agg


def load_txt(load) -> str:
    if isinstance(load, (int, float)):  # raw files of earlier runs kept the 1-minute figure only
        load = [load]
    return " / ".join("–" if x != x else f"{x:.2f}" for x in load)


def fmt(x, digits=0):
    if x is None or x != x:
        return "–"
    return f"{x:,.{digits}f}"


def ms(us):
    return "–" if us is None or us != us else (f"{us / 1000:.2f}" if us < 10_000 else f"{us / 1000:.0f}")


def ratio(x, y):
    return "–" if not y or x != x or y != y else f"{x / y:.2f}×"


def write_back_txt(r) -> str:
    if not r:
        return "not measured"
    if not r["acquires"]:
        return "no acquires seen"
    calls = f", {r['raise_calls'] / r['write_backs']:.1f} calls" if r["write_backs"] else ""
    return f"{100 * r['write_backs'] / r['acquires']:.1f} % ({r['write_backs']:,} of {r['acquires']:,}{calls})"


def best_peer(agg, lang, scenario, impls):
    peers = [(agg[(lang, scenario, i)]["rate"], i) for i in impls
             if not i.startswith("fencelock") and not i.startswith("floor") and (lang, scenario, i) in agg]
    return max(peers) if peers else (float("nan"), None)


def write_results(a, agg, mem, rb, records, path, took, loads, wb=()):
    """bench/results.md, and (a whole full run) the README's summary of it."""
    generated = datetime.datetime.now(datetime.timezone.utc)
    L = []
    w = L.append
    rb_rate = med(rb)
    rb_floor = rb_rate / 2
    mode = "QUICK (smoke run: short windows, 1 round; numbers are indicative only)" if a.quick else "full"
    w("# fencelock benchmark results\n")
    took_txt = f" in {took:.0f} s" if took == took else ""
    w(f"Generated by `make bench{' QUICK=1' if a.quick else ''}` on "
      f"{generated:%Y-%m-%d %H:%M} UTC{took_txt}; mode: {mode}.\n")
    w(f"Machine: {os.cpu_count()} cores ({cpu_model()}), {platform.system()} {platform.release()}; "
      f"{a.versions}. Client and Redis share the machine, over loopback. "
      f"Load average (1 / 5 / 15 min, as `uptime`) at start: {load_txt(loads[0])}; at end: {load_txt(loads[1])} "
      f"— anything well above 1 means other work shared the {os.cpu_count()} cores and the wall-clock figures are noisy; "
      "CPU/cycle and the ratios within a round hold up better.\n")
    w(f"Each measurement: {a.rounds} round(s) × {a.secs:g} s (S3: {2 * a.secs:g} s) after a warm-up on the same code path; "
      "implementations alternate in rotated order each round, each in a fresh process of its own; figures are the median over rounds. "
      "Latency = one acquire+release cycle (S3: the wait from asking to getting). CPU = user+system "
      "time of the whole client process (every thread) per cycle. TTL 10 s everywhere.\n")
    w("## Headline\n")
    for line in headline(agg, rb_floor):
        w(line)
    w("")
    w("## Floors\n")
    each = ", ".join(fmt(r) for r in rb)
    w(f"- `redis-benchmark -c 1 -t set`: {fmt(rb_rate)} SET/s (median of {len(rb)}: {each}) → "
      f"**two-round-trip floor {fmt(rb_floor)} cycles/s**.")
    if len(rb) > 1 and min(rb) > 0 and max(rb) / min(rb) > 1.5:
        # The host's speed can swing by 3-5x (a shared VM): say so where the
        # figures are read, rather than let one round's pace pass as another's.
        w(f"- **The machine's speed changed during this run**: the same server measured {fmt(min(rb))} to "
          f"{fmt(max(rb))} SET/s in different rounds. Compare figures within a round (the implementations "
          "alternate in each), not absolute rates.")
    w("- Hand-written floor per language: `SET key token NX PX 10000` then `EVALSHA` compare-and-delete, on that "
      "language's fastest plain client (redis-rs multiplexed, redis-py + hiredis, ioredis).\n")

    def cycle_table(scenario, title, note):
        w(f"## {title}\n")
        if note:
            w(note + "\n")
        w("| language | implementation | cycles/s | p50 ms | p99 ms | client CPU µs/cycle | × best peer | × own floor | × redis-benchmark floor |")
        w("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
        for lang, sc, impls in GROUPS:
            if sc != scenario:
                continue
            peer_rate, _ = best_peer(agg, lang, scenario, impls)
            floor = agg.get((lang, scenario, FLOOR_OF[lang]), {}).get("rate", float("nan"))
            for i in impls:
                g = agg.get((lang, scenario, i))
                if not g:
                    w(f"| {LANG_LABEL[lang]} | {IMPL_LABEL[i]} | failed | | | | | | |")
                    continue
                mine = i.startswith("fencelock")
                err = f" ({g['errors']} errors)" if g["errors"] else ""
                w(f"| {LANG_LABEL[lang]} | {IMPL_LABEL[i]}{err} | {fmt(g['rate'])} | {ms(g['p50_us'])} | {ms(g['p99_us'])} | "
                  f"{fmt(g['cpu'], 1)} | {ratio(g['rate'], peer_rate) if mine else ''} | "
                  f"{ratio(g['rate'], floor) if mine else ''} | {ratio(g['rate'], rb_floor) if mine and scenario == 's1' else ''} |")
        w("")

    cycle_table("s1", "S1 — uncontended: one client, sequential acquire + release", "")
    cycle_table("s2", "S2 — concurrent: 64 workers (threads / tasks / promises), each on its own key", "")

    w("## S1r — what `replicas=1` costs: S1 on a primary with one replica\n")
    w("Same client, same server: without and with `replicas=1` (every acquire is followed by `WAIT 1`, pipelined "
      "with the script on the same connection, so still one round trip; the release needs no acknowledgement).\n")
    w("| language | implementation | cycles/s | p50 ms | p99 ms | client CPU µs/cycle | µs per acquire+release | × replicas=0 |")
    w("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for lang, sc, impls in GROUPS:
        if sc != "s1r":
            continue
        base = agg.get((lang, "s1r", "fencelock"), {}).get("rate", float("nan"))
        for i in impls:
            g = agg.get((lang, "s1r", i))
            if not g:
                w(f"| {LANG_LABEL[lang]} | {IMPL_LABEL[i]} | failed | | | | | |")
                continue
            w(f"| {LANG_LABEL[lang]} | {IMPL_LABEL[i]} | {fmt(g['rate'])} | {ms(g['p50_us'])} | {ms(g['p99_us'])} | "
              f"{fmt(g['cpu'], 1)} | {fmt(1e6 / g['rate'], 1)} | {ratio(g['rate'], base)} |")
    w("")

    w("## S3 — contended: 8 workers on ONE key, ~0 ms hold\n")
    w("| language | implementation | acquisitions/s | wait p50 ms | wait p99 ms | wait p99.9 ms | fairness min/max | errors | client CPU µs/acq | × best peer |")
    w("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for lang, sc, impls in GROUPS:
        if sc != "s3":
            continue
        peer_rate, _ = best_peer(agg, lang, "s3", impls)
        for i in impls:
            g = agg.get((lang, "s3", i))
            if not g:
                w(f"| {LANG_LABEL[lang]} | {IMPL_LABEL[i]} | failed | | | | | | | |")
                continue
            mine = i.startswith("fencelock")
            w(f"| {LANG_LABEL[lang]} | {IMPL_LABEL[i]} | {fmt(g['rate'])} | {ms(g['p50_us'])} | {ms(g['p99_us'])} | {ms(g['p999_us'])} | "
              f"{g['fair']:.2f} | {g['errors']} | {fmt(g['cpu'], 1)} | {ratio(g['rate'], peer_rate) if mine else ''} |")
    w("")

    w("## S3p — contended across processes: 8 processes (one client each) on ONE key, ~0 ms hold (Python)\n")
    w("Celery or gunicorn workers are separate processes, so the local line of one client cannot order them. "
      "`fair=True` makes them stand in a line kept in Redis. Targets: fairness ≥ 0.9, wait p99.9 ≤ 20 ms.\n")
    w("| implementation | acquisitions/s | wait p50 ms | wait p99 ms | wait p99.9 ms | fairness min/max | errors |")
    w("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for lang, sc, impls in GROUPS:
        if sc != "s3p":
            continue
        for i in impls:
            g = agg.get((lang, "s3p", i))
            if not g:
                w(f"| {IMPL_LABEL[i]} | failed | | | | | |")
                continue
            w(f"| {IMPL_LABEL[i]} | {fmt(g['rate'])} | {ms(g['p50_us'])} | {ms(g['p99_us'])} | {ms(g['p999_us'])} | "
              f"{g['fair']:.2f} | {g['errors']} |")
    w("")

    w("## S4 — Redlock over 5 independent nodes: one client, sequential acquire + release\n")
    w("The Rust floor fans SET NX PX and EVALSHA out to the 5 nodes in parallel on redis-rs (majority wins; no fencing, "
      "no validity maths, no undo): what this machine allows at best. The 5 servers and the client share 2 cores, so the "
      "fan-out cannot be truly parallel here.\n")
    w("Write-back rate: the share of fencelock's Redlock leases whose fence M (the maximum over the granting majority) "
      "fewer than a majority had reported, so that the driver wrote it back with the raise-fence script before handing "
      "the lease over (one more round trip). Counted from `redis-cli MONITOR` on all 5 nodes during one extra "
      f"{2 * a.secs:g} s S4 run per front end, outside the timed rounds: distinct (fence key, M) among raise-fence "
      "EVALSHAs ÷ distinct (fence key, token) among acquire EVALSHAs; calls = raise-fence EVALSHAs per written-back "
      "lease (one per lagging node of the majority).\n")
    w("| language | implementation | cycles/s | p50 ms | p99 ms | client CPU µs/cycle | p50 ÷ own single-node p50 | × node-redlock | write-back rate |")
    w("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    wb_of = {(r["lang"], r["impl"]): r for r in wb}
    nr = agg.get(("node", "s4", "redlock"), {}).get("rate", float("nan"))
    for lang, sc, impls in GROUPS:
        if sc != "s4":
            continue
        for i in impls:
            g = agg.get((lang, "s4", i))
            mine = i.startswith("fencelock")
            wbr = write_back_txt(wb_of.get((lang, i))) if mine else ""
            if not g:
                w(f"| {LANG_LABEL[lang]} | {IMPL_LABEL[i]} | failed | | | | | | {wbr} |")
                continue
            single = agg.get((lang, "s1", i), {}).get("p50_us", float("nan"))
            w(f"| {LANG_LABEL[lang]} | {IMPL_LABEL[i]} | {fmt(g['rate'])} | {ms(g['p50_us'])} | {ms(g['p99_us'])} | "
              f"{fmt(g['cpu'], 1)} | {ratio(g['p50_us'], single)} | {ratio(g['rate'], nr) if mine else ''} | {wbr} |")
    w("")

    w(f"## Memory — {a.leases:,} locks held by one client\n")
    w("Redis: `MEMORY USAGE key SAMPLES 0` summed over every key the lock library wrote for the held locks, per lock; "
      "client: growth of the process RSS while acquiring them, per lease (Rust, Node and Python asyncio acquire 256 at a time, "
      "Python threads one at a time), each implementation in a fresh process of its own after a warm-up.\n")
    w("| language | implementation | keys per lock | Redis bytes per lock | of which key names | Redis bytes beyond key names | client RSS bytes per lease |")
    w("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for r in mem:
        w(f"| {LANG_LABEL[r['lang']]} | {IMPL_LABEL[r['impl']]} | {r['keys_per_lock']:.0f} | {r['redis_bytes_per_lock']:.0f} | "
          f"{r['key_name_bytes_per_lock']:.0f} | {r['redis_bytes_beyond_names']:.0f} | "
          f"{fmt(r['rss_bytes_per_lease']) if r['rss_bytes_per_lease'] >= 0 else '≈ 0 (RSS shrank: GC noise)'} |")
    w("")

    primitives_section(w, agg)

    w("## Targets\n")
    w("| target | measured | verdict |")
    w("| --- | --- | --- |")
    for name, measured, ok in targets(agg, mem, rb_floor):
        w(f"| {name} | {measured} | {'met' if ok else '**missed**'} |")
    w("")
    with open(path, "w") as f:
        f.write("\n".join(L))
    if a.readme and not a.quick:
        update_readme(a.readme, readme_summary(a, agg, mem, rb, took, loads, generated))


def primitives_section(w, agg) -> None:
    """Issue 16's rows: the semaphore and the read-write lock, contended like S3."""
    w("## Semaphore and read-write lock — 8 workers on ONE name, ~0 ms hold (Node)\n")
    w("`sem`: a semaphore of 3 permits (redis-semaphore `Semaphore`). `rw`: a read-write lock, worker i writing "
      "when i % 4 = 0 and reading otherwise; redis-semaphore has no read-write lock, so its `MultiSemaphore` of 8 "
      "permits stands in (a reader takes 1, a writer all 8). Wait = from asking to getting; fairness = fewest / most "
      "acquisitions of one worker. fencelock serves waiters in arrival order through its line in Redis.\n")
    w("| primitive | implementation | acquisitions/s | wait p50 ms | wait p99 ms | fairness min/max | errors | client CPU µs/acq | × best peer |")
    w("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for lang, sc, impls in GROUPS:
        if sc not in ("sem", "rw"):
            continue
        peer_rate, _ = best_peer(agg, lang, sc, impls)
        for i in impls:
            g = agg.get((lang, sc, i))
            what = "semaphore (3)" if sc == "sem" else "read-write"
            if not g:
                w(f"| {what} | {IMPL_LABEL[i]} | failed | | | | | | |")
                continue
            mine = i.startswith("fencelock")
            w(f"| {what} | {IMPL_LABEL[i]} | {fmt(g['rate'])} | {ms(g['p50_us'])} | {ms(g['p99_us'])} | "
              f"{g['fair']:.2f} | {g['errors']} | {fmt(g['cpu'], 1)} | {ratio(g['rate'], peer_rate) if mine else ''} |")
    w("")


def headline(agg, rb_floor):
    """One row per fencelock front end: the figures the issue asks about."""
    g = lambda *k: agg.get(k, {})  # noqa: E731
    out = [
        "| fencelock front end | S1 cycles/s | S1 × own floor | S1 × best peer | S2 cycles/s | S2 × best peer "
        "| S3 acq/s | S3 wait p99 ms | S3 fairness | S4 cycles/s | S4 × node-redlock |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    nr4 = g("node", "s4", "redlock").get("rate", float("nan"))
    for lang, imp in [("rust", "fencelock"), ("python", "fencelock"), ("python-async", "fencelock-async"), ("node", "fencelock")]:
        impls = {sc: i for (l, sc, i) in GROUPS if l == lang}
        s1, s2, s3, s4 = (g(lang, sc, imp) for sc in ("s1", "s2", "s3", "s4"))
        floor = g(lang, "s1", FLOOR_OF[lang]).get("rate", float("nan"))
        p1 = best_peer(agg, lang, "s1", impls.get("s1", []))[0]
        p2 = best_peer(agg, lang, "s2", impls.get("s2", []))[0]
        r = lambda d, k="rate": d.get(k, float("nan"))  # noqa: E731
        out.append(
            f"| {LANG_LABEL[lang]} | {fmt(r(s1))} | {ratio(r(s1), floor)} | {ratio(r(s1), p1)} | {fmt(r(s2))} | "
            f"{ratio(r(s2), p2)} | {fmt(r(s3))} | {ms(r(s3, 'p99_us'))} | "
            f"{fmt(r(s3, 'fair'), 2)} | {fmt(r(s4))} | {ratio(r(s4), nr4)} |"
        )
    out.append("")
    out.append(f"Floors: `redis-benchmark -c 1 -t set` ÷ 2 = {fmt(rb_floor)} cycles/s; own floor = hand-written "
               "SET NX PX + EVALSHA in the same language (Rust: redis-rs, Python: redis-py + hiredis, Node: ioredis); "
               "– = no peer in that language.")
    return out


def targets(agg, mem, rb_floor):
    g = lambda *k: agg.get(k, {})  # noqa: E731
    out = []
    for lang, imp in [("rust", "fencelock"), ("python", "fencelock"), ("python-async", "fencelock-async"), ("node", "fencelock")]:
        mine = g(lang, "s1", imp).get("rate", float("nan"))
        floor = g(lang, "s1", FLOOR_OF[lang]).get("rate", float("nan"))
        out.append((f"S1 {LANG_LABEL[lang]} ≥ 1.0× own floor", f"{ratio(mine, floor)} ({fmt(mine)} vs {fmt(floor)})", mine >= floor))
        out.append((f"S1 {LANG_LABEL[lang]} ≥ 0.75× redis-benchmark floor", f"{ratio(mine, rb_floor)}", mine >= 0.75 * rb_floor))
    pa = g("python-async", "s2", "fencelock-async").get("rate", float("nan"))
    pp = g("python-async", "s2", "redis-py-async").get("rate", float("nan"))
    out.append(("S2 Python asyncio ≥ 2× redis-py asyncio", ratio(pa, pp), pa >= 2 * pp))
    na = g("node", "s2", "fencelock").get("rate", float("nan"))
    nr = g("node", "s2", "redlock").get("rate", float("nan"))
    out.append(("S2 Node ≥ 1.5× node-redlock", ratio(na, nr), na >= 1.5 * nr))
    for lang, sc, impls in GROUPS:
        if sc != "s3":
            continue
        m = g(lang, "s3", impls[0])
        if not m:
            continue
        out.append((f"S3 {LANG_LABEL[lang]} wait p99 ≤ 10 ms", f"{ms(m['p99_us'])} ms", m["p99_us"] <= 10_000))
        out.append((f"S3 {LANG_LABEL[lang]} wait p99.9 ≤ 20 ms", f"{ms(m['p999_us'])} ms", m["p999_us"] <= 20_000))
        out.append((f"S3 {LANG_LABEL[lang]} fairness ≥ 0.5", f"{m['fair']:.2f}", m["fair"] >= 0.5))
        peer, who = best_peer(agg, lang, "s3", impls)
        if who:
            out.append((f"S3 {LANG_LABEL[lang]} ≥ 1.5× best peer ({IMPL_LABEL[who]})", ratio(m["rate"], peer), m["rate"] >= 1.5 * peer))
    fair = g("python", "s3p", "fencelock:fair")
    if fair:
        out.append(("S3p fair=True, 8 processes: fairness ≥ 0.9", f"{fair['fair']:.2f}", fair["fair"] >= 0.9))
        out.append(("S3p fair=True, 8 processes: wait p99.9 ≤ 20 ms", f"{ms(fair['p999_us'])} ms",
                    fair["p999_us"] <= 20_000))
    nr4 = g("node", "s4", "redlock").get("rate", float("nan"))
    for lang, sc, impls in GROUPS:
        if sc != "s4":
            continue
        m, s = g(lang, "s4", impls[0]), g(lang, "s1", impls[0])
        if not m or not s:
            continue
        out.append((f"S4 {LANG_LABEL[lang]} p50 ≤ 1.3× single-node p50", ratio(m["p50_us"], s["p50_us"]), m["p50_us"] <= 1.3 * s["p50_us"]))
        out.append((f"S4 {LANG_LABEL[lang]} ≥ 1.5× node-redlock", ratio(m["rate"], nr4), m["rate"] >= 1.5 * nr4))
    front_end = {lang: impls[0] for lang, impls in MEM_GROUPS}  # as GROUPS: fencelock first
    for r in mem:
        if r["impl"] == front_end[r["lang"]]:
            out.append((f"Memory ({LANG_LABEL[r['lang']]}) ≤ 150 B/lock beyond key names",
                        f"{r['redis_bytes_beyond_names']:.0f} B", r["redis_bytes_beyond_names"] <= 150))
            out.append((f"Memory ({LANG_LABEL[r['lang']]}) ≤ 2 KB client RSS per held lease",
                        f"{fmt(r['rss_bytes_per_lease'])} B", r["rss_bytes_per_lease"] <= 2048))
    return out


README_BEGIN = "<!-- bench:begin"
README_END = "<!-- bench:end -->"


def readme_summary(a, agg, mem, rb, took, loads, at) -> list[str]:
    """The README's Performance figures: this full run's headline and targets."""
    rb_floor = med(rb) / 2
    met = targets(agg, mem, rb_floor)
    out = [
        f"{README_BEGIN} (written by `make bench` from its last full run; edits here are overwritten) -->",
        f"Last full run: `make bench` on {at:%Y-%m-%d %H:%M} UTC, "
        f"{os.cpu_count()} cores, {took:.0f} s, {a.rounds} rounds × {a.secs:g} s per measurement; "
        f"load average (1 / 5 / 15 min) {load_txt(loads[0])} at the start, {load_txt(loads[1])} at the end "
        "(above 1: other work shared the cores, so compare ratios within the run, not absolute figures "
        "across runs). Every peer, p50/p99, CPU per cycle and memory: [bench/results.md](bench/results.md).",
        "",
    ]
    out += headline(agg, rb_floor)
    out += ["", f"Targets: {sum(ok for _, _, ok in met)} of {len(met)} met in this run.", "",
            "| target | measured | verdict |", "| --- | --- | --- |"]
    out += [f"| {name} | {measured} | {'met' if ok else '**missed**'} |" for name, measured, ok in met]
    out.append(README_END)
    return out


def update_readme(path: str, block: list[str]) -> None:
    """Replace the marked block of the README (left alone if the markers are missing)."""
    with open(path) as f:
        text = f.read()
    start, end = text.find(README_BEGIN), text.find(README_END)
    if start < 0 or end < start:
        failed(f"{path}: no {README_BEGIN} ... {README_END} block to update")
        return
    with open(path, "w") as f:
        f.write(text[:start] + "\n".join(block) + text[end + len(README_END):])


def rerender(a) -> None:
    """Rebuild the table from the raw JSON lines of an earlier run."""
    records, mem, rb, meta, wb = [], [], [], {}, []
    with open(a.raw) as f:
        for line in f:
            r = json.loads(line)
            if "redis_benchmark_set_rps" in r:
                rb.append(r["redis_benchmark_set_rps"])
            elif r.get("meta"):
                meta = r
            elif r.get("writeback"):
                wb.append(r)
            elif r.get("scenario") == "mem":
                mem.append(r)
            else:
                records.append(r)
    for k in ("versions", "rounds", "secs", "leases", "quick"):
        if k in meta:
            setattr(a, k, meta[k])
    if not meta:
        a.rounds = max(sum(1 for r in records if (r["lang"], r["scenario"]) == ("rust", "s1") and r["impl"] == "fencelock"), 1)
    loads = tuple(meta.get("loads", [float("nan"), float("nan")]))  # [1-min] or [[1, 5, 15 min]] per end
    write_results(a, aggregate(records), mem, rb or [float("nan")], records, a.out, meta.get("took", float("nan")), loads, wb)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--urls", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--raw", required=True)
    ap.add_argument("--rust-bin", required=True)
    ap.add_argument("--replica-url", default="", help="a primary with one replica (scenario s1r)")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--versions", default="")
    ap.add_argument("--only", default="", help="comma-separated scenarios (s1,s2,s3,s3p,s4,s1r,sem,rw,mem)")
    ap.add_argument("--from-raw", action="store_true", help="only re-render --out from an earlier --raw file")
    ap.add_argument("--readme", default="", help="a full run also writes its summary into this README's bench block")
    a = ap.parse_args()
    a.rounds, a.secs, a.leases = (1, 0.3, 1000) if a.quick else (3, 1.5, 10_000)
    if a.from_raw:
        rerender(a)
        return
    only = set(a.only.split(",")) if a.only else {"s1", "s2", "s3", "s3p", "s4", "s1r", "sem", "rw", "mem"}
    port = int(re.search(r":(\d+)", a.url.split("//", 1)[1]).group(1))
    started = time.time()
    load0 = list(os.getloadavg())
    records: list[dict] = []
    rb: list[float] = []
    raw = open(a.raw, "w")
    for rnd in range(a.rounds):
        print(f"bench: round {rnd + 1}/{a.rounds}", file=sys.stderr)
        if "s1" in only:
            rb.append(redis_benchmark(port, 20_000 if a.quick else 100_000))
            raw.write(json.dumps({"redis_benchmark_set_rps": rb[-1]}) + "\n")
        for lang, scenario, impls in GROUPS:
            if scenario not in only:
                continue
            k = rnd % len(impls)
            # One process per implementation: in a shared one, whichever
            # ran later inherited the heap the others grew, and a garbage
            # collector's pauses over it landed in its latencies.
            res = [r for kind in impls[k:] + impls[:k]
                   for r in run_group(lang, scenario, [kind], a, timeout=60 + a.secs * 4)]
            for r in res:
                raw.write(json.dumps(r) + "\n")
                print(f"  {lang:12} {scenario} {r['impl']:22} {r['rate']:>10,.0f}/s  p50 {r['p50_us'] / 1000:.2f} ms  "
                      f"p99 {r['p99_us'] / 1000:.2f} ms  cpu {r['cpu_us_per_cycle']} µs  err {r['errors']}", file=sys.stderr)
            records += res
    wb = []
    if "s4" in only:
        # After the timed rounds, so MONITOR never slows a timed S4 row.
        for lang, scenario, impls in GROUPS:
            if scenario != "s4":
                continue
            for kind in impls:
                if not kind.startswith("fencelock"):
                    continue
                r = measure_write_back(a, lang, kind, os.path.dirname(os.path.abspath(a.raw)))
                if r is None:
                    failed(f"write-back {lang} {kind}: the S4 run under MONITOR gave no result")
                    continue
                raw.write(json.dumps(r) + "\n")
                print(f"  write-back {lang:12} {kind:26} {write_back_txt(r)}  (EVAL calls {r['eval_calls']}, "
                      f"{r['rate']:,.0f} cycles/s under MONITOR)", file=sys.stderr)
                wb.append(r)
    mem = []
    if "mem" in only:
        for lang, impls in MEM_GROUPS:
            res = measure_memory(a, lang, impls)
            for r in res:
                raw.write(json.dumps(r) + "\n")
                print(f"  mem {lang:8} {r['impl']:12} redis {r['redis_bytes_per_lock']:.0f} B/lock "
                      f"(beyond names {r['redis_bytes_beyond_names']:.0f}), rss {r['rss_bytes_per_lease']:.0f} B/lease", file=sys.stderr)
            mem += res
    load1 = list(os.getloadavg())
    meta = {"meta": True, "took": time.time() - started, "loads": [load0, load1],
            "versions": a.versions, "quick": a.quick, "rounds": a.rounds, "secs": a.secs, "leases": a.leases}
    raw.write(json.dumps(meta) + "\n")
    raw.close()
    write_results(a, aggregate(records), mem, rb or [float("nan")], records, a.out, time.time() - started,
                  (load0, load1), wb)
    print(f"bench: wrote {a.out} ({time.time() - started:.0f} s)", file=sys.stderr)
    if FAILURES:
        print(f"bench: {len(FAILURES)} run(s) failed:", file=sys.stderr)
        for f in FAILURES:
            print(f"  {f}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
