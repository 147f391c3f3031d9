#!/usr/bin/env bash
# Start/stop the harness's redis-servers on loopback ports from ci/ports.sh,
# under a run directory in .build/: one single node, 5 independent nodes
# (Redlock), a 3-primary + 3-replica Redis Cluster, a primary + replica
# watched by 3 Sentinels (service "mymaster"), and, TLS-only for clients
# with ci/tls.sh's certificates (private CA, client certificates required),
# a 3-primary cluster and a primary behind one Sentinel.
#   ci/redis.sh start   -> writes $RUN_DIR/env (FENCELOCK_TEST_REDIS_URL,
#                          FENCELOCK_TEST_REDLOCK_URLS, FENCELOCK_TEST_CLUSTER_URLS,
#                          FENCELOCK_TEST_SENTINEL_URLS, FENCELOCK_TEST_SENTINEL_SERVICE,
#                          FENCELOCK_TEST_TLS_DIR, FENCELOCK_TEST_TLS_CLUSTER_URLS,
#                          FENCELOCK_TEST_TLS_SENTINEL_URLS); no-op if already up
#   ci/redis.sh stop    -> stops exactly the servers this directory started
# FENCELOCK_REDIS_RUN_DIR overrides the run directory (ci/test.sh uses its own
# so it never stops servers a developer started with `make redis-start`).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUN_DIR=${FENCELOCK_REDIS_RUN_DIR:-$ROOT/.build/redis}
NODES=(single r1 r2 r3 r4 r5 c1 c2 c3 c4 c5 c6 sp sr s1 s2 s3 tc1 tc2 tc3 tsp ts1)
SERVICE=mymaster

# One start or stop at a time per run directory: `make test-rust` alone runs
# test binaries in parallel, and each may ask for the harness (the second
# would find it half started and stop it). The flock process holds the lock;
# -o keeps it out of the daemonized servers.
if [ -z "${FENCELOCK_REDIS_LOCKED:-}" ] && { [ "${1:-}" = start ] || [ "${1:-}" = stop ]; }; then
  mkdir -p "$RUN_DIR"
  FENCELOCK_REDIS_LOCKED=1 exec flock -o "$RUN_DIR/.lock" bash "$0" "$@"
fi

# True if $1 is alive and really a redis-server (a stale pidfile from an
# earlier boot could name an unrelated process; never kill that).
is_our_redis() {
  [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -q redis-server
}

# Start one node; prints its port. Its port comes from ci/ports.sh, claimed
# for this script and handed to the daemonized server once it runs (the claim
# then lasts as long as the server, and covers a cluster node's bus port,
# port + 10000). Retries on another port if a process outside the allocator
# holds the one we got.
#   start_node NAME [redis-server args...]
# CONF, if set, is the config file to start with (Sentinels need one they
# can rewrite).
start_node() {
  local name=$1 attempt port pid
  shift
  for attempt in 1 2 3; do
    port=$(bash "$ROOT/ci/ports.sh" claim --owner $$)
    rm -f "$RUN_DIR/$port.pid" "$RUN_DIR/$port.log"
    redis-server ${CONF:+"$CONF"} --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
      --daemonize yes --pidfile "$RUN_DIR/$port.pid" \
      --logfile "$RUN_DIR/$port.log" --dir "$RUN_DIR" "$@" >/dev/null
    # Redis writes the pidfile only after binding; if the bind failed the
    # daemon logs "aborting", exits, and the pidfile never appears.
    for _ in $(seq 100); do
      grep -qE 'aborting|Fatal' "$RUN_DIR/$port.log" 2>/dev/null && break
      if [ -s "$RUN_DIR/$port.pid" ]; then
        pid=$(cat "$RUN_DIR/$port.pid")
        # PING must be answered by OUR process, not by someone else who got
        # the port first.
        if [ "$(redis-cli -p "$port" INFO server 2>/dev/null | tr -d '\r' |
              sed -n 's/^process_id://p')" = "$pid" ]; then
          bash "$ROOT/ci/ports.sh" own "$port" --owner "$pid"
          echo "$port" >"$RUN_DIR/$name.port"
          echo "$port"
          return 0
        fi
        is_our_redis "$pid" || break
      fi
      sleep 0.1
    done
    echo "redis.sh: port $port failed (attempt $attempt), see $RUN_DIR/$port.log" >&2
    [ -s "$RUN_DIR/$port.pid" ] && stop_pids "$(cat "$RUN_DIR/$port.pid")"
    bash "$ROOT/ci/ports.sh" release "$port"
  done
  echo "redis.sh: could not start $name" >&2
  return 1
}

# TERM the given pids (only live redis-servers), then wait for all of them.
stop_pids() {
  local pid live
  for pid in "$@"; do is_our_redis "$pid" && kill -TERM "$pid" 2>/dev/null || true; done
  # Daemonized servers are not our children, so `wait` cannot be used: poll
  # (up to 10 s, then SIGKILL and 5 s more).
  for i in $(seq 150); do
    live=()
    for pid in "$@"; do is_our_redis "$pid" && live+=("$pid"); done
    [ ${#live[@]} -eq 0 ] && return 0
    [ "$i" -eq 100 ] && kill -KILL "${live[@]}" 2>/dev/null || true
    sleep 0.1
  done
  echo "redis.sh: pids ${live[*]} did not exit" >&2
  return 1
}

stop_all() {
  local f pids=() ports=()
  [ -d "$RUN_DIR" ] || return 0
  for f in "$RUN_DIR"/*.pid; do
    [ -e "$f" ] && pids+=("$(cat "$f")")
  done
  for f in "$RUN_DIR"/*.port; do
    [ -e "$f" ] && ports+=("$(cat "$f")")
  done
  [ ${#pids[@]} -eq 0 ] || stop_pids "${pids[@]}" || return 1
  [ ${#ports[@]} -eq 0 ] || bash "$ROOT/ci/ports.sh" release "${ports[@]}"
  rm -f "$RUN_DIR"/*.pid "$RUN_DIR"/*.port "$RUN_DIR/env" "$RUN_DIR"/nodes-*.conf \
    "$RUN_DIR"/sentinel-*.conf
}

# Three primaries and three replicas (one each), slots spread evenly; waits
# until every node agrees the cluster is up. Prints the seed URLs.
start_cluster() {
  local n port ports=() addrs=() urls=()
  for n in c1 c2 c3 c4 c5 c6; do
    port=$(start_node "$n" --cluster-enabled yes \
      --cluster-config-file "nodes-$n.conf" --cluster-node-timeout 2000)
    ports+=("$port"); addrs+=("127.0.0.1:$port"); urls+=("redis://127.0.0.1:$port")
  done
  redis-cli --cluster create "${addrs[@]}" --cluster-replicas 1 --cluster-yes >"$RUN_DIR/cluster-create.log" 2>&1 ||
    { echo "redis.sh: cluster create failed, see $RUN_DIR/cluster-create.log" >&2; return 1; }
  for _ in $(seq 200); do
    local ok=0
    for port in "${ports[@]}"; do
      redis-cli -p "$port" CLUSTER INFO 2>/dev/null | grep -q 'cluster_state:ok' && ok=$((ok + 1))
    done
    # Replicas must have synced too, or WAIT-based tests start on a half-built cluster.
    if [ $ok -eq 6 ] && [ "$(for port in "${ports[@]}"; do redis-cli -p "$port" INFO replication; done |
        grep -c 'master_link_status:up')" -eq 3 ]; then
      (IFS=,; echo "${urls[*]}")
      return 0
    fi
    sleep 0.1
  done
  echo "redis.sh: cluster did not reach cluster_state:ok" >&2
  return 1
}

# A node that serves clients over TLS on a port of its own (its plain port
# serves the readiness checks here), requires client certificates, and uses
# TLS (with the client certificate) for replication and the cluster bus.
# Prints its TLS port; the plain one is in $RUN_DIR/NAME.port.
#   start_tls_node NAME [redis-server args...]
start_tls_node() {
  local name=$1 tport pid
  shift
  tport=$(bash "$ROOT/ci/ports.sh" claim --owner $$)
  start_node "$name" --tls-port "$tport" \
    --tls-cert-file "$TLS_DIR/server.crt" --tls-key-file "$TLS_DIR/server.key" \
    --tls-client-cert-file "$TLS_DIR/client.crt" --tls-client-key-file "$TLS_DIR/client.key" \
    --tls-ca-cert-file "$TLS_DIR/ca.crt" --tls-auth-clients yes --tls-replication yes "$@" >/dev/null
  pid=$(cat "$RUN_DIR/$(cat "$RUN_DIR/$name.port").pid")
  bash "$ROOT/ci/ports.sh" own "$tport" --owner "$pid"
  echo "$tport" >"$RUN_DIR/$name-tls.port"
  echo "$tport"
}

# Three TLS primaries, no replicas (enough for routing and TLS to every
# node; the plain cluster covers failover), created over TLS. The cluster bus
# (TLS too) is on the TLS port + 10000, which ci/ports.sh's claim covers.
# Prints the TLS seed URLs.
start_tls_cluster() {
  local n port tport ports=() addrs=() urls=()
  for n in tc1 tc2 tc3; do
    tport=$(start_tls_node "$n" --cluster-enabled yes --tls-cluster yes \
      --cluster-config-file "nodes-$n.conf" --cluster-node-timeout 2000)
    ports+=("$(cat "$RUN_DIR/$n.port")"); addrs+=("127.0.0.1:$tport"); urls+=("rediss://127.0.0.1:$tport")
  done
  redis-cli --tls --cacert "$TLS_DIR/ca.crt" --cert "$TLS_DIR/client.crt" --key "$TLS_DIR/client.key" \
    --cluster create "${addrs[@]}" --cluster-yes >"$RUN_DIR/tls-cluster-create.log" 2>&1 ||
    { echo "redis.sh: TLS cluster create failed, see $RUN_DIR/tls-cluster-create.log" >&2; return 1; }
  for _ in $(seq 200); do
    local ok=0
    for port in "${ports[@]}"; do
      redis-cli -p "$port" CLUSTER INFO 2>/dev/null | grep -q 'cluster_state:ok' && ok=$((ok + 1))
    done
    if [ $ok -eq 3 ]; then (IFS=,; echo "${urls[*]}"); return 0; fi
    sleep 0.1
  done
  echo "redis.sh: the TLS cluster did not reach cluster_state:ok" >&2
  return 1
}

# A TLS primary watched by one TLS Sentinel (which reaches it over TLS with
# its client certificate). Prints the Sentinel's TLS URL.
start_tls_sentinel() {
  local primary tport conf
  primary=$(start_tls_node tsp)
  conf=$RUN_DIR/sentinel-ts1.conf
  cat >"$conf" <<CONF
sentinel monitor $SERVICE 127.0.0.1 $primary 1
sentinel down-after-milliseconds $SERVICE 1000
CONF
  tport=$(CONF=$conf start_tls_node ts1 --sentinel)
  for _ in $(seq 200); do
    if [ "$(redis-cli -p "$(cat "$RUN_DIR/ts1.port")" SENTINEL get-master-addr-by-name "$SERVICE" 2>/dev/null |
          tail -1)" = "$primary" ] &&
       redis-cli -p "$(cat "$RUN_DIR/ts1.port")" SENTINEL master "$SERVICE" 2>/dev/null |
          grep -qx 'master'; then
      echo "rediss://127.0.0.1:$tport"
      return 0
    fi
    sleep 0.1
  done
  echo "redis.sh: the TLS Sentinel did not see its primary" >&2
  return 1
}

# A primary, its replica, and three Sentinels (quorum 2) that fail over
# within ~2 s of the primary going down. Prints the Sentinel URLs.
start_sentinels() {
  local primary replica n port conf urls=()
  primary=$(start_node sp)
  replica=$(start_node sr --replicaof 127.0.0.1 "$primary")
  for n in s1 s2 s3; do
    conf=$RUN_DIR/sentinel-$n.conf
    cat >"$conf" <<CONF
sentinel monitor $SERVICE 127.0.0.1 $primary 2
sentinel down-after-milliseconds $SERVICE 1000
sentinel failover-timeout $SERVICE 4000
sentinel parallel-syncs $SERVICE 1
CONF
    port=$(CONF=$conf start_node "$n" --sentinel)
    urls+=("redis://127.0.0.1:$port")
  done
  for _ in $(seq 200); do
    if redis-cli -p "$replica" INFO replication 2>/dev/null | grep -q 'master_link_status:up' &&
       redis-cli -p "${urls[0]##*:}" SENTINEL replicas "$SERVICE" 2>/dev/null | grep -q "^$replica\$" &&
       [ "$(redis-cli -p "${urls[0]##*:}" SENTINEL sentinels "$SERVICE" 2>/dev/null | grep -c '^name$')" -eq 2 ]; then
      (IFS=,; echo "${urls[*]}")
      return 0
    fi
    sleep 0.1
  done
  echo "redis.sh: the Sentinel group did not settle" >&2
  return 1
}

all_up() {
  local n port
  [ -s "$RUN_DIR/env" ] || return 1
  for n in "${NODES[@]}"; do
    port=$(cat "$RUN_DIR/$n.port" 2>/dev/null) || return 1
    [ "$(redis-cli -p "$port" PING 2>/dev/null)" = PONG ] || return 1
  done
}

case "${1:-}" in
  start)
    mkdir -p "$RUN_DIR"
    if all_up; then echo "redis.sh: already running ($RUN_DIR/env)"; exit 0; fi
    stop_all   # leftovers of a half-started or killed run
    rm -f "$RUN_DIR"/*.log
    # If any start fails, do not leave the others running.
    trap 'stop_all' ERR
    single=$(start_node single)
    urls=()
    for n in r1 r2 r3 r4 r5; do urls+=("redis://127.0.0.1:$(start_node "$n")/0"); done
    cluster=$(start_cluster)
    sentinels=$(start_sentinels)
    TLS_DIR=$(bash "$ROOT/ci/tls.sh" "$RUN_DIR/tls")
    tls_cluster=$(start_tls_cluster)
    tls_sentinel=$(start_tls_sentinel)
    trap - ERR
    {
      echo "FENCELOCK_TEST_REDIS_URL=redis://127.0.0.1:$single/0"
      echo "FENCELOCK_TEST_REDLOCK_URLS=$(IFS=,; echo "${urls[*]}")"
      echo "FENCELOCK_TEST_CLUSTER_URLS=$cluster"
      echo "FENCELOCK_TEST_SENTINEL_URLS=$sentinels"
      echo "FENCELOCK_TEST_SENTINEL_SERVICE=$SERVICE"
      echo "FENCELOCK_TEST_TLS_DIR=$TLS_DIR"
      echo "FENCELOCK_TEST_TLS_CLUSTER_URLS=$tls_cluster"
      echo "FENCELOCK_TEST_TLS_SENTINEL_URLS=$tls_sentinel"
    } >"$RUN_DIR/env"
    echo "redis.sh: started; env in $RUN_DIR/env"
    cat "$RUN_DIR/env"
    ;;
  stop)
    stop_all
    echo "redis.sh: stopped"
    ;;
  *)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
