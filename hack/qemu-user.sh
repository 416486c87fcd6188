#!/usr/bin/env bash
# hack/qemu-user.sh [--net] COMMAND [ARGS] - runs COMMAND where arm64 (aarch64) ELF binaries run
# under qemu-user through binfmt_misc, with no change to the host: a new user namespace (root mapped to the caller) and mount namespace, a binfmt_misc
# mounted there (Linux 6.7 and later give each user namespace its own binfmt_misc instance: the
# host's handlers, if any, are neither seen nor touched) and one handler, qemu-aarch64, with the
# F flag (the interpreter is opened now, so it works in a chroot too). QEMU_LD_PREFIX is the
# :arm64 sysroot (hack/arm64-sysroot.sh), where an arm64 binary of build/arm64 finds its loader
# and libraries; a command that chroots into an arm64 root filesystem unsets it. --net adds a
# network namespace of its own (only lo, set up), where the user namespace's root may use rtnetlink
# (in the host's, the kernel refuses RTM_SETLINK with EPERM before it looks for the interface).
#
# qemu-user is Debian's bookworm-backports build (QEMU 10.0), fetched once with a private apt
# state (hack/debian-apt.sh; nothing installed) into HOSTDEVD_TOOLS_CACHE/qemu-user-<version>/:
# bookworm's own, QEMU 7.2 (qemu-user-static), has no openat2, so src/node/sysfs.c took its openat
# fallback under it and two unit tests of links out of the sysfs root failed there (QEMU_AARCH64
# names another qemu-aarch64).
#   hack/qemu-user.sh --net build/arm64/unit-tests
#   hack/qemu-user.sh --check    exits 0 when an arm64 binary runs (says why not otherwise)
#   hack/qemu-user.sh --qemu     prints the path of qemu-aarch64 (fetching it on first use)
set -euo pipefail
HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
die() { echo "qemu-user: $*" >&2; exit 1; }
[ $# -gt 0 ] || { echo "usage: hack/qemu-user.sh COMMAND [ARGS] | --check" >&2; exit 2; }

if [ "${1:-}" = --inside ]; then
    shift
    mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc ||
        die "no binfmt_misc of our own (Linux 6.7 or later mounts one per user namespace; this is $(uname -r))"
    # The ELF header of an aarch64 executable (EM_AARCH64 = 0xb7), as Debian's qemu-user-static
    # registers it (/usr/lib/binfmt.d/qemu-aarch64.conf); F: open the interpreter now.
    magic='\x7f\x45\x4c\x46\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x02\x00\xb7\x00'
    mask='\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff\xfe\xff\xff\xff'
    echo ":qemu-aarch64:M::$magic:$mask:$QEMU_BIN:F" >/proc/sys/fs/binfmt_misc/register ||
        die "could not register qemu-aarch64 in the private binfmt_misc"
    if [ -n "${QEMU_USER_NET:-}" ]; then
        unset QEMU_USER_NET
        ip link set lo up || die "could not set lo up in the private network namespace"
    fi
    exec "$@"
fi

# qemu-aarch64 from <codename>-backports' qemu-user (static binaries), in the cache.
fetch_qemu() {
    local cache=${HOSTDEVD_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hostdevd-tools} d tmp suite
    mkdir -p "$cache"
    exec 8>"$cache/.qemu-user.lock"
    flock 8
    d=$(find "$cache" -mindepth 2 -maxdepth 2 -name .complete -path '*/qemu-user-*' -printf '%h\n' 2>/dev/null | sort -V | tail -1)
    if [ -z "$d" ]; then
        tmp=$cache/.qemu-user-fetch
        rm -rf "$tmp"
        # shellcheck source=hack/debian-apt.sh
        . "$HACK/debian-apt.sh"
        apt_private "$tmp/apt"
        suite=$(awk 'END {print $(NF - 1)}' "$tmp/apt/sources.list")
        echo "qemu-user: fetching qemu-user from $suite (private apt state in $tmp)" >&2
        (cd "$tmp" && apt-get "${APT_PRIVATE[@]}" update && apt-get "${APT_PRIVATE[@]}" download "qemu-user/$suite") \
            >"$tmp/apt.log" 2>&1 || { tail -5 "$tmp/apt.log" >&2; die "could not download qemu-user from $suite"; }
        d=$cache/qemu-user-$(dpkg-deb -f "$tmp"/qemu-user_*.deb Version | sed 's/^[0-9]*://')
        rm -rf "$d"
        mkdir -p "$d"
        dpkg-deb --fsys-tarfile "$tmp"/qemu-user_*.deb | tar -x -O ./usr/bin/qemu-aarch64 >"$d/qemu-aarch64"
        chmod 0755 "$d/qemu-aarch64"
        rm -rf "$tmp"
        touch "$d/.complete"
    fi
    echo "$d/qemu-aarch64"
}

QEMU_BIN=${QEMU_AARCH64:-$(fetch_qemu)}
[ -x "$QEMU_BIN" ] || die "no qemu-aarch64 ($QEMU_BIN)"
if [ "$1" = --qemu ]; then
    echo "$QEMU_BIN"
    exit 0
fi
QEMU_LD_PREFIX=$("$HACK/arm64-sysroot.sh") || die "no :arm64 sysroot (make deps-arm64)"
export QEMU_BIN QEMU_LD_PREFIX
if [ "$1" = --check ]; then
    # /bin/true of the sysroot is not there (no coreutils): its loader prints its usage.
    out=$(unshare --user --map-root-user --mount "$0" --inside "$QEMU_LD_PREFIX/lib/ld-linux-aarch64.so.1" --help 2>&1) ||
        die "an arm64 binary does not run: $out"
    exit 0
fi
ns=(--user --map-root-user --mount)
if [ "$1" = --net ]; then
    ns+=(--net)
    export QEMU_USER_NET=1
    shift
fi
exec unshare "${ns[@]}" "$0" --inside "$@"
