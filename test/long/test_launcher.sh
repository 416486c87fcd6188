#!/usr/bin/env bash
# test/long/test_launcher.sh - KubeVirt's own virt-launcher starts the VM with the claimed devices
# (`make test-long`: cases 1-3 about 4-6 minutes of TCG node time, the mdev case 4 two more
# launcher runs; on a cold cache, a 6-minute build of virt-launcher and a 75 MB package fetch). A qemu node (hack/qemu-node.sh --launcher) holds
# KubeVirt v1.9.0's virt-launcher and virt-launcher-monitor (hack/kubevirt-build.sh, from the Go
# module proxy) in a root filesystem of Debian bookworm-backports' libvirt 11.3 and QEMU 10.0
# (hack/launcher-rootfs.sh); the launcher runs there in its standalone mode (the VMI as YAML in
# STANDALONE_VMI, as virt-handler would hand it over) in a chroot, with the environment a
# container would get:
#   1. a VMI without host devices: the control -- no <hostdev> in the domain, no vfio-pci in
#      QEMU's arguments, no 8086:10d3 in the VM;
#   2. device plugins: the e1000e (PCIDeviceClaim) and the USB keyboard (USBDeviceClaim) claimed,
#      Allocate called by kubelet's own device manager (test/kubeletpeer in the node), the VMI's
#      hostDevices naming the two resources and the launcher's environment exactly the variables
#      Allocate answered: KubeVirt writes <hostdev type='pci' managed='no'> and <hostdev
#      type='usb'>, libvirt starts QEMU with vfio-pci host=0000:00:04.0 and usb-host, QEMU holds
#      /dev/vfio/<group>, the VM's firmware assigned the e1000e's BARs (QEMU's `info pci`); the
#      claim deleted while the VM runs waits (DeviceInUse naming QEMU), the VM stopped -> the
#      device back on e1000e;
#   3. DRA: a ResourceClaim allocated to the e1000e, prepared through the agent's DRA plugin
#      (grpctool plays kubelet), the CDI spec's mount applied to the launcher's filesystem as a
#      runtime would, the VMI's host device naming the claim (HostDevicesWithDRA): the same
#      outcomes, and unprepare refused while QEMU holds the device, then restoring e1000e;
#   4. a mediated device (issue 45): the kernel's mtty sample loaded in the node, the agent's free
#      VGPUDevice slot enabled with type mtty-2 and a UUID (the agent creates the instance), its
#      device plugin's Allocate called by kubelet's device manager: exactly
#      MDEV_PCI_RESOURCE_DEVICES_HARVESTERHCI_IO_MTTY-2=<uuid> and the group's device nodes; the
#      VMI's hostDevices naming devices.harvesterhci.io/mtty-2: KubeVirt writes <hostdev
#      mode='subsystem' type='mdev' model='vfio-pci'> with the UUID, libvirt starts QEMU with
#      vfio-pci sysfsdev=/sys/bus/mdev/devices/<uuid>, QEMU holds /dev/vfio/<group>, the VM's
#      firmware programmed the card's two I/O BARs (4348:3253 in `info pci`); the VGPUDevice
#      disabled while the VM runs waits (DeviceInUse naming QEMU, no remove written), the VM
#      stopped -> the instance removed. Then DRA: enabled again (the same UUID), mdev-<uuid> in the
#      node's pool, a ResourceClaim of class mdev.vfio-pci.hostdevd.io prepared, the VMI's host
#      device naming the claim: the same domain, QEMU and VM evidence from the metadata's mdevUUID;
#      unprepared after the launcher, disabled -> removed.
# LAUNCHER_CASES picks the cases and their order (default "control plugins dra mdev";
# LAUNCHER_CASES=mdev boots the node and runs only case 4).
# Prints: launcher start -> device in the VM, VM stopped -> device restored (instance removed),
# and libvirt's QEMU probe on a cold and a filled capabilities cache.
# shellcheck disable=SC2317 # (functions called through eventually, and the cases after a finish)
SUITE=long-launcher
# shellcheck source=test/e2e/lib.sh
. "$(dirname "$0")/../e2e/lib.sh"
cd "$ROOT" || exit 1
NODE=qlaunch
NIC=0000:00:04.0 # e1000e
KBD=$NODE-0627-0001-1-1
PCI_CLAIM=$NODE-000000040
DRIVER=vfio-pci.hostdevd.io
DEV=pci-0000-00-04-0
KDIR=/var/lib/kubelet
PDIR=$KDIR/plugins/$DRIVER
SOCK=$PDIR/dra.sock
CDI=/var/run/cdi
GRPCTOOL=$ROOT/build/release/grpctool
# shellcheck source=test/e2e/launcher-lib.sh
. "$(dirname "$0")/../e2e/launcher-lib.sh"

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
[ -x "$GRPCTOOL" ] || make -C "$ROOT" build/release/grpctool >/dev/null ||
    { fail "build/release/grpctool builds"; finish; }
PEER=$(hack/kubeletpeer-build.sh) || { fail "kubelet's device manager builds (hack/kubeletpeer-build.sh)"; finish; }
LAUNCHER_BIN=$(hack/kubevirt-build.sh virt-launcher virt-launcher-monitor) ||
    { fail "KubeVirt v1.9.0's virt-launcher builds (hack/kubevirt-build.sh)"; finish; }
cluster_start
install_crds
create_node "$NODE"
expect_ok "the DeviceClasses are applied" kubectl apply -f manifests/deviceclasses.yaml

echo "--- boot (the launcher's root filesystem and binaries as disks of the node)"
# kubelet makes plugins_registry before any plugin starts: the agent is started after it.
if launcher_node_boot "$NODE" --no-agent --memory 2048 --extra "$GRPCTOOL:/usr/bin/grpctool" \
    --extra "$PEER:/usr/bin/kubeletpeer" --agent-args "--kubelet-dir $KDIR --cdi-dir $CDI"; then
    pass "node $NODE boots with the launcher's disks (${BOOT_SECONDS}s)"; else fail "node boots"; finish; fi
OUT=$(guest "mkdir -p $KDIR/plugins_registry && agentctl start" 2>&1)
if eventually 120 guest_agent_ready; then pass "agent ready"; else fail "agent ready" "$OUT"$'\n'"$(node_logs)"; finish; fi
GROUP=$(guest "basename \$(readlink /sys/bus/pci/devices/$NIC/iommu_group)")

# What the VM's firmware made of the e1000e: QEMU's `info pci` of the VM gives a BAR an address
# only once the firmware (SeaBIOS) has found the function in its PCI scan and programmed it
# (0xffffffffffffffff before). Prints "8086:10d3 BAR0=0x..." once programmed.
# (KubeVirt would also relay SeaBIOS's own log with VIRT_LAUNCHER_LOG_VERBOSITY above 5, through
# a <qemu:commandline> isa-debugcon; libvirt 11.3 here drops that element: not used.)
vm_e1000e() {
    launcher_vm_bars 8086:10d3 | awk '/BAR0: 32 bit memory at/ && $6 !~ /^0xffffffff/ {print "8086:10d3 BAR0=" $6}'
}
vm_has_e1000e() { [ -n "$(vm_e1000e)" ]; }
vm_bars() { launcher_vm_bars 8086:10d3 | grep -c 'BAR[0-9]'; }
# launcher_run NAME ENVFILE VMIFILE: the launcher started, T_RUN its time to a running domain.
# KubeVirt's launcher gives the libvirtd it starts 10 s to answer (createLibvirtConnection in
# cmd/virt-launcher) and exits when it does not: a node starved of CPU by other work on the host
# misses that. Then the launcher is started again (at most five times, said in the output), not
# waited for in vain.
launcher_exited() { guest "grep -q 'virt-launcher-monitor: Exiting' /var/log/launcher.log"; }
launcher_up() { launcher_running || launcher_exited; }
launcher_run() {
    local try
    for try in 1 2 3 4 5; do
        launcher_start "$2" "$3" >/dev/null || return 1
        eventually 300 launcher_up || return 1
        launcher_running && break
        launcher_log | grep -q 'failed to connect to virtqemud' || return 1
        [ "$try" = 5 ] || echo "  (the launcher exited: libvirtd did not answer within KubeVirt's 10 s; started again)"
    done
    launcher_running || return 1
    T_RUN=$(secs "$LAUNCHER_T0" "$(now)")
}
# The launcher stopped as kubelet stops its Pod: SIGTERM, SIGKILL after the grace period (in
# standalone mode the launcher waits for virt-handler's last word after QEMU exits: only the
# SIGKILL ends it). In the background, so that the device is watched meanwhile.
GRACE=15
stop_launcher_bg() { launcher_stop "$GRACE" >"$TEST_DIR/stop.out" 2>&1 & STOP_PID=$!; }
stop_launcher_wait() {
    wait "$STOP_PID"
    QEMU_EXIT=$(grep -o 'qemu exited [0-9.]*s after SIGTERM' "$TEST_DIR/stop.out")
    eventually 60 launcher_gone
}
dump_launcher() { launcher_log | tail -30; guest 'launcher-run qemu-log' 2>/dev/null | tail -10; }
hostdevs() { # the domain's <hostdev> elements, one line each: type managed source
    python3 -c 'import sys, xml.etree.ElementTree as E
for h in E.fromstring(sys.stdin.read()).iter("hostdev"):
    s = h.find("source"); a = s.find("address") if s is not None else None
    print(h.get("type"), h.get("managed"), " ".join(f"{k}={v}" for k, v in sorted((a.attrib if a is not None else {}).items())))'
}
# kubelet's device manager (test/kubeletpeer) serves kubelet.sock / has allocated and exited
sock() { guest 'test -S /var/lib/kubelet/device-plugins/kubelet.sock'; }
peer_done() { guest 'test -s /tmp/peer.json && ! pidof kubeletpeer'; }
# dra VERB NS/NAME/UID: NodePrepareResources / NodeUnprepareResources as kubelet calls them
dra() { OUT=$(guest "grpctool dra $SOCK $1 $2" 2>&1); }

# 1. the control: a VMI without host devices
case_control() {
    echo "--- 1. the control: a VMI without host devices"
    launcher_vmi vm0 "$(cat /proc/sys/kernel/random/uuid)" >"$TEST_DIR/vm0.yaml"
    : >"$TEST_DIR/empty.env"
    if launcher_run vm0 "$TEST_DIR/empty.env" "$TEST_DIR/vm0.yaml"; then
        pass "KubeVirt's launcher runs the domain (${T_RUN} s from start, libvirt's capabilities cache as the image has it)"
    else fail "the launcher runs a VMI without host devices" "$(dump_launcher)"; finish; fi
    T_COLD=$T_RUN
    XML=$(launcher_domxml)
    CMD=$(launcher_qemu_cmdline)
    expect_ok "no <hostdev> in the domain" test "$(grep -c '<hostdev' <<<"$XML")" -eq 0
    expect_ok "no vfio-pci in QEMU's arguments" test "$(grep -c 'vfio-pci' <<<"$CMD")" -eq 0
    eventually 60 guest "launcher-run hmp 'info pci' | grep -q 'Host bridge'" || fail "QEMU answers info pci" "$(launcher_hmp 'info pci' 2>&1 | tail -5)"
    expect_ok "the VM's PCI bus has no 8086:10d3" test "$(vm_bars)" -eq 0
    if launcher_stop "$GRACE" && eventually 60 launcher_gone; then pass "the launcher stopped (SIGTERM, as kubelet stops the Pod)"; else
        fail "the launcher stops" "$(dump_launcher)"; fi
}

# 2. device plugins: the e1000e and the keyboard
case_plugins() {
    echo "--- 2. device plugins: the claimed e1000e and keyboard, Allocate's answer, the launcher"
    RES_PCI=$(kubectl get pcidevice "$PCI_CLAIM" -o jsonpath='{.status.resourceName}')
    RES_USB=$(kubectl get usbdevice "$KBD" -o jsonpath='{.status.resourceName}')
    guest "kubeletpeer --wait-resources 2 --timeout 150s --allocate '$RES_PCI' --allocate '$RES_USB' \
        --bench 0 >/tmp/peer.json 2>/tmp/peer.log &"
    eventually 90 sock || fail "kubelet.sock served in the guest" "$(guest 'cat /tmp/peer.log')"
    printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: %s}\nspec: {address: "%s", nodeName: %s}\n' \
        "$PCI_CLAIM" "$NIC" "$NODE" | kubectl create -f - >/dev/null
    printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: USBDeviceClaim\nmetadata: {name: %s}\nspec: {}\n' "$KBD" |
        kubectl create -f - >/dev/null
    usb_ready() { [ "$(kubectl get usbdeviceclaim "$KBD" -o jsonpath='{.status.conditions[?(@.type=="Ready")].reason}')" = Enabled ]; }
    if eventually 90 enabled "$NIC" && eventually 60 usb_ready; then pass "the e1000e claim is passthroughEnabled, the keyboard's Enabled"; else
        fail "claims ready" "$(kubectl get pcideviceclaims,usbdeviceclaims -o wide)"; finish; fi
    if eventually 150 peer_done; then pass "kubelet's device manager allocated both"; else fail "kubeletpeer finished" "$(guest 'tail -20 /tmp/peer.log')"; finish; fi
    guest 'cat /tmp/peer.json' >"$TEST_DIR/peer.json"
    PCI_ENV=$(launcher_env_var PCI_RESOURCE "$RES_PCI")
    USB_ENV=$(launcher_env_var USB_RESOURCE "$RES_USB")
    # The launcher's environment: exactly the variables of Allocate's answers.
    jq -r '.allocations[] | .envs // {} | to_entries[] | "\(.key)=\(.value)"' "$TEST_DIR/peer.json" >"$TEST_DIR/allocate.env"
    BUSNUM=$(guest 'cat /sys/bus/usb/devices/1-1/busnum')
    DEVNUM=$(guest 'cat /sys/bus/usb/devices/1-1/devnum')
    expect_ok "Allocate answered $PCI_ENV=$NIC and $USB_ENV=$BUSNUM:$DEVNUM" \
        test "$(sort "$TEST_DIR/allocate.env" | tr '\n' ' ')" = "$(printf '%s\n' "$PCI_ENV=$NIC" "$USB_ENV=$BUSNUM:$DEVNUM" | sort | tr '\n' ' ')"
    cp "$TEST_DIR/allocate.env" "$TEST_DIR/plugins.env"
    launcher_vmi vm1 "$(cat /proc/sys/kernel/random/uuid)" "nic=$RES_PCI" "kbd=$RES_USB" >"$TEST_DIR/vm1.yaml"
    if launcher_run vm1 "$TEST_DIR/plugins.env" "$TEST_DIR/vm1.yaml"; then
        pass "the launcher runs the VMI with both host devices (${T_RUN} s from start; libvirt's capabilities cache now filled)"
    else fail "the launcher runs the VMI with host devices" "$(dump_launcher)"; finish; fi
    T_WARM=$T_RUN
    XML=$(launcher_domxml)
    echo "$XML" >"$TEST_DIR/vm1.xml"
    CMD=$(launcher_qemu_cmdline)
    echo "$CMD" >"$TEST_DIR/vm1.cmdline"
    HD=$(hostdevs <<<"$XML")
    expect_contains "KubeVirt's domain has <hostdev type='pci' managed='no'> with source $NIC" "$HD" \
        "pci no bus=0x00 domain=0x0000 function=0x0 slot=0x04"
    expect_contains "... and <hostdev type='usb'> with bus $BUSNUM device $DEVNUM" "$HD" "usb"
    expect_contains "libvirt starts QEMU with vfio-pci host=$NIC" "$CMD" "\"driver\":\"vfio-pci\",\"host\":\"$NIC\""
    expect_contains "... and usb-host" "$CMD" '"driver":"usb-host"'
    if eventually 60 launcher_qemu_holds_group "$GROUP"; then pass "the launcher's QEMU holds /dev/vfio/$GROUP"; else
        fail "QEMU holds /dev/vfio/$GROUP" "$(dump_launcher)"; fi
    if eventually 120 vm_has_e1000e; then pass "the VM's firmware programmed the e1000e: $(vm_e1000e)"; else
        fail "the VM lists 8086:10d3 with its BARs programmed" "$(launcher_hmp 'info pci' 2>&1 | tail -20)"; fi
    T_SEEN=$(secs "$LAUNCHER_T0" "$(now)")
    expect_ok "... with its four BARs" test "$(vm_bars)" -eq 4
    OUT=$(launcher_hmp 'info usb' 2>&1)
    expect_contains "the VM's USB bus has the node's keyboard (info usb)" "$OUT" "QEMU USB Keyboard"
    echo "  launcher started -> e1000e in the VM (firmware's BARs): $T_SEEN s"

    echo "--- the claims deleted while the VM runs; the VM stopped"
    IFACE=/sys/bus/usb/devices/1-1:1.0
    kbd_driver() { guest "basename \$(readlink $IFACE/driver) 2>/dev/null"; }
    kbd_on() { [ "$(kbd_driver)" = "$1" ]; }
    if eventually 30 kbd_on usbfs; then pass "the launcher's QEMU claimed the keyboard's interface (usbfs)"; else fail "QEMU claimed the keyboard (usbfs)" "$(kbd_driver)"; fi
    expect_ok "the e1000e's claim deleted" kubectl delete pcideviceclaim "$PCI_CLAIM" --wait=false
    expect_ok "the keyboard's claim deleted" kubectl delete usbdeviceclaim "$KBD" --wait=false
    if eventually 30 has_reason "$NIC" DeviceInUse; then pass "the e1000e's deletion waits: DeviceInUse"; else fail "the e1000e's deletion waits: DeviceInUse" "$(reason "$NIC")"; fi
    expect_contains "... naming the launcher's QEMU" "$(message "$NIC")" "qemu-system-x86"
    usb_cond() { kubectl get usbdeviceclaim "$KBD" -o jsonpath="{.status.conditions[?(@.type==\"Ready\")].$1}" 2>/dev/null; }
    usb_in_use() { [ "$(usb_cond reason)" = DeviceInUse ]; }
    if eventually 30 usb_in_use; then pass "the keyboard's deletion waits: DeviceInUse"; else fail "the keyboard's deletion waits" "$(usb_cond reason): $(usb_cond message)"; fi
    expect_contains "... naming the launcher's QEMU" "$(usb_cond message)" "qemu-system-x86"
    expect_ok "the e1000e stays on vfio-pci" on_driver "$NIC" vfio-pci
    T1=$(now)
    stop_launcher_bg
    # (the API, not the node: the node's control channel is busy with the stop meanwhile) The agent
    # removes the claim's finalizer once the e1000e is back on its driver.
    if eventually 60 claim_gone "$NIC"; then pass "the e1000e's claim is gone"; else fail "the e1000e's deletion completes" "$(reason "$NIC"): $(message "$NIC")"; fi
    T_BACK=$(secs "$T1" "$(now)")
    if stop_launcher_wait; then pass "the launcher stopped (SIGTERM; $QEMU_EXIT): no monitor, no QEMU"; else fail "the launcher stops" "$(dump_launcher)"; fi
    if eventually 30 on_driver "$NIC" e1000e; then pass "$NIC back on e1000e"; else fail "$NIC back on e1000e" "$(guest_driver "$NIC")"; fi
    usb_claim_gone() { ! kubectl get usbdeviceclaim "$KBD" >/dev/null 2>&1; }
    if eventually 30 usb_claim_gone; then pass "the keyboard's claim is gone"; else fail "the keyboard's deletion completes" "$(usb_cond message)"; fi
    if eventually 30 kbd_on usbhid; then pass "the keyboard back on usbhid"; else fail "the keyboard back on usbhid" "$(kbd_driver)"; fi
    echo "  launcher's SIGTERM -> e1000e back on its driver and the claim gone: $T_BACK s ($QEMU_EXIT)"
}

# 3. DRA: the e1000e through a ResourceClaim
case_dra() {
    echo "--- 3. DRA: a ResourceClaim prepared by the agent's kubelet plugin, the launcher"
    kubectl create -f - >/dev/null <<YAML
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: nic1, namespace: default}
spec:
  devices:
    requests:
    - name: nic
      exactly: {deviceClassName: $DRIVER}
YAML
    CLAIM_UID=$(kubectl get resourceclaim nic1 -n default -o jsonpath='{.metadata.uid}')
    [ -n "$CLAIM_UID" ] && pass "ResourceClaim default/nic1 created" || { fail "ResourceClaim created"; finish; }
    # The allocation as kube-scheduler writes it (no scheduler runs here).
    ALLOC=$(jq -cn --arg d "$DRIVER" --arg p "$NODE" --arg n "$DEV" \
        '{status: {allocation: {devices: {results: [{request: "nic", driver: $d, pool: $p, device: $n}]},
          nodeSelector: {nodeSelectorTerms: [{matchFields: [{key: "metadata.name", operator: "In", values: [$p]}]}]}}}}')
    expect_ok "its status.allocation written (the e1000e of pool $NODE)" \
        kubectl patch resourceclaim nic1 -n default --subresource=status --type=merge -p "$ALLOC"
    dra prepare "default/nic1/$CLAIM_UID"
    expect_contains "NodePrepareResources answers the device" "$OUT" "uid=$CLAIM_UID error=\"\" device=$NODE/$DEV"
    if on_driver "$NIC" vfio-pci; then pass "$NIC on vfio-pci"; else fail "$NIC on vfio-pci after prepare" "$(guest_driver "$NIC"); $(node_logs)"; fi
    # The container runtime's part of the CDI spec: its metadata mount, into the launcher's filesystem
    # (/var/run is ../run there), read-only as a CDI mount is. (The device nodes are the node's own
    # /dev, bound into the launcher's root.)
    SPEC_JSON=$(guest "cat $CDI/$DRIVER-$CLAIM_UID.json")
    echo "$SPEC_JSON" >"$TEST_DIR/cdi.json"
    MOUNT=$(jq -r '[.devices[].containerEdits.mounts // [] | .[]][0] | "\(.hostPath) \(.containerPath)"' <<<"$SPEC_JSON")
    read -r HPATH CPATH <<<"$MOUNT"
    [[ $CPATH == /var/run/kubernetes.io/dra-device-attributes/* ]] && pass "the CDI spec mounts the metadata under KubeVirt's DRA path: $CPATH" ||
        fail "the CDI spec's metadata mount" "$MOUNT"
    TARGET=/launcher/run/${CPATH#/var/run/}
    expect_ok "the mount applied in the launcher's filesystem" guest "mkdir -p \$(dirname $TARGET) && touch $TARGET && mount --bind -o ro $HPATH $TARGET"
    launcher_vmi vm2 "$(cat /proc/sys/kernel/random/uuid)" >"$TEST_DIR/vm2.yaml"
    cat >>"$TEST_DIR/vm2.yaml" <<'YAML'
      hostDevices:
      - name: nic
        claimName: nic
        requestName: nic
  resourceClaims:
  - name: nic
    resourceClaimName: nic1
YAML
    if launcher_run vm2 "$TEST_DIR/empty.env" "$TEST_DIR/vm2.yaml"; then
        pass "the launcher runs the VMI whose host device names the claim (${T_RUN} s from start)"
    else fail "the launcher runs the DRA VMI" "$(dump_launcher)"; finish; fi
    XML=$(launcher_domxml)
    echo "$XML" >"$TEST_DIR/vm2.xml"
    CMD=$(launcher_qemu_cmdline)
    HD=$(hostdevs <<<"$XML")
    [ "$HD" = "pci no bus=0x00 domain=0x0000 function=0x0 slot=0x04" ] &&
        pass "KubeVirt's domain has one <hostdev type='pci' managed='no'> with source $NIC, from the metadata file" ||
        fail "the DRA <hostdev>" "$HD"
    expect_contains "libvirt starts QEMU with vfio-pci host=$NIC" "$CMD" "\"driver\":\"vfio-pci\",\"host\":\"$NIC\""
    if eventually 60 launcher_qemu_holds_group "$GROUP"; then pass "the launcher's QEMU holds /dev/vfio/$GROUP"; else
        fail "QEMU holds /dev/vfio/$GROUP (DRA)" "$(dump_launcher)"; fi
    if eventually 120 vm_has_e1000e; then pass "the VM's firmware programmed the e1000e: $(vm_e1000e)"; else
        fail "the VM lists 8086:10d3 (DRA)" "$(launcher_hmp 'info pci' 2>&1 | tail -20)"; fi
    T_SEEN_DRA=$(secs "$LAUNCHER_T0" "$(now)")
    echo "  launcher started -> e1000e in the VM (DRA): $T_SEEN_DRA s"
    dra unprepare "default/nic1/$CLAIM_UID"
    expect_contains "NodeUnprepareResources while the VM runs answers that QEMU holds /dev/vfio/$GROUP" "$OUT" \
        "qemu-system-x86" "/dev/vfio/$GROUP"
    expect_ok "... and the e1000e stays on vfio-pci" on_driver "$NIC" vfio-pci
    guest "umount $TARGET" >/dev/null 2>&1
    T1=$(now)
    stop_launcher_bg
    if stop_launcher_wait; then pass "the launcher stopped (SIGTERM; $QEMU_EXIT): no monitor, no QEMU"; else fail "the launcher stops (DRA)" "$(dump_launcher)"; fi
    dra unprepare "default/nic1/$CLAIM_UID"
    [ "$OUT" = "uid=$CLAIM_UID error=\"\"" ] && pass "then unprepare answers no error" || fail "unprepare after the VM" "$OUT"
    if eventually 30 on_driver "$NIC" e1000e; then pass "$NIC back on e1000e"; else fail "$NIC back on e1000e (DRA)" "$(guest_driver "$NIC")"; fi
    echo "  launcher's SIGTERM -> unprepared (after the launcher is gone), e1000e back on its driver: $(secs "$T1" "$(now)") s"
    expect_ok "the CDI spec is removed" guest "! test -e $CDI/$DRIVER-$CLAIM_UID.json"
}

# 4. a mediated device: an instance of mtty's type mtty-2 enabled through a VGPUDevice, offered
# by its device plugin (devices.harvesterhci.io/mtty-2), the launcher's VMI naming it in
# spec.domain.devices.hostDevices (KubeVirt's generic host devices: <hostdev type='mdev'> with
# display off; `gpus` would ask for display=on and ramfb, which a serial card has not).
MDEV_UUID=5c1f6e2a-3b4d-4e8f-9a0b-7c6d5e4f3a21
RES_MDEV=devices.harvesterhci.io/mtty-2
SLOT=$NODE-mtty-0
vg() { kubectl get vgpudevice "$1" -o jsonpath="{$2}" 2>/dev/null; }
vg_is() { [ "$(vg "$1" "$2")" = "$3" ]; }
vg_reason() { vg "$1" '.status.conditions[?(@.type=="Ready")].reason'; }
vg_message() { vg "$1" '.status.conditions[?(@.type=="Ready")].message'; }
vg_removed() { ! mdev_exists "$MDEV_UUID" && vg_is "$SLOT" .status.vGPUStatus ""; }
# What the VM's firmware made of mtty's card (4348:3253, two I/O BARs): "BAR0=0x... BAR1=0x..."
# once both are programmed (0xffffffffffffffff before).
vm_mtty() {
    launcher_vm_bars 4348:3253 | awk '/BAR[0-9]: I\/O at/ && $4 !~ /^0xffffffff/ {printf "%s%s=%s", s, substr($1, 1, 4), $4; s = " "}
        END {if (s) print ""}'
}
vm_has_mtty() { [ "$(vm_mtty | wc -w)" -eq 2 ]; }
# QEMU's arguments (one a line) have a -device {"driver":"vfio-pci",...,"sysfsdev":"<the instance>"}
qemu_has_mdev() { grep '"driver":"vfio-pci"' <<<"$1" | grep -qF "\"sysfsdev\":\"$MDEV_BUS/$MDEV_UUID\""; }
mdev_hostdevs() { # the domain's <hostdev type='mdev'> elements: mode model display (libvirt's default
    # "off" when KubeVirt sets none, as for hostDevices; "on" for gpus) uuid
    python3 -c 'import sys, xml.etree.ElementTree as E
for h in E.fromstring(sys.stdin.read()).iter("hostdev"):
    if h.get("type") != "mdev": continue
    a = h.find("source/address")
    print(h.get("mode"), h.get("model"), "display=%s" % h.get("display"), "uuid=%s" % (a.get("uuid") if a is not None else None))'
}
case_mdev() {
    echo "--- 4. a mediated device: mtty's instance enabled through a VGPUDevice, its device plugin, the launcher"
    local t_load t0 holder
    if t_load=$(mtty_load); then pass "modprobe mtty: /sys/class/mdev_bus/mtty (${t_load}s in the guest)"; else fail "modprobe mtty" "$t_load"; finish; fi
    # (a virtual parent comes with no PCI event: the agent scans again on SIGHUP)
    guest 'kill -HUP $(pidof hostdevd)' >/dev/null
    if eventually 60 vg_is "$SLOT" '.status.conditions[0].reason' Available; then pass "the agent publishes a free slot $SLOT"; else
        fail "a free slot $SLOT" "$(kubectl get vgpudevices -o wide 2>&1; node_logs | tail -5)"; finish; fi
    guest "rm -f /tmp/peer.json; kubeletpeer --wait-resources 1 --timeout 150s --allocate '$RES_MDEV' --bench 0 >/tmp/peer.json 2>/tmp/peer.log &"
    eventually 90 sock || fail "kubelet.sock served in the guest" "$(guest 'cat /tmp/peer.log')"
    t0=$(now)
    kubectl patch vgpudevice "$SLOT" --type merge -p "{\"spec\":{\"enabled\":true,\"vGPUTypeName\":\"mtty-2\",\"uuid\":\"$MDEV_UUID\"}}" >/dev/null
    if eventually 60 vg_is "$SLOT" .status.vGPUStatus vGPUConfigured; then pass "enabled with mtty-2: the agent creates $MDEV_UUID ($(secs "$t0" "$(now)") s)"; else
        fail "enabled: vGPUConfigured" "$(vg_reason "$SLOT"): $(vg_message "$SLOT")"; finish; fi
    MGROUP=$(mdev_group "$MDEV_UUID")
    expect_contains "... offered as $RES_MDEV, IOMMU group $MGROUP" "$(vg "$SLOT" '.status.resourceName} {.status.iommuGroup')" "$RES_MDEV $MGROUP"
    if eventually 150 peer_done; then pass "kubelet's device manager allocated $RES_MDEV"; else fail "kubeletpeer finished" "$(guest 'tail -20 /tmp/peer.log')"; finish; fi
    guest 'cat /tmp/peer.json' >"$TEST_DIR/peer-mdev.json"
    MDEV_ENV=$(launcher_env_var MDEV_PCI_RESOURCE "$RES_MDEV")
    jq -r '.allocations[] | .envs // {} | to_entries[] | "\(.key)=\(.value)"' "$TEST_DIR/peer-mdev.json" >"$TEST_DIR/mdev.env"
    expect_ok "Allocate answered $MDEV_ENV=$MDEV_UUID and nothing else" test "$(cat "$TEST_DIR/mdev.env")" = "$MDEV_ENV=$MDEV_UUID"
    expect_ok "... and the device nodes /dev/vfio/vfio and /dev/vfio/$MGROUP" \
        test "$(jq -r '.allocations[].devices[].hostPath' "$TEST_DIR/peer-mdev.json" | sort | xargs)" = "/dev/vfio/$MGROUP /dev/vfio/vfio"
    launcher_vmi vm3 "$(cat /proc/sys/kernel/random/uuid)" "serial=$RES_MDEV" >"$TEST_DIR/vm3.yaml"
    if launcher_run vm3 "$TEST_DIR/mdev.env" "$TEST_DIR/vm3.yaml"; then
        pass "the launcher runs the VMI whose hostDevices names $RES_MDEV (${T_RUN} s from start)"
    else fail "the launcher runs the mdev VMI" "$(dump_launcher)"; finish; fi
    [ -n "$T_COLD" ] || T_COLD=$T_RUN
    XML=$(launcher_domxml)
    echo "$XML" >"$TEST_DIR/vm3.xml"
    CMD=$(launcher_qemu_cmdline)
    echo "$CMD" >"$TEST_DIR/vm3.cmdline"
    expect_ok "KubeVirt's domain has one <hostdev mode='subsystem' type='mdev' model='vfio-pci'> with uuid $MDEV_UUID" \
        test "$(mdev_hostdevs <<<"$XML")" = "subsystem vfio-pci display=off uuid=$MDEV_UUID"
    expect_ok "libvirt starts QEMU with vfio-pci sysfsdev=/sys/bus/mdev/devices/$MDEV_UUID" qemu_has_mdev "$CMD"
    if eventually 60 launcher_qemu_holds_group "$MGROUP"; then pass "the launcher's QEMU holds /dev/vfio/$MGROUP"; else
        fail "QEMU holds /dev/vfio/$MGROUP (mdev)" "$(dump_launcher)"; fi
    if eventually 120 vm_has_mtty; then pass "the VM's firmware programmed mtty's card 4348:3253: $(vm_mtty)"; else
        fail "the VM lists 4348:3253 with its BARs programmed" "$(launcher_hmp 'info pci' 2>&1 | tail -20)"; fi
    echo "  launcher started -> mdev in the VM (firmware's BARs): $(secs "$LAUNCHER_T0" "$(now)") s"

    echo "--- the VGPUDevice disabled while the VM runs; the VM stopped"
    kubectl patch vgpudevice "$SLOT" --type merge -p '{"spec":{"enabled":false}}' >/dev/null
    if eventually 60 vg_is "$SLOT" '.status.conditions[0].reason' DeviceInUse; then pass "disabling waits: DeviceInUse"; else
        fail "disabled while the VM runs: DeviceInUse" "$(vg_reason "$SLOT"): $(vg_message "$SLOT")"; fi
    holder=$(guest 'launcher-run qemu-pid')
    expect_contains "... naming the launcher's QEMU" "$(vg_message "$SLOT")" "/dev/vfio/$MGROUP) is held by qemu-system-x86 (pid $holder)"
    expect_ok "... the instance stays" mdev_exists "$MDEV_UUID"
    expect_ok "... no remove was written: no thread waits in vfio_unregister_group_dev" \
        guest '! grep -qx vfio_unregister_group_dev /proc/[0-9]*/task/[0-9]*/wchan'
    t0=$(now)
    stop_launcher_bg
    if eventually 60 vg_removed; then pass "the agent removes the instance once QEMU is gone"; else
        fail "removed after the VM stopped" "$(vg_reason "$SLOT"): $(vg_message "$SLOT")"; fi
    echo "  launcher's SIGTERM -> instance removed: $(secs "$t0" "$(now)") s (the agent re-checks a held instance)"
    if stop_launcher_wait; then pass "the launcher stopped (SIGTERM; $QEMU_EXIT): no monitor, no QEMU"; else fail "the launcher stops (mdev)" "$(dump_launcher)"; fi
    expect_ok "... /dev/vfio/$MGROUP is gone, mtty-1 24 and mtty-2 12 available again" \
        test "$(guest "test -e /dev/vfio/$MGROUP && echo held")$(mdev_avail mtty-1 mtty-2)" = "24 12"
}

# 4b. the same instance through DRA: enabled again (the same UUID, spec.uuid), published in the
# node's pool as mdev-<uuid>, a ResourceClaim of class mdev.vfio-pci.hostdevd.io allocated to it,
# prepared by the agent's kubelet plugin, the VMI's host device naming the claim
# (HostDevicesWithDRA): KubeVirt reads mdevUUID from the metadata file.
mdev_in_slice() {
    kubectl get resourceslices -o json | jq -e --arg d "mdev-$MDEV_UUID" --arg u "$MDEV_UUID" \
        '[.items[].spec.devices[]? | select(.name == $d) | .attributes] | length == 1 and .[0]["dra.kubevirt.io/mdevUUID"].string == $u' >/dev/null
}
case_mdev_dra() {
    echo "--- 4b. the instance through DRA: a ResourceClaim on mdev-<uuid>, prepared by the agent's plugin, the launcher"
    local uid spec mount hpath cpath target t0
    kubectl patch vgpudevice "$SLOT" --type merge -p '{"spec":{"enabled":true}}' >/dev/null
    if eventually 60 vg_is "$SLOT" .status.vGPUStatus vGPUConfigured && mdev_exists "$MDEV_UUID"; then pass "enabled again: $MDEV_UUID made again (its spec.uuid)"; else
        fail "enabled again: vGPUConfigured" "$(vg_reason "$SLOT"): $(vg_message "$SLOT")"; return; fi
    MGROUP=$(mdev_group "$MDEV_UUID")
    if eventually 60 mdev_in_slice; then pass "the instance is in the node's pool: mdev-$MDEV_UUID with dra.kubevirt.io/mdevUUID"; else
        fail "mdev in the slice" "$(kubectl get resourceslices -o json | jq -c '[.items[].spec.devices[]?.name]')"; return; fi
    kubectl create -f - >/dev/null <<YAML
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: serial1, namespace: default}
spec:
  devices:
    requests:
    - name: serial
      exactly: {deviceClassName: mdev.$DRIVER}
YAML
    uid=$(kubectl get resourceclaim serial1 -n default -o jsonpath='{.metadata.uid}')
    [ -n "$uid" ] || { fail "ResourceClaim default/serial1 created"; return; }
    # The allocation as kube-scheduler writes it (no scheduler runs here).
    expect_ok "ResourceClaim default/serial1 (class mdev.$DRIVER) allocated mdev-$MDEV_UUID of pool $NODE" \
        kubectl patch resourceclaim serial1 -n default --subresource=status --type=merge -p "$(jq -cn --arg d "$DRIVER" --arg p "$NODE" --arg n "mdev-$MDEV_UUID" \
            '{status: {allocation: {devices: {results: [{request: "serial", driver: $d, pool: $p, device: $n}]},
              nodeSelector: {nodeSelectorTerms: [{matchFields: [{key: "metadata.name", operator: "In", values: [$p]}]}]}}}}')"
    dra prepare "default/serial1/$uid"
    expect_contains "NodePrepareResources answers the instance" "$OUT" "uid=$uid error=\"\" device=$NODE/mdev-$MDEV_UUID"
    spec=$(guest "cat $CDI/$DRIVER-$uid.json")
    echo "$spec" >"$TEST_DIR/cdi-mdev.json"
    expect_ok "the CDI spec gives /dev/vfio/vfio and /dev/vfio/$MGROUP" \
        test "$(jq -r '[.devices[].containerEdits.deviceNodes // [] | .[].path] | sort | join(" ")' <<<"$spec")" = "/dev/vfio/$MGROUP /dev/vfio/vfio"
    mount=$(jq -r '[.devices[].containerEdits.mounts // [] | .[]][0] | "\(.hostPath) \(.containerPath)"' <<<"$spec")
    read -r hpath cpath <<<"$mount"
    target=/launcher/run/${cpath#/var/run/}
    expect_ok "its metadata mount applied in the launcher's filesystem ($cpath)" \
        guest "mkdir -p \$(dirname $target) && touch $target && mount --bind -o ro $hpath $target"
    : >"$TEST_DIR/empty.env"
    launcher_vmi vm4 "$(cat /proc/sys/kernel/random/uuid)" >"$TEST_DIR/vm4.yaml"
    cat >>"$TEST_DIR/vm4.yaml" <<'YAML'
      hostDevices:
      - name: serial
        claimName: serial
        requestName: serial
  resourceClaims:
  - name: serial
    resourceClaimName: serial1
YAML
    if launcher_run vm4 "$TEST_DIR/empty.env" "$TEST_DIR/vm4.yaml"; then
        pass "the launcher runs the VMI whose host device names the claim (${T_RUN} s from start)"
    else fail "the launcher runs the mdev DRA VMI" "$(dump_launcher)"; return; fi
    XML=$(launcher_domxml)
    echo "$XML" >"$TEST_DIR/vm4.xml"
    expect_ok "KubeVirt's domain has one <hostdev mode='subsystem' type='mdev' model='vfio-pci'> with uuid $MDEV_UUID, from the metadata" \
        test "$(mdev_hostdevs <<<"$XML")" = "subsystem vfio-pci display=off uuid=$MDEV_UUID"
    expect_ok "libvirt starts QEMU with vfio-pci sysfsdev=/sys/bus/mdev/devices/$MDEV_UUID" qemu_has_mdev "$(launcher_qemu_cmdline)"
    if eventually 60 launcher_qemu_holds_group "$MGROUP"; then pass "the launcher's QEMU holds /dev/vfio/$MGROUP"; else
        fail "QEMU holds /dev/vfio/$MGROUP (mdev, DRA)" "$(dump_launcher)"; fi
    if eventually 120 vm_has_mtty; then pass "the VM's firmware programmed mtty's card 4348:3253: $(vm_mtty)"; else
        fail "the VM lists 4348:3253 (DRA)" "$(launcher_hmp 'info pci' 2>&1 | tail -20)"; fi
    echo "  launcher started -> mdev in the VM (DRA): $(secs "$LAUNCHER_T0" "$(now)") s"
    guest "umount $target" >/dev/null 2>&1
    stop_launcher_bg
    if stop_launcher_wait; then pass "the launcher stopped (SIGTERM; $QEMU_EXIT)"; else fail "the launcher stops (mdev, DRA)" "$(dump_launcher)"; fi
    dra unprepare "default/serial1/$uid"
    [ "$OUT" = "uid=$uid error=\"\"" ] && pass "unprepare answers no error" || fail "unprepare (mdev)" "$OUT"
    expect_ok "... the CDI spec is removed, the instance stays" guest "! test -e $CDI/$DRIVER-$uid.json && test -e $MDEV_BUS/$MDEV_UUID"
    t0=$(now)
    kubectl patch vgpudevice "$SLOT" --type merge -p '{"spec":{"enabled":false}}' >/dev/null
    if eventually 30 vg_removed; then pass "disabled, nothing holds it: removed ($(secs "$t0" "$(now)") s)"; else
        fail "removed when disabled" "$(vg_reason "$SLOT"): $(vg_message "$SLOT")"; fi
}

# LAUNCHER_CASES: the cases to run, in this order (default all; "mdev" alone boots the node and
# runs only case 4, with libvirt's capabilities cache cold)
CASES=${LAUNCHER_CASES:-control plugins dra mdev}
T_COLD="" T_WARM=""
for c in $CASES; do
    case $c in
    control) case_control ;;
    plugins) case_plugins ;;
    dra) case_dra ;;
    mdev) case_mdev; case_mdev_dra ;;
    *) fail "LAUNCHER_CASES: no case '$c' (control plugins dra mdev)"; finish ;;
    esac
done
echo "--- libvirt's QEMU probe"
echo "  launcher start -> domain running: ${T_COLD:-?} s (first run of this boot), ${T_WARM:-?} s (second: libvirt's cache as the first left it)"
finish
