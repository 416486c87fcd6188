# shellcheck shell=bash disable=SC2034 # variables set here are for the tests
# test/e2e/launcher-lib.sh - KubeVirt v1.9.0's own virt-launcher in a qemu node (sourced after
# test/e2e/lib.sh): libvirt 11.3 and qemu 10.0 from Debian's backports in the launcher's root
# filesystem (hack/launcher-rootfs.sh, a disk of the node), the launcher's binaries on a second
# disk, run by the guest's /sbin/launcher-run in standalone mode (the VMI in STANDALONE_VMI, no
# virt-handler) with virt-launcher-monitor as PID 1 of its own PID namespace.
#
#   launcher_node_boot NAME [BOOT OPTIONS]  node_boot with --launcher-bin (LAUNCHER_BIN: the
#                                    directory with virt-launcher and virt-launcher-monitor;
#                                    default: hack/kubevirt-build.sh's)
#   launcher_vmi NAME UID [HOSTDEV...] a fully defaulted VMI as YAML on stdout (virt-api's
#                                    defaults written out: q35, memory, CPU topology, firmware
#                                    UUID, no pod interface); HOSTDEV is NAME=RESOURCE, one
#                                    spec.domain.devices.hostDevices entry each
#   launcher_env_var PREFIX RESOURCE the variable a device plugin's Allocate sets for RESOURCE
#                                    (KubeVirt's ResourceNameToEnvVar: PCI_RESOURCE_<NAME>, ...)
#   launcher_start ENVFILE VMIFILE   the host's files into the guest, the launcher started there
#                                    (LAUNCHER_T0: the host clock at the start)
#   launcher_state                   libvirt's state of the domain (running, shut off, ...)
#   launcher_running                 the domain runs
#   launcher_domxml                  the domain's XML (virsh dumpxml)
#   launcher_qemu_cmdline            the launcher's qemu's command line, one argument a line
#   launcher_qemu_holds_group N      that qemu holds /dev/vfio/N open
#   launcher_hmp 'CMD'               a qemu monitor command through libvirt (e.g. info pci)
#   launcher_vm_lists VVVV:DDDD      the VM's PCI bus (info pci) has that function
#   launcher_vm_bars VVVV:DDDD       its BAR lines in info pci (addresses the VM's SeaBIOS mapped)
#   launcher_stop [S]                SIGTERM to the monitor, as kubelet stops the Pod; waits until
#                                    it is gone (SIGKILL after S s)
#   launcher_gone                    no monitor, no qemu
#   launcher_log                     the launcher's output (and libvirt's, which it relays)
#   launcher_vfio_bind ADDRESS       by hand, without the agent: ADDRESS to vfio-pci
#                                    (driver_override, unbind, bind)

LAUNCHER_BIN=${LAUNCHER_BIN:-}
LAUNCHER_T0=""

launcher_node_boot() {
    local name=$1
    shift
    if [ -z "$LAUNCHER_BIN" ]; then
        LAUNCHER_BIN=$("$ROOT/hack/kubevirt-build.sh" virt-launcher virt-launcher-monitor) || return 1
    fi
    node_boot "$name" --launcher-bin "$LAUNCHER_BIN" "$@"
}

launcher_env_var() { # prefix resource
    local v=${2^^}
    v=${v//\//_}
    echo "${1}_${v//./_}"
}

launcher_vmi() { # name uid [name=resource...]
    local name=$1 uid=$2 h
    shift 2
    cat <<YAML
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata:
  name: $name
  namespace: default
  uid: $uid
spec:
  terminationGracePeriodSeconds: 0
  domain:
    machine:
      type: q35
    cpu:
      cores: 1
      sockets: 1
      threads: 1
    memory:
      guest: 128Mi
    resources:
      requests:
        memory: 128Mi
    firmware:
      uuid: $uid
    features:
      acpi:
        enabled: true
    devices:
      autoattachPodInterface: false
      autoattachGraphicsDevice: false
      autoattachMemBalloon: false
      autoattachSerialConsole: true
YAML
    [ $# -gt 0 ] || return 0
    echo "      hostDevices:"
    for h in "$@"; do
        printf '      - name: %s\n        deviceName: %s\n' "${h%%=*}" "${h#*=}"
    done
}

# FILE to the guest's PATH (text; one guest command)
launcher_put() { # file path
    guest "cat >$2 <<'LAUNCHER_EOF'
$(cat "$1")
LAUNCHER_EOF"
}

launcher_start() { # envfile vmifile
    launcher_put "$1" /tmp/launcher.env || return 1
    launcher_put "$2" /tmp/launcher-vmi.yaml || return 1
    LAUNCHER_T0=$(date +%s.%N)
    guest "launcher-run start /tmp/launcher.env /tmp/launcher-vmi.yaml"
}

launcher_state() { guest "launcher-run state" 2>/dev/null | sed -n '1s/[[:space:]]*$//p'; }
launcher_running() { [ "$(launcher_state)" = running ]; }
launcher_domxml() { guest "launcher-run domxml"; }
launcher_qemu_cmdline() { guest "launcher-run qemu-cmdline"; }
launcher_qemu_holds_group() { # n
    # (the link reads /launcher/dev/vfio/N from the node's root)
    guest "p=\$(launcher-run qemu-pid) && ls -l /proc/\$p/fd | grep -q '/dev/vfio/$1\$'"
}
launcher_hmp() { guest "launcher-run hmp '$1'"; }
launcher_vm_lists() { # vvvv:dddd (info pci: "Ethernet controller: PCI device 8086:10d3")
    launcher_hmp 'info pci' | grep -qi "PCI device $1"
}
launcher_vm_bars() { # vvvv:dddd
    launcher_hmp 'info pci' | awk -v id="$1" '/^  Bus/ {f = 0} index(tolower($0), "pci device " id) {f = 1} f && /BAR[0-9]/'
}
launcher_stop() { GUEST_TIMEOUT=$((${1:-30} + 30)) guest "launcher-run stop ${1:-30}"; }
launcher_gone() { guest "! launcher-run status >/dev/null && [ -z \"\$(launcher-run qemu-pid)\" ]"; }
launcher_log() { guest "launcher-run log"; }
launcher_vfio_bind() { # address
    guest "modprobe vfio-pci && modprobe vfio_iommu_type1 && echo vfio-pci >/sys/bus/pci/devices/$1/driver_override &&
        { [ ! -e /sys/bus/pci/devices/$1/driver ] || echo $1 >/sys/bus/pci/devices/$1/driver/unbind; } &&
        echo $1 >/sys/bus/pci/drivers/vfio-pci/bind && basename \$(readlink /sys/bus/pci/devices/$1/driver)"
}
