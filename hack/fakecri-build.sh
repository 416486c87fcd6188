#!/usr/bin/env bash
# Builds test/fakecri (the fake CRI runtime the kubelet harness runs, a Go test program) from the
# Go module proxy into a cache outside the repo, keyed by the Go version and a hash of its
# sources, with a completion stamp: unchanged sources are never rebuilt, and a second run prints
# the directory in well under a second. Prints the bin directory on stdout; progress on stderr.
set -euo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../test/fakecri" && pwd)
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-modcacherw
ROOT=${HOSTDEVD_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hostdevd-k8s}
GOVER=$(go env GOVERSION)
SUM=$(cd "$SRC" && cat go.mod go.sum ./*.go | sha256sum | cut -c1-16)
OUT="$ROOT/fakecri_${GOVER}_$(go env GOOS)-$(go env GOARCH)_$SUM"
if [ -f "$OUT/bin/.complete" ]; then echo "$OUT/bin"; exit 0; fi
mkdir -p "$ROOT"
exec 9>"$ROOT/.lock-fakecri"
flock 9
if [ -f "$OUT/bin/.complete" ]; then echo "$OUT/bin"; exit 0; fi

W=$(mktemp -d "$ROOT/.work-fakecri.XXXXXX")
trap 'rm -rf "$W"' EXIT
echo "fakecri-build: building test/fakecri with ${GOVER} into $OUT" >&2
mkdir -p "$W/bin"
(cd "$SRC" && go build -mod=readonly -trimpath -ldflags "-s -w" -o "$W/bin/fakecri" .) >&2
touch "$W/bin/.complete"
mkdir -p "$OUT"
rm -rf "${OUT:?}/bin"
mv "$W/bin" "$OUT/bin"
echo "$OUT/bin"
