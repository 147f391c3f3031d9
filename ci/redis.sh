#!/usr/bin/env bash
# Start/stop the harness's redis-servers: one single node and 5 independent
# nodes (Redlock), on loopback ports from ci/ports.sh, under a run directory
# in .build/.
#   ci/redis.sh start   -> writes $RUN_DIR/env (FENCELOCK_TEST_REDIS_URL,
#                          FENCELOCK_TEST_REDLOCK_URLS); no-op if already up
#   ci/redis.sh stop    -> stops exactly the servers this directory started
# FENCELOCK_REDIS_RUN_DIR overrides the run directory (ci/test.sh uses its own
# so it never stops servers a developer started with `make redis-start`).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUN_DIR=${FENCELOCK_REDIS_RUN_DIR:-$ROOT/.build/redis}
NODES=(single r1 r2 r3 r4 r5)

# True if $1 is alive and really a redis-server (a stale pidfile from an
# earlier boot could name an unrelated process; never kill that).
is_our_redis() {
  [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -q redis-server
}

# Start one node; prints its port. Its port comes from ci/ports.sh, claimed
# for this script and handed to the daemonized server once it runs (the claim
# then lasts as long as the server). Retries on another port if a process
# outside the allocator holds the one we got.
start_node() {
  local name=$1 attempt port pid
  for attempt in 1 2 3; do
    port=$(bash "$ROOT/ci/ports.sh" claim --owner $$)
    rm -f "$RUN_DIR/$port.pid" "$RUN_DIR/$port.log"
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
      --daemonize yes --pidfile "$RUN_DIR/$port.pid" \
      --logfile "$RUN_DIR/$port.log" --dir "$RUN_DIR" >/dev/null
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
  rm -f "$RUN_DIR"/*.pid "$RUN_DIR"/*.port "$RUN_DIR/env"
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
    trap - ERR
    {
      echo "FENCELOCK_TEST_REDIS_URL=redis://127.0.0.1:$single/0"
      echo "FENCELOCK_TEST_REDLOCK_URLS=$(IFS=,; echo "${urls[*]}")"
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
