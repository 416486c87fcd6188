#!/usr/bin/env bash
# test/e2e/test_plugins.sh - the agent's kubelet device plugins on a real kernel, offered to
# kubelet's own device manager: a qemu node (hack/qemu-node.sh) whose agent runs with a
# node-bound token, and test/kubeletpeer in the guest (k8s.io/kubernetes/pkg/kubelet/cm/
# devicemanager v1.37.1 driven by a small main: kubelet's registration server, endpoint client,
# Allocate and PreStartContainer, without the rest of a kubelet, which would be slow under TCG).
# Checks: a claimed e1000e (0000:00:04.0) and a claimed USB keyboard (port 1-1) are offered, one
# healthy device each, without NUMA topology when the guest's numa_node is -1; Allocate for the
# e1000e names /dev/vfio/vfio and /dev/vfio/<its group in the guest's sysfs> (and its vfio cdev
# when the kernel has one), "mrw", and PCI_RESOURCE_<NAME>=0000:00:04.0; Allocate for the
# keyboard names its /dev/bus/usb/BBB/DDD and USB_RESOURCE_<NAME>=<busnum>:<devnum> from the
# guest's sysfs, and the node is chowned to 107:107; KubeVirt v1.9.0's own reader of these
# variables (test/kubevirtenv, on the host) turns the answers into the expected libvirt host
# devices, and a VMM in the guest (hack/qemu-node.sh --vmm) started with libvirt's arguments for
# those host devices realizes both: the e1000e in its query-pci and its SeaBIOS's PCI scan, the
# keyboard on its USB bus; the keyboard's claim deleted while the VMM has it waits (DeviceInUse,
# naming the VMM; the device stays enabled and offered; no writes while it waits) and is
# released when the VMM exits, the keyboard back on usbhid. Prints the time
# from the claims being Ready to the device manager holding both devices, and the median
# Allocate (through the manager) of 50.
SUITE=e2e-plugins
# shellcheck source=test/e2e/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1
T_START=$SECONDS
NODE=qplug
NIC=0000:00:04.0
KBD=$NODE-0627-0001-1-1
PCI_CLAIM=$NODE-000000040
BENCH=${PLUGIN_ALLOCATE_RUNS:-50}

if ! PEER=$(hack/kubeletpeer-build.sh); then
    fail "kubelet's device manager builds (hack/kubeletpeer-build.sh)"
    finish
fi
KUBEVIRTENV=$(hack/kubevirtenv-build.sh) || fail "KubeVirt's host-device env reader builds (hack/kubevirtenv-build.sh)"
cluster_start
install_crds
create_node "$NODE"

echo "--- boot"
if node_boot "$NODE" --vmm --memory 1024 --extra "$PEER:/usr/bin/kubeletpeer"; then pass "node $NODE boots (${BOOT_SECONDS}s)"; else
    fail "node boots"; finish; fi
if eventually 120 guest_agent_ready; then pass "agent ready with its node-bound token"; else fail "agent ready" "$(node_logs)"; finish; fi

now() { date +%s.%N; }
# The guest's clock minus the host's (the middle of a round trip), to place guest times.
H0=$(now)
G=$(guest 'date +%s.%N')
H1=$(now)
SKEW=$(awk -v g="$G" -v a="$H0" -v b="$H1" 'BEGIN {printf "%.3f", g - (a + b) / 2}')
RTT=$(awk -v a="$H0" -v b="$H1" 'BEGIN {printf "%.2f", b - a}')

echo "--- kubelet's device manager in the guest, then the claims"
# It serves kubelet.sock (removing the sockets there, as kubelet does) before anything is offered.
RES_PCI=$(kubectl get pcidevice "$PCI_CLAIM" -o jsonpath='{.status.resourceName}')
RES_USB=$(kubectl get usbdevice "$KBD" -o jsonpath='{.status.resourceName}')
guest "kubeletpeer --wait-resources 2 --timeout 150s --seen-file /tmp/peer.seen --allocate '$RES_PCI' \
    --allocate '$RES_USB' --bench $BENCH >/tmp/peer.json 2>/tmp/peer.log &"
sock() { guest 'test -S /var/lib/kubelet/device-plugins/kubelet.sock'; }
eventually 120 sock || fail "kubelet.sock served in the guest" "$(guest 'cat /tmp/peer.log')"
printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: %s}\nspec: {address: "%s", nodeName: %s}\n' \
    "$PCI_CLAIM" "$NIC" "$NODE" | kubectl create -f - >/dev/null
printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: USBDeviceClaim\nmetadata: {name: %s}\nspec: {}\n' "$KBD" |
    kubectl create -f - >/dev/null
bound() { [ "$(kubectl get pcideviceclaim "$PCI_CLAIM" -o jsonpath='{.status.passthroughEnabled}')" = true ]; }
usb_ready() { [ "$(kubectl get usbdeviceclaim "$KBD" -o jsonpath='{.status.conditions[?(@.type=="Ready")].reason}')" = Enabled ]; }
# Both watched in one loop, so the later of the two is timed to the poll (0.1 s).
both_ready() {
    local t=$((SECONDS + 90)) a="" b=""
    while [ $SECONDS -lt $t ]; do
        [ -n "$a" ] || ! bound || a=$(now)
        [ -n "$b" ] || ! usb_ready || b=$(now)
        if [ -n "$a" ] && [ -n "$b" ]; then
            READY_AT=$(awk -v a="$a" -v b="$b" 'BEGIN {print (a > b ? a : b)}')
            return 0
        fi
        sleep 0.1
    done
    return 1
}
if both_ready; then
    pass "the e1000e claim is passthroughEnabled and the keyboard claim Enabled"
else
    fail "claims ready" "$(kubectl get pcideviceclaims,usbdeviceclaims -o wide)"
    finish
fi
peer_done() { guest 'test -s /tmp/peer.json && ! pidof kubeletpeer'; }
if eventually 150 peer_done; then pass "kubeletpeer finished"; else fail "kubeletpeer finished" "$(guest 'tail -20 /tmp/peer.log')"; fi
JSON=$(guest 'cat /tmp/peer.json')
SEEN=$(guest 'cat /tmp/peer.seen')
echo "$JSON" >"$TEST_DIR/peer.json"
guest 'cat /tmp/peer.log' >"$TEST_DIR/peer.log" 2>&1
# j EXPR: a Python expression over the peer's document d.
j() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$TEST_DIR/peer.json" "$1" 2>&1; }
[ "$(j 'd.get("error", "")')" = "" ] || fail "kubeletpeer ran without error" "$(j 'd["error"]'); $(tail -5 "$TEST_DIR/peer.log")"
if [ -n "$SEEN" ] && [ -n "${READY_AT:-}" ]; then
    READY_TO_SEEN=$(awk -v s="$SEEN" -v k="$SKEW" -v r="$READY_AT" 'BEGIN {printf "%.2f", s - k - r}')
fi

echo "--- offered"
[ "$(j 'd["capacity"].get("'"$RES_PCI"'")')" = 1 ] &&
    [ "$(j 'd["allocatable"].get("'"$RES_PCI"'")')" = 1 ] &&
    [ "$(j 'd["capacity"].get("'"$RES_USB"'")')" = 1 ] && [ "$(j 'd["allocatable"].get("'"$RES_USB"'")')" = 1 ] &&
    pass "capacity and allocatable: $RES_PCI 1, $RES_USB 1" ||
    fail "capacity and allocatable" "$(j 'd["capacity"], d["allocatable"]')"
[ "$(j '[(x["id"], x["health"]) for x in d["devices"]["'"$RES_PCI"'"]]')" = "[('$NIC', 'Healthy')]" ] &&
    [ "$(j '[(x["id"], x["health"]) for x in d["devices"]["'"$RES_USB"'"]]')" = "[('$KBD', 'Healthy')]" ] &&
    pass "devices: $NIC and $KBD, Healthy" || fail "devices" "$(j 'd["devices"]')"
NUMA=$(guest "cat /sys/bus/pci/devices/$NIC/numa_node")
if [ "$NUMA" = -1 ]; then
    [ "$(j '[x["topology"] for v in d["devices"].values() for x in v]')" = "[False, False]" ] &&
        pass "no NUMA topology sent (the guest's numa_node is -1)" || fail "topology absent" "$(j 'd["devices"]')"
else
    [ "$(j '[x["numaNodes"] for x in d["devices"]["'"$RES_PCI"'"]]')" = "[[$NUMA]]" ] &&
        pass "NUMA node $NUMA sent" || fail "topology" "$(j 'd["devices"]')"
fi

echo "--- Allocate"
env_name() { echo "$1_$(tr 'a-z/.' 'A-Z__' <<<"$2")"; }
PCI_ENV=$(env_name PCI_RESOURCE "$RES_PCI")
USB_ENV=$(env_name USB_RESOURCE "$RES_USB")
GROUP=$(guest "basename \$(readlink /sys/bus/pci/devices/$NIC/iommu_group)")
# The iommufd cdev only when the kernel made one (6.6+ with CONFIG_VFIO_DEVICE_CDEV): Debian 12's
# 6.1 lists vfio-dev/vfio0 in sysfs but has no /dev/vfio/devices/ at all.
CDEV=$(guest "for c in /sys/bus/pci/devices/$NIC/vfio-dev/*; do [ -c /dev/vfio/devices/\${c##*/} ] && echo \${c##*/}; done")
WANT="[('/dev/vfio/$GROUP', '/dev/vfio/$GROUP', 'mrw'), ('/dev/vfio/vfio', '/dev/vfio/vfio', 'mrw')]"
[ -z "$CDEV" ] || WANT="[('/dev/vfio/$GROUP', '/dev/vfio/$GROUP', 'mrw'), ('/dev/vfio/devices/$CDEV', '/dev/vfio/devices/$CDEV', 'mrw'), ('/dev/vfio/vfio', '/dev/vfio/vfio', 'mrw')]"
pa() { j '[a for a in d["allocations"] if a["resource"] == "'"$RES_PCI"'"][0]'"$1"; }
ua() { j '[a for a in d["allocations"] if a["resource"] == "'"$RES_USB"'"][0]'"$1"; }
[ "$(pa '.get("error", "")')" = "" ] && [ "$(pa '["deviceIDs"]')" = "['$NIC']" ] &&
    pass "the e1000e allocated to a pod: $NIC" || fail "PCI Allocate" "$(pa '')"
[ "$(pa '["envs"]')" = "{'$PCI_ENV': '$NIC'}" ] && pass "... with $PCI_ENV=$NIC" || fail "PCI env" "$(pa '["envs"]')"
GOT=$(j 'sorted((x["containerPath"], x["hostPath"], x["permissions"]) for x in [a for a in d["allocations"] if a["resource"] == "'"$RES_PCI"'"][0]["devices"])')
[ "$GOT" = "$WANT" ] && pass "... and /dev/vfio/vfio, /dev/vfio/$GROUP (the guest's group of $NIC)${CDEV:+ and /dev/vfio/devices/$CDEV}, mrw" ||
    fail "PCI device nodes" "got $GOT"$'\n'"want $WANT"
# What a container runtime does with the answer: each host path must be a device node of the
# node (containerd fails the container, "lstat ...: no such file or directory", otherwise).
MISSING=$(for x in $(j '" ".join(x["hostPath"] for a in d["allocations"] for x in a.get("devices", []))'); do
    guest "[ -c $x ] || echo $x"
done)
[ -z "$MISSING" ] && pass "every device path of the answers is a character device in the guest" ||
    fail "device paths that do not exist in the guest" "$MISSING"
BUSNUM=$(guest 'cat /sys/bus/usb/devices/1-1/busnum')
DEVNUM=$(guest 'cat /sys/bus/usb/devices/1-1/devnum')
USB_NODE=$(printf '/dev/bus/usb/%03d/%03d' "$BUSNUM" "$DEVNUM")
[ "$(ua '.get("error", "")')" = "" ] && [ "$(ua '["deviceIDs"]')" = "['$KBD']" ] &&
    pass "the keyboard allocated to a pod: $KBD" || fail "USB Allocate" "$(ua '')"
[ "$(ua '["envs"]')" = "{'$USB_ENV': '$BUSNUM:$DEVNUM'}" ] && pass "... with $USB_ENV=$BUSNUM:$DEVNUM (the guest's busnum:devnum)" ||
    fail "USB env" "$(ua '["envs"]')"
GOT=$(j '[(x["containerPath"], x["hostPath"], x["permissions"]) for x in [a for a in d["allocations"] if a["resource"] == "'"$RES_USB"'"][0]["devices"]]')
[ "$GOT" = "[('$USB_NODE', '$USB_NODE', 'mrw')]" ] && pass "... and its node $USB_NODE, mrw" || fail "USB device node" "$GOT"
OWNER=$(guest "stat -c %u:%g $USB_NODE")
[ "$OWNER" = 107:107 ] && pass "$USB_NODE chowned to 107:107 in the guest" || fail "USB node owner" "$OWNER"
MEDIAN=$(j '"Allocate %.1f ms (worst %.1f ms), run options with PreStartContainer %.1f ms, medians of %d" % (d["bench"]["medianMs"], d["bench"]["worstMs"], d["bench"]["startMedianMs"], d["bench"]["n"])')
[ "$(j 'd["bench"].get("error", "")')" = "" ] && pass "$BENCH more Allocates of the e1000e, each for a new pod: $MEDIAN" ||
    fail "Allocate repeated" "$(j 'd["bench"]')"

echo "--- KubeVirt's reader of the answers (virt-launcher's hostdevice address pools)"
if [ -n "$KUBEVIRTENV" ]; then
    # The variables exactly as Allocate returned them (a name may hold '-': env(1), not the shell).
    mapfile -t ENVS < <(j '"\n".join(k + "=" + v for a in d["allocations"] for k, v in a["envs"].items())')
    KV=$(env "${ENVS[@]}" "$KUBEVIRTENV" --pci "$RES_PCI" --usb "$RES_USB" 2>&1)
    echo "$KV" >"$TEST_DIR/kubevirtenv.json"
    kv() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$TEST_DIR/kubevirtenv.json" "$1" 2>&1; }
    [ "$(kv '[(x["type"], x["managed"], x["domain"], x["bus"], x["slot"], x["function"]) for x in d["pci"]]')" = \
        "[('pci', 'no', '0x0000', '0x00', '0x04', '0x0')]" ] &&
        pass "KubeVirt v1.9.0 makes <hostdev type='pci' managed='no'> with source 0000:00:04.0 of it" ||
        fail "KubeVirt's PCI host device" "$KV"
    [ "$(kv '[(x["type"], x["mode"], x["bus"], x["device"]) for x in d["usb"]]')" = "[('usb', 'subsystem', '$BUSNUM', '$DEVNUM')]" ] &&
        pass "... and <hostdev type='usb' mode='subsystem'> with bus $BUSNUM device $DEVNUM" ||
        fail "KubeVirt's USB host device" "$KV"

    echo "--- a VMM started from those host devices, with libvirt's arguments for them"
    # <hostdev type='pci' managed='no'><source><address domain bus slot function/> ->
    # -device vfio-pci,host=DDDD:BB:SS.F; <hostdev type='usb'><source><address bus device/> ->
    # -device usb-host,hostbus=B,hostaddr=D (on the VM's USB controller).
    HOSTDEV_PCI=$(kv '",".join("%s:%s:%s.%s" % tuple(x[k][2:] for k in ("domain", "bus", "slot", "function")) for x in d["pci"])')
    HOSTDEV_USB=$(kv '",".join("hostbus=%s,hostaddr=%s" % (x["bus"], x["device"]) for x in d["usb"])')
    vmm_start "-device qemu-xhci,id=usb -device vfio-pci,host=$HOSTDEV_PCI,id=hostdev0 -device usb-host,$HOSTDEV_USB,id=hostdev1"
    vmm_query
    lists_e1000e() { [ -n "$(vmm_bars 32902 4307)" ]; }
    if eventually 60 lists_e1000e; then pass "the VMM realizes $HOSTDEV_PCI: query-pci lists 8086:10d3"; else
        fail "the VMM realizes the PCI host device" "$(guest 'cat /tmp/vmm.err; tail -c 1500 /tmp/vmm.out')"; fi
    usb_listed() { vmm_hmp "info usb"; guest "grep -q 'Product QEMU USB Keyboard, ID: hostdev1' /tmp/vmm.out"; }
    if eventually 30 usb_listed; then pass "... and its USB bus has the keyboard ($HOSTDEV_USB)"; else
        fail "the VMM's USB bus has the keyboard" "$(guest 'cat /tmp/vmm.err; tail -c 1500 /tmp/vmm.out')"; fi
    if eventually 60 vmm_bios_saw 8086:10d3; then pass "... and its SeaBIOS reads the e1000e through vfio"; else
        fail "the nested SeaBIOS reads the e1000e" "$(guest 'tail -20 /tmp/vmm.bios')"; fi

    echo "--- the keyboard's claim deleted while the VMM has the keyboard"
    # QEMU's usb-host claims the keyboard's interface through usbfs: the claim waits for it.
    IFACE=/sys/bus/usb/devices/1-1:1.0
    iface_driver() { guest "basename \$(readlink $IFACE/driver) 2>/dev/null"; }
    on_usbfs() { [ "$(iface_driver)" = usbfs ]; } # once the nested SeaBIOS configures it
    eventually 30 on_usbfs || fail "the VMM claimed the keyboard's interface (driver usbfs)" "$(iface_driver)"
    usb_cond() { kubectl get usbdeviceclaim "$KBD" -o jsonpath="{.status.conditions[?(@.type==\"Ready\")].$1}" 2>/dev/null; }
    usb_in_use() { [ "$(usb_cond reason)" = DeviceInUse ]; }
    offered() { guest 'wget -qO- http://127.0.0.1:9808/metrics' | awk '$1 == "hostdevd_plugin_devices" {print $2}'; }
    OFFERED=$(offered)
    # every version of the claim from its deletion on: one DeviceInUse write per wait
    kubectl get usbdeviceclaim "$KBD" -w -o json 2>/dev/null |
        jq -c --unbuffered '.status.conditions // [] | .[] | select(.type == "Ready") | [.reason, .message]' >"$TEST_DIR/kbd-versions.json" &
    KBD_WATCH=$!
    track "$KBD_WATCH"
    kubectl delete usbdeviceclaim "$KBD" --wait=false >/dev/null
    if eventually 30 usb_in_use; then pass "the deleted keyboard claim waits: Ready=False DeviceInUse"; else
        fail "the deleted keyboard claim waits (DeviceInUse)" "$(kubectl get usbdeviceclaim "$KBD" -o yaml 2>&1 | tail -20)"; fi
    MSG=$(usb_cond message)
    [[ $MSG == "qemu-system-x86 (pid "*") holds /dev/bus/usb/$(printf %03d "$BUSNUM")/$(printf %03d "$DEVNUM") (1 interface claimed through usbfs); "* ]] &&
        pass "... its message names the VMM and the device node: ${MSG%%;*}" || fail "the message names the VMM" "$MSG"
    RV=$(kubectl get usbdeviceclaim "$KBD" -o jsonpath='{.metadata.resourceVersion}')
    sleep 11 # two of the agent's looks (USBCLAIM_BUSY_RETRY, 5 s)
    [ "$(kubectl get usbdevice "$KBD" -o jsonpath='{.status.enabled}')" = true ] &&
        pass "... the USBDevice stays enabled" || fail "the USBDevice stays enabled while the VMM has it"
    [ "$(offered)" = "$OFFERED" ] && [ -n "$OFFERED" ] &&
        pass "... the plugin still offers it ($OFFERED devices offered)" || fail "the plugin still offers the keyboard" "$OFFERED -> $(offered)"
    [ "$(kubectl get usbdeviceclaim "$KBD" -o jsonpath='{.metadata.resourceVersion}')" = "$RV" ] &&
        pass "... and the agent's looks while it waits write nothing" || fail "no write while the claim waits" "$RV -> $(kubectl get usbdeviceclaim "$KBD" -o jsonpath='{.metadata.resourceVersion}')"
    usb_claim_gone() { ! kubectl get usbdeviceclaim "$KBD" >/dev/null 2>&1; }
    T_QUIT=$(now)
    # Killed, not quit: a clean quit reattaches the host's driver itself (libusb), a kill leaves
    # the interface with none until the agent gives it back.
    guest "kill -KILL \$(cat /tmp/vmm.pid); kill \$(cat /tmp/vmm.hold) 2>/dev/null; true"
    eventually 30 vmm_gone || fail "the VMM is killed"
    if eventually 30 usb_claim_gone; then pass "the VMM killed: the keyboard claim is released ($(awk -v a="$T_QUIT" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }') s)"; else
        fail "the keyboard claim is released once the VMM exits" "$(kubectl get usbdeviceclaim "$KBD" -o yaml 2>&1 | tail -20)"; fi
    usb_disabled() { [ "$(kubectl get usbdevice "$KBD" -o jsonpath='{.status.enabled}')" = false ]; }
    eventually 30 usb_disabled && pass "... the USBDevice is no longer enabled" || fail "the USBDevice is disabled after the release"
    back_on_usbhid() { [ "$(iface_driver)" = usbhid ]; }
    eventually 30 back_on_usbhid && pass "... and the keyboard is back on usbhid in the node, after a SIGKILL" || fail "the keyboard is back on usbhid after the VMM was killed" "$(iface_driver)"
    kill "$KBD_WATCH" 2>/dev/null
    in_use_writes() { jq -s '[foreach .[] as $v ({}; {prev: .cur, cur: $v}; select(.cur[0] == "DeviceInUse" and .cur != .prev))] | length' "$TEST_DIR/kbd-versions.json"; }
    jq -r '"       | \(.[0]): \(.[1])"' "$TEST_DIR/kbd-versions.json" | uniq
    expect_ok "one DeviceInUse status written for the wait, across the kill ($(in_use_writes))" test "$(in_use_writes)" -eq 1
    kbd_events() { kubectl get events -o json --field-selector "involvedObject.name=$KBD,reason=DeviceInUse" | jq '[.items[] | select(.type == "Warning") | (.series.count // .count // 1)] | add // 0'; }
    expect_ok "one Warning Event DeviceInUse ($(kbd_events))" test "$(kbd_events)" -eq 1
fi

echo "  claims Ready -> device manager holds both devices ${READY_TO_SEEN:-?} s (host/guest clocks matched to ±$RTT s)"
echo "  kubelet's device manager, per new pod: ${MEDIAN:-?}; test $((SECONDS - T_START))s"
mkdir -p "$ROOT/build/results" && echo "ready-to-seen ${READY_TO_SEEN:-?} s; allocate ${MEDIAN:-?}" >"$ROOT/build/results/e2e-plugins.txt"
finish
