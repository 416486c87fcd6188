#!/usr/bin/env bash
# Builds test/grpcpeer (a grpc-go peer, test infrastructure only) from the Go module proxy into a
# cache outside the repo, keyed by a hash of its go.mod, go.sum and main.go and the Go version:
# a second run prints the path at once. Prints the binary's path on stdout; progress on stderr.
set -euo pipefail
# shellcheck source=hack/go.sh
. "$(dirname "${BASH_SOURCE[0]}")/go.sh"
cd "$(dirname "${BASH_SOURCE[0]}")/../test/grpcpeer"
ROOT=$GO_CACHE
HASH=$( (echo "$GOVER"; cat go.mod go.sum main.go) | sha256sum | cut -c1-16)
OUT="$ROOT/grpcpeer-$HASH"
go_cached "$ROOT" grpcpeer "$OUT/grpcpeer" "$OUT/grpcpeer"
echo "grpcpeer: building into $OUT" >&2
go_workdir "$ROOT" grpcpeer
go build -mod=readonly -trimpath -ldflags "-s -w" -o "$W/grpcpeer" . >&2
mkdir -p "$OUT"
mv "$W/grpcpeer" "$OUT/grpcpeer"
echo "$OUT/grpcpeer"
