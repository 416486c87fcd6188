#!/usr/bin/env bash
# hack/launcher-image.sh - KubeVirt's virt-launcher image for containerd, test infrastructure only:
# an OCI archive of one image, localhost/virt-launcher:v1.9.0 (the name the test's virt-controller
# renders into the launcher Pod: --launcher-image), made offline by hand (no builder, no
# registry): one layer holding the root filesystem of hack/launcher-rootfs.sh (libvirt 11.3,
# qemu 10.0 from Debian's backports, KubeVirt's libvirt configuration; copied out of its ext4
# image with debugfs) and KubeVirt's own binaries from hack/kubevirt-build.sh at /kubevirt/,
# where the root filesystem's /usr/bin/virt-launcher, virt-launcher-monitor, ... links point.
# Into a cache outside the repo keyed by the root filesystem image, the binaries and this script,
# with a completion stamp. Prints "ARCHIVE NAME" on stdout; progress on stderr.
#
#   hack/launcher-image.sh [BINDIR [HOOKDIR]]  BINDIR: virt-launcher and virt-launcher-monitor
#                                     (default: hack/kubevirt-build.sh's); HOOKDIR:
#                                     libvirt-hook-client, installed as /usr/bin/libvirt-hook-client
#                                     (default: hack/kvhandler-build.sh's)
#
# The layer is not compressed (about 300 MB): the qemu node's containerd imports it under TCG,
# where gunzip cost most of the import (197 s for a gzip -1 layer of 92 MB at load 5). libvirt's
# qemu capabilities cache in the root filesystem is kept, but the unpacked files have new ctimes,
# so libvirtd in the container probes qemu again (about 44 s under TCG in the qemu node).
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
NAME=localhost/virt-launcher:v1.9.0
CACHE=${HOSTDEVD_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hostdevd-tools}
die() { echo "launcher-image: $*" >&2; exit 1; }

BIN=${1:-}
[ -n "$BIN" ] || BIN=$("$HACK/kubevirt-build.sh" virt-launcher virt-launcher-monitor) || die "hack/kubevirt-build.sh"
for f in virt-launcher virt-launcher-monitor; do [ -x "$BIN/$f" ] || die "no $BIN/$f"; done
HOOK=${2:-}
[ -n "$HOOK" ] || HOOK=$("$HACK/kvhandler-build.sh") || die "hack/kvhandler-build.sh"
[ -x "$HOOK/libvirt-hook-client" ] || die "no $HOOK/libvirt-hook-client"
ROOTFS=$("$HACK/launcher-rootfs.sh") || die "hack/launcher-rootfs.sh"
KEY=$( (stat -c '%s %Y' "$ROOTFS"; sha256sum "$BIN/virt-launcher" "$BIN/virt-launcher-monitor" "$HOOK/libvirt-hook-client" | cut -c1-64; cat "$0") |
    sha256sum | cut -c1-16)
OUT=$CACHE/launcher-image-$KEY
if [ -f "$OUT/.complete" ]; then echo "$OUT/launcher.tar $NAME"; exit 0; fi
mkdir -p "$CACHE"
exec 9>"$CACHE/.launcher-image.lock"
flock 9
if [ -f "$OUT/.complete" ]; then echo "$OUT/launcher.tar $NAME"; exit 0; fi
W=$(mktemp -d "$CACHE/.launcher-image.XXXXXX")
trap 'rm -rf "$W"' EXIT
t0=$SECONDS

# The root filesystem out of its ext4 image (owners, modes, links as there), the binaries beside.
R=$W/rootfs
mkdir -p "$R"
debugfs -R "rdump / $R" "$ROOTFS" >"$W/debugfs.log" 2>&1 || { cat "$W/debugfs.log" >&2; die "debugfs rdump"; }
rm -rf "$R/lost+found"
[ -x "$R/usr/sbin/libvirtd" ] || die "no libvirtd in the root filesystem copied out of $ROOTFS"
install -m 0755 "$BIN/virt-launcher" "$BIN/virt-launcher-monitor" "$R/kubevirt/"
install -m 0755 "$HOOK/libvirt-hook-client" "$R/usr/bin/libvirt-hook-client"
[ "$(readlink "$R/usr/bin/virt-launcher")" = /kubevirt/virt-launcher ] || die "the root filesystem's /usr/bin/virt-launcher does not link to /kubevirt/"
mkdir -p "$W/oci/blobs/sha256"
tar --sort=name --numeric-owner --format=gnu -C "$R" -cf "$W/layer.tar" .
diffid=$(sha256sum "$W/layer.tar" | cut -d' ' -f1)
rm -rf "$R"

blob() { # FILE: moved into blobs/sha256 under its digest; prints "DIGEST SIZE"
    local d s
    d=$(sha256sum "$1" | cut -d' ' -f1)
    s=$(stat -c %s "$1")
    mv "$1" "$W/oci/blobs/sha256/$d"
    echo "$d $s"
}
read -r ldig lsize < <(blob "$W/layer.tar")
printf '{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],"Entrypoint":["/usr/bin/virt-launcher-monitor"],"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created_by":"hack/launcher-image.sh"}]}' \
    "$diffid" >"$W/config.json"
read -r cdig csize < <(blob "$W/config.json")
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s}]}' \
    "$cdig" "$csize" "$ldig" "$lsize" >"$W/manifest.json"
read -r mdig msize < <(blob "$W/manifest.json")
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
    "$mdig" "$msize" "$NAME" "${NAME##*:}" >"$W/oci/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' >"$W/oci/oci-layout"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=gnu -C "$W/oci" -cf "$W/launcher.tar" .
rm -rf "$OUT"
mkdir -p "$OUT"
mv "$W/launcher.tar" "$OUT/launcher.tar"
touch "$OUT/.complete"
# images of other inputs go
find "$CACHE" -mindepth 1 -maxdepth 1 -type d -name 'launcher-image-*' ! -name "launcher-image-$KEY" -exec rm -rf {} +
echo "launcher-image: $NAME sha256:$mdig ($((lsize / 1048576)) MB) in $((SECONDS - t0)) s" >&2
echo "$OUT/launcher.tar $NAME"
