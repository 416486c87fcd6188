#!/usr/bin/env bash
# Builds test/kubeletpeer (kubelet's device manager of Kubernetes v1.37.1 driven by a small main,
# test infrastructure only) from the Go module proxy into a cache outside the repo, keyed by the
# Go version and a hash of its sources, with a completion stamp: unchanged sources are never
# rebuilt, and a second run prints the path at once. Static (CGO_ENABLED=0): it runs in the
# qemu node's initramfs. Prints the binary's path on stdout; progress on stderr.
set -euo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../test/kubeletpeer" && pwd)
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-modcacherw
ROOT=${HOSTDEVD_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hostdevd-tools}
GOVER=$(go env GOVERSION)
SUM=$(cd "$SRC" && cat go.mod go.sum ./*.go | sha256sum | cut -c1-16)
OUT="$ROOT/kubeletpeer_${GOVER}_$(go env GOOS)-$(go env GOARCH)_$SUM"
if [ -f "$OUT/.complete" ]; then echo "$OUT/kubeletpeer"; exit 0; fi
mkdir -p "$ROOT"
exec 9>"$ROOT/.kubeletpeer.lock"
flock 9
if [ -f "$OUT/.complete" ]; then echo "$OUT/kubeletpeer"; exit 0; fi
echo "kubeletpeer-build: building test/kubeletpeer with ${GOVER} into $OUT" >&2
W=$(mktemp -d "$ROOT/.kubeletpeer.XXXXXX")
trap 'rm -rf "$W"' EXIT
(cd "$SRC" && go build -mod=readonly -trimpath -ldflags "-s -w" -o "$W/kubeletpeer" .) >&2
touch "$W/.complete"
rm -rf "$OUT"
mv "$W" "$OUT"
trap - EXIT
echo "$OUT/kubeletpeer"
