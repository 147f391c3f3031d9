#!/usr/bin/env bash
# `make dist`: the artifacts a registry would serve, into dist/ (emptied first):
#   fencelock-V-cp39-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl  PyPI
#   fencelock-V.tar.gz                                                  PyPI (sdist)
#   fencelock-V.tgz                  npm: JS, types, fencelock/wasm (wasm/pkg)
#   fencelock-linux-x64-gnu-V.tgz    npm: the prebuilt addon (napi-rs layout)
#   fencelock-core-V.crate, fencelock-V.crate                           crates.io
# Release routine and the why of each step: docs/releasing.md.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
pyenv_root=${PYENV_ROOT:-$HOME/.pyenv}
[ -d "$pyenv_root/shims" ] && export PATH="$pyenv_root/shims:$PATH"
cargo_bin=${CARGO_HOME:-$HOME/.cargo}/bin
[ -d "$cargo_bin" ] && export PATH="$cargo_bin:$PATH"

version=$(bash ci/check-versions.sh)
out=$root/dist
rm -rf "$out"
mkdir -p "$out"

# Build tools, once, in their own venv: maturin (the Python suite's
# version), ziglang (zig links against glibc 2.17's symbols, so the wheel is
# manylinux2014), auditwheel (checks the wheel's tag).
venv=$root/.build/dist-venv
if ! "$venv/bin/maturin" --version 2>/dev/null | grep -q '^maturin 1\.16\.' \
    || ! "$venv/bin/python" -c 'import ziglang, auditwheel' 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --disable-pip-version-check 'maturin==1.16.*' 'ziglang==0.13.*' 'auditwheel==6.*'
fi

# 1. Python: the abi3 wheel and the sdist. The zig-linked build has other C
#    compiler settings than the Python suite's build, so it gets its own
#    target dir (sharing one would rebuild ring and its dependents each time).
#    A cargo shim records the environment maturin gives its cargo build (zig
#    wrappers as CC and linker): step 2 builds the addon with exactly that
#    environment, so it reuses every dependency compiled here.
shim=$root/.build/dist-shim
mkdir -p "$shim"
printf '#!/bin/sh\ncase "$1" in build|rustc) env -0 >"%s/build.env" ;; esac\nexec "%s" "$@"\n' \
  "$shim" "$(command -v cargo)" >"$shim/cargo"
chmod +x "$shim/cargo"
rm -f "$shim/build.env"
echo "dist: maturin build --zig --compatibility manylinux2014"
(
  cd python
  PATH="$shim:$venv/bin:$PATH" CARGO_TARGET_DIR=$root/target/dist \
    maturin build --quiet --release --locked --zig --compatibility manylinux2014 \
    --target x86_64-unknown-linux-gnu -o "$out"
  PATH="$venv/bin:$PATH" maturin sdist -o "$out" >/dev/null
)
wheel=$(ls "$out"/fencelock-"$version"-cp39-abi3-*.whl)
# (auditwheel wraps its lines: join them before matching)
shown=$("$venv/bin/auditwheel" show "$wheel" | tr -s ' \n' ' ')
echo "dist: auditwheel: ${shown%%. The wheel references*}"
[[ $shown == *'is consistent with the following platform tag: "manylinux_2_17_x86_64"'* ]] \
  || { echo "dist: $wheel is not manylinux_2_17: $shown" >&2; exit 1; }

# 2. npm, napi-rs layout: the main package names the per-platform package in
#    optionalDependencies; npm installs the one whose os/cpu/libc match.
#    The addon is linked by zig against glibc 2.17 like the wheel, in the
#    environment maturin's cargo build had (recorded by the shim above).
#    fencelock/wasm is rebuilt incrementally (the wasm suite built it).
echo "dist: cargo build -p fencelock-node in maturin's zig environment (glibc 2.17)"
[ -s "$shim/build.env" ] || { echo "dist: maturin ran no cargo build through $shim" >&2; exit 1; }
mapfile -d '' build_env <"$shim/build.env"
env -i "${build_env[@]}" cargo build --quiet --release --locked -p fencelock-node --target x86_64-unknown-linux-gnu
addon=$root/target/dist/x86_64-unknown-linux-gnu/release/libfencelock_node.so
glibc=$(objdump -T "$addon" | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)
[ "$(printf '%s\n' "$glibc" GLIBC_2.17 | sort -V | tail -1)" = GLIBC_2.17 ] \
  || { echo "dist: the addon needs $glibc, more than glibc 2.17" >&2; exit 1; }
cd "$root/node"
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  FENCELOCK_SKIP_ADDON_BUILD=1 npm ci --no-audit --no-fund
fi
npm run --silent build:wasm
stage=$root/.build/dist-npm
rm -rf "$stage"
mkdir -p "$stage"
# (napi keeps the generated dirs inside the project it runs in: a copy of
# package.json in the staging dir is that project)
cp package.json "$stage/"
npx --no-install napi create-npm-dirs --cwd "$stage" >/dev/null
rm "$stage/package.json"
platform_dir=$stage/npm/linux-x64-gnu
cp "$addon" "$platform_dir/fencelock.linux-x64-gnu.node"
npm pack --silent --pack-destination "$stage" >/dev/null
tar -xzf "$stage/fencelock-$version.tgz" -C "$stage"
rm "$stage/fencelock-$version.tgz"
# The published main package carries no addon and no install script (that
# one builds the addon with cargo for `npm install ./node` from a checkout).
node - "$stage/package" "$version" <<'EOF'
const fs = require('node:fs')
const path = require('node:path')
const [dir, version] = process.argv.slice(2)
const file = path.join(dir, 'package.json')
const pkg = JSON.parse(fs.readFileSync(file, 'utf8'))
delete pkg.scripts.install
pkg.files = pkg.files.filter((f) => f !== '*.node' && f !== 'scripts/build-addon.js')
pkg.optionalDependencies = { 'fencelock-linux-x64-gnu': version }
fs.writeFileSync(file, JSON.stringify(pkg, null, 2) + '\n')
for (const f of fs.readdirSync(dir)) if (f.endsWith('.node')) fs.rmSync(path.join(dir, f))
fs.rmSync(path.join(dir, 'scripts', 'build-addon.js'))
EOF
(cd "$stage/package" && npm pack --silent --pack-destination "$out" >/dev/null)
(cd "$platform_dir" && npm pack --silent --pack-destination "$out" >/dev/null)
cd "$root"

# 3. Rust: the two published crates (the bindings are publish = false).
#    Packaged together, so fencelock's verify build resolves fencelock-core
#    from the other .crate, not from crates.io.
#    Cargo treats a registry crate of one version as immutable: it unpacks
#    it once into $CARGO_HOME/registry/src and never rebuilds its compiled
#    copy. Ours change under the same version until released, so drop both
#    (the verify builds get their own target dir, holding nothing else).
echo "dist: cargo package -p fencelock-core -p fencelock"
pkg_target=$root/target/dist-package
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/fencelock-core-"$version" \
  "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/fencelock-"$version" \
  "$pkg_target"/debug/{deps,.fingerprint,build}/*fencelock*
CARGO_TARGET_DIR=$pkg_target cargo package --quiet --locked -p fencelock-core -p fencelock
cp "$pkg_target"/package/fencelock-core-"$version".crate "$pkg_target"/package/fencelock-"$version".crate "$out/"

echo "dist: $out"
ls -l "$out" | awk 'NR > 1 { printf "  %-72s %9d bytes\n", $9, $5 }'
