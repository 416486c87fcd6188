#!/usr/bin/env bash
# Builds test/kubeletpeer (kubelet's device manager of Kubernetes v1.37.1 driven by a small main,
# test infrastructure only) from the Go module proxy into a cache outside the repo, keyed by the
# Go version and a hash of its sources, with a completion stamp: unchanged sources are never
# rebuilt, and a second run prints the path at once. Static (CGO_ENABLED=0): it runs in the
# qemu node's initramfs. Prints the binary's path on stdout; progress on stderr.
set -euo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../test/kubeletpeer" && pwd)
# shellcheck source=hack/go.sh
. "$(dirname "${BASH_SOURCE[0]}")/go.sh"
ROOT=$GO_CACHE
SUM=$(cd "$SRC" && cat go.mod go.sum ./*.go | sha256sum | cut -c1-16)
OUT="$ROOT/kubeletpeer_${GOVER}_${GOOSARCH}_$SUM"
go_cached "$ROOT" kubeletpeer "$OUT/.complete" "$OUT/kubeletpeer"
echo "kubeletpeer-build: building test/kubeletpeer with ${GOVER} into $OUT" >&2
go_workdir "$ROOT" kubeletpeer
(cd "$SRC" && go build -mod=readonly -trimpath -ldflags "-s -w" -o "$W/kubeletpeer" .) >&2
touch "$W/.complete"
rm -rf "$OUT"
mv "$W" "$OUT"
trap - EXIT
echo "$OUT/kubeletpeer"
