#!/usr/bin/env bash
# hack/image.sh [rootfs|build] - the hostdevd OCI image, made on this machine without a
# registry (docs/image.md). No base image: a root filesystem is staged from bin/hostdevd and the
# Debian files it needs (the shared libraries ldd names, the dynamic loader, CA certificates,
# pci.ids, usb.ids), then `Containerfile` (FROM scratch, COPY rootfs/ /, labels) is built with
# buildah into a private store and written as an OCI archive:
#
#   build/image/rootfs/                    the staged root filesystem (hack/image.sh rootfs)
#   build/image/hostdevd-<version>.tar     the OCI archive of localhost/hostdevd:<version>
# (hack/image.sh name prints the image's name and the archive's path, building nothing)
#   build/image/digest                     the image's manifest digest (sha256:...)
#
# Reproducible: every mtime, the image's created time and the archive's entries are clamped to
# SOURCE_DATE_EPOCH (default: the commit time, git log -1 --format=%ct), owners are 0:0, file
# order is sorted, and nothing of the build host (name, paths, tool versions) gets in; the same
# commit gives the same digest and the same archive bytes. Environment: VERSION (default the
# file VERSION, as the Makefile compiles it in; bin/hostdevd must print it),
# SOURCE_DATE_EPOCH, IMAGE_NAME (default localhost/hostdevd: the name podman gives a short name,
# and one containerd's CRI leaves as it is), IMAGE_SOURCE (the org.opencontainers.image.source
# label), IMAGE_DIR (default build/image). Prints the archive, its digest and sizes on stdout.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
what=${1:-build}

VERSION=${VERSION:-$(cat VERSION)}
REVISION=$(git rev-parse HEAD 2>/dev/null || echo unknown)
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
# A fixed value, not the clone's remote: the label is part of the digest. The repository records
# no upstream address yet; this one is a placeholder until it does.
IMAGE_SOURCE=${IMAGE_SOURCE:-https://github.com/hostdevd/hostdevd}
IMAGE_DIR=${IMAGE_DIR:-build/image}
BIN=bin/hostdevd
ROOTFS=$IMAGE_DIR/rootfs
NAME=${IMAGE_NAME:-localhost/hostdevd}:$VERSION
ARCHIVE=$IMAGE_DIR/hostdevd-$VERSION.tar
export SOURCE_DATE_EPOCH TZ=UTC LC_ALL=C

die() { echo "image: $*" >&2; exit 1; }

# The version compiled in must be the one the image is labelled with.
check_version() {
    [ -x "$BIN" ] || die "$BIN missing (make bin/hostdevd)"
    local have
    have=$("$BIN" version)
    [ "${have% (*}" = "hostdevd $VERSION" ] || die "$BIN says \"$have\", expected \"hostdevd $VERSION (...)\" (make bin/hostdevd)"
}

# put SRC DEST: copies SRC's content (links followed) to ROOTFS/DEST, mode 0644 or 0755, and
# notes SRC in IMAGE_DIR/sources.
put() {
    local mode=0644
    [ -x "$1" ] && mode=0755
    install -D -m "$mode" "$1" "$ROOTFS/$2"
    echo "$1" >>"$IMAGE_DIR/sources"
}

# The shared libraries bin/hostdevd loads, as ldd resolves them (libgcc_s too: glibc loads it
# for unwinding), each under its soname in /usr/lib/<multiarch>; the loader where the ELF
# interpreter path points.
stage_libs() {
    local multiarch lib loader
    multiarch=$(gcc -print-multiarch)
    loader=$(readelf -p .interp "$BIN" | awk '/\]/ {print $NF}')
    { ldd "$BIN" | awk '$2 == "=>" && $3 ~ /^\// {print $3}'; gcc -print-file-name=libgcc_s.so.1; } |
        sort -u | while read -r lib; do
        [[ "$(basename "$lib")" != ld-linux* ]] || continue
        put "$lib" "usr/lib/$multiarch/$(basename "$lib")"
    done
    put "$loader" "usr/lib/$multiarch/$(basename "$loader")"
    mkdir -p "$ROOTFS/usr$(dirname "$loader")"
    ln -s "../lib/$multiarch/$(basename "$loader")" "$ROOTFS/usr$loader"
    ln -s usr/lib "$ROOTFS/lib"
    ln -s "usr$(dirname "$loader")" "$ROOTFS${loader%/*}"
}

# variants FILE: FILE's path, the path its links lead to, and both without /usr (bookworm's
# packages still name /lib paths), as dpkg -S may know them.
variants() {
    local real
    real=$(readlink -f "$1")
    printf '%s\n' "$1" "$real" "${1#/usr}" "${real#/usr}"
}

# The Debian packages whose files are in the image, with versions (usr/share/doc/hostdevd/
# packages), and their copyright files: the licences of what is redistributed. One dpkg -S for
# all (it reads its database once per call). The CA bundle is made by update-ca-certificates.
stage_notices() {
    local f v p
    # shellcheck disable=SC2016 # dpkg-query's fields, not the shell's
    local fmt='${Package} ${Version}\n'
    declare -A owner=([/etc/ssl/certs/ca-certificates.crt]=ca-certificates)
    while read -r p f; do
        owner[$f]=${p%%:*}
    done < <(while read -r f; do variants "$f"; done <"$IMAGE_DIR/sources" | sort -u |
        xargs dpkg -S 2>/dev/null | sed 's/: / /')
    while read -r f; do
        p=
        for v in $(variants "$f"); do p=${owner[$v]:-$p}; done
        [ -n "$p" ] || die "no Debian package owns $f"
        echo "$p"
    done <"$IMAGE_DIR/sources" | { cat; echo pci.ids; } | sort -u |
        xargs dpkg-query -W -f="$fmt" >"$IMAGE_DIR/packages"
    put "$IMAGE_DIR/packages" usr/share/doc/hostdevd/packages
    while read -r p _; do
        put "/usr/share/doc/$p/copyright" "usr/share/doc/$p/copyright"
    done <"$IMAGE_DIR/packages"
}

stage_rootfs() {
    check_version
    rm -rf "$ROOTFS" "$IMAGE_DIR/sources"
    mkdir -p "$ROOTFS"
    install -D -m 0755 "$BIN" "$ROOTFS/usr/bin/hostdevd"
    strip --strip-all "$ROOTFS/usr/bin/hostdevd"
    stage_libs
    put /etc/ssl/certs/ca-certificates.crt etc/ssl/certs/ca-certificates.crt
    # libpci tries pci.ids.gz first; usb.ids is mapped as it is.
    mkdir -p "$ROOTFS/usr/share/misc"
    gzip -9n <"$(pkg-config --variable=idsdir libpci)/pci.ids" >"$ROOTFS/usr/share/misc/pci.ids.gz"
    put /usr/share/misc/usb.ids usr/share/misc/usb.ids
    # root for the agent; 65532 (nonroot) for the controller, as its Deployment runs it.
    printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$ROOTFS/etc/passwd"
    printf 'root:x:0:\nnonroot:x:65532:\n' >"$ROOTFS/etc/group"
    printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$ROOTFS/etc/nsswitch.conf"
    install -d -m 1777 "$ROOTFS/tmp"
    stage_notices
    find "$ROOTFS" -type d -exec chmod go-w {} + -o -type f -exec chmod go-w {} +
    chmod 1777 "$ROOTFS/tmp"
    find "$ROOTFS" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
}

# A private store (vfs: works wherever buildah runs, nested or not), removed afterwards.
buildah_() {
    buildah --root "$STORE/root" --runroot "$STORE/run" --storage-driver vfs "$@"
}

build_image() {
    STORE=$(mktemp -d "${TMPDIR:-/tmp}/hostdevd-image.XXXXXX")
    trap 'buildah_ rm --all >/dev/null 2>&1; buildah_ rmi --all --force >/dev/null 2>&1; rm -rf "$STORE"' EXIT
    local created ann=() kv
    created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
    for kv in "version=$VERSION" "revision=$REVISION" "source=$IMAGE_SOURCE" "created=$created" \
        "title=hostdevd"; do
        ann+=(--annotation "org.opencontainers.image.$kv")
    done
    buildah_ build --quiet --isolation chroot --pull-never --identity-label=false \
        --timestamp "$SOURCE_DATE_EPOCH" --build-arg "VERSION=$VERSION" \
        --build-arg "REVISION=$REVISION" --build-arg "SOURCE=$IMAGE_SOURCE" \
        --build-arg "CREATED=$created" "${ann[@]}" -f Containerfile -t "$NAME" "$IMAGE_DIR" >/dev/null
    rm -rf "$IMAGE_DIR/oci" "$IMAGE_DIR"/hostdevd-*.tar
    buildah_ push --quiet --format oci --digestfile "$IMAGE_DIR/digest" "$NAME" \
        "oci:$IMAGE_DIR/oci:$NAME" >/dev/null
    # The layout as one archive, entries sorted, clamped and owned by 0:0, so the bytes repeat.
    tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --clamp-mtime --owner=0 --group=0 \
        --numeric-owner --format=gnu -C "$IMAGE_DIR/oci" -cf "$ARCHIVE" .
    rm -rf "$IMAGE_DIR/oci"
}

sizes() {
    local rootfs layers
    rootfs=$(du -sb --apparent-size "$ROOTFS" | cut -f1)
    layers=$(skopeo inspect --raw "oci-archive:$ARCHIVE" | python3 -c \
        'import json,sys; print(sum(l["size"] for l in json.load(sys.stdin)["layers"]))')
    echo "image: $NAME $(cat "$IMAGE_DIR/digest")"
    echo "image: $ARCHIVE ($(stat -c %s "$ARCHIVE") bytes; layer $layers bytes compressed, $rootfs bytes unpacked)"
}

case "$what" in
name) echo "$NAME $ARCHIVE" ;;
rootfs) stage_rootfs ;;
build) stage_rootfs; build_image; sizes ;;
*) echo "usage: $0 [rootfs|build]" >&2; exit 2 ;;
esac
