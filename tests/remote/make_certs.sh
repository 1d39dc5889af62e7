#!/usr/bin/env bash
# Makes the certificates the remote tests use, in DIR: a CA (ca.crt), two
# peers it signed (a.crt/a.key, b.crt/b.key) and a rogue signed by another
# CA (rogue.crt/rogue.key, other-ca.crt). Each peer's certificate names
# 127.0.0.1, localhost and the extra IP addresses given, so that it serves
# and dials with the same certificate, as engramd does.
#   tests/remote/make_certs.sh DIR [IP...]
set -euo pipefail
dir=$1; shift
mkdir -p "$dir"; cd "$dir"
san="IP:127.0.0.1,DNS:localhost"
for ip in "$@"; do san="$san,IP:$ip"; done
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
ca() {  # name, common name
  key "$1.key"
  openssl req -x509 -new -key "$1.key" -subj "/CN=$2" -days 2 -out "$1.crt" \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
}
peer() {  # name, ca
  key "$1.key"
  openssl req -new -key "$1.key" -subj "/CN=engram peer $1" -out "$1.csr" 2>/dev/null
  printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth,clientAuth\nbasicConstraints=CA:FALSE\n' "$san" >"$1.ext"
  openssl x509 -req -in "$1.csr" -CA "$2.crt" -CAkey "$2.key" -CAcreateserial -days 2 -extfile "$1.ext" \
    -out "$1.crt" 2>/dev/null
  rm -f "$1.csr" "$1.ext"
}
ca ca "engram test CA"
ca other-ca "another CA"
peer a ca
peer b ca
peer rogue other-ca
