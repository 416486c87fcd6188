#!/usr/bin/env bash
# hack/mtty-build.sh - the kernel's mtty sample (samples/vfio-mdev/mtty.c: a virtual serial port
# card that is a mediated-device parent, "mtty", with types mtty-1 and mtty-2) built as mtty.ko
# for the qemu node's kernel; test infrastructure only (hack/qemu-node.sh build puts it in the
# image's module tree, not loaded at boot). Debian's kernel has CONFIG_VFIO_MDEV=m but no
# samples.
#
#   hack/mtty-build.sh [KERNEL]   prints the path of mtty.ko; KERNEL (e.g. 6.1.0-56-amd64) is the
#                                 one hack/qemu-node.sh boots (`hack/qemu-node.sh kernel`) unless
#                                 given (qemu-node.sh build gives its own)
#
# Fetched once per kernel with `apt-get download` (the host's apt lists, as qemu-node.sh fetches
# the kernel itself: this kernel's packages are in the security suite, which the private state
# of hack/debian-apt.sh does not carry; nothing is installed, the host's sources stay as they
# are): linux-headers-KERNEL and its -common at the kernel package's own version, the
# linux-kbuild-<major.minor> they depend on (its scripts: fixdep, modpost) and
# linux-source-<major.minor> at that version, of which only samples/vfio-mdev/mtty.c is kept (the
# 139 MB .deb is dropped). Kept in HOSTDEVD_TOOLS_CACHE/mtty-src-KERNEL/. The module is built
# with Kbuild (`obj-m := mtty.o`) against the headers unpacked (dpkg-deb -x) into a scratch
# directory, whose Makefiles' absolute /usr/src/... include is pointed at the copy, with the
# host's gcc-<N> that built the kernel (checked against the kernel's own record), stripped of
# debug info, into HOSTDEVD_TOOLS_CACHE/mtty-KERNEL-<hash of this script>/mtty.ko with a
# completion stamp: a second call prints the path at once. Progress on stderr.
set -euo pipefail

HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOOLS=${HOSTDEVD_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hostdevd-tools}
QCACHE=${HOSTDEVD_QEMU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hostdevd-qemu}
export DEBIAN_FRONTEND=noninteractive
die() { echo "mtty-build: $*" >&2; exit 1; }
note() { echo "mtty-build: $*" >&2; }

K=${1:-}
[ -n "$K" ] || K=$("$HACK/qemu-node.sh" kernel)
OUT=$TOOLS/mtty-$K-$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-16)
[ ! -f "$OUT/.complete" ] || { echo "$OUT/mtty.ko"; exit 0; }

SRC=$TOOLS/mtty-src-$K
MM=${K%%-*}     # 6.1.0
MM=${MM%.*}     # 6.1
KDEB=$(find "$QCACHE/$K" -maxdepth 1 -name "linux-image-${K}_*.deb" | head -1)
[ -n "$KDEB" ] || KDEB=$(find "$QCACHE/$K" -maxdepth 1 -name "linux-image-${K}-unsigned_*.deb" | head -1)
[ -n "$KDEB" ] || die "kernel $K is not in $QCACHE (hack/qemu-node.sh kernel fetches it)"
KVER=$(dpkg-deb -f "$KDEB" Version)

apt_download() { # dir packages...
    local d=$1
    shift
    (cd "$d" && apt-get -o APT::Sandbox::User=root download "$@" >/dev/null 2>&1) ||
        (apt-get -o DPkg::Lock::Timeout=300 update >/dev/null 2>&1 &&
            cd "$d" && apt-get -o APT::Sandbox::User=root download "$@" >/dev/null) ||
        die "apt-get download $* failed"
}

# SRC: the header packages' .debs (15 MB) and mtty.c, once per kernel.
fetch_sources() {
    local tmp=$SRC.fetch t0=$SECONDS
    rm -rf "$tmp"
    mkdir -p "$tmp/debs" "$tmp/src"
    note "fetching the headers and mtty.c of $K ($KVER) into $SRC"
    apt_download "$tmp/debs" "linux-headers-$K=$KVER" "linux-headers-${K%-*}-common=$KVER" \
        "linux-kbuild-$MM" "linux-source-$MM=$KVER"
    dpkg-deb --fsys-tarfile "$tmp"/debs/linux-source-"$MM"_*.deb |
        tar -xOf - "./usr/src/linux-source-$MM.tar.xz" |
        tar -xJf - -C "$tmp/src" --strip-components=3 "linux-source-$MM/samples/vfio-mdev/mtty.c"
    [ -s "$tmp/src/mtty.c" ] || die "no samples/vfio-mdev/mtty.c in linux-source-$MM $KVER"
    rm -f "$tmp"/debs/linux-source-*.deb
    rm -rf "$SRC"
    mv "$tmp" "$SRC"
    touch "$SRC/.complete"
    note "sources fetched in $((SECONDS - t0))s"
}

# The gcc that built the kernel (the headers' CONFIG_CC_VERSION_TEXT, e.g. "gcc-12 (Debian
# 12.2.0-14+deb12u1) 12.2.0"): that command on this host, noted when its version differs.
kernel_cc() { # headers root
    local text cc host
    text=$(sed -n 's/^CONFIG_CC_VERSION_TEXT="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' \
        "$1/usr/src/linux-headers-$K/include/config/auto.conf")
    cc=${text%% *}
    case $cc in gcc-[0-9]*) ;; *) die "cannot tell the kernel's compiler from '$text'" ;; esac
    command -v "$cc" >/dev/null || die "the kernel was built with $text; this host has no $cc (apt-get install $cc)"
    host=$("$cc" --version | head -1)
    [ "$host" = "$text" ] || note "the kernel was built with '$text', this host's $cc is '$host'"
    echo "$cc"
}

build() {
    local w r hdr cc f t0=$SECONDS
    w=$(mktemp -d "$TOOLS/.mtty-build.XXXXXX")
    r=$w/root
    for f in "$SRC"/debs/*.deb; do dpkg-deb -x "$f" "$r"; done
    hdr=$r/usr/src/linux-headers-$K
    [ -f "$hdr/Makefile" ] || die "no headers at /usr/src/linux-headers-$K in the packages"
    # the headers' Makefiles name the -common tree by its installed path
    grep -rlF --include=Makefile /usr/src/ "$r/usr/src" | while read -r f; do
        sed -i "s|\([ =]\)/usr/src/|\1$r/usr/src/|g" "$f"
    done
    cc=$(kernel_cc "$r")
    mkdir -p "$w/mod"
    cp "$SRC/src/mtty.c" "$w/mod/"
    echo 'obj-m := mtty.o' >"$w/mod/Kbuild"
    if ! make -C "$hdr" M="$w/mod" CC="$cc" modules >"$w/build.log" 2>&1; then
        tail -30 "$w/build.log" >&2
        die "building mtty.ko failed (all in $w/build.log)"
    fi
    strip --strip-debug -o "$w/mtty.ko" "$w/mod/mtty.ko"
    modinfo -F vermagic "$w/mtty.ko" | grep -q "^$K " || die "mtty.ko is not for $K: $(modinfo -F vermagic "$w/mtty.ko")"
    rm -rf "$OUT"
    mkdir -p "$OUT"
    mv "$w/mtty.ko" "$w/build.log" "$OUT/"
    rm -rf "$w"
    touch "$OUT/.complete"
    note "built $OUT/mtty.ko with $cc ($(($(stat -c %s "$OUT/mtty.ko") / 1024)) KiB) in $((SECONDS - t0))s"
}

mkdir -p "$TOOLS"
exec 9>"$TOOLS/.mtty.lock"
flock 9
if [ ! -f "$OUT/.complete" ]; then
    [ -f "$SRC/.complete" ] || fetch_sources
    build
fi
echo "$OUT/mtty.ko"
