"""A demo worker (Python): takes jobs from the queue, locks the job's
resource with fencelock, "works", writes the result to the resource's ledger
with a fenced write (`lease.fenced_hset`: the ledger refuses a stale lock
holder), releases. Prints one JSON event per line for the orchestrator.
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
    # The resource's ledger: a hash of job -> worker, and the last fence it
    # accepted (field "fence"), which the fenced write checks and records.
    ledger = ns + "ledger:" + resource
    try:
        if MODE == "fenced":
            lease.fenced_hset(ledger, job_id, me)
        else:  # DEMO_UNFENCED=1: a plain write, no fence check (see what breaks)
            redis.execute("HSET", ledger, job_id, me)
        emit("wrote", job=job_id, res=resource, fence=lease.fence)
    except fencelock.LockLost as refused:  # we were paused or force-released: not ours any more
        # StaleFence: the ledger refused (it accepted a newer fence); plain
        # LockLost: our lease knew it had expired and sent nothing.
        by = "ledger" if isinstance(refused, fencelock.StaleFence) else "lease"
        emit("stale", job=job_id, res=resource, fence=lease.fence, by=by, last=getattr(refused, "accepted", None))
        redis.execute("LPUSH", ns + "jobs", job)  # retry the job later
    redis.execute("LREM", ns + "processing:" + me, 1, job)
    try:
        lease.release()
        emit("released", res=resource, fence=lease.fence)
    except fencelock.LockLost:
        emit("lost", res=resource, fence=lease.fence)
client.close()
