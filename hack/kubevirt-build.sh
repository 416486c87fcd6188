#!/usr/bin/env bash
# Builds KubeVirt v1.9.0's own daemons (test infrastructure only, never the product) from the
# kubevirt.io/kubevirt module on the Go module proxy into a cache outside the repo: one directory
# keyed by the Go version and a hash of this script and the stand-in modules, one binary per
# command with its own completion stamp (a command built once is not built again, whatever set
# asked for it); a second run prints the path at once. Prints the output DIRECTORY on stdout;
# progress on stderr.
#
#   hack/kubevirt-build.sh [CMD...]   default: virt-launcher virt-launcher-monitor
#                                     virt-controller virt-handler (another cmd/ of the module is
#                                     built without cgo; not every one builds with the stand-ins)
#
# The module is built as the main module from a copy of its zip's tree, with go.mod changed:
#   - kubevirt.io/api and kubevirt.io/client-go are replaced by ./staging/..., which the zip
#     lacks (nested modules): they point at the published v1.9.0 instead;
#   - kubevirt.io/virt-template-{api,client-go,engine}@v0.2.0 and libguestfs.org/libnbd, which
#     the proxy refuses, are replaced by the stand-ins of test/kubevirtstubs/ (a few types and
#     functions; virt-template only behind feature gates, libnbd only for backups).
# The go command adds the missing go.sum lines (-mod=mod), verified against the checksum
# database as usual; once the modules are in the module cache a rebuild needs no network.
#
# cgo: virt-launcher with -tags libvirt_dlopen (no libvirt-dev; libvirt.so.0 is dlopen()ed at
# run time) and virt-handler (its node-labeller includes <linux/kvm.h>, from linux-libc-dev);
# the others CGO_ENABLED=0. Each binary must run (--help exits 0 without libvirt or a cluster)
# or the build fails; virt-launcher must link only glibc and dlopen libvirt.so.0 when it runs.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
STUBS=$(cd "$HERE/../test/kubevirtstubs" && pwd)
SELF=$(realpath "${BASH_SOURCE[0]}")
# shellcheck source=hack/go.sh
. "$HERE/go.sh"
ROOT=$GO_CACHE
KUBEVIRT=v1.9.0
ALL=(virt-launcher virt-launcher-monitor virt-controller virt-handler)
CMDS=("$@")
[ ${#CMDS[@]} -gt 0 ] || CMDS=("${ALL[@]}")
for c in "${CMDS[@]}"; do
    [[ $c =~ ^[a-z0-9-]+$ ]] || { echo "kubevirt-build: bad command name '$c'" >&2; exit 2; }
done
SUM=$( (
    cat "$SELF"
    cd "$STUBS" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 cat
) | sha256sum | cut -c1-16)
OUT="$ROOT/kubevirt_${KUBEVIRT}_${GOVER}_${GOOSARCH}_$SUM"
# The set's stamp (for go_cached's quick answer); each command has its own, .CMD.complete.
SET=$(printf '%s\n' "${CMDS[@]}" | LC_ALL=C sort -u | sha256sum | cut -c1-8)
go_cached "$ROOT" kubevirt "$OUT/.set-$SET.complete" "$OUT"
go_workdir "$ROOT" kubevirt
export GOWORK=off

# The work copy of the module: the zip's tree, go.mod's replace directives changed.
prepare() {
    local mod
    mod=$(cd "$W" && go mod download -json "kubevirt.io/kubevirt@$KUBEVIRT" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    [ -f "$mod/go.mod" ] || { echo "kubevirt-build: cannot download kubevirt.io/kubevirt@$KUBEVIRT" >&2; exit 1; }
    cp -r "$mod" "$W/src"
    cp -r "$STUBS" "$W/stubs"
    chmod -R u+w "$W/src"
    rm -f "$W/src/go.work" "$W/src/go.work.sum" # (it would use ./staging, which the zip lacks)
    find "$W/src" -name '*_test.go' -delete
    (cd "$W/src" && go mod edit \
        -replace "kubevirt.io/api=kubevirt.io/api@$KUBEVIRT" \
        -replace "kubevirt.io/client-go=kubevirt.io/client-go@$KUBEVIRT" \
        -replace kubevirt.io/virt-template-api=../stubs/virt-template-api \
        -replace kubevirt.io/virt-template-client-go=../stubs/virt-template-client-go \
        -replace kubevirt.io/virt-template-engine=../stubs/virt-template-engine \
        -replace libguestfs.org/libnbd=../stubs/libnbd)
    mkdir -p "$W/out"
}

build() { # cmd
    local cgo=0 tags=() t0
    case "$1" in
    virt-launcher) cgo=1 tags=(-tags libvirt_dlopen) ;;
    virt-handler) cgo=1 ;;
    esac
    t0=$(date +%s)
    echo "kubevirt-build: go build ./cmd/$1 (CGO_ENABLED=$cgo${tags[*]:+ ${tags[*]}})" >&2
    (cd "$W/src" && CGO_ENABLED=$cgo GOFLAGS="$GOFLAGS -mod=mod" \
        go build -p 2 "${tags[@]}" -trimpath -ldflags "-s -w" -o "$W/out/$1" "./cmd/$1") >&2
    echo "kubevirt-build: $1 built in $(($(date +%s) - t0)) s, $(du -m "$W/out/$1" | cut -f1) MB" >&2
}

# The binary runs: --help exits 0 (flag's usage) without libvirt or a cluster.
check_runs() { # cmd
    local log=$W/$1.help
    if ! "$W/out/$1" --help >"$log" 2>&1; then
        cat "$log" >&2
        echo "kubevirt-build: $1 --help failed" >&2
        exit 1
    fi
}

# virt-launcher links only glibc (ldd), and it does look libvirt.so.0 up at run time: with
# libvirt_dlopen its init() (libvirt.EventRegisterDefaultImpl) dlopen()s it, so --help already
# does; glibc's LD_DEBUG=libs shows the search, found or not.
check_launcher() {
    local bad
    bad=$(ldd "$W/out/virt-launcher" | awk '{print $1}' |
        grep -vE '^(linux-vdso\.so\.1|/lib64/ld-linux-x86-64\.so\.2|/lib/ld-linux-aarch64\.so\.1|lib(c|dl|pthread|m|resolv)\.so\.[0-9]+)$' || true)
    if [ -n "$bad" ]; then
        echo "kubevirt-build: virt-launcher links more than glibc: ${bad//$'\n'/ }" >&2
        exit 1
    fi
    LD_DEBUG=libs "$W/out/virt-launcher" --help >"$W/launcher.ld" 2>&1 || true
    grep -q 'find library=libvirt\.so\.0 \[0\]; searching' "$W/launcher.ld" || {
        echo "kubevirt-build: virt-launcher does not dlopen libvirt.so.0 (not built with libvirt_dlopen?)" >&2
        exit 1
    }
}

for c in "${CMDS[@]}"; do
    [ ! -f "$OUT/.$c.complete" ] || continue
    [ -d "$W/src" ] || {
        echo "kubevirt-build: building ${CMDS[*]} of kubevirt.io/kubevirt@$KUBEVIRT with ${GOVER} into $OUT" >&2
        prepare
    }
    [ -d "$W/src/cmd/$c" ] || { echo "kubevirt-build: no cmd/$c in kubevirt.io/kubevirt@$KUBEVIRT" >&2; exit 1; }
    build "$c"
    [ "$c" != virt-launcher ] || check_launcher
    check_runs "$c"
    mkdir -p "$OUT"
    mv "$W/out/$c" "$OUT/$c"
    touch "$OUT/.$c.complete"
done
mkdir -p "$OUT"
touch "$OUT/.set-$SET.complete"
echo "$OUT"
