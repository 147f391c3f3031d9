#!/usr/bin/env bash
# Test certificates for the TLS suites, made with openssl (idempotent):
#   ci/tls.sh DIR   -> DIR/{ca,other-ca}.{crt,key}   two CAs (one "wrong")
#                      DIR/server.{crt,key}          127.0.0.1 + localhost, by ca
#                      DIR/otherhost.{crt,key}       other.invalid only, by ca
#                      DIR/client.{crt,key}          a client certificate, by ca
# Prints DIR. Tests start `redis-server --tls-port` with these themselves.
set -euo pipefail
dir=${1:?usage: ci/tls.sh DIR}
mkdir -p "$dir"
if [ -s "$dir/done" ]; then echo "$dir"; exit 0; fi
command -v openssl >/dev/null || { echo "tls.sh: openssl is not installed (ci/setup.sh installs it)" >&2; exit 1; }
cd "$dir"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ca() { # name
  openssl req -x509 -newkey rsa:2048 -nodes -sha256 -days 3650 \
    -keyout "$1.key" -out "$1.crt" -subj "/CN=fencelock test $1" 2>/dev/null
}
leaf() { # name subjectAltName extendedKeyUsage
  openssl req -newkey rsa:2048 -nodes -sha256 -keyout "$1.key" -out "$tmp/$1.csr" \
    -subj "/CN=fencelock test $1" 2>/dev/null
  printf 'subjectAltName=%s\nextendedKeyUsage=%s\nbasicConstraints=CA:FALSE\n' "$2" "$3" >"$tmp/$1.ext"
  openssl x509 -req -in "$tmp/$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial \
    -out "$1.crt" -days 3650 -sha256 -extfile "$tmp/$1.ext" 2>/dev/null
}

ca ca
ca other-ca
leaf server "IP:127.0.0.1,DNS:localhost" serverAuth
leaf otherhost "DNS:other.invalid" serverAuth
leaf client "DNS:fencelock-test-client" clientAuth
chmod 600 ./*.key
echo ok >done
echo "$dir"
