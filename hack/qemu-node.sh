#!/usr/bin/env bash
# A qemu "test node": Debian's real kernel under software emulation (TCG, q35, virtual Intel
# IOMMU) with emulated PCI and USB devices at fixed addresses, running `hostdevd agent` from an
# initramfs against a control plane on the host (reached at 10.0.2.2 through user-mode
# networking), driven by host scripts through a control channel on the guest's second serial port.
#
#   hack/qemu-node.sh build OUTDIR [AGENT_BINARY]     kernel + initramfs (agent default bin/hostdevd)
#   hack/qemu-node.sh boot DIR [OPTIONS]              start qemu in the background; waits until the
#                                                     control channel answers (unless --no-wait)
#       --image BUILDDIR       the build output (default: DIR itself)
#       --kubeconfig FILE      the agent's kubeconfig (server must be reachable from the guest)
#       --node-name NAME       hostname and --node-name of the agent (default qnode)
#       --agent-args "ARGS"    extra agent arguments (split on whitespace in the guest)
#       --agent-env "K=V ..."  extra environment of the supervised agent
#       --agent BINARY         replace the image's agent binary for this boot (same libraries)
#       --extra SRC:DEST       also put file SRC at DEST in the guest for this boot (repeatable;
#                              a static binary: its libraries are not copied)
#       --no-agent             do not start the supervised agent (agentctl start does)
#       --sriov                an SR-IOV NIC (igb, an 82576: 7 VFs) behind its own PCIe root port
#                              (`devices`), igb and igbvf loaded at boot, iproute2's ip as
#                              /usr/sbin/ip (busybox's sh runs its own `ip` for a bare `ip`).
#                              igb needs qemu >= 8.0: the host's qemu if it has igb, else
#                              Debian's <release>-backports qemu (10.0 for bookworm), fetched on
#                              first use with a private apt state into HOSTDEVD_QEMU_CACHE's
#                              qemu-backports/ (13 MB download, 39 MB unpacked; 1.5-1.7 s here)
#       --hotplug              an e1000e (qemu id hotnic) behind a hotplug-capable PCIe root port of
#                              its own (hotrp, 00:08.0; `devices`), for surprise removal:
#                              hmp DIR 'device_del hotnic', back with the same id, bus and address:
#                              hmp DIR 'device_add e1000e,netdev=n4,id=hotnic,bus=hotrp,addr=00.0,
#                              mac=52:54:00:00:08:00,romfile=' (one argument; HOTPLUG_NIC below).
#                              q35's default ACPI PCI hotplug: the guest's acpiphp ejects it at once
#                              (no attention button); a vfio-pci user blocks the eject until it closes
#       --vmm                  also put a VMM in the guest: the host's qemu-system-x86_64 with its
#                              libraries, TCG and usb-host modules and SeaBIOS (BUILDDIR/vmm.cpio,
#                              made on first use, about 50 MB), to start VMs the way libvirt does
#       --vmm-linux            --vmm and a nested Linux for it: the image's kernel and a tiny
#                              initramfs (busybox, e1000e, hack/qemu-nested/init) in the guest's
#                              /usr/share/vmm-linux/ (BUILDDIR/vmm-linux.cpio, made on first use)
#       --kubelet              also put a Kubernetes node's runtime in the guest (BUILDDIR/kubelet.cpio,
#                              made on first use, about 180 MB): kubelet (hack/k8s-build.sh),
#                              containerd 2, its runc shim and ctr (hack/containerd-build.sh), the
#                              host's runc and socat, CNI's loopback, the test box image as the
#                              sandbox image; the guest's /sbin/kubelet-node starts them
#       --kubelet-kubeconfig FILE  kubelet's kubeconfig in the guest (/etc/kubelet/kubeconfig;
#                              self-contained: certificates as *-data)
#       --image-archive FILE   an OCI archive containerd imports at kubelet-node start (repeatable)
#       --launcher             KubeVirt's virt-launcher can run in the guest (/sbin/launcher-run): the
#                              root filesystem of hack/launcher-rootfs.sh (libvirt 11.3, qemu 10.0
#                              from <release>-backports; about 370 MB, built on first use) as a
#                              virtio disk (serial launcher-root, 00:09.0) through a per-boot
#                              overlay (qemu's snapshot=on: the image stays as built, every boot
#                              starts clean), mounted at /launcher; at least 2048 MB of memory
#       --launcher-bin DIR     --launcher and the launcher's binaries (DIR/virt-launcher,
#                              DIR/virt-launcher-monitor) on a second, read-only disk (serial
#                              launcher-bin, 00:0a.0; BUILDDIR/launcher-bin.ext4, made when older
#                              than them, about 1 s) at /launcher/kubevirt
#       --memory MB, --smp N   guest size (default 768, 1)
#       --timeout S            how long to wait for the control channel (default 120)
#       --no-wait              return once qemu runs
#       --watch-pid PID        stop qemu when process PID is gone (tests pass their shell's)
#   hack/qemu-node.sh stop DIR                        power off (kill) qemu; idempotent
#   hack/qemu-node.sh exec DIR [--timeout S] 'CMD'    run CMD with /bin/sh in the guest; prints its
#                                                     output (stdout+stderr), exits with its status
#   hack/qemu-node.sh wait-ready DIR [--timeout S]    wait until the guest's command loop answers
#   hack/qemu-node.sh reboot DIR [--timeout S]        `reboot -f` in the guest, wait until it is back
#   hack/qemu-node.sh hmp DIR 'MONITOR COMMAND'       qemu human monitor (e.g. device_add usb-kbd,...)
#   hack/qemu-node.sh status DIR                      exit 0 when qemu runs; prints its pid
#   hack/qemu-node.sh kubelet-kubeconfig NODE FILE    kubelet's kubeconfig for a --kubelet boot: a
#                                                     client certificate system:node:NODE signed by
#                                                     the cluster's CA (needs K8S_SERVER, K8S_CA and
#                                                     the ca.key beside it)
#   hack/qemu-node.sh devices                         the fixed device layout
#   hack/qemu-node.sh kernel                          the version of the kernel the image boots
#                                                     (fetched into the cache on first use)
#   hack/qemu-node.sh kubeconfig NODE FILE            a kubeconfig for the guest's agent with a
#                                                     token bound to the Node (needs K8S_SERVER,
#                                                     K8S_CA, kubectl)
#
# DIR gets: qemu.pid, qemu.log (qemu's own messages), console.log (the guest's ttyS0), ctl.sock
# (control channel, see test/e2e/guestctl.py), qmp.sock (QMP; hmp goes through it), stick.img (the USB stick),
# initrd-boot.img (image + per-boot config archive), boot.cpio.
#
# In the guest: agentctl start|stop|restart|status|run-once|log|cmdline (see `agentctl help`),
# launcher-run (boot --launcher: KubeVirt's virt-launcher; see hack/qemu-guest/sbin/launcher-run),
# the agent's log in /var/log/hostdevd.log, config in /etc/hostdevd/. The guest's own files
# (/init, inittab, boot script, control loop, agent supervisor, agentctl) are hack/qemu-guest/.
# Environment: HOSTDEVD_QEMU_CACHE (default ~/.cache/hostdevd-qemu), QEMU_NODE_KERNEL_PKG
# (default: the package linux-image-amd64 depends on), QEMU_NODE_EXTRA_MODULES (more modules
# for the image's tree), QEMU_NODE_APPEND (more kernel arguments), QEMU_NODE_QEMU_ARGS (more
# qemu arguments), QEMU_NODE_ACCEL (qemu's -accel, default tcg; "kvm" needs /dev/kvm).
set -euo pipefail

HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HACK/.." && pwd)
GUESTCTL=$ROOT/test/e2e/guestctl.py
GUEST=$HACK/qemu-guest
CACHE=${HOSTDEVD_QEMU_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hostdevd-qemu}
export DEBIAN_FRONTEND=noninteractive

# Modules in the image's tree (with their dependencies). The guest loads the drivers of the
# devices at boot, but not vfio: the agent loads vfio-pci and vfio_iommu_type1 itself.
BOOT_MODULES="virtio_pci virtio_net e1000 e1000e xhci_pci usb_storage sd_mod usbhid hid_generic"
# mdev (the mediated-device bus) and the kernel's mtty sample (hack/mtty-build.sh) are in the
# tree too, not loaded at boot: a test's `modprobe mtty` loads them (and vfio).
TREE_MODULES="$BOOT_MODULES uas vfio_pci vfio_iommu_type1 igb igbvf mdev ${QEMU_NODE_EXTRA_MODULES:-}"

die() { echo "qemu-node: $*" >&2; exit 1; }
note() { echo "qemu-node: $*" >&2; }
# shellcheck source=hack/debian-apt.sh
. "$HACK/debian-apt.sh"

# --- the fixed device layout ---------------------------------------------------------------------

print_devices() {
    cat <<'EOF'
guest PCI address  device                               qemu id   IOMMU group, driver at boot
0000:00:00.0       q35 host bridge 8086:29c0            -         0, none
0000:00:02.0       virtio-net 1af4:1000 (management)    mgmt      1, virtio-pci; 10.0.2.15/24 via 10.0.2.2
0000:00:03.0       e1000 8086:100e                      nic0      2, e1000
0000:00:04.0       e1000e 8086:10d3                     nic1      3, e1000e
0000:00:05.0       e1000e 8086:10d3                     nic2      4, e1000e
0000:00:06.0       qemu-xhci 1b36:000d                  xhci      5, xhci_hcd
  usb 1-1          usb-kbd 0627:0001 (xhci port 1)      kbd       usbhid
  usb 1-2          usb-tablet 0627:0001 (xhci port 2)   tablet    usbhid
  usb 2-3          usb-storage 46f4:0001 (xhci port 3)  stick     usb-storage (SuperSpeed bus), sda = DIR/stick.img,
                                                                  serial HOSTDEVD-STICK-1
  xhci port 4      free for hotplug: hmp DIR 'device_add usb-kbd,id=k2,bus=xhci.0,port=4'
0000:00:1f.0/2/3   q35 ICH9 LPC, SATA, SMBus            -         6 (all three), none
Group numbers are the kernel's order of discovery; the same at every boot of this layout.

With boot --launcher, also 0000:00:09.0 (group 6; with --launcher-bin 0000:00:0a.0, group 7):
virtio-blk 1af4:1001, the launcher's disks (the ICH9 functions' group follows them: 8).
With boot --sriov (qemu 10.0, see fetch_sriov_qemu), also (the ICH9 functions' group is then 7):
0000:00:07.0       pcie-root-port 1b36:000c             sriovrp   6, pcieport
0000:01:00.0       igb 8086:10c9 (82576 PF, 7 VFs)      sriov0    8, igb; 52:54:00:00:07:00
0000:01:10.0 ...   its VFs 8086:10ca, VF n at devfn     -         9+n, igbvf (loaded at boot);
                   0x80+2n: 01:10.0 10.2 10.4 10.6                none until sriov_numvfs is written
                   11.0 11.2 11.4                                 (0 at every boot)
With boot --hotplug (the host's qemu; the ICH9 functions' group is then 7):
0000:00:08.0       pcie-root-port 1b36:000c, hotplug    hotrp     6, pcieport; its slot is ACPI's (acpiphp)
0000:01:00.0       e1000e 8086:10d3                     hotnic    8, e1000e; 52:54:00:00:08:00; netdev n4
                   (not tried with --sriov: the firmware numbers buses in slot order, so the
                   igb would keep bus 1 and the hotplug e1000e would be 0000:02:00.0)
EOF
}

# shellcheck disable=SC2054 # commas are qemu's
QEMU_DEVICES=(
    -netdev user,id=mgmt
    -device virtio-net-pci,netdev=mgmt,id=mgmt,addr=02.0,mac=52:54:00:00:02:00,romfile=
    -netdev user,id=n0,restrict=on
    -device e1000,netdev=n0,id=nic0,addr=03.0,mac=52:54:00:00:03:00,romfile=
    -netdev user,id=n1,restrict=on
    -device e1000e,netdev=n1,id=nic1,addr=04.0,mac=52:54:00:00:04:00,romfile=
    -netdev user,id=n2,restrict=on
    -device e1000e,netdev=n2,id=nic2,addr=05.0,mac=52:54:00:00:05:00,romfile=
    -device qemu-xhci,id=xhci,addr=06.0
    -device usb-kbd,id=kbd,bus=xhci.0,port=1
    -device usb-tablet,id=tablet,bus=xhci.0,port=2
)

# --sriov: an igb (82576, SR-IOV: up to 7 VFs) behind a PCIe root port of its own.
# shellcheck disable=SC2054 # commas are qemu's
SRIOV_DEVICES=(
    -device pcie-root-port,id=sriovrp,bus=pcie.0,addr=07.0,chassis=7,slot=7
    -netdev user,id=n3,restrict=on
    -device igb,netdev=n3,id=sriov0,bus=sriovrp,addr=00.0,mac=52:54:00:00:07:00,romfile=
)
# --hotplug: an e1000e behind a PCIe root port of its own, which can be removed (device_del
# hotnic) and added back (HOTPLUG_NIC: the same id, bus and address) while the node runs.
HOTPLUG_NIC=e1000e,netdev=n4,id=hotnic,bus=hotrp,addr=00.0,mac=52:54:00:00:08:00,romfile=
# shellcheck disable=SC2054 # commas are qemu's
HOTPLUG_DEVICES=(
    -device pcie-root-port,id=hotrp,bus=pcie.0,addr=08.0,chassis=8,slot=8,hotplug=on
    -netdev user,id=n4,restrict=on
    -device "$HOTPLUG_NIC"
)
# in the tree of a --launcher boot (launcher.cpio): the launcher's disks
LAUNCHER_MODULES="virtio_blk ext4"
# loaded at a --sriov boot (a real node's udev would load them for the PF and its VFs)
SRIOV_BOOT_MODULES="igb igbvf"

# --- host tools ----------------------------------------------------------------------------------

apt_install() { # packages...
    apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends "$@" >/dev/null 2>&1 || {
        apt-get -o DPkg::Lock::Timeout=300 update >/dev/null 2>&1
        apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends "$@" >/dev/null
    }
}

need_tools() {
    local missing=()
    command -v qemu-system-x86_64 >/dev/null || missing+=(qemu-system-x86)
    command -v busybox >/dev/null || missing+=(busybox-static)
    command -v cpio >/dev/null || missing+=(cpio)
    command -v depmod >/dev/null || missing+=(kmod)
    [ -f /usr/share/misc/pci.ids ] || missing+=(pci.ids)
    [ -f /usr/share/misc/usb.ids ] || missing+=(usb.ids)
    [ ${#missing[@]} -eq 0 ] && return 0
    note "installing ${missing[*]}"
    apt_install "${missing[@]}"
}

need_qemu() {
    command -v qemu-system-x86_64 >/dev/null || apt_install qemu-system-x86
    command -v python3 >/dev/null || die "python3 is needed for the control channel"
}

# --- the kernel (cached) -------------------------------------------------------------------------

kernel_pkg() {
    local pkg=${QEMU_NODE_KERNEL_PKG:-}
    [ -n "$pkg" ] || pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
        awk '/Depends: linux-image-[0-9]/{print $2; exit}')
    if [ -z "$pkg" ]; then
        apt-get -o DPkg::Lock::Timeout=300 update >/dev/null 2>&1 || true
        pkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
            awk '/Depends: linux-image-[0-9]/{print $2; exit}')
    fi
    if [ -z "$pkg" ]; then # no package lists: the newest cached kernel
        local k
        k=$(find "$CACHE" -maxdepth 2 -name .complete -printf '%h\n' 2>/dev/null | sort -V | tail -1)
        [ -n "$k" ] || die "cannot tell which Debian kernel to use (apt-cache depends linux-image-amd64)"
        pkg=linux-image-$(basename "$k")
    fi
    echo "$pkg"
}

# The uncompressed kernel (an ELF with a PVH entry point) out of a bzImage: qemu boots it
# directly, without the firmware's real-mode loader and the decompression, which under TCG take
# ~6 of the ~12 seconds of a boot.
extract_vmlinux() { # vmlinuz out
    python3 - "$1" "$2" <<'PY'
import lzma, struct, sys, zlib
d = open(sys.argv[1], "rb").read()
out = None
i = d.find(b"\xfd7zXZ\x00")                      # Debian: CONFIG_KERNEL_XZ
if i >= 0:
    out = lzma.LZMADecompressor(format=lzma.FORMAT_XZ).decompress(d[i:])
else:
    i = d.find(b"\x1f\x8b\x08\x00")
    if i >= 0:
        out = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(d[i:])
# An ELF with Xen's PVH entry note (XEN_ELFNOTE_PHYS32_ENTRY = 18), which qemu boots directly.
if not out or out[:4] != b"\x7fELF" or not any(
        struct.pack("<III", 4, n, 18) + b"Xen\x00" in out for n in (4, 8)):
    sys.exit(1)
open(sys.argv[2] + ".tmp", "wb").write(out)
PY
    [ -f "$2.tmp" ] && mv "$2.tmp" "$2"
}

# Prints the kernel version; the cache has CACHE/K/root (the unpacked package, depmod run) and
# the .deb. Locked, so two builds do not race.
fetch_kernel() {
    local pkg k dir
    pkg=$(kernel_pkg)
    k=${pkg#linux-image-}
    dir=$CACHE/$k
    if [ ! -f "$dir/.complete" ]; then
        mkdir -p "$CACHE"
        exec 8>"$CACHE/.lock"
        flock 8
        if [ ! -f "$dir/.complete" ]; then
            note "fetching kernel $pkg into $dir"
            rm -rf "$dir"
            mkdir -p "$dir"
            (cd "$dir" && apt-get -o APT::Sandbox::User=root download "$pkg" >/dev/null 2>&1) ||
                (apt-get -o DPkg::Lock::Timeout=300 update >/dev/null 2>&1 &&
                    cd "$dir" && apt-get -o APT::Sandbox::User=root download "$pkg" >/dev/null) ||
                die "apt-get download $pkg failed"
            dpkg-deb -x "$dir"/"$pkg"_*.deb "$dir/root"
            depmod -b "$dir/root" "$k"
            [ -f "$dir/root/boot/vmlinuz-$k" ] || die "$pkg has no /boot/vmlinuz-$k"
            touch "$dir/.complete"
        fi
        exec 8>&-
    fi
    if [ ! -f "$dir/vmlinux" ] && [ ! -f "$dir/.no-vmlinux" ]; then
        exec 8>"$CACHE/.lock"
        flock 8
        if [ ! -f "$dir/vmlinux" ] && ! extract_vmlinux "$dir/root/boot/vmlinuz-$k" "$dir/vmlinux"; then
            note "could not extract vmlinux: booting the compressed kernel (slower)"
            touch "$dir/.no-vmlinux"
        fi
        exec 8>&-
    fi
    echo "$k"
}

# --- the SR-IOV qemu (cached) -------------------------------------------------------------------

# --sriov needs qemu's igb (an 82576 with SR-IOV), which qemu has since 8.0. The host's qemu when
# it has igb; else Debian's <codename>-backports build (10.0 for bookworm), downloaded once with
# a private apt state (the host's sources stay as they are) and unpacked, not installed, into
# CACHE/qemu-backports/<version>/root. Its libraries are the host's (those of the host's qemu).
SRIOV_QEMU_PKGS="qemu-system-x86 qemu-system-common qemu-system-data seabios"

# backports_source: hack/debian-apt.sh

# Prints the qemu-system-x86_64 to run for --sriov ("" = the host's). Network only on first use.
fetch_sriov_qemu() {
    local base=$CACHE/qemu-backports q tmp v
    # (`-device X,help` exits 0 for an unknown X too: its output tells)
    qemu-system-x86_64 -device igb,help 2>/dev/null | grep -q '^igb options' && return 0
    mkdir -p "$base"
    q=$(find "$base" -mindepth 2 -maxdepth 2 -name .complete -printf '%h\n' | sort -V | tail -1)
    if [ -z "$q" ]; then
        exec 8>"$CACHE/.lock"
        flock 8
        q=$(find "$base" -mindepth 2 -maxdepth 2 -name .complete -printf '%h\n' | sort -V | tail -1)
        if [ -z "$q" ]; then
            tmp=$base/.fetch
            rm -rf "$tmp"
            mkdir -p "$tmp"/{lists/partial,cache/archives/partial,debs}
            backports_source >"$tmp/sources.list"
            note "fetching an SR-IOV capable qemu ($(cut -d' ' -f2- "$tmp/sources.list" | sed 's/\[[^]]*\] //'))"
            local apt=(-o "Dir::Etc::SourceList=$tmp/sources.list" -o Dir::Etc::SourceParts=/dev/null
                -o "Dir::State::Lists=$tmp/lists" -o "Dir::Cache=$tmp/cache"
                -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache= -o APT::Sandbox::User=root)
            local suite pkgs=() p
            suite=$(awk '{print $(NF - 1)}' "$tmp/sources.list")
            for p in $SRIOV_QEMU_PKGS; do pkgs+=("$p/$suite"); done
            if ! { apt-get "${apt[@]}" update && (cd "$tmp/debs" && apt-get "${apt[@]}" download "${pkgs[@]}"); } \
                >"$tmp/apt.log" 2>&1; then
                cat "$tmp/apt.log" >&2
                die "could not download ${pkgs[*]}"
            fi
            v=$(dpkg-deb -f "$tmp"/debs/qemu-system-x86_*.deb Version)
            v=${v#*:}
            q=$base/$v
            rm -rf "$q"
            mkdir -p "$q/root"
            for p in "$tmp"/debs/*.deb; do dpkg-deb -x "$p" "$q/root"; done
            # only what a node needs: the x86_64 system emulator, its modules and firmware
            rm -rf "$q"/root/usr/share/doc "$q"/root/usr/share/man "$q"/root/usr/bin/qemu-system-i386 \
                "$q"/root/usr/bin/qemu-system-x86_64-microvm "$q"/root/usr/bin/qemu-*-helper
            if ldd "$q/root/usr/bin/qemu-system-x86_64" | grep -q 'not found'; then
                need_qemu # the host's qemu brings the libraries
                ldd "$q/root/usr/bin/qemu-system-x86_64" | grep 'not found' >&2 &&
                    die "qemu $v lacks libraries on this host"
            fi
            QEMU_MODULE_DIR=$q/root/usr/lib/x86_64-linux-gnu/qemu "$q/root/usr/bin/qemu-system-x86_64" \
                -device igb,help 2>/dev/null | grep -q '^igb options' || die "qemu $v has no igb device"
            du -sh "$tmp/debs" | awk '{print "download " $1}' >"$q/fetch.log"
            rm -rf "$tmp"
            touch "$q/.complete"
            note "qemu $v in $q"
        fi
        exec 8>&-
    fi
    echo "$q/root/usr/bin/qemu-system-x86_64"
}

# --- the image -----------------------------------------------------------------------------------

# Copies a binary and every shared library ldd finds for it (and the dynamic loader) into the
# same paths under the image root.
copy_with_libs() { # file dest-in-root root
    local src=$1 dest=$2 r=$3 lib
    install -D -m 755 "$src" "$r$dest"
    { ldd "$src" 2>/dev/null || true; } | awk '/=> \//{print $3} /^[[:space:]]*\//{print $1}' |
        while read -r lib; do
            [ -e "$r$lib" ] || install -D -m 755 "$(readlink -f "$lib")" "$r$lib"
        done
}

# busybox (Debian's busybox-static) and a link for each of its applets.
install_busybox() { # root
    local r=$1 f
    copy_with_libs "$(command -v busybox)" /bin/busybox "$r"
    busybox --list-full | while read -r f; do
        [ -e "$r/$f" ] || [ -L "$r/$f" ] || { mkdir -p "$(dirname "$r/$f")"; ln -s /bin/busybox "$r/$f"; }
    done
}

# A real /lib/modules/K tree under ROOT with only MODULES and their dependencies, from the cached
# kernel package, and its modules.dep (depmod).
copy_modules() { # K root modules...
    local k=$1 r=$2 kroot=$CACHE/$1/root m f what path deps
    local mods=$r/lib/modules/$k
    shift 2
    mkdir -p "$mods"
    for f in modules.builtin modules.builtin.modinfo modules.order; do
        [ -f "$kroot/lib/modules/$k/$f" ] && cp "$kroot/lib/modules/$k/$f" "$mods/"
    done
    for m in "$@"; do
        deps=$(modprobe -d "$kroot" -S "$k" --show-depends "$m") || die "module $m not found in kernel $k"
        while read -r what path _; do
            [ "$what" = insmod ] || continue
            f=${path#"$kroot/lib/modules/$k/"}
            [ -f "$mods/$f" ] || install -D -m 644 "$path" "$mods/$f"
        done <<<"$deps"
    done
    depmod -b "$r" "$k"
    [ -s "$mods/modules.dep" ] || die "depmod made no modules.dep"
}

cmd_build() {
    [ $# -ge 1 ] || die "usage: build OUTDIR [AGENT_BINARY]"
    local out agent k kroot r t0=$SECONDS f
    out=$(realpath -m "$1")
    agent=${2:-$ROOT/bin/hostdevd}
    [ -x "$agent" ] || die "no agent binary at $agent (make bin/hostdevd)"
    need_tools
    k=$(fetch_kernel)
    kroot=$CACHE/$k/root
    mkdir -p "$out"
    r=$out/root
    rm -rf "$r"
    mkdir -p "$r"/{bin,sbin,usr/bin,usr/sbin,lib,lib64,etc/hostdevd,proc,sys,dev,run,tmp,root} \
        "$r"/{var/log,var/lib/kubelet/device-plugins,var/run,mnt,usr/share/misc}
    chmod 1777 "$r/tmp"

    install_busybox "$r"
    # kmod's tools (libkmod, which the agent uses too) beside busybox's modprobe, which stays
    # /sbin/modprobe: /usr/lib/kmod/{modprobe,insmod,rmmod,lsmod,modinfo,depmod}
    if [ -x /bin/kmod ] || [ -x /usr/bin/kmod ]; then
        copy_with_libs "$(command -v kmod)" /usr/bin/kmod "$r"
        mkdir -p "$r/usr/lib/kmod"
        for f in modprobe insmod rmmod lsmod modinfo depmod; do ln -s /usr/bin/kmod "$r/usr/lib/kmod/$f"; done
    fi
    # the agent, its libraries, the ID databases
    copy_with_libs "$agent" /usr/bin/hostdevd "$r"
    cp /usr/share/misc/pci.ids /usr/share/misc/usb.ids "$r/usr/share/misc/"
    printf '/lib/x86_64-linux-gnu\n/usr/lib/x86_64-linux-gnu\n' >"$r/etc/ld.so.conf"
    ldconfig -r "$r" 2>/dev/null || true

    # the kernel modules: a real /lib/modules/K tree with only what the node needs, and mtty
    local mods=$r/lib/modules/$k
    install -D -m 644 "$("$HACK/mtty-build.sh" "$k")" "$mods/extra/mtty.ko"
    # shellcheck disable=SC2086 # a list of module names
    copy_modules "$k" "$r" $TREE_MODULES

    write_guest_files "$r"
    [ -e "$r/dev/console" ] || mknod -m 600 "$r/dev/console" c 5 1 2>/dev/null || true
    [ -e "$r/dev/null" ] || mknod -m 666 "$r/dev/null" c 1 3 2>/dev/null || true

    cp "$kroot/boot/vmlinuz-$k" "$out/vmlinuz"
    rm -f "$out/vmlinux"
    if [ -f "$CACHE/$k/vmlinux" ]; then
        ln -f "$CACHE/$k/vmlinux" "$out/vmlinux" 2>/dev/null || cp "$CACHE/$k/vmlinux" "$out/vmlinux"
    fi
    echo "$k" >"$out/kernel-version"
    (cd "$r" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) |
        cat >"$out/initrd.img"
    # Uncompressed: unpacking is faster than gunzip under TCG. Padded to 512 bytes (the kernel
    # wants the next, per-boot archive 4-byte aligned).
    local size pad
    size=$(stat -c %s "$out/initrd.img")
    pad=$(((512 - size % 512) % 512))
    [ $pad -eq 0 ] || head -c $pad /dev/zero >>"$out/initrd.img"
    note "built $out (kernel $k, initrd $(($(stat -c %s "$out/initrd.img") / 1024)) KiB," \
        "$(find "$mods" -name '*.ko' | wc -l) modules) in $((SECONDS - t0))s"
}

# The VMM a test starts in the guest as virt-launcher's libvirt would (`-device vfio-pci,host=`,
# `-device usb-host,hostbus=,hostaddr=`): the host's qemu-system-x86_64, its libraries, the
# modules TCG and usb-host load, and SeaBIOS, as an archive appended to a boot's initramfs.
build_vmm() { # BUILDDIR
    local out=$1 r m
    r=$out/vmm-root
    rm -rf "$r"
    mkdir -p "$r/usr/share/seabios" "$r/usr/share/qemu"
    copy_with_libs "$(command -v qemu-system-x86_64)" /usr/bin/qemu-system-x86_64 "$r"
    for m in accel-tcg-x86_64.so hw-usb-host.so; do
        copy_with_libs "/usr/lib/x86_64-linux-gnu/qemu/$m" "/usr/lib/x86_64-linux-gnu/qemu/$m" "$r"
    done
    cp -L /usr/share/seabios/bios-256k.bin /usr/share/seabios/bios.bin "$r/usr/share/seabios/"
    cp -L /usr/share/qemu/kvmvapic.bin /usr/share/qemu/linuxboot_dma.bin "$r/usr/share/qemu/"
    (cd "$r" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$out/vmm.cpio.tmp"
    mv "$out/vmm.cpio.tmp" "$out/vmm.cpio"
    rm -rf "$r"
}

# The nested Linux (--vmm-linux) a test boots in that VMM with a host device: the image's own
# kernel (vmlinuz) and a tiny initramfs (busybox, e1000e and its dependencies from the same
# kernel's modules, hack/qemu-nested/init), as /usr/share/vmm-linux/{vmlinuz,initrd.img} in an
# archive appended after vmm.cpio. Rebuilt when older than the image or hack/qemu-nested/.
NESTED_MODULES="e1000e"
build_vmm_linux() { # BUILDDIR
    local out=$1 k r w f
    k=$(cat "$out/kernel-version")
    k=$(QEMU_NODE_KERNEL_PKG=linux-image-$k fetch_kernel)
    r=$out/vmm-linux-root
    w=$out/vmm-linux-wrap
    rm -rf "$r" "$w"
    mkdir -p "$r"/{bin,sbin,proc,sys,dev} "$w/usr/share/vmm-linux"
    install_busybox "$r"
    # shellcheck disable=SC2086 # a list of module names
    copy_modules "$k" "$r" $NESTED_MODULES
    (cd "$ROOT/hack/qemu-nested" && find . -type f | LC_ALL=C sort) | while read -r f; do
        install -D -m "$([ -x "$ROOT/hack/qemu-nested/$f" ] && echo 755 || echo 644)" \
            "$ROOT/hack/qemu-nested/$f" "$r/${f#./}"
    done
    mknod -m 600 "$r/dev/console" c 5 1 2>/dev/null || true
    (cd "$r" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) \
        >"$w/usr/share/vmm-linux/initrd.img"
    cp "$out/vmlinuz" "$w/usr/share/vmm-linux/vmlinuz"
    (cd "$w" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$out/vmm-linux.cpio.tmp"
    mv "$out/vmm-linux.cpio.tmp" "$out/vmm-linux.cpio"
    rm -rf "$r" "$w"
}

# What a --sriov boot adds to the image: iproute2's ip (the host's, with its libraries) as
# /usr/sbin/ip, which prints and sets an interface's VFs (busybox's /sbin/ip does neither).
# Only for --sriov, so other boots keep busybox's ip. About 1.3 MB.
build_sriov() { # BUILDDIR
    local out=$1 r f
    command -v ip >/dev/null || apt_install iproute2
    r=$out/sriov-root
    rm -rf "$r"
    mkdir -p "$r"
    copy_with_libs "$(readlink -f "$(command -v ip)")" /usr/sbin/ip "$r"
    # only what the image lacks
    (cd "$r" && find . -type f) | while read -r f; do
        [ ! -e "$out/root/$f" ] || [ "$f" = ./usr/sbin/ip ] || rm -f "$r/$f"
    done
    (cd "$r" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$out/sriov.cpio.tmp"
    mv "$out/sriov.cpio.tmp" "$out/sriov.cpio"
    rm -rf "$r"
}

# A Kubernetes node's runtime for --kubelet (hack/qemu-guest/sbin/kubelet-node starts it): only
# what the image lacks.
build_kubelet() { # BUILDDIR
    local out=$1 r k8s ctrd box name f
    k8s=$("$HACK/k8s-build.sh")
    ctrd=$("$HACK/containerd-build.sh")
    read -r box name <<<"$("$HACK/testbox-image.sh")"
    if ! command -v runc >/dev/null || ! command -v socat >/dev/null || [ ! -x /usr/lib/cni/loopback ]; then
        apt_install runc socat containernetworking-plugins
    fi
    r=$out/kubelet-root
    rm -rf "$r"
    mkdir -p "$r/etc/kubelet" "$r/var/lib/hostdevd-images"
    install -m 755 "$k8s/kubelet" "$r/usr/bin/kubelet" -D
    for f in containerd containerd-shim-runc-v2 ctr; do install -D -m 755 "$ctrd/$f" "$r/usr/bin/$f"; done
    copy_with_libs "$(command -v runc)" /usr/sbin/runc "$r"
    copy_with_libs "$(command -v socat)" /usr/bin/socat "$r"
    copy_with_libs /usr/lib/cni/loopback /usr/lib/cni/loopback "$r"
    cp "$box" "$r/var/lib/hostdevd-images/testbox.tar"
    echo "$name" >"$r/etc/kubelet/sandbox-image"
    (cd "$r" && find . -type f) | while read -r f; do
        [ ! -e "$out/root/$f" ] || rm -f "$r/$f"
    done
    (cd "$r" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$out/kubelet.cpio.tmp"
    mv "$out/kubelet.cpio.tmp" "$out/kubelet.cpio"
    rm -rf "$r"
}

# What a --launcher boot adds to the image: the modules of the launcher's disks (and a
# modules.dep that has them). Only for --launcher: other boots keep their smaller initramfs.
build_launcher() { # BUILDDIR
    local out=$1 r k f
    k=$(cat "$out/kernel-version")
    r=$out/launcher-root
    rm -rf "$r"
    # (the image's mtty in this tree's modules.dep too: this archive's replaces the image's)
    install -D -m 644 "$out/root/lib/modules/$k/extra/mtty.ko" "$r/lib/modules/$k/extra/mtty.ko"
    # shellcheck disable=SC2086 # lists of module names
    copy_modules "$k" "$r" $TREE_MODULES $LAUNCHER_MODULES
    (cd "$r" && find . -type f -name '*.ko*') | while read -r f; do [ ! -e "$out/root/$f" ] || rm -f "$r/$f"; done
    (cd "$r" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$out/launcher.cpio.tmp"
    mv "$out/launcher.cpio.tmp" "$out/launcher.cpio"
    rm -rf "$r"
}

# The launcher's binaries as a small ext4 image in the image's directory (boot --launcher-bin).
launcher_bin_image() { # DIR BUILDDIR: prints the image
    local src=$1 img=$2/launcher-bin.ext4 r f
    for f in virt-launcher virt-launcher-monitor; do [ -x "$src/$f" ] || die "--launcher-bin: no $src/$f"; done
    if [ ! -f "$img" ] || [ "$img" -ot "$src/virt-launcher" ] || [ "$img" -ot "$src/virt-launcher-monitor" ]; then
        r=$img.d
        rm -rf "$r"
        mkdir -p "$r"
        for f in "$src"/virt-*; do [ -x "$f" ] && [ -f "$f" ] && cp "$f" "$r/"; done
        mkfs.ext4 -q -F -L launcher-bin -d "$r" "$img.tmp" "$(($(du -sm "$r" | awk '{print $1}') * 11 / 10 + 8))M" >/dev/null
        mv "$img.tmp" "$img"
        rm -rf "$r"
    fi
    echo "$img"
}

vmm_linux_stale() { # BUILDDIR
    [ -f "$1/vmm-linux.cpio" ] || return 0
    [ "$1/vmm-linux.cpio" -ot "$1/initrd.img" ] && return 0
    [ -n "$(find "$ROOT/hack/qemu-nested" -newer "$1/vmm-linux.cpio" -print -quit)" ]
}

# The guest's userland (/init, busybox init's inittab, the boot script, the control loop, the
# agent supervisor, agentctl, ...): hack/qemu-guest/ is the image root's tree of these files.
# What the build decides goes to /etc/hostdevd/image.env, which the scripts source.
write_guest_files() { # root
    local r=$1 f mode
    (cd "$GUEST" && find . -type f | LC_ALL=C sort) | while read -r f; do
        mode=644
        [ -x "$GUEST/$f" ] && mode=755
        install -D -m $mode "$GUEST/$f" "$r/${f#./}"
    done
    echo "BOOT_MODULES=$(squote "$BOOT_MODULES")" >"$r/etc/hostdevd/image.env"
}

# --- running -------------------------------------------------------------------------------------

qemu_pid() { # dir: prints the pid of the running qemu of DIR, or nothing
    local f=$1/qemu.pid pid
    [ -f "$f" ] || return 0
    pid=$(cat "$f" 2>/dev/null) || return 0
    [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 0
    # Only a qemu of ours, for this directory: a recycled pid never gets signalled.
    if tr '\0' '\n' <"/proc/$pid/cmdline" | grep -qxF "socket,id=ctl,path=$1/ctl.sock,server=on,wait=off"; then
        echo "$pid"
    fi
}

squote() { # a value single-quoted for /bin/sh
    local s=${1//\'/\'\\\'\'}
    printf "'%s'" "$s"
}

cmd_boot() {
    [ $# -ge 1 ] || die "usage: boot DIR [OPTIONS]"
    local dir image kubeconfig="" node=qnode agent_args="" agent_env="" agent="" enabled=1
    local mem=768 smp=1 timeout=120 wait=1 watch="" extras=() x vmm=0 vmm_linux=0 sriov=0 hotplug=0
    local kubelet=0 kubelet_kubeconfig="" archives=() launcher=0 launcher_bin=""
    dir=$(realpath -m "$1")
    shift
    image=$dir
    while [ $# -gt 0 ]; do
        case $1 in
        --image) image=$(realpath -m "$2"); shift 2 ;;
        --kubeconfig) kubeconfig=$2; shift 2 ;;
        --node-name) node=$2; shift 2 ;;
        --agent-args) agent_args=$2; shift 2 ;;
        --agent-env) agent_env=$2; shift 2 ;;
        --agent) agent=$2; shift 2 ;;
        --extra) extras+=("$2"); shift 2 ;;
        --no-agent) enabled=0; shift ;;
        --vmm) vmm=1; shift ;;
        --sriov) sriov=1; shift ;;
        --hotplug) hotplug=1; shift ;;
        --kubelet) kubelet=1; shift ;;
        --launcher) launcher=1; shift ;;
        --launcher-bin) launcher=1; launcher_bin=$2; shift 2 ;;
        --kubelet-kubeconfig) kubelet_kubeconfig=$2; shift 2 ;;
        --image-archive) archives+=("$2"); shift 2 ;;
        --vmm-linux) vmm=1; vmm_linux=1; shift ;;
        --memory) mem=$2; shift 2 ;;
        --smp) smp=$2; shift 2 ;;
        --timeout) timeout=$2; shift 2 ;;
        --no-wait) wait=0; shift ;;
        --watch-pid) watch=$2; shift 2 ;;
        *) die "boot: unknown option $1" ;;
        esac
    done
    { [ -f "$image/vmlinuz" ] && [ -f "$image/initrd.img" ]; } || die "no image in $image (run: build $image)"
    need_qemu
    # --sriov: the qemu with igb (fetch_sriov_qemu), its modules and firmware
    local qemu=qemu-system-x86_64 qemu_env=() qemu_dirs=() q
    if [ $sriov -eq 1 ]; then
        q=$(fetch_sriov_qemu)
        if [ -n "$q" ]; then
            qemu=$q
            q=${q%/usr/bin/qemu-system-x86_64}
            qemu_env=("QEMU_MODULE_DIR=$q/usr/lib/x86_64-linux-gnu/qemu")
            qemu_dirs=(-L "$q/usr/share/qemu" -L "$q/usr/share/seabios")
        fi
    fi
    # --launcher: its root filesystem (a per-boot overlay: snapshot=on), its binaries' disk
    local ldisks=()
    if [ $launcher -eq 1 ]; then
        [ "$mem" -ge 2048 ] || mem=2048
        # shellcheck disable=SC2054 # commas are qemu's
        ldisks=(-drive "if=none,id=lroot,format=raw,snapshot=on,file=$("$HACK/launcher-rootfs.sh")"
            -device virtio-blk-pci,drive=lroot,id=lroot,addr=09.0,serial=launcher-root)
    fi
    mkdir -p "$dir"
    [ -z "$(qemu_pid "$dir")" ] || die "a node already runs in $dir (stop it first)"
    rm -f "$dir/ctl.sock" "$dir/qmp.sock" "$dir/qemu.pid"

    # The per-boot configuration: a small archive appended to the image's initramfs.
    local cfg=$dir/boot-root
    rm -rf "$cfg"
    mkdir -p "$cfg/etc/hostdevd"
    {
        echo "NODE_NAME=$(squote "$node")"
        echo "AGENT_ENABLED=$([ -n "$kubeconfig" ] && echo $enabled || echo 0)"
        echo "AGENT_ARGS=$(squote "$agent_args")"
        echo "AGENT_ENV=$(squote "$agent_env")"
        [ $sriov -eq 0 ] || echo "EXTRA_BOOT_MODULES=$(squote "$SRIOV_BOOT_MODULES")"
        echo "LAUNCHER=$launcher"
    } >"$cfg/etc/hostdevd/node.env"
    if [ -n "$kubeconfig" ]; then
        install -m 600 "$kubeconfig" "$cfg/etc/hostdevd/kubeconfig"
    fi
    if [ -n "$agent" ]; then
        install -D -m 755 "$agent" "$cfg/usr/bin/hostdevd"
    fi
    if [ -n "$kubelet_kubeconfig" ]; then
        install -D -m 600 "$kubelet_kubeconfig" "$cfg/etc/kubelet/kubeconfig"
    fi
    for x in ${archives[@]+"${archives[@]}"}; do
        [ -f "$x" ] || die "--image-archive: no file $x"
        install -D -m 644 "$x" "$cfg/var/lib/hostdevd-images/$(basename "$x")"
    done
    for x in ${extras[@]+"${extras[@]}"}; do
        case $x in /*:/* | [!/]*:/*) ;; *) die "--extra wants SRC:/DEST, not $x" ;; esac
        [ -f "${x%%:*}" ] || die "--extra: no file ${x%%:*}"
        install -D -m 755 "${x%%:*}" "$cfg/${x#*:}"
    done
    (cd "$cfg" && find . -mindepth 1 | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) >"$dir/boot.cpio"
    local parts=("$image/initrd.img")
    # The image's extras are built by the first boot that needs them; boots of one image may run
    # side by side (make test's qemu suites), so they build and read them one at a time.
    exec 9>"$image/.extras.lock"
    flock 9
    if [ $vmm -eq 1 ]; then
        [ -f "$image/vmm.cpio" ] || build_vmm "$image"
        parts+=("$image/vmm.cpio")
    fi
    if [ $vmm_linux -eq 1 ]; then
        if vmm_linux_stale "$image"; then build_vmm_linux "$image"; fi
        parts+=("$image/vmm-linux.cpio")
    fi
    if [ $sriov -eq 1 ]; then
        if [ ! -f "$image/sriov.cpio" ] || [ "$image/sriov.cpio" -ot "$image/initrd.img" ]; then
            build_sriov "$image"
        fi
        parts+=("$image/sriov.cpio")
    fi
    if [ $kubelet -eq 1 ]; then
        if [ ! -f "$image/kubelet.cpio" ] || [ "$image/kubelet.cpio" -ot "$image/initrd.img" ]; then
            build_kubelet "$image"
        fi
        parts+=("$image/kubelet.cpio")
    fi
    if [ $launcher -eq 1 ]; then
        if [ ! -f "$image/launcher.cpio" ] || [ "$image/launcher.cpio" -ot "$image/initrd.img" ]; then
            build_launcher "$image"
        fi
        parts+=("$image/launcher.cpio")
        # shellcheck disable=SC2054 # commas are qemu's
        [ -z "$launcher_bin" ] || ldisks+=(
            -drive "if=none,id=lbin,format=raw,readonly=on,file=$(launcher_bin_image "$launcher_bin" "$image")"
            -device virtio-blk-pci,drive=lbin,id=lbin,addr=0a.0,serial=launcher-bin)
    fi
    cat "${parts[@]}" "$dir/boot.cpio" >"$dir/initrd-boot.img"
    exec 9>&-
    [ -f "$dir/stick.img" ] || {
        truncate -s 16M "$dir/stick.img"
        printf 'hostdevd test stick\n' | dd of="$dir/stick.img" conv=notrunc status=none
    }

    local kernel=$image/vmlinuz
    [ -f "$image/vmlinux" ] && kernel=$image/vmlinux
    : >"$dir/console.log"
    # tsc=unstable: under TCG the TSC calibrates wrongly and the guest clock runs fast until the
    # watchdog drops it.
    local append="console=ttyS0 intel_iommu=on iommu=pt tsc=unstable panic=-1 ${QEMU_NODE_APPEND:-}"
    # shellcheck disable=SC2054 # commas are qemu's
    local args=(
        -name hostdevd-node,debug-threads=off
        -accel "${QEMU_NODE_ACCEL:-tcg}" -machine q35,kernel-irqchip=split -cpu max -m "$mem" -smp "$smp"
        -nodefaults -no-user-config -vga none -display none
        -device intel-iommu,intremap=on,caching-mode=on
        -kernel "$kernel" -initrd "$dir/initrd-boot.img" -append "$append"
        -chardev "file,id=con,path=$dir/console.log" -serial chardev:con
        -chardev "socket,id=ctl,path=$dir/ctl.sock,server=on,wait=off" -serial chardev:ctl
        -qmp "unix:$dir/qmp.sock,server=on,wait=off"
        "${qemu_dirs[@]}"
        "${QEMU_DEVICES[@]}"
        -drive "if=none,id=stick,format=raw,file=$dir/stick.img"
        -device usb-storage,id=stick,bus=xhci.0,port=3,drive=stick,serial=HOSTDEVD-STICK-1
        -pidfile "$dir/qemu.pid"
    )
    # shellcheck disable=SC2206
    args+=(${QEMU_NODE_QEMU_ARGS:-})
    [ $sriov -eq 0 ] || args+=("${SRIOV_DEVICES[@]}")
    [ $hotplug -eq 0 ] || args+=("${HOTPLUG_DEVICES[@]}")
    args+=(${ldisks[@]+"${ldisks[@]}"})
    printf '%q ' ${qemu_env[@]+"${qemu_env[@]}"} "$qemu" "${args[@]}" >"$dir/qemu.cmdline"
    echo >>"$dir/qemu.cmdline"
    date +%s.%N >"$dir/boot.started"
    env ${qemu_env[@]+"${qemu_env[@]}"} setsid "$qemu" "${args[@]}" </dev/null >"$dir/qemu.log" 2>&1 &
    local launcher=$!
    for _ in $(seq 1 100); do
        [ -S "$dir/ctl.sock" ] && [ -n "$(qemu_pid "$dir")" ] && break
        kill -0 $launcher 2>/dev/null || break
        sleep 0.1
    done
    local qpid
    qpid=$(qemu_pid "$dir")
    if [ -z "$qpid" ]; then
        cat "$dir/qemu.log" >&2
        die "qemu did not start"
    fi
    if [ -n "$watch" ]; then
        # Ends qemu when the process that booted it is gone (a killed test leaves no VM behind).
        (
            while kill -0 "$watch" 2>/dev/null && kill -0 "$qpid" 2>/dev/null; do sleep 2; done
            # only this boot's qemu: after a stop, DIR may have been booted again already
            [ "$(qemu_pid "$dir")" != "$qpid" ] || cmd_stop "$dir"
        ) </dev/null >/dev/null 2>&1 &
        disown
    fi
    [ $wait = 1 ] || return 0
    if ! python3 "$GUESTCTL" "$dir/ctl.sock" wait-ready --timeout "$timeout" --qemu-pid "$qpid" >/dev/null; then
        note "the guest's control channel did not answer within ${timeout}s; console:"
        tail -30 "$dir/console.log" >&2
        return 1
    fi
}

cmd_stop() {
    [ $# -ge 1 ] || die "usage: stop DIR"
    local dir pid
    dir=$(realpath -m "$1")
    pid=$(qemu_pid "$dir")
    if [ -n "$pid" ]; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
        while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
    fi
    rm -f "$dir/qemu.pid" "$dir/ctl.sock" "$dir/qmp.sock"
}

# kubeconfig NAME FILE: the guest's kubeconfig: https://10.0.2.2:<port of $K8S_SERVER> (the host's
# 127.0.0.1 seen from user-mode networking; the API server's certificate names that address), the
# CA from $K8S_CA, and a token of ServiceAccount hostdevd-system/hostdevd-agent bound to the Node
# NAME (so its requests carry authentication.kubernetes.io/node-name). Needs kubectl on PATH, the
# Node and the ServiceAccount.
# A kubeconfig for the guest: the API server at 10.0.2.2 (the host's 127.0.0.1 under user-mode
# networking; its certificate names that address), the CA embedded, user USER whose fields are
# CREDENTIALS (lines already indented under `user:`). Mode 600.
guest_kubeconfig() { # file user credentials
    (
        umask 077
        cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: qemu-node
  cluster:
    server: https://10.0.2.2:${K8S_SERVER##*:}
    certificate-authority-data: $(base64 -w0 <"$K8S_CA")
users:
- name: $2
  user:
$3
contexts:
- name: qemu-node
  context: {cluster: qemu-node, user: $2}
current-context: qemu-node
EOF
    )
}

cmd_kubeconfig() {
    [ $# -eq 2 ] || die "usage: kubeconfig NODE FILE"
    { [ -n "${K8S_SERVER:-}" ] && [ -n "${K8S_CA:-}" ]; } || die "K8S_SERVER and K8S_CA must be set (hack/cluster.sh env DIR)"
    local token
    token=$(kubectl create token hostdevd-agent -n hostdevd-system --bound-object-kind Node \
        --bound-object-name "$1" --duration "${QEMU_NODE_TOKEN_DURATION:-24h}") || return 1
    guest_kubeconfig "$2" hostdevd-agent "    token: $token"
}

# kubelet's identity in the guest: a client certificate system:node:NODE (groups system:nodes and
# system:masters, as hack/kubelet.sh's: the test API server has no Node authorizer) signed by the
# cluster's CA (K8S_CA's ca.key beside it), everything embedded.
cmd_kubelet_kubeconfig() {
    [ $# -eq 2 ] || die "usage: kubelet-kubeconfig NODE FILE"
    { [ -n "${K8S_SERVER:-}" ] && [ -n "${K8S_CA:-}" ]; } || die "K8S_SERVER and K8S_CA must be set (hack/cluster.sh env DIR)"
    local key=${K8S_CA%/*}/ca.key t
    [ -f "$key" ] || die "no CA key beside $K8S_CA"
    t=$(mktemp -d)
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/O=system:nodes/O=system:masters/CN=system:node:$1" \
        -keyout "$t/node.key" -out "$t/node.csr" 2>/dev/null || { rm -rf "$t"; die "openssl req failed"; }
    openssl x509 -req -in "$t/node.csr" -CA "$K8S_CA" -CAkey "$key" -CAcreateserial -CAserial "$t/ca.srl" \
        -days 2 -out "$t/node.crt" 2>/dev/null \
        -extfile <(printf 'extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature,keyEncipherment\n') ||
        { rm -rf "$t"; die "openssl x509 failed"; }
    guest_kubeconfig "$2" kubelet "    client-certificate-data: $(base64 -w0 <"$t/node.crt")
    client-key-data: $(base64 -w0 <"$t/node.key")"
    rm -rf "$t"
}

cmd_status() {
    local dir pid
    dir=$(realpath -m "$1")
    pid=$(qemu_pid "$dir")
    [ -n "$pid" ] || { echo "stopped"; return 1; }
    echo "running: qemu pid $pid, rss $(awk '/VmRSS/{print $2, $3}' "/proc/$pid/status")"
}

main() {
    [ $# -ge 1 ] || die "usage: $0 build|boot|stop|exec|wait-ready|reboot|hmp|status|devices ..."
    local cmd=$1
    shift
    case $cmd in
    build) cmd_build "$@" ;;
    boot) cmd_boot "$@" ;;
    stop) cmd_stop "$@" ;;
    status) [ $# -eq 1 ] || die "usage: status DIR"; cmd_status "$1" ;;
    kubeconfig) cmd_kubeconfig "$@" ;;
    kubelet-kubeconfig) cmd_kubelet_kubeconfig "$@" ;;
    devices) print_devices ;;
    kernel) fetch_kernel ;;
    exec | wait-ready | reboot)
        [ $# -ge 1 ] || die "usage: $cmd DIR ..."
        local dir
        dir=$(realpath -m "$1")
        shift
        exec python3 "$GUESTCTL" "$dir/ctl.sock" "$cmd" "$@"
        ;;
    hmp)
        [ $# -ge 2 ] || die "usage: hmp DIR 'COMMAND'"
        exec python3 "$GUESTCTL" "$(realpath -m "$1")/qmp.sock" hmp "$2"
        ;;
    -h | --help | help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' ;;
    *) die "unknown command $cmd" ;;
    esac
}

main "$@"
