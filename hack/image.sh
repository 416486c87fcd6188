#!/usr/bin/env bash
# hack/image.sh [rootfs|build] - the hostdevd OCI image index, made on this machine without a
# registry (docs/image.md). No base image: for each platform (ARCH: amd64, arm64 or both) a root
# filesystem is staged from its binary (amd64: bin/hostdevd; arm64: build/arm64/hostdevd, Debian's
# cross build against the private :arm64 sysroot of hack/arm64-sysroot.sh) and the Debian files
# it needs (the shared libraries its DT_NEEDED entries name, resolved the way the dynamic loader
# does, the loader, CA certificates, pci.ids, usb.ids), then `Containerfile` (FROM scratch,
# COPY rootfs-$TARGETARCH/ /, labels) is built with buildah for that platform into a private
# store, each image added to one index in a fixed order (amd64, then arm64), and the index
# written as an OCI archive:
#
#   build/image/rootfs-<arch>/             each platform's root filesystem (hack/image.sh rootfs)
#   build/image/hostdevd-<version>.tar     the OCI archive of the index localhost/hostdevd:<version>
# (hack/image.sh name prints the image's name and the archive's path, building nothing)
#   build/image/digest                     the index's digest (sha256:...), the name's digest
#   build/image/digest-<arch>              each platform's image manifest digest
#
# Reproducible: every mtime, the image's created time and the archive's entries are clamped to
# SOURCE_DATE_EPOCH (default: the commit time, git log -1 --format=%ct), owners are 0:0, file
# order is sorted, and nothing of the build host (name, paths, tool versions) gets in; the same
# commit gives the same digest and the same archive bytes. Environment: VERSION (default the
# file VERSION, as the Makefile compiles it in; each binary must print it), ARCH (default
# "amd64 arm64": the platforms; the index lists them in that order whatever order ARCH has),
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
NAME=${IMAGE_NAME:-localhost/hostdevd}:$VERSION
ARCHIVE=$IMAGE_DIR/hostdevd-$VERSION.tar
export SOURCE_DATE_EPOCH TZ=UTC LC_ALL=C

die() { echo "image: $*" >&2; exit 1; }

# The platforms, in the index's fixed order (the order is part of the index's digest).
ARCH=${ARCH:-amd64 arm64}
ARCHES=()
for a in $ARCH; do
    case $a in amd64 | arm64) ;; *) die "ARCH: \"$a\" is neither amd64 nor arm64" ;; esac
done
for a in amd64 arm64; do
    [[ " $ARCH " != *" $a "* ]] || ARCHES+=("$a")
done
[ ${#ARCHES[@]} -gt 0 ] || die "ARCH is empty (amd64, arm64 or both)"

# platform ARCH: that platform's binary (BIN), root filesystem (ROOTFS), multiarch directory,
# ELF machine (as readelf -h names it), binutils (TOOL, their prefix), where its Debian files come
# from (LIBROOT: the host's for amd64, the :arm64 sysroot for arm64) and how its binary runs here
# (RUN: qemu-user for arm64, as a command, not through binfmt_misc).
platform() {
    ROOTFS=$IMAGE_DIR/rootfs-$1
    case $1 in
    amd64) BIN=bin/hostdevd MULTIARCH=x86_64-linux-gnu MACHINE="Advanced Micro Devices X86-64" TOOL=
        LIBROOT='' RUN=() ;;
    arm64)
        BIN=build/arm64/hostdevd MULTIARCH=aarch64-linux-gnu MACHINE=AArch64 TOOL=aarch64-linux-gnu-
        command -v "${TOOL}strip" >/dev/null || die "arm64: no ${TOOL}strip (make deps-arm64)"
        LIBROOT=$(hack/arm64-sysroot.sh) || die "arm64: no :arm64 sysroot (make deps-arm64)"
        q=$(hack/qemu-user.sh --qemu) || die "arm64: no qemu-aarch64 (make deps-arm64)"
        RUN=("$q" -L "$LIBROOT") ;;
    esac
}

# The binary must be its platform's, and the version compiled in the one the image is labelled
# with.
check_binary() {
    [ -x "$BIN" ] || die "$BIN missing (make $BIN)"
    local have
    have=$(readelf -h "$BIN" | sed -n 's/^ *Machine: *//p')
    [ "$have" = "$MACHINE" ] || die "$BIN is a \"$have\" binary, not $MACHINE"
    have=$("${RUN[@]}" "$BIN" version)
    [ "${have% (*}" = "hostdevd $VERSION" ] || die "$BIN says \"$have\", expected \"hostdevd $VERSION (...)\" (make $BIN)"
}

# put SRC DEST: copies SRC's content (links followed) to ROOTFS/DEST, mode 0644 or 0755, and
# notes SRC in ROOTFS.sources.
put() {
    local mode=0644
    [ -x "$1" ] && mode=0755
    install -D -m "$mode" "$1" "$ROOTFS/$2"
    echo "$1" >>"$ROOTFS.sources"
}

# needed ELF: its DT_NEEDED entries (readelf reads any architecture's ELF).
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]$/\1/p'; }

# resolve SONAME: the file the dynamic loader would load, in LIBROOT's Debian directories.
resolve() {
    local d
    for d in "$LIBROOT/usr/lib/$MULTIARCH" "$LIBROOT/lib/$MULTIARCH" "$LIBROOT/usr/lib" "$LIBROOT/lib"; do
        [ -e "$d/$1" ] && { echo "$d/$1"; return; }
    done
    die "$1 (needed by $BIN) is not in ${LIBROOT:-/}usr/lib/$MULTIARCH"
}

# The shared libraries the binary loads: the closure of DT_NEEDED (libgcc_s too: glibc loads it
# for unwinding), each under its soname in /usr/lib/<multiarch>; the loader where the ELF
# interpreter path points, with the links Debian has.
stage_libs() {
    local loader lib path queue
    declare -A seen=()
    loader=$(readelf -p .interp "$BIN" | awk '/\]/ {print $NF}')
    mapfile -t queue < <(echo libgcc_s.so.1; needed "$BIN")
    while [ ${#queue[@]} -gt 0 ]; do
        lib=${queue[0]}
        queue=("${queue[@]:1}")
        if [ -n "${seen[$lib]:-}" ] || [[ "$lib" == ld-linux* ]]; then continue; fi
        seen[$lib]=1
        path=$(resolve "$lib")
        put "$path" "usr/lib/$MULTIARCH/$lib"
        mapfile -t -O ${#queue[@]} queue < <(needed "$path")
    done
    put "$LIBROOT$loader" "usr/lib/$MULTIARCH/$(basename "$loader")"
    ln -s usr/lib "$ROOTFS/lib"
    if [ "${loader%/*}" = /lib ]; then # arm64: /lib/ld-linux-aarch64.so.1
        ln -s "$MULTIARCH/$(basename "$loader")" "$ROOTFS/usr$loader"
    else # amd64: /lib64/ld-linux-x86-64.so.2
        mkdir -p "$ROOTFS/usr${loader%/*}"
        ln -s "../lib/$MULTIARCH/$(basename "$loader")" "$ROOTFS/usr$loader"
        ln -s "usr${loader%/*}" "$ROOTFS${loader%/*}"
    fi
}

# variants ROOT FILE: FILE (under ROOT; "" is the host) as dpkg may know it, ROOT taken off:
# its path, the path its links lead to, and both without /usr (bookworm's packages still name
# /lib paths).
variants() {
    local f=${2#"$1"} real
    real=$(readlink -f "$2")
    real=${real#"$1"}
    printf '%s\n' "$f" "$real" "${f#/usr}" "${real#/usr}"
}

# owners ROOT FILE...: "PACKAGE PATH" for each FILE's variants, from the host's dpkg database
# (ROOT "": the package's name without its architecture, as before arm64 came) or from the
# sysroot's own (names with ":arm64"). One dpkg -S for all (it reads its database once a call).
owners() {
    local root=$1 db=()
    shift
    [ $# -gt 0 ] || return 0
    [ -z "$root" ] || db=(--admindir="$root/var/lib/dpkg")
    for f in "$@"; do variants "$root" "$f"; done | sort -u |
        xargs dpkg-query "${db[@]}" -S 2>/dev/null | sed 's/: / /' |
        if [ -z "$root" ]; then sed 's/:[a-z0-9]* / /'; else cat; fi
}

# The Debian packages whose files are in the image, with versions (usr/share/doc/hostdevd/
# packages: the host's first, then the sysroot's :arm64 ones), and their copyright files: the
# licences of what is redistributed. The CA bundle is made by update-ca-certificates.
stage_notices() {
    local f v p src host=() sys=()
    # shellcheck disable=SC2016 # dpkg-query's fields, not the shell's
    local fmt='${Package} ${Version}\n' sysfmt='${binary:Package} ${Version}\n'
    declare -A owner=([h:/etc/ssl/certs/ca-certificates.crt]=ca-certificates)
    while read -r f; do
        if [ -n "$LIBROOT" ] && [[ "$f" == "$LIBROOT"/* ]]; then sys+=("$f"); else host+=("$f"); fi
    done <"$ROOTFS.sources"
    while read -r p f; do owner[h:$f]=$p; done < <(owners "" "${host[@]}")
    while read -r p f; do owner[s:$f]=$p; done < <(owners "$LIBROOT" "${sys[@]}")
    # owner_of KEY ROOT FILE
    owner_of() {
        local p='' v
        for v in $(variants "$2" "$3"); do p=${owner[$1:$v]:-$p}; done
        [ -n "$p" ] || die "no Debian package owns $3"
        echo "$p"
    }
    : >"$ROOTFS.packages"
    for f in "${host[@]}"; do owner_of h "" "$f"; done | { cat; echo pci.ids; } | sort -u |
        xargs dpkg-query -W -f="$fmt" >>"$ROOTFS.packages"
    if [ ${#sys[@]} -gt 0 ]; then
        for f in "${sys[@]}"; do owner_of s "$LIBROOT" "$f"; done | sort -u |
            xargs dpkg-query --admindir="$LIBROOT/var/lib/dpkg" -W -f="$sysfmt" >>"$ROOTFS.packages"
    fi
    put "$ROOTFS.packages" usr/share/doc/hostdevd/packages
    while read -r p _; do
        src=/usr/share/doc/${p%%:*}/copyright
        [[ "$p" != *:* ]] || src=$LIBROOT$src
        put "$src" "usr/share/doc/${p%%:*}/copyright"
    done <"$ROOTFS.packages"
}

stage_rootfs() {
    check_binary
    rm -rf "$ROOTFS" "$ROOTFS.sources"
    mkdir -p "$ROOTFS"
    install -D -m 0755 "$BIN" "$ROOTFS/usr/bin/hostdevd"
    "${TOOL}strip" --strip-all "$ROOTFS/usr/bin/hostdevd"
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

# Each platform's image built alone (FROM scratch: nothing runs, no emulation) and added to the
# index in the fixed order; built together (--platform a,b) the order would follow whichever
# finished first, and so would the digest.
build_image() {
    STORE=$(mktemp -d "${TMPDIR:-/tmp}/hostdevd-image.XXXXXX")
    trap 'buildah_ rm --all >/dev/null 2>&1; buildah_ rmi --all --force >/dev/null 2>&1; rm -rf "$STORE"' EXIT
    local created ann=() kv arch
    created=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
    for kv in "version=$VERSION" "revision=$REVISION" "source=$IMAGE_SOURCE" "created=$created" \
        "title=hostdevd"; do
        ann+=(--annotation "org.opencontainers.image.$kv")
    done
    buildah_ manifest create "$NAME" >/dev/null
    for arch in "${ARCHES[@]}"; do
        buildah_ build --quiet --isolation chroot --pull-never --identity-label=false \
            --platform "linux/$arch" --timestamp "$SOURCE_DATE_EPOCH" --build-arg "VERSION=$VERSION" \
            --build-arg "REVISION=$REVISION" --build-arg "SOURCE=$IMAGE_SOURCE" \
            --build-arg "CREATED=$created" "${ann[@]}" -f Containerfile -t "$NAME-$arch" \
            "$IMAGE_DIR" >/dev/null
        buildah_ manifest add "$NAME" "$NAME-$arch" >/dev/null
    done
    rm -rf "$IMAGE_DIR/oci" "$IMAGE_DIR"/hostdevd-*.tar "$IMAGE_DIR"/digest*
    buildah_ manifest push --quiet --all --format oci --digestfile "$IMAGE_DIR/digest" "$NAME" \
        "oci:$IMAGE_DIR/oci:$NAME" >/dev/null
    check_index
    # The layout as one archive, entries sorted, clamped and owned by 0:0, so the bytes repeat.
    tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --clamp-mtime --owner=0 --group=0 \
        --numeric-owner --format=gnu -C "$IMAGE_DIR/oci" -cf "$ARCHIVE" .
    rm -rf "$IMAGE_DIR/oci"
}

# The layout's index must list the platforms in ARCHES's order, each image's config of that
# architecture; writes digest-<arch> and each image's compressed layer size (layers-<arch>).
check_index() {
    python3 - "$IMAGE_DIR/oci" "$(cat "$IMAGE_DIR/digest")" "${ARCHES[@]}" <<'PY' || die "the index is not what was built"
import json, os, sys
oci, want, arches = sys.argv[1], sys.argv[2], sys.argv[3:]
blob = lambda d: json.load(open(os.path.join(oci, "blobs", *d.split(":"))))
top = json.load(open(os.path.join(oci, "index.json")))["manifests"]
assert len(top) == 1 and top[0]["digest"] == want, f"index.json names {top}, not {want}"
idx = blob(want)
assert idx["mediaType"] == "application/vnd.oci.image.index.v1+json", idx["mediaType"]
got = [(m["platform"]["os"], m["platform"]["architecture"]) for m in idx["manifests"]]
assert got == [("linux", a) for a in arches], f"platforms {got}, expected {arches} in that order"
for m, a in zip(idx["manifests"], arches):
    man = blob(m["digest"])
    cfg = blob(man["config"]["digest"])
    assert (cfg["os"], cfg["architecture"]) == ("linux", a), f"{a}: config says {cfg['architecture']}"
    open(os.path.join(oci, "..", f"digest-{a}"), "w").write(m["digest"])
    open(os.path.join(oci, "..", f"layers-{a}"), "w").write(str(sum(l["size"] for l in man["layers"])))
PY
}

sizes() {
    local arch
    echo "image: $NAME $(cat "$IMAGE_DIR/digest") (index: ${ARCHES[*]/#/linux/})"
    echo "image: $ARCHIVE ($(stat -c %s "$ARCHIVE") bytes)"
    for arch in "${ARCHES[@]}"; do
        echo "image: linux/$arch $(cat "$IMAGE_DIR/digest-$arch"): layer $(cat "$IMAGE_DIR/layers-$arch") bytes compressed, $(du -sb --apparent-size "$IMAGE_DIR/rootfs-$arch" | cut -f1) bytes unpacked"
    done
}

stage_all() {
    local arch
    rm -rf "$IMAGE_DIR/rootfs" "$IMAGE_DIR"/rootfs-* "$IMAGE_DIR/sources" "$IMAGE_DIR/packages"
    for arch in "${ARCHES[@]}"; do
        platform "$arch"
        stage_rootfs
    done
}

case "$what" in
name) echo "$NAME $ARCHIVE" ;;
rootfs) stage_all ;;
build) stage_all; build_image; sizes ;;
*) echo "usage: $0 [rootfs|build]" >&2; exit 2 ;;
esac
