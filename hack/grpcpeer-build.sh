#!/usr/bin/env bash
# Builds test/grpcpeer (a grpc-go peer, test infrastructure only) from the Go module proxy into a
# cache outside the repo, keyed by a hash of its go.mod, go.sum and main.go and the Go version:
# a second run prints the path at once. Prints the binary's path on stdout; progress on stderr.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../test/grpcpeer"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-modcacherw
ROOT=${HOSTDEVD_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hostdevd-tools}
HASH=$( (go env GOVERSION; cat go.mod go.sum main.go) | sha256sum | cut -c1-16)
OUT="$ROOT/grpcpeer-$HASH"
if [ -x "$OUT/grpcpeer" ]; then echo "$OUT/grpcpeer"; exit 0; fi
mkdir -p "$ROOT"
exec 9>"$ROOT/.grpcpeer.lock"
flock 9
if [ -x "$OUT/grpcpeer" ]; then echo "$OUT/grpcpeer"; exit 0; fi
echo "grpcpeer: building into $OUT" >&2
W=$(mktemp -d "$ROOT/.grpcpeer.XXXXXX")
trap 'rm -rf "$W"' EXIT
go build -mod=readonly -trimpath -ldflags "-s -w" -o "$W/grpcpeer" . >&2
mkdir -p "$OUT"
mv "$W/grpcpeer" "$OUT/grpcpeer"
echo "$OUT/grpcpeer"
