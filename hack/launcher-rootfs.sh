#!/usr/bin/env bash
# hack/launcher-rootfs.sh - the root filesystem KubeVirt's virt-launcher runs in, in the qemu node
# (hack/qemu-node.sh boot --launcher): libvirt 11.3 (libvirtd as virtqemud, virtlogd, the qemu
# driver, virsh) and qemu-system-x86 10.0 from Debian's <release>-backports with every dependency
# resolved as for an empty system (about 174 packages), downloaded once with a private apt state
# (hack/debian-apt.sh; the host's apt sources and state stay as they are), unpacked with dpkg-deb
# (no docs, man pages, locales, perl), made what the launcher expects (below), as an ext4 image
# made offline (mkfs.ext4 -d). Prints the image's path:
#   HOSTDEVD_QEMU_CACHE/launcher-rootfs/<libvirt version>_<qemu version>_<hash of this script>/rootfs.ext4
# The launcher's own binaries are not in it (boot --launcher-bin puts them in).
#
# libvirt's qemu capabilities cache (/var/cache/libvirt/qemu/capabilities/) is filled at build
# time: libvirtd probes the image's qemu once on this host, in the image's root and private
# namespaces (mount, PID, network, UTS, IPC; no /dev/kvm: the node has none, and the cache
# records what qemu could accelerate), so the launcher's libvirtd finds it valid (same qemu and
# libvirtd ctimes, which mkfs.ext4 -d keeps) and does not probe qemu under TCG in the node.
# LAUNCHER_ROOTFS_CAPS=0 builds the image without it (a separate image).
#
#   hack/launcher-rootfs.sh            fetch (first use only), build (when missing), print the path
#   hack/launcher-rootfs.sh --rebuild  build the image again from the cached packages
set -euo pipefail

HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${HOSTDEVD_QEMU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hostdevd-qemu}
BASE=$CACHE/launcher-rootfs
export DEBIAN_FRONTEND=noninteractive
die() { echo "launcher-rootfs: $*" >&2; exit 1; }
note() { echo "launcher-rootfs: $*" >&2; }
# shellcheck source=hack/debian-apt.sh
. "$HACK/debian-apt.sh"

# What the launcher runs: virtqemud (libvirtd here), virtlogd, the qemu driver; virsh for tests.
PKGS="libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients qemu-system-x86"
# Not unpacked: perl (only maintainer scripts use it), and what a TCG q35 VM without a display
# does not load.
SKIP_PKGS="perl perl-base perl-modules-5.36 libperl5.36"
TAR_EXCLUDES=(--exclude=./usr/share/doc --exclude=./usr/share/man --exclude=./usr/share/locale
    --exclude=./usr/share/info --exclude=./usr/share/lintian --exclude=./usr/bin/qemu-system-i386
    --exclude=./usr/bin/qemu-system-x86_64-microvm)

# The packages' .debs in BASE/debs-<libvirt>_<qemu>/ (network on first use only). Prints the dir.
fetch_debs() {
    local d tmp suite v q
    d=$(find "$BASE" -mindepth 2 -maxdepth 2 -name .complete -path '*/debs-*' -printf '%h\n' 2>/dev/null | sort -V | tail -1)
    [ -z "$d" ] || { echo "$d"; return; }
    tmp=$BASE/.fetch
    rm -rf "$tmp"
    apt_private "$tmp"
    suite=$(awk 'END {print $(NF - 1)}' "$tmp/sources.list")
    note "fetching libvirt and qemu from $suite with every dependency (private apt state in $tmp)"
    # shellcheck disable=SC2086 # a list of package names
    if ! { apt-get "${APT_PRIVATE[@]}" update &&
        apt-get "${APT_PRIVATE[@]}" -y -d -t "$suite" install --no-install-recommends $PKGS; } \
        >"$tmp/apt.log" 2>&1; then
        tail -20 "$tmp/apt.log" >&2
        die "could not download $PKGS"
    fi
    v=$(dpkg-deb -f "$tmp"/cache/archives/libvirt-daemon_*.deb Version)
    q=$(dpkg-deb -f "$tmp"/cache/archives/qemu-system-x86_*.deb Version)
    d=$BASE/debs-${v}_${q#*:}
    rm -rf "$d"
    mkdir -p "$d"
    mv "$tmp"/cache/archives/*.deb "$d/"
    rm -rf "$tmp"
    touch "$d/.complete"
    echo "$d"
}

# KubeVirt v1.9.0's cmd/virt-launcher/{qemu,virtqemud,nsswitch}.conf and its passwd/group (qemu,
# 107), with Debian's own users of its libvirt packages beside them.
write_config() { # root
    local r=$1
    mkdir -p "$r/etc/libvirt"
    cat >"$r/etc/libvirt/qemu.conf" <<'CONF'
vnc_listen = "0.0.0.0"
vnc_tls = 0
vnc_sasl = 0
user = "qemu"
group = "qemu"
dynamic_ownership = 1
remember_owner = 0
namespaces = [ ]
cgroup_controllers = [ ]
CONF
    cat >"$r/etc/libvirt/virtqemud.conf" <<'CONF'
listen_tls = 0
listen_tcp = 0
log_outputs = "1:stderr"
stdio_handler = "logd"
CONF
    cat >"$r/etc/nsswitch.conf" <<'CONF'
passwd:     files
shadow:     files
group:      files
hosts:      files dns
services:   files
networks:   files dns
protocols:  files
rpc:        files
CONF
    cat >"$r/etc/passwd" <<'CONF'
root:x:0:0:root:/root:/bin/sh
qemu:x:107:107:qemu:/home/qemu:/bin/false
libvirt-qemu:x:64055:108:Libvirt Qemu:/var/lib/libvirt:/usr/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
CONF
    cat >"$r/etc/group" <<'CONF'
root:x:0:
qemu:x:107:
kvm:x:108:libvirt-qemu,qemu
libvirt:x:109:
libvirt-qemu:x:64055:
nogroup:x:65534:
CONF
}

# libvirtd in ROOT probes ROOT's qemu: its capabilities cache in ROOT/var/cache/libvirt/qemu.
probe_caps() { # root
    local r=$1
    mkdir -p "$r/dev" "$r/proc" "$r/sys"
    # PID 1 of the namespaces: a minimal /dev (no kvm), /sys read-only, libvirtd, the probe;
    # everything in them ends with it
    # shellcheck disable=SC2016 # the script expands its own variables
    LC_ALL=C unshare -m -p -n -u -i -f --mount-proc="$r/proc" sh -ec '
        r=$1
        mount -t tmpfs -o mode=755 tmpfs "$r/dev"
        for n in null:1:3 zero:1:5 full:1:7 random:1:8 urandom:1:9 tty:5:0; do
            mknod -m 666 "$r/dev/${n%%:*}" c "$(echo "$n" | cut -d: -f2)" "${n##*:}"
        done
        mkdir "$r/dev/pts" "$r/dev/shm"
        mount -t devpts -o newinstance,ptmxmode=666 devpts "$r/dev/pts"
        ln -s pts/ptmx "$r/dev/ptmx"
        mount --bind /sys "$r/sys"
        mount -o remount,bind,ro "$r/sys"
        mount -t tmpfs tmpfs "$r/run"
        mkdir -p "$r/run/libvirt"
        chroot "$r" /usr/sbin/libvirtd -d
        i=0
        until chroot "$r" /usr/bin/virsh -c qemu:///system capabilities >/dev/null 2>&1; do
            i=$((i + 1)); [ $i -lt 100 ] || exit 1; sleep 0.2
        done' probe "$r" || die "libvirtd did not probe qemu in the root"
    ls "$r"/var/cache/libvirt/qemu/capabilities/*.xml >/dev/null 2>&1 || die "no capabilities cache written"
}

build_image() { # debs-dir image
    local debs=$1 img=$2 r p name t0=$SECONDS
    r=$(dirname "$img")/root
    rm -rf "$r"
    mkdir -p "$r/usr/bin" "$r/usr/sbin" "$r/usr/lib" "$r/usr/lib64"
    # merged /usr, as a bookworm system's (usrmerge does it at install; tar keeps the links)
    for p in bin sbin lib lib64; do ln -s "usr/$p" "$r/$p"; done
    for p in "$debs"/*.deb; do
        name=$(dpkg-deb -f "$p" Package)
        case " $SKIP_PKGS " in *" $name "*) continue ;; esac
        dpkg-deb --fsys-tarfile "$p" | tar -x -C "$r" --keep-directory-symlink "${TAR_EXCLUDES[@]}"
    done
    { [ -x "$r/usr/sbin/libvirtd" ] && [ -x "$r/usr/sbin/virtlogd" ]; } || die "no libvirtd/virtlogd unpacked"
    ln -sf libvirtd "$r/usr/sbin/virtqemud"
    # /var/run -> ../run (relative: virt-handler resolves it through /proc/<pid>/root)
    rm -rf "$r/var/run"
    mkdir -p "$r/var" "$r/run/libvirt"
    ln -s ../run "$r/var/run"
    mkdir -p "$r"/run/kubevirt/{sockets,container-disks,hotplug-disks} "$r"/run/kubevirt-private \
        "$r"/run/kubevirt-ephemeral-disks "$r"/var/log/libvirt/qemu "$r"/var/lib/libvirt/qemu \
        "$r"/var/cache/libvirt/qemu "$r"/home/qemu "$r"/root "$r"/tmp "$r"/proc "$r"/sys "$r"/dev \
        "$r"/kubevirt "$r"/etc/libvirt/hooks
    chmod 1777 "$r/tmp"
    # no domain definitions (a stale one is reused silently)
    rm -f "$r"/etc/libvirt/qemu/*.xml
    write_config "$r"
    # The launcher's binaries come from the second disk that boot --launcher-bin mounts at /kubevirt.
    for p in virt-launcher virt-launcher-monitor virt-freezer virt-probe virt-tail; do
        ln -sf "/kubevirt/$p" "$r/usr/bin/$p"
    done
    printf '/usr/lib/x86_64-linux-gnu\n' >"$r/etc/ld.so.conf.d/x86_64-linux-gnu.conf"
    ldconfig -r "$r"
    chown -R 107:107 "$r/home/qemu"
    [ "${LAUNCHER_ROOTFS_CAPS:-1}" = 0 ] || probe_caps "$r"
    # a missing library shows here, not in the guest
    if chroot "$r" /usr/sbin/libvirtd --version >/dev/null 2>&1; then :; else
        chroot "$r" /usr/sbin/libvirtd --version || die "libvirtd does not run in the root"
    fi
    chroot "$r" /usr/bin/qemu-system-x86_64 --version >"$(dirname "$img")/qemu-version" ||
        die "qemu does not run in the root"
    local size
    size=$(du -sm "$r" | awk '{print $1}')
    rm -f "$img.tmp"
    # room for what libvirt and qemu write at run time (logs, the capabilities cache)
    mkfs.ext4 -q -F -L launcher -d "$r" -E lazy_itable_init=0 "$img.tmp" "$((size * 12 / 10 + 128))M" >/dev/null
    mv "$img.tmp" "$img"
    rm -rf "$r"
    note "built $img (${size} MB of files) in $((SECONDS - t0))s"
}

main() {
    local rebuild=0 debs key dir
    [ "${1:-}" != --rebuild ] || rebuild=1
    mkdir -p "$BASE"
    exec 8>"$BASE/.lock"
    flock 8
    debs=$(fetch_debs)
    key=${debs##*/debs-}_$(cat "$0" "$HACK/debian-apt.sh" | sha256sum | cut -c1-12)
    [ "${LAUNCHER_ROOTFS_CAPS:-1}" != 0 ] || key=${key}_nocaps
    dir=$BASE/$key
    if [ $rebuild = 1 ] || [ ! -f "$dir/rootfs.ext4" ]; then
        # images of earlier versions of this script go
        find "$BASE" -mindepth 1 -maxdepth 1 -type d ! -name 'debs-*' ! -name "${key%_nocaps}" \
            ! -name "${key%_nocaps}_nocaps" -exec rm -rf {} +
        mkdir -p "$dir"
        build_image "$debs" "$dir/rootfs.ext4"
    fi
    echo "$dir/rootfs.ext4"
}

main "$@"
