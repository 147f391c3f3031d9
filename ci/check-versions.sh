#!/usr/bin/env bash
# One version everywhere a release is cut from: the Cargo workspace (the
# crates, and the wheel, whose version maturin takes from bindings/python),
# bindings/wasm (its own workspace), node/package.json and its lockfile.
# Prints the version; exits 1, naming the odd ones out, if they disagree.
set -euo pipefail
cd "$(dirname "$0")/.."
toml_version() {  # the first `version = "..."` under the given [table]
  awk -v table="[$2]" '$0 == table { on = 1; next } /^\[/ { on = 0 }
    on && $1 == "version" { gsub(/"/, "", $3); print $3; exit }' "$1"
}
declare -A found=(
  [Cargo.toml]=$(toml_version Cargo.toml workspace.package)
  [bindings/wasm/Cargo.toml]=$(toml_version bindings/wasm/Cargo.toml package)
  [node/package.json]=$(node -p 'require("./node/package.json").version')
  [node/package-lock.json]=$(node -p 'require("./node/package-lock.json").packages[""].version')
)
want=${found[Cargo.toml]}
rc=0
for file in "${!found[@]}"; do
  if [ "${found[$file]}" != "$want" ]; then
    echo "check-versions: $file has ${found[$file]:-no version}, Cargo.toml's workspace has $want" >&2
    rc=1
  fi
done
# The published crates depend on each other at exactly this version.
for dep in fencelock-core fencelock; do
  line=$(grep -E "^$dep = \{ path" Cargo.toml)
  [[ $line == *"version = \"$want\""* ]] \
    || { echo "check-versions: Cargo.toml's workspace dependency on $dep is not version $want" >&2; rc=1; }
done
# Workspace members must inherit it rather than carry their own.
for manifest in core/Cargo.toml bindings/*/Cargo.toml; do
  [ "$manifest" = bindings/wasm/Cargo.toml ] && continue
  grep -q '^version.workspace = true' "$manifest" \
    || { echo "check-versions: $manifest does not use version.workspace = true" >&2; rc=1; }
done
[ $rc -eq 0 ] && echo "$want"
exit $rc
