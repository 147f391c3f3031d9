#!/usr/bin/env bash
# The one port allocator of every test redis-server (Python, Node and Rust
# tests, ci/redis.sh, the safety checker, bench, demo). Binding port 0 and
# releasing it races: another server, another test run or any client socket
# can take the port before redis-server binds it. Instead:
#
# - Ports come from a reserved range, 20000-22767 by default: below Linux's
#   ephemeral range (32768-60999), so no outgoing connection ever gets one.
# - Port P is claimed by creating $FENCELOCK_PORTS_DIR/P (default
#   /tmp/fencelock-ports) holding its owner's pid and start time, under one
#   flock that every claim takes, so two claimers never get the same port.
# - A claim lasts until released or until its owner process is gone (a dead
#   owner's claims are reaped by the next claimer that looks at them); pid
#   reuse is caught by the start time.
# - A claim of P covers P + 10000 too (a cluster-mode server's bus port,
#   still below 32768), and a port where any socket other than a TIME_WAIT
#   leftover exists (a process that does not use this allocator) is skipped.
#
#   ci/ports.sh claim [N] [--owner PID]  claim N ports (default 1), one per
#                                        line; owner: PID (default: the caller)
#   ci/ports.sh own PORT... --owner PID  hand claims to another process (a
#                                        daemonized server outliving its starter)
#   ci/ports.sh release PORT...          give claims back
#   ci/ports.sh list                     claims with their owner and liveness
set -euo pipefail

DIR=${FENCELOCK_PORTS_DIR:-/tmp/fencelock-ports}
RANGE=${FENCELOCK_PORT_RANGE:-20000-22767}
MIN=${RANGE%-*}
MAX=${RANGE#*-}
BUS_OFFSET=10000

die() { echo "ports.sh: $*" >&2; exit 1; }

# A process's start time (clock ticks since boot): with the pid it names one
# process for good, even after the pid is reused.
start_time() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }           # the command name may hold spaces and ')'
  set -- $stat
  echo "${20}"                # field 22 of stat, the 20th after the name
}

owner_alive() {  # owner_alive CLAIM-FILE
  local pid st
  read -r pid st <"$1" 2>/dev/null || return 1
  [ -n "$pid" ] && [ "$(start_time "$pid")" = "$st" ]
}

lock() {
  mkdir -p "$DIR"
  chmod 1777 "$DIR" 2>/dev/null || true   # shared by every user's test runs
  exec 9>>"$DIR/.lock"
  flock 9
}

# Every local TCP port with a socket on it that is not in TIME_WAIT (state 06).
busy_ports() {
  local hex
  for hex in $(awk 'FNR > 1 && $4 != "06" { n = split($2, a, ":"); print a[n] }' \
                 /proc/net/tcp /proc/net/tcp6 2>/dev/null | sort -u); do
    echo $((16#$hex))
  done
}

owner_record() {  # owner_record PID -> "PID STARTTIME"
  local st
  st=$(start_time "$1") || die "owner pid $1 is not running"
  echo "$1 $st"
}

cmd=${1:-}
[ $# -gt 0 ] && shift
n=1 owner=$PPID ports=()
while [ $# -gt 0 ]; do
  case $1 in
    --owner) owner=$2; shift 2 ;;
    *) ports+=("$1"); shift ;;
  esac
done

case $cmd in
  claim)
    [ ${#ports[@]} -le 1 ] || die "usage: claim [N] [--owner PID]"
    [ ${#ports[@]} -eq 1 ] && n=${ports[0]}
    [[ $n =~ ^[1-9][0-9]*$ ]] || die "claim: N must be a positive integer"
    record=$(owner_record "$owner")
    lock
    declare -A busy=()
    for p in $(busy_ports); do busy[$p]=1; done
    size=$((MAX - MIN + 1))
    offset=$(( (RANDOM * 32768 + RANDOM) % size ))
    got=()
    for ((i = 0; i < size && ${#got[@]} < n; i++)); do
      p=$((MIN + (offset + i) % size))
      [ -z "${busy[$p]:-}" ] && [ -z "${busy[$((p + BUS_OFFSET))]:-}" ] || continue
      if [ -e "$DIR/$p" ]; then
        owner_alive "$DIR/$p" && continue
        rm -f "$DIR/$p"   # its owner is gone: reap
      fi
      echo "$record" >"$DIR/$p"
      got+=("$p")
    done
    if [ ${#got[@]} -lt "$n" ]; then
      for p in "${got[@]}"; do rm -f "$DIR/$p"; done
      die "only ${#got[@]} of $n ports free in $RANGE"
    fi
    printf '%s\n' "${got[@]}"
    ;;
  own)
    [ ${#ports[@]} -gt 0 ] || die "usage: own PORT... --owner PID"
    record=$(owner_record "$owner")
    lock
    for p in "${ports[@]}"; do
      [ -e "$DIR/$p" ] || die "port $p is not claimed"
      echo "$record" >"$DIR/$p"
    done
    ;;
  release)
    lock
    for p in "${ports[@]}"; do
      [[ $p =~ ^[0-9]+$ ]] || die "release: bad port $p"
      rm -f "$DIR/$p"
    done
    ;;
  list)
    [ -d "$DIR" ] || exit 0
    for f in "$DIR"/[0-9]*; do
      [ -e "$f" ] || continue
      read -r pid _ <"$f" || true
      if owner_alive "$f"; then state=live; else state=stale; fi
      echo "${f##*/} pid=$pid $state"
    done
    ;;
  *)
    die "usage: ci/ports.sh claim [N] [--owner PID] | own PORT... --owner PID | release PORT... | list"
    ;;
esac
