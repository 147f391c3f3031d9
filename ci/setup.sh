#!/usr/bin/env bash
# Idempotent machine setup for `make test`. Fast (a few dpkg queries) when
# everything is already there. Python and Node packages are NOT installed here:
# ci/test-python.sh and ci/test-node.sh own their environments.
set -euo pipefail

# redis-server/redis-tools: the test servers and redis-cli for health checks.
# postgresql: the SQL recipe's test server (ci/postgres.sh; its `postgres`
# user runs it, as PostgreSQL refuses root).
# openssl: ci/tls.sh makes the TLS suites' CA and certificates.
# rustc-web, cargo-web, rust-web-src, lld: Debian's Rust with std sources and
# wasm-ld, used only by ci/test-wasm.sh because rustup cannot add the
# wasm32-unknown-unknown target on this machine.
packages=(redis-server redis-tools postgresql openssl rustc-web cargo-web rust-web-src lld)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all system packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
export DEBIAN_FRONTEND=noninteractive

# Keep the redis-server and postgresql packages from starting their own
# daemons (ports 6379, 5432): the harness starts exactly the servers it needs
# and nothing else. Only if no
# policy is in place already, and removed again however we exit.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | "${sudo[@]}" tee "$policy" >/dev/null
  "${sudo[@]}" chmod +x "$policy"
  trap '"${sudo[@]}" rm -f "$policy"' EXIT
fi

"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -q --no-install-recommends "${missing[@]}"
