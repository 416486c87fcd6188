#!/usr/bin/env bash
# Builds test/kubevirtenv (KubeVirt v1.9.0's reader of PCI_RESOURCE_* / USB_RESOURCE_* and of DRA
# device metadata files, with the host devices virt-launcher makes of them; test
# infrastructure only) from the Go module proxy into a cache outside the repo, keyed by the Go
# version and a hash of its sources and this script, with a completion stamp; a second run prints
# the path at once. Prints the binary's path on stdout; progress on stderr.
#
# kubevirt.io/kubevirt does not build as a plain dependency with CGO_ENABLED=0: the package
# pkg/virt-launcher/virtwrap/device/hostdevice also holds hotplug.go, which uses constants that
# libvirt.org/go/libvirt defines only in its cgo files (with cgo it needs libvirt's C headers).
# So the module is copied from the module cache with that one file left out, and go.mod's
# replace directive points at the copy (./kubevirt); addresspool.go and hostdev.go, which read
# the variables and make the host devices, are KubeVirt's, unchanged.
set -euo pipefail
SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../test/kubevirtenv" && pwd)
SELF=$(realpath "${BASH_SOURCE[0]}")
# shellcheck source=hack/go.sh
. "$(dirname "${BASH_SOURCE[0]}")/go.sh"
ROOT=$GO_CACHE
KUBEVIRT=v1.9.0
SUM=$( (cd "$SRC" && cat go.mod go.sum ./*.go; cat "$SELF") | sha256sum | cut -c1-16)
OUT="$ROOT/kubevirtenv_${GOVER}_${GOOSARCH}_$SUM"
go_cached "$ROOT" kubevirtenv "$OUT/.complete" "$OUT/kubevirtenv"
echo "kubevirtenv-build: building test/kubevirtenv with ${GOVER} and kubevirt.io/kubevirt@$KUBEVIRT into $OUT" >&2
go_workdir "$ROOT" kubevirtenv
MOD=$(cd "$SRC" && go mod download -json "kubevirt.io/kubevirt@$KUBEVIRT" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -f "$MOD/go.mod" ] || { echo "kubevirtenv-build: cannot download kubevirt.io/kubevirt@$KUBEVIRT" >&2; exit 1; }
mkdir -p "$W/src/kubevirt"
cp "$SRC"/go.mod "$SRC"/go.sum "$SRC"/*.go "$W/src/"
cp -r "$MOD/go.mod" "$MOD/pkg" "$W/src/kubevirt/"
chmod -R u+w "$W/src/kubevirt"
rm "$W/src/kubevirt/pkg/virt-launcher/virtwrap/device/hostdevice/hotplug.go"
find "$W/src/kubevirt" -name '*_test.go' -delete # (their imports are not in go.sum)
(cd "$W/src" && go build -mod=readonly -trimpath -ldflags "-s -w" -o "$W/out/kubevirtenv" .) >&2
touch "$W/out/.complete"
rm -rf "$OUT"
mv "$W/out" "$OUT"
echo "$OUT/kubevirtenv"
