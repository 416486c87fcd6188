#!/usr/bin/env bash
# Builds test/kvhandler (kvhandler-standin: virt-handler's hand-over of a VMI to virt-launcher,
# made with KubeVirt v1.9.0's own cmd-client, isolation and hypervisor packages; test
# infrastructure only) as a command of the kubevirt.io/kubevirt module, and the module's own
# cmd/virt-launcher/libvirt-hook-client (KubeVirt's launcher image has it at
# /usr/bin/libvirt-hook-client; the launcher panics without it while the feature gate
# LibvirtHooksServerAndClient, beta and on by default, is on; hack/kubevirt-build.sh builds only
# top-level commands), the way
# hack/kubevirt-build.sh builds KubeVirt's own (a copy of the module's tree with go.mod's
# replace directives changed, the stand-ins of test/kubevirtstubs), CGO_ENABLED=0 (static: it
# runs in the qemu node), into a cache outside the repo keyed by the Go version and a hash of
# its source, the stand-ins and this script, with a completion stamp; a second run prints the
# path at once. Prints the DIRECTORY holding kvhandler-standin and libvirt-hook-client on stdout;
# progress on stderr.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../test/kvhandler" && pwd)
STUBS=$(cd "$HERE/../test/kubevirtstubs" && pwd)
SELF=$(realpath "${BASH_SOURCE[0]}")
# shellcheck source=hack/go.sh
. "$HERE/go.sh"
ROOT=$GO_CACHE
KUBEVIRT=v1.9.0
SUM=$( (
    cat "$SELF" "$SRC"/*.go
    cd "$STUBS" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 cat
) | sha256sum | cut -c1-16)
OUT="$ROOT/kvhandler_${KUBEVIRT}_${GOVER}_${GOOSARCH}_$SUM"
go_cached "$ROOT" kvhandler "$OUT/.complete" "$OUT"
echo "kvhandler-build: building test/kvhandler with ${GOVER} and kubevirt.io/kubevirt@$KUBEVIRT into $OUT" >&2
go_workdir "$ROOT" kvhandler
export GOWORK=off
mod=$(cd "$W" && go mod download -json "kubevirt.io/kubevirt@$KUBEVIRT" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -f "$mod/go.mod" ] || { echo "kvhandler-build: cannot download kubevirt.io/kubevirt@$KUBEVIRT" >&2; exit 1; }
mkdir -p "$W/src"
cp -r "$mod/go.mod" "$mod/go.sum" "$mod/pkg" "$W/src/"
cp -r "$STUBS" "$W/stubs"
mkdir -p "$W/src/cmd/kvhandler-standin" "$W/src/cmd/virt-launcher"
cp -r "$mod/cmd/virt-launcher/libvirt-hook-client" "$W/src/cmd/virt-launcher/"
cp "$SRC"/*.go "$W/src/cmd/kvhandler-standin/"
chmod -R u+w "$W/src"
find "$W/src" -name '*_test.go' -delete
(cd "$W/src" && go mod edit \
    -replace "kubevirt.io/api=kubevirt.io/api@$KUBEVIRT" \
    -replace "kubevirt.io/client-go=kubevirt.io/client-go@$KUBEVIRT" \
    -replace kubevirt.io/virt-template-api=../stubs/virt-template-api \
    -replace kubevirt.io/virt-template-client-go=../stubs/virt-template-client-go \
    -replace kubevirt.io/virt-template-engine=../stubs/virt-template-engine \
    -replace libguestfs.org/libnbd=../stubs/libnbd)
mkdir -p "$W/out"
(cd "$W/src" && CGO_ENABLED=0 GOFLAGS="$GOFLAGS -mod=mod" \
    go build -p 2 -trimpath -ldflags "-s -w" -o "$W/out/kvhandler-standin" ./cmd/kvhandler-standin &&
    CGO_ENABLED=0 GOFLAGS="$GOFLAGS -mod=mod" \
    go build -p 2 -trimpath -ldflags "-s -w" -o "$W/out/libvirt-hook-client" ./cmd/virt-launcher/libvirt-hook-client) >&2
"$W/out/kvhandler-standin" --help >/dev/null 2>&1 || [ $? -eq 2 ] # (flag's usage: exit 2)
touch "$W/out/.complete"
rm -rf "$OUT"
mv "$W/out" "$OUT"
echo "$OUT"
