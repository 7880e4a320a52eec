#!/usr/bin/env bash
# Signed session tokens: a server given the registry's Ed25519 public key admits tokens signed
# with the private key and enforces their claims (memory quota), and refuses forged, expired and
# other-server tokens with a clear reason.
#   signed_tokens.sh BIN_DIR PROGRAMS_DIR
set -uo pipefail
bin=$1 programs=$2
work=$(mktemp -d)
source "$(dirname "$0")/lib.sh"
trap 'kill $server 2>/dev/null; rm -rf "$work"' EXIT
fail() { echo "signed_tokens: $*"; cat "$work/server.log"; exit 1; }
"$bin/rgpu" token keygen --private "$work/registry.pem" --public "$work/registry.pub" || fail keygen
"$bin/rgpu" token keygen --private "$work/other.pem" --public "$work/other.pub" || fail keygen
start_server "$work/server.log" --token-public-key "$work/registry.pub" --name gpu-host-1
sign() { "$bin/rgpu" token sign --tenant carol --memory 16M "$@"; }
refused() {  # TOKEN REASON
  out=$("$bin/rgpu" run --server "$url" --token "$1" -- "$programs/driver_vector_add" 2>&1) &&
    fail "admitted a token that should be refused ($2)"
  echo "$out" | grep -q "$2" || fail "expected '$2' in: $out"
}
good=$(sign --key "$work/registry.pem" --server gpu-host-1) || fail sign
"$bin/rgpu" run --server "$url" --token "$good" -- "$programs/driver_quota_check" 16777216 ||
  fail "a valid signed token"
refused "$(sign --key "$work/other.pem")" "does not verify"
refused "$(sign --key "$work/registry.pem" --ttl -5)" "expired"
refused "$(sign --key "$work/registry.pem" --server gpu-host-2)" "for server gpu-host-2"
# Change one character in the middle of the signature (the last one may only carry padding bits).
sig=${good#*.}
pos=$(( ${#sig} / 2 ))
ch=${sig:$pos:1}
[ "$ch" = A ] && new=B || new=A
tampered="${good%%.*}.${sig:0:$pos}${new}${sig:$((pos + 1))}"
refused "$tampered" "does not verify"
# Claims changed after signing (another tenant's name) do not verify either.
claims=${good%%.*}
forged_claims="${claims:0:4}$([ "${claims:4:1}" = Z ] && echo Y || echo Z)${claims:5}.${sig}"
refused "$forged_claims" "does not verify\|malformed"
echo "signed_tokens: valid tokens admitted with their quota; forged, expired and foreign refused"
