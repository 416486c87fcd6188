#!/usr/bin/env bash
# Builds test/fakecri (the fake CRI runtime the kubelet harness runs, a Go test program) from the
# Go module proxy into a cache outside the repo, keyed by the Go version and a hash of its
# sources, with a completion stamp: unchanged sources are never rebuilt, and a second run prints
# the directory in well under a second. Prints the bin directory on stdout; progress on stderr.
set -euo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../test/fakecri" && pwd)
# shellcheck source=hack/go.sh
. "$(dirname "${BASH_SOURCE[0]}")/go.sh"
ROOT=${HOSTDEVD_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hostdevd-k8s}
SUM=$(cd "$SRC" && cat go.mod go.sum ./*.go | sha256sum | cut -c1-16)
OUT="$ROOT/fakecri_${GOVER}_${GOOSARCH}_$SUM"
go_cached "$ROOT" fakecri "$OUT/bin/.complete" "$OUT/bin"
go_workdir "$ROOT" work-fakecri
echo "fakecri-build: building test/fakecri with ${GOVER} into $OUT" >&2
mkdir -p "$W/bin"
(cd "$SRC" && go build -mod=readonly -trimpath -ldflags "-s -w" -o "$W/bin/fakecri" .) >&2
touch "$W/bin/.complete"
mkdir -p "$OUT"
rm -rf "${OUT:?}/bin"
mv "$W/bin" "$OUT/bin"
echo "$OUT/bin"
