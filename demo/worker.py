"""A demo worker (Python): takes jobs from the queue, locks the job's
resource with fencelock, "works", writes the result to the fenced ledger,
releases. Prints one JSON event per line for the orchestrator.
Usage: worker.py REDIS_URL NAMESPACE WORKER_NAME TTL_MS"""

import json
import os
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
import fencelock  # noqa: E402
from fltest import Redis  # noqa: E402

url, ns, me, ttl_ms = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
MODE = "unfenced" if os.environ.get("DEMO_UNFENCED") else "fenced"


def emit(ev: str, **fields: object) -> None:
    print(json.dumps({"ev": ev, "w": me, "t": time.time(), **fields}), flush=True)


redis = Redis(url)
ledger = redis.execute("SCRIPT", "LOAD", (Path(__file__).parent / "ledger.lua").read_bytes()).decode()
client = fencelock.Client(url)
emit("ready")
while not redis.execute("EXISTS", ns + "stop"):
    job = redis.execute("LMOVE", ns + "jobs", ns + "processing:" + me, "RIGHT", "LEFT")
    if job is None:
        time.sleep(0.02)
        continue
    job_id, resource = job.decode().split()
    waited_from = time.time()
    lease = client.acquire(ns + resource, ttl=ttl_ms / 1000)  # waits until acquired
    slow = redis.execute("GETDEL", ns + "slow:" + me) is not None
    emit("acquired", job=job_id, res=resource, fence=lease.fence, waited_from=waited_from, slow=slow)
    time.sleep(0.6 if slow else random.uniform(0.04, 0.08))  # the work
    ok, last = redis.execute(
        "EVALSHA", ledger, 4, ns + "fences", ns + "done", ns + "stats", ns + "history",
        resource, lease.fence, job_id, me, MODE,
    )
    if ok:
        emit("wrote", job=job_id, res=resource, fence=lease.fence)
    else:  # our lock expired while we were paused: someone else owns the resource now
        emit("stale", job=job_id, res=resource, fence=lease.fence, last=last)
        redis.execute("LPUSH", ns + "jobs", job)  # retry the job later
    redis.execute("LREM", ns + "processing:" + me, 1, job)
    try:
        lease.release()
        emit("released", res=resource, fence=lease.fence)
    except fencelock.LockLost:
        emit("lost", res=resource, fence=lease.fence)
client.close()
