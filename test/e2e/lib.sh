# shellcheck shell=bash disable=SC2034 # variables set here are for the tests
# test/e2e/lib.sh - end-to-end helpers: qemu test nodes (hack/qemu-node.sh) running the agent
# against the private control plane of test/integration/lib.sh (whose assertions, `eventually`,
# `finish` and `cluster_start` this file brings in).
#
#   cluster_start                    the control plane (test/integration/lib.sh)
#   agent_rbac                       namespace hostdevd-system, ServiceAccount hostdevd-agent, its
#                                    RBAC and the admission policies, from manifests/
#   node_kubeconfig NAME FILE        a kubeconfig for the guest: https://10.0.2.2:PORT, the CA, a
#                                    token of hostdevd-agent bound to the Node NAME
#   node_boot NAME [BOOT OPTIONS]    image built once per run, then boots node NAME (with the agent
#                                    when a control plane runs) and waits for the control channel;
#                                    sets NODE_DIR and BOOT_SECONDS; further options go to
#                                    `hack/qemu-node.sh boot` (--agent-args "...", --no-agent, ...)
#   node_use NAME                    make NAME the node that guest/node_* talk to
#   guest CMD...                     run CMD (one shell command line) in the guest; its output on
#                                    stdout, its exit status returned (GUEST_TIMEOUT, default 60 s)
#   guest_agent_ready                the agent's /readyz answers ok
#   node_reboot [TIMEOUT]            `reboot -f` in the guest, back when its control channel is
#                                    (within TIMEOUT s, default 120); sets REBOOT_SECONDS
#   node_stop [NAME]                 stop a node (all of them on exit)
#   node_logs [NAME]                 copy the guest's agent log into NODE_DIR, print its tail
#   node_hmp 'COMMAND'               qemu monitor command (e.g. device_add / device_del for USB)
#   claim ADDRESS, name_of, field ADDRESS JSONPATH, enabled, reason, message, has_reason,
#   claim_gone, guest_driver ADDRESS, on_driver ADDRESS DRIVER
#                                    a PCIDeviceClaim of $NODE's device ADDRESS and its state
#   vmm_start 'ARGS'                 (a node booted with --vmm) a nested machine in the guest, as
#                                    libvirt starts one, with the host-device ARGS (-device
#                                    vfio-pci,host=... / usb-host,...); QMP through a FIFO
#   vmm_qmp 'JSON' / vmm_hmp 'CMD'   a QMP command to it (answers land in the guest's /tmp/vmm.out)
#   vmm_bars VENDOR DEVICE           "bar:size ..." of that function in its query-pci (decimal ids)
#   vmm_bios_saw VVVV:DDDD           its SeaBIOS logged that function in its PCI scan
#   vmm_holds_group N                it holds /dev/vfio/N open
#   vmm_quit / vmm_gone              quit it / whether it has exited
#   vmm_linux_start 'ARGS'           (a node booted with --vmm-linux) the VMM boots the nested Linux
#                                    (the node's kernel, hack/qemu-nested/init) with the host-device
#                                    ARGS; its serial console in the guest's /tmp/vmm.console
#   vmm_linux_wait S                 wait (polling every 5 s) until the nested init is done or the
#                                    VMM is gone; vmm_linux_console prints the init's "nested:" lines
#   guest_timed 'CMD'                CMD in the guest; prints the guest's own seconds for it
#   mtty_load                        the kernel's mtty sample (every image's module tree has it,
#                                    not loaded at boot): modprobe mtty (with mdev, vfio) and
#                                    vfio_iommu_type1; parent /sys/class/mdev_bus/mtty; prints the
#                                    guest's seconds for it
#   mdev_avail TYPE...               available_instances of mtty's TYPEs (mtty-1, mtty-2), one line
#   mdev_create TYPE UUID            an instance by the sysfs write (the infrastructure's own check;
#                                    the agent creates them itself); prints the guest's seconds
#   mdev_exists UUID / mdev_group UUID   in /sys/bus/mdev/devices / its IOMMU group number
#   mdev_remove_start UUID           write 1 to its `remove` in the background (the kernel makes
#                                    the writer wait while a VMM holds the device); mdev_remove_rc
#                                    prints the write's status once it returned, mdev_remove_waits
#                                    says the writer sleeps in vfio_unregister_group_dev
#   vmm_start_mdev UUID              vmm_start with -device vfio-pci,sysfsdev=/sys/bus/mdev/devices/UUID
#                                    (vmm_bios_saw 4348:3253: SeaBIOS found mtty's serial card)
#   vfio_group_holders N             "PID COMM" of each guest process with /dev/vfio/N open
#
# Every node is stopped when the test exits, before the control plane (chained into
# cluster_stop, which lib.sh's EXIT trap runs). When a check failed, the agent's log and the tail
# of the console are kept in the node's directory (with KEEP_FAILED_STATE=1 the whole test
# directory stays).
# shellcheck source=test/integration/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../integration/lib.sh"

QEMU_NODE=$ROOT/hack/qemu-node.sh
GUESTCTL=$ROOT/test/e2e/guestctl.py
E2E_AGENT=${E2E_AGENT:-$ROOT/bin/hostdevd}
E2E_IMAGE=${E2E_IMAGE:-}      # a prebuilt image directory (else built once per run)
E2E_WORK=""                   # where node directories go when there is no TEST_DIR
E2E_NODES=()                  # names of the booted nodes
declare -A E2E_NODE_DIRS=()
NODE_DIR=""
NODE_NAME=""
BOOT_SECONDS=""
REBOOT_SECONDS=""
GUEST_TIMEOUT=${GUEST_TIMEOUT:-60}

e2e_workdir() {
    if [ -n "$TEST_DIR" ]; then
        echo "$TEST_DIR"
    else
        [ -n "$E2E_WORK" ] || E2E_WORK=$(mktemp -d "${TMPDIR:-/tmp}/hostdevd-e2e-$SUITE.XXXXXX")
        echo "$E2E_WORK"
    fi
}

# Builds the image (kernel + initramfs with the agent) once per run.
e2e_image() {
    [ -n "$E2E_IMAGE" ] && [ -f "$E2E_IMAGE/initrd.img" ] && return 0
    if [ ! -x "$E2E_AGENT" ]; then
        make -C "$ROOT" bin/hostdevd >/dev/null || { echo "cannot build $E2E_AGENT" >&2; return 1; }
    fi
    E2E_IMAGE=$(e2e_workdir)/qemu-image
    local t0=$SECONDS
    "$QEMU_NODE" build "$E2E_IMAGE" "$E2E_AGENT" >"$(e2e_workdir)/qemu-build.log" 2>&1 ||
        { cat "$(e2e_workdir)/qemu-build.log" >&2; return 1; }
    echo "  node image built in $((SECONDS - t0))s ($(cat "$E2E_IMAGE/kernel-version"))"
}

# The agent's identity and permissions: the project's namespace, RBAC and admission policies,
# as `kubectl apply -k manifests/` installs them (without the workloads: no kubelet runs them).
agent_rbac() {
    kubectl apply -f "$ROOT/manifests/namespace.yaml" -f "$ROOT/manifests/agent-rbac.yaml" \
        -f "$ROOT/manifests/policies-agent.yaml" -f "$ROOT/manifests/policies-devices.yaml" \
        -f "$ROOT/manifests/policies-claims.yaml" >/dev/null
}

# node_kubeconfig NAME FILE: the guest reaches the host's 127.0.0.1 at 10.0.2.2 (the API server's
# certificate names that address). The Node NAME must exist (the token is bound to it).
node_kubeconfig() {
    kubectl get serviceaccount hostdevd-agent -n hostdevd-system >/dev/null 2>&1 || agent_rbac || return 1
    QEMU_NODE_TOKEN_DURATION=2h "$QEMU_NODE" kubeconfig "$1" "$2"
}

node_use() {
    NODE_NAME=$1
    NODE_DIR=${E2E_NODE_DIRS[$1]:?no node $1}
}

node_boot() {
    local name=$1 dir
    shift
    e2e_image || return 1
    dir=$(e2e_workdir)/node-$name
    mkdir -p "$dir"
    local opts=(--image "$E2E_IMAGE" --node-name "$name")
    if [ -n "${K8S_SERVER:-}" ]; then
        node_kubeconfig "$name" "$dir/kubeconfig" || return 1
        opts+=(--kubeconfig "$dir/kubeconfig")
    fi
    [ -n "$(trap -p EXIT)" ] || trap cluster_stop EXIT
    E2E_NODES+=("$name")
    E2E_NODE_DIRS[$name]=$dir
    node_use "$name"
    "$QEMU_NODE" boot "$dir" "${opts[@]}" --watch-pid $$ "$@" || return 1
    date +%s.%N >"$dir/boot.ready"
    BOOT_SECONDS=$(awk -v a="$(cat "$dir/boot.ready")" -v b="$(cat "$dir/boot.started")" \
        'BEGIN {printf "%.1f", a - b}')
}

guest() {
    python3 "$GUESTCTL" "$NODE_DIR/ctl.sock" exec --timeout "$GUEST_TIMEOUT" -- "$*"
}

guest_agent_ready() { # (wget fails on the 503 of a not yet ready agent)
    guest 'wget -qO- http://127.0.0.1:9808/readyz' 2>/dev/null | grep -q '^ok'
}

node_reboot() {
    local out
    out=$(python3 "$GUESTCTL" "$NODE_DIR/ctl.sock" reboot --timeout "${1:-300}") || return 1
    REBOOT_SECONDS=$out
}

node_hmp() {
    "$QEMU_NODE" hmp "$NODE_DIR" "$1"
}

node_logs() {
    local name=${1:-$NODE_NAME} dir
    dir=${E2E_NODE_DIRS[$name]:-}
    [ -n "$dir" ] || return 0
    python3 "$GUESTCTL" "$dir/ctl.sock" exec --timeout 10 -- \
        'agentctl status; cat /var/log/hostdevd.log' >"$dir/hostdevd.log" 2>&1
    echo "--- node $name: agent log (tail; all in $dir/hostdevd.log)"
    tail -25 "$dir/hostdevd.log"
    echo "--- node $name: console (tail; all in $dir/console.log)"
    tail -10 "$dir/console.log"
}

node_stop() {
    local name=${1:-$NODE_NAME} dir
    dir=${E2E_NODE_DIRS[$name]:-}
    [ -n "$dir" ] || return 0
    "$QEMU_NODE" stop "$dir"
}

e2e_cleanup() {
    local n
    for n in "${E2E_NODES[@]}"; do
        if [ "$FAILED" -gt 0 ] && [ -S "${E2E_NODE_DIRS[$n]}/ctl.sock" ]; then
            node_logs "$n"
        fi
        node_stop "$n"
    done
    E2E_NODES=()
    if [ -n "$E2E_WORK" ]; then
        if [ "$FAILED" -gt 0 ] && [ -n "${KEEP_FAILED_STATE:-}" ]; then
            echo "state kept in $E2E_WORK"
        else
            rm -rf "$E2E_WORK"
        fi
    fi
}

# Nodes stop before the control plane goes (lib.sh's EXIT trap runs cluster_stop).
eval "$(declare -f cluster_stop | sed '1s/^cluster_stop/_e2e_cluster_stop/')"
cluster_stop() {
    e2e_cleanup
    _e2e_cluster_stop
}

# --- PCIDeviceClaims of $NODE's devices ------------------------------------------------------------
name_of() { local a=${1//:/}; echo "$NODE-${a//./}"; }
CLAIMS=/apis/devices.harvesterhci.io/v1beta1/pcideviceclaims
claim() {
    kapi POST $CLAIMS "$(printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: %s}\nspec: {address: "%s", nodeName: %s}\n' \
        "$(name_of "$1")" "$1" "$NODE")" >/dev/null
}
field() { kubectl get pcideviceclaim "$(name_of "$1")" -o jsonpath="$2" 2>/dev/null; }
# The polled ones by curl and jq (lib.sh's kget): a wait polls them up to once a second.
enabled() { [ "$(kget pcideviceclaim "$(name_of "$1")" .status.passthroughEnabled)" = true ]; }
ready_field() { kget pcideviceclaim "$(name_of "$1")" ".status.conditions[]? | select(.type == \"Ready\") | .$2"; }
reason() { ready_field "$1" reason; }
message() { ready_field "$1" message; }
has_reason() { [ "$(reason "$1")" = "$2" ]; }
claim_gone() { ! kexists pcideviceclaim "$(name_of "$1")"; }
guest_driver() { guest "basename \$(readlink /sys/bus/pci/devices/$1/driver) 2>/dev/null"; }
on_driver() { [ "$(guest_driver "$1")" = "$2" ]; }

# --- a VMM in the guest (node_boot ... --vmm) -----------------------------------------------------
# The nested machine, as virt-launcher's libvirt starts one for a hostdev of `managed='no'` (the
# device already on vfio-pci, or a USB device's node): a small PC with no default devices,
# SeaBIOS's debug console in a file, QMP on stdin/stdout through a FIFO the test writes to.
vmm_start() { # host-device arguments
    guest "rm -f /tmp/vmm.*; mkfifo /tmp/vmm.in
sleep 100000 >/tmp/vmm.in & echo \$! >/tmp/vmm.hold
qemu-system-x86_64 -name vm0 -accel tcg -machine pc -m 64 -nodefaults -no-user-config \
  -display none -chardev file,id=dbg,path=/tmp/vmm.bios -device isa-debugcon,iobase=0x402,chardev=dbg \
  -qmp stdio $* </tmp/vmm.in >/tmp/vmm.out 2>/tmp/vmm.err & echo \$! >/tmp/vmm.pid
echo '{\"execute\":\"qmp_capabilities\"}' >/tmp/vmm.in"
}
vmm_qmp() { guest "echo '$1' >/tmp/vmm.in"; }
vmm_hmp() { vmm_qmp "{\"execute\":\"human-monitor-command\",\"arguments\":{\"command-line\":\"$1\"}}"; }
vmm_query() { vmm_qmp '{"execute":"query-pci"}'; }
vmm_quit() { guest "echo '{\"execute\":\"quit\"}' >/tmp/vmm.in; sleep 1; kill \$(cat /tmp/vmm.hold) 2>/dev/null; true"; }
vmm_gone() { ! guest "kill -0 \$(cat /tmp/vmm.pid) 2>/dev/null"; }
vmm_bars() { # vendor device (decimal)
    guest "cat /tmp/vmm.out" | jq -r --argjson v "$1" --argjson d "$2" 'select(.return | type == "array")
        | .return[].devices[] | select(.id.vendor == $v and .id.device == $d)
        | [.regions[] | "\(.bar):\(.size)"] | join(" ")' 2>/dev/null
}
vmm_bios_saw() { guest "grep -q 'PCI: init bdf=.* id=$1' /tmp/vmm.bios"; }
vmm_holds_group() { guest "ls -l /proc/\$(cat /tmp/vmm.pid)/fd | grep -q ' /dev/vfio/$1\$'"; }

# --- nested Linux helpers
# The VMM above booting a Linux (hack/qemu-node.sh boot --vmm-linux): the node's own kernel and
# the nested initramfs from the guest's /usr/share/vmm-linux/, the console on the first serial
# port in a file. Its /init loads e1000e, prints "nested: ..." lines (the PCI functions, their
# drivers and netdevs) and powers off, which ends the VMM (-no-reboot: a panic ends it too). More
# memory than vmm_start's 64 MB: the kernel unpacks itself and the initramfs (VMM_LINUX_MEMORY).
# cryptomgr.notests skips the crypto self-tests at boot (13 s of one verbose nested boot).
vmm_linux_start() { # host-device arguments
    guest "rm -f /tmp/vmm.*
qemu-system-x86_64 -name vm0 -accel tcg -machine pc -m ${VMM_LINUX_MEMORY:-256} -nodefaults \
  -no-user-config -display none -no-reboot \
  -kernel /usr/share/vmm-linux/vmlinuz -initrd /usr/share/vmm-linux/initrd.img \
  -append 'console=ttyS0 quiet panic=-1 tsc=unstable cryptomgr.notests' \
  -chardev file,id=con,path=/tmp/vmm.console -serial chardev:con \
  $* </dev/null >/tmp/vmm.out 2>/tmp/vmm.err & echo \$! >/tmp/vmm.pid"
}
vmm_linux_console() { guest "tr -d '\\r' </tmp/vmm.console | grep '^nested: '"; }
vmm_linux_done() { guest "grep -q '^nested: done' /tmp/vmm.console"; }
vmm_linux_wait() { # seconds: every 5 s, not eventually's 0.5 s (each poll costs the busy node)
    local deadline=$((SECONDS + $1))
    until vmm_linux_done || vmm_gone; do
        [ $SECONDS -lt $deadline ] || return 1
        sleep 5
    done
}
vmm_linux_kill() { guest "kill \$(cat /tmp/vmm.pid) 2>/dev/null; true"; }

# --- mediated devices: the kernel's mtty sample (hack/mtty-build.sh) --------------------------------
# mtty.ko is in every image's module tree (extra/), with mdev, not loaded at boot: other suites see
# no new device. Its parent "mtty" (not a PCI device) has types mtty-1 (one port) and mtty-2 (two)
# over one pool of 24 ports. A test loads it when it needs it; the agent then sees
# /sys/class/mdev_bus/mtty. vfio_iommu_type1 is what a VMM's container needs for an mdev (the
# agent loads it too when it starts).
MDEV_BUS=/sys/bus/mdev/devices
# guest_timed 'CMD': CMD in the guest (its stdout dropped); prints the guest's own seconds for it
# (its uptime clock: 10 ms steps, no control channel in it); fails as CMD does.
guest_timed() {
    guest "a=\$(cut -d' ' -f1 /proc/uptime); { $1; } >/dev/null || exit \$?
awk -v a=\$a '{printf \"%.2f\\n\", \$1 - a}' /proc/uptime"
}
mtty_load() { guest_timed 'modprobe mtty && modprobe vfio_iommu_type1 && test -d /sys/class/mdev_bus/mtty/mdev_supported_types'; }
mdev_avail() { # types...: their available_instances, on one line
    guest "for t in $*; do cat /sys/class/mdev_bus/mtty/mdev_supported_types/\$t/available_instances; done" | xargs
}
mdev_create() { guest_timed "echo $2 >/sys/class/mdev_bus/mtty/mdev_supported_types/$1/create"; } # type uuid
mdev_exists() { guest "test -e $MDEV_BUS/$1"; }
mdev_group() { guest "basename \$(readlink $MDEV_BUS/$1/iommu_group)"; }
mdev_remove_start() {
    guest "rm -f /tmp/mdev.rm.rc; (echo 1 >$MDEV_BUS/$1/remove; echo \$? >/tmp/mdev.rm.rc) </dev/null >/dev/null 2>&1 &
echo \$! >/tmp/mdev.rm.pid"
}
mdev_remove_rc() { guest "cat /tmp/mdev.rm.rc 2>/dev/null"; }
mdev_remove_waits() { guest "grep -qx vfio_unregister_group_dev /proc/\$(cat /tmp/mdev.rm.pid)/wchan"; }
vmm_start_mdev() { vmm_start "-device vfio-pci,sysfsdev=$MDEV_BUS/$1,id=hostdev0"; }
vfio_group_holders() {
    guest "for p in /proc/[0-9]*; do ls -l \$p/fd 2>/dev/null | grep -q ' /dev/vfio/$1\$' &&
    echo \${p#/proc/} \$(cat \$p/comm); done; true"
}
