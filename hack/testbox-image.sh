#!/usr/bin/env bash
# Builds the test box image, test infrastructure only: an OCI archive of one image,
# localhost/hostdevd-testbox:<busybox version>, holding Debian's static busybox
# (busybox-static) as /bin/busybox with links for its applets in /bin, and as entrypoint
# `sleep` for ever. hack/kubelet.sh's containerd mode imports it as the sandbox ("pause") image
# and tests run their pods' shells in it: no registry is asked for anything. Made by hand (a
# layer tar, its config, manifest and index as JSON; no builder), reproducible (every mtime is
# 0, owners 0:0, sorted), into a cache outside the repo keyed by the busybox package's version
# and the recipe (bump RECIPE when this script changes what it writes), with a completion
# stamp. Prints "ARCHIVE NAME" on stdout.
set -euo pipefail
RECIPE=r1
BUSYBOX=/bin/busybox
if ! dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed'; then
    echo "testbox-image: no busybox-static (make deps)" >&2
    exit 1
fi
VER=$(dpkg-query -W -f='${Version}' busybox-static | sed 's/^[0-9]*://; s/[^A-Za-z0-9_.-]/_/g')
NAME=localhost/hostdevd-testbox:$VER
ROOT=${HOSTDEVD_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hostdevd-tools}
OUT="$ROOT/testbox-${VER}_$RECIPE"
if [ -f "$OUT/.complete" ]; then echo "$OUT/testbox.tar $NAME"; exit 0; fi
mkdir -p "$ROOT"
exec 9>"$ROOT/.testbox.lock"
flock 9
if [ -f "$OUT/.complete" ]; then echo "$OUT/testbox.tar $NAME"; exit 0; fi
W=$(mktemp -d "$ROOT/.testbox.XXXXXX")
trap 'rm -rf "$W"' EXIT

# The root filesystem: /bin/busybox, a link per applet, /tmp, /etc/passwd.
R=$W/rootfs
mkdir -p "$R/bin" "$R/etc" "$R/tmp" "$R/proc" "$R/sys" "$R/dev"
install -m 0755 "$BUSYBOX" "$R/bin/busybox"
for a in $("$BUSYBOX" --list); do [ "$a" = busybox ] || ln -s busybox "$R/bin/$a"; done
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n' >"$R/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$R/etc/group"
chmod 1777 "$R/tmp"
mkdir -p "$W/oci/blobs/sha256"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=gnu -C "$R" -cf "$W/layer.tar" .
diffid=$(sha256sum "$W/layer.tar" | cut -d' ' -f1)
gzip -9n <"$W/layer.tar" >"$W/layer.tar.gz"

# blob FILE: moves FILE into blobs/sha256 under its digest, prints "DIGEST SIZE".
blob() {
    local d s
    d=$(sha256sum "$1" | cut -d' ' -f1)
    s=$(stat -c %s "$1")
    mv "$1" "$W/oci/blobs/sha256/$d"
    echo "$d $s"
}
read -r ldig lsize < <(blob "$W/layer.tar.gz")
printf '{"architecture":"amd64","os":"linux","config":{"Env":["PATH=/bin"],"Entrypoint":["/bin/sleep","2147483647"],"WorkingDir":"/"},"rootfs":{"type":"layers","diff_ids":["sha256:%s"]},"history":[{"created_by":"hack/testbox-image.sh: busybox-static %s"}]}' \
    "$diffid" "$VER" >"$W/config.json"
read -r cdig csize < <(blob "$W/config.json")
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"sha256:%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar+gzip","digest":"sha256:%s","size":%s}]}' \
    "$cdig" "$csize" "$ldig" "$lsize" >"$W/manifest.json"
read -r mdig msize < <(blob "$W/manifest.json")
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.index.v1+json","manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
    "$mdig" "$msize" "$NAME" "${NAME##*:}" >"$W/oci/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' >"$W/oci/oci-layout"
tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner --format=gnu -C "$W/oci" -cf "$W/testbox.tar" .
mkdir -p "$OUT"
mv "$W/testbox.tar" "$OUT/testbox.tar"
touch "$OUT/.complete"
echo "testbox-image: $NAME sha256:$mdig in $OUT/testbox.tar" >&2
echo "$OUT/testbox.tar $NAME"
