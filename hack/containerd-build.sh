#!/usr/bin/env bash
# Builds containerd 2, its runc shim and its client (cmd/containerd, cmd/containerd-shim-runc-v2
# and cmd/ctr of a pinned github.com/containerd/containerd/v2 release) from the Go module proxy, test
# infrastructure only: the real container runtime of hack/kubelet.sh's containerd mode.
# Kubernetes 1.35 was the last release to support containerd 1.x and Debian bookworm ships 1.6,
# so it is built here like kubelet; runc and the CNI plugins come from Debian (hack/deps.sh).
#
# An empty wrapper module `go get`s the three command packages (the module alone leaves their
# dependencies out of go.sum) and builds them static (CGO_ENABLED=0) without the btrfs,
# devmapper and zfs snapshotters (cgo), with the version stamped as containerd's Makefile does.
# Output goes to a cache outside the repo, keyed by the containerd version, the Go version, the
# platform and the recipe (bump RECIPE when the build changes), with a completion stamp: a second
# run prints the path at once. Prints the bin directory (containerd, containerd-shim-runc-v2, and
# ctr: the ctr of the same release, as Debian's is 1.6's) on stdout; progress on stderr.
set -euo pipefail
# shellcheck source=hack/go.sh
. "$(dirname "${BASH_SOURCE[0]}")/go.sh"
CONTAINERD_VERSION=${CONTAINERD_VERSION:-v2.4.2}
RECIPE=r2
MOD=github.com/containerd/containerd/v2
ROOT=$GO_CACHE
OUT="$ROOT/containerd-${CONTAINERD_VERSION}_${GOVER}_${GOOSARCH}_$RECIPE"
go_cached "$ROOT" containerd "$OUT/.complete" "$OUT"
start=$(date +%s)
echo "containerd-build: building $MOD@$CONTAINERD_VERSION with $GOVER into $OUT" >&2
go_workdir "$ROOT" containerd
(
    cd "$W"
    go mod init hostdevd.test/containerd-build
    go get "$MOD/cmd/containerd@$CONTAINERD_VERSION" \
        "$MOD/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION" "$MOD/cmd/ctr@$CONTAINERD_VERSION"
    go build -mod=readonly -trimpath -tags "no_btrfs no_devmapper no_zfs" \
        -ldflags "-s -w -X $MOD/version.Version=$CONTAINERD_VERSION -X $MOD/version.Package=$MOD" \
        -o "$W/bin/" "$MOD/cmd/containerd" "$MOD/cmd/containerd-shim-runc-v2" "$MOD/cmd/ctr"
) >&2
"$W/bin/containerd" --version >&2
touch "$W/bin/.complete"
rm -rf "$OUT"
mv "$W/bin" "$OUT"
echo "containerd-build: done in $(($(date +%s) - start))s" >&2
echo "$OUT"
