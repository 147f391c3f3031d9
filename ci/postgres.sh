#!/usr/bin/env bash
# Start/stop the harness's PostgreSQL: one private cluster for the SQL
# recipe's tests (Python fencelock.sql, Node fencelock/sql), initdb'd fresh
# under a run directory in .build/, listening on 127.0.0.1 only, on a port
# from ci/ports.sh, its unix socket inside its own data directory. PostgreSQL
# refuses to run as root: as root (CI) it runs as the `postgres` user that
# Debian's package creates (ci/setup.sh installs `postgresql`).
#   ci/postgres.sh start -> writes $RUN_DIR/env (FENCELOCK_TEST_PG_URL); no-op if up
#   ci/postgres.sh stop  -> stops exactly the server this directory started
#                           (by its pid), releases its port, removes its data
# FENCELOCK_PG_RUN_DIR overrides the run directory (the test fixtures use a
# private one when FENCELOCK_TEST_PG_URL is unset).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
RUN_DIR=${FENCELOCK_PG_RUN_DIR:-$ROOT/.build/postgres}
USER_NAME=fencelock

# One start or stop at a time per run directory (as ci/redis.sh).
if [ -z "${FENCELOCK_PG_LOCKED:-}" ] && { [ "${1:-}" = start ] || [ "${1:-}" = stop ]; }; then
  mkdir -p "$RUN_DIR"
  FENCELOCK_PG_LOCKED=1 exec flock -o "$RUN_DIR/.lock" bash "$0" "$@"
fi

bindir() {
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  [ -x "$dir/initdb" ] || { echo "postgres.sh: no PostgreSQL server found (bash ci/setup.sh installs it)" >&2; return 1; }
  echo "$dir"
}

# Run as the cluster's owner: `postgres` when we are root, else ourselves.
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# The data directory: in the run directory if the owner can reach it, else
# (a checkout the postgres user cannot enter) a private one under /tmp.
data_dir() {
  if [ -s "$RUN_DIR/datadir" ]; then cat "$RUN_DIR/datadir"; return; fi
  local dir=$RUN_DIR/data
  if ! as_owner test -x "$RUN_DIR"; then dir=$(mktemp -d /tmp/fencelock-pg.XXXXXX); fi
  echo "$dir" >"$RUN_DIR/datadir"
  echo "$dir"
}

# True if $1 is alive and really a postgres server (never kill a stranger).
is_our_postgres() {
  [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -q postgres
}

stop_all() {
  local data pid port i
  [ -s "$RUN_DIR/datadir" ] || return 0
  data=$(cat "$RUN_DIR/datadir")
  pid=$(head -1 "$data/postmaster.pid" 2>/dev/null || true)
  if [ -n "$pid" ] && is_our_postgres "$pid"; then
    kill -INT "$pid" 2>/dev/null || true   # fast shutdown
    for i in $(seq 150); do
      is_our_postgres "$pid" || break
      [ "$i" -eq 100 ] && kill -KILL "$pid" 2>/dev/null || true
      sleep 0.1
    done
  fi
  port=$(cat "$RUN_DIR/port" 2>/dev/null || true)
  [ -z "$port" ] || bash "$ROOT/ci/ports.sh" release "$port"
  rm -rf "$data"
  rm -f "$RUN_DIR/datadir" "$RUN_DIR/port" "$RUN_DIR/env"
}

up() {
  [ -s "$RUN_DIR/env" ] && [ -s "$RUN_DIR/port" ] || return 1
  "$(bindir)/pg_isready" -q -h 127.0.0.1 -p "$(cat "$RUN_DIR/port")"
}

start() {
  local bin data port pid attempt
  bin=$(bindir)
  data=$(data_dir)
  rm -rf "$data"
  mkdir -p "$data"
  [ "$(id -u)" -ne 0 ] || chown postgres: "$data"
  chmod 700 "$data"
  as_owner "$bin/initdb" -D "$data" -U "$USER_NAME" --auth=trust --no-sync \
    -E UTF8 --locale=C >"$RUN_DIR/initdb.log" 2>&1 ||
    { echo "postgres.sh: initdb failed, see $RUN_DIR/initdb.log" >&2; return 1; }
  for attempt in 1 2 3; do
    port=$(bash "$ROOT/ci/ports.sh" claim --owner $$)
    echo "$port" >"$RUN_DIR/port"
    # Durability is not under test: no fsync, the fastest commits.
    if as_owner "$bin/pg_ctl" -D "$data" -l "$data/server.log" -w -t 30 \
        -o "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories='$data' \
            -c fsync=off -c synchronous_commit=off -c full_page_writes=off" start >/dev/null; then
      pid=$(head -1 "$data/postmaster.pid")
      bash "$ROOT/ci/ports.sh" own "$port" --owner "$pid"
      echo "FENCELOCK_TEST_PG_URL=postgresql://$USER_NAME@127.0.0.1:$port/postgres" >"$RUN_DIR/env"
      return 0
    fi
    echo "postgres.sh: port $port failed (attempt $attempt), see $data/server.log" >&2
    bash "$ROOT/ci/ports.sh" release "$port"
    rm -f "$RUN_DIR/port"
  done
  echo "postgres.sh: could not start PostgreSQL" >&2
  return 1
}

case "${1:-}" in
  start)
    if up; then echo "postgres.sh: already running ($RUN_DIR/env)"; exit 0; fi
    stop_all   # leftovers of a half-started or killed run
    trap 'stop_all' ERR
    start
    trap - ERR
    echo "postgres.sh: started; env in $RUN_DIR/env"
    cat "$RUN_DIR/env"
    ;;
  stop)
    stop_all
    echo "postgres.sh: stopped"
    ;;
  *)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
