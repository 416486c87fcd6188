#!/usr/bin/env bash
# test/e2e/test_usb.sh - USB on a real kernel: a qemu node (hack/qemu-node.sh: xhci at
# 0000:00:06.0 with usb-kbd on port 1, usb-tablet on port 2, a usb-storage stick on port 3)
# whose agent runs with a node-bound token under the project's RBAC and admission policies.
# Checks: the guest's devices appear as USBDevices with the fields sysfs gives (and the agent's
# reader agrees with libudev's enumeration); QMP device_add of a keyboard on port 4 creates its
# object through a kernel uevent, device_del deletes it, the same device re-added to the same
# port gets the same name (timed: median and worst of 3; 10 in make test-long, test_usb_all.sh;
# make bench's latency section times it); a claimed device that is removed
# turns orphaned (its claim Ready=False DeviceUnplugged, both saying to plug it back into the
# same port) and recovers, still claimed, when re-added; a PCIDeviceClaim on the xhci with an
# enabled device behind it and a USBDeviceClaim behind the claimed xhci are refused with their
# reasons; once no device behind it is enabled, the PCIDeviceClaim passes the xhci through, its
# USB devices' objects go without becoming orphans, and they come back when the claim is
# deleted; a claimed device removed again, its claim deleted while it is away: the claim goes at
# once with the orphaned object, and the device put back is a new, unclaimed object.
SUITE=e2e-usb
# shellcheck source=test/e2e/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1
T_START=$SECONDS
NODE=qusb
XHCI=0000:00:06.0
RUNS=${USB_HOTPLUG_RUNS:-3}

cluster_start
install_crds
create_node "$NODE"

KBD=$NODE-0627-0001-1-1
TABLET=$NODE-0627-0001-1-2
STICK=$NODE-46f4-0001-2-3
KBD2=$NODE-0627-0001-1-4
XHCI_CLAIM=$NODE-000000060

usbdevs() { kubectl get usbdevices -l "nodename=$NODE" -o name 2>/dev/null | sed 's|.*/||' | sort; }
field() { kget "$1" "$2" ".status.$3"; } # (polled: curl and jq, lib.sh's kget)
field_is() { [ "$(field usbdevice "$1" "$2")" = "$3" ]; }
exists() { kexists "$1" "$2"; }
gone() { ! exists "$1" "$2"; }
reason() { kget "$1" "$2" '.status.conditions[]? | select(.type == "Ready") | .reason'; }
message() { kget "$1" "$2" '.status.conditions[]? | select(.type == "Ready") | .message'; }
has_reason() { [ "$(reason "$1" "$2")" = "$3" ]; }
usb_claim() {
    printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: USBDeviceClaim\nmetadata: {name: %s}\nspec: {}\n' "$1" |
        kubectl create -f - >/dev/null
}
guest_attr() { guest "cat /sys/bus/usb/devices/$1/$2"; }
guest_driver() { guest "basename \$(readlink /sys/bus/pci/devices/$1/driver) 2>/dev/null"; }
on_driver() { [ "$(guest_driver "$1")" = "$2" ]; }
guest_port_present() { guest "test -e /sys/bus/usb/devices/$1"; }
# The device path a port has in the guest now.
guest_devpath() { printf '/dev/bus/usb/%03d/%03d' "$(guest_attr "$1" busnum)" "$(guest_attr "$1" devnum)"; }

echo "--- boot"
if node_boot "$NODE"; then pass "node $NODE boots (${BOOT_SECONDS}s)"; else fail "node boots"; finish; fi
if eventually 120 guest_agent_ready; then pass "agent ready with its node-bound token"; else fail "agent ready" "$(node_logs)"; finish; fi

echo "--- inventory"
want_three() { [ "$(usbdevs | tr '\n' ' ')" = "$KBD $TABLET $STICK " ]; }
if eventually 60 want_three; then pass "the keyboard, the tablet and the stick are USBDevices, named by port"; else
    fail "three USBDevices" "$(usbdevs)"; fi
OUT=$(kubectl get usbdevice "$STICK" -o json)
expect_contains "the stick's fields are the guest's sysfs facts" "$OUT" \
    '"vendorID": "46f4"' '"productID": "0001"' '"portPath": "2-3"' "\"pciAddress\": \"$XHCI\"" \
    "\"devicePath\": \"$(guest_devpath 2-3)\"" '"serial": "HOSTDEVD-STICK-1"' \
    '"classType": "Mass Storage"' "\"description\": \"Unknown (QEMU) [$(guest_attr 2-3 product)]\"" \
    "\"speed\": \"$(guest_attr 2-3 speed)\"" "\"resourceName\": \"kubevirt.io/$STICK\"" '"enabled": false'
field_is "$KBD" classType HID && field_is "$TABLET" classType HID && field_is "$KBD" devicePath "$(guest_devpath 1-1)" &&
    pass "two identical 0627:0001 devices in ports 1 and 2: two objects, each with its own device path" ||
    fail "keyboard and tablet" "$(kubectl get usbdevices -o wide)"
MINE=$(guest 'hostdevd usb list | cut -f1 | sort | tr "\n" " "')
UDEV=$(guest 'hostdevd usb list --udev | sort | tr "\n" " "')
[ -n "$MINE" ] && [ "$MINE" = "$UDEV" ] && pass "the agent's sysfs reader and libudev's enumeration agree ($MINE)" ||
    fail "sysfs reader vs libudev" "ours: $MINE; libudev: $UDEV"

echo "--- hotplug through QMP"
# Every watch event of this node's USBDevices, timestamped on arrival: "<time> <TYPE> <name>".
EVENTS=$TEST_DIR/usb-events
kubectl get usbdevices -l "nodename=$NODE" --watch-only --output-watch-events \
    -o jsonpath='{.type} {.object.metadata.name}{"\n"}' 2>/dev/null |
    while read -r type name; do echo "$(date +%s.%N) $type $name"; done >"$EVENTS" &
WATCH_PID=$!
sleep 2
event_after() { # since TYPE name: the time of the first such event after `since`
    awk -v t="$1" -v ty="$2" -v n="$3" '$1 >= t && $2 == ty && $3 == n {print $1; exit}' "$EVENTS"
}
has_event_after() { [ -n "$(event_after "$@")" ]; }
LAT=()
FAILS=0
for i in $(seq 1 "$RUNS"); do
    T0=$(date +%s.%N)
    node_hmp 'device_add usb-kbd,id=k2,bus=xhci.0,port=4' >/dev/null
    if eventually 30 has_event_after "$T0" ADDED "$KBD2"; then
        LAT+=("$(awk -v a="$(event_after "$T0" ADDED "$KBD2")" -v b="$T0" 'BEGIN {printf "%.3f", a - b}')")
    else
        FAILS=$((FAILS + 1))
    fi
    T1=$(date +%s.%N)
    node_hmp 'device_del k2' >/dev/null
    eventually 30 has_event_after "$T1" DELETED "$KBD2" || FAILS=$((FAILS + 1))
    eventually 10 bash -c "! python3 '$GUESTCTL' '$NODE_DIR/ctl.sock' exec --timeout 5 -- 'test -e /sys/bus/usb/devices/1-4'" || true
done
[ "$FAILS" -eq 0 ] && [ "${#LAT[@]}" -eq "$RUNS" ] &&
    pass "$RUNS x device_add on port 4 creates $KBD2, device_del deletes it (same name every time)" ||
    fail "hotplug add/delete" "$FAILS misses; $(tail -5 "$EVENTS")"
if [ "${#LAT[@]}" -gt 0 ]; then
    STATS=$(printf '%s\n' "${LAT[@]}" | sort -n | awk '{v[NR]=$1} END {m = NR % 2 ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2; printf "median %.3f s, worst %.3f s (n=%d)", m, v[NR], NR}')
    echo "  QMP device_add -> USBDevice object: $STATS"
    mkdir -p "$ROOT/build/results" && echo "$STATS" >"$ROOT/build/results/usb-hotplug.txt"
fi

echo "--- a claimed device removed and re-added"
node_hmp 'device_add usb-kbd,id=k2,bus=xhci.0,port=4' >/dev/null
eventually 30 exists usbdevice "$KBD2" || fail "keyboard on port 4 back" "$(usbdevs)"
usb_claim "$KBD2"
if eventually 30 has_reason usbdeviceclaim "$KBD2" Enabled && eventually 20 field_is "$KBD2" enabled true; then
    pass "USBDeviceClaim $KBD2 enabled (Ready, device enabled)"
else
    fail "claim enabled" "$(reason usbdeviceclaim "$KBD2"): $(message usbdeviceclaim "$KBD2")"
fi
UID2=$(kubectl get usbdevice "$KBD2" -o jsonpath='{.metadata.uid}')
node_hmp 'device_del k2' >/dev/null
if eventually 30 field_is "$KBD2" status orphaned && eventually 20 has_reason usbdeviceclaim "$KBD2" DeviceUnplugged; then
    expect_contains "removed while claimed: orphaned, with what to do; the claim waits" \
        "$(field usbdevice "$KBD2" message)" "unplugged from port 1-4" "plug it back into the same port"
    expect_contains "... and the claim's Ready=False DeviceUnplugged says the same" \
        "$(message usbdeviceclaim "$KBD2")" "unplugged from port 1-4" "plug it back into the same port"
else
    fail "orphaned" "$(kubectl get usbdevice "$KBD2" -o yaml 2>&1 | tail -12)"
fi
eventually 10 bash -c "! python3 '$GUESTCTL' '$NODE_DIR/ctl.sock' exec --timeout 5 -- 'test -e /sys/bus/usb/devices/1-4'" || true
node_hmp 'device_add usb-kbd,id=k2,bus=xhci.0,port=4' >/dev/null
recovered() { has_reason usbdeviceclaim "$KBD2" Enabled && [ -z "$(field usbdevice "$KBD2" status)" ]; }
if eventually 30 recovered; then
    [ "$(kubectl get usbdevice "$KBD2" -o jsonpath='{.metadata.uid}')" = "$UID2" ] &&
        field_is "$KBD2" enabled true && field_is "$KBD2" devicePath "$(guest_devpath 1-4)" &&
        pass "re-added to port 4: the same object, still claimed, devicePath $(guest_devpath 1-4)" ||
        fail "recovered object" "$(kubectl get usbdevice "$KBD2" -o yaml | tail -20)"
else
    fail "orphan recovers" "$(reason usbdeviceclaim "$KBD2"); $(field usbdevice "$KBD2" status)"
fi

echo "--- conflicts"
printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: %s}\nspec: {address: "%s", nodeName: %s}\n' \
    "$XHCI_CLAIM" "$XHCI" "$NODE" | kubectl create -f - >/dev/null
if eventually 60 has_reason pcideviceclaim "$XHCI_CLAIM" USBDevicesEnabled; then
    expect_contains "a PCIDeviceClaim on the xhci with an enabled USB device behind it is refused, naming it" \
        "$(message pcideviceclaim "$XHCI_CLAIM")" "$KBD2" "delete their USBDeviceClaims first"
else
    fail "xhci claim refused" "$(reason pcideviceclaim "$XHCI_CLAIM"): $(message pcideviceclaim "$XHCI_CLAIM")"
fi
expect_ok "the xhci stays on xhci_hcd" on_driver "$XHCI" xhci_hcd
usb_claim "$TABLET"
if eventually 30 has_reason usbdeviceclaim "$TABLET" ControllerPassedThrough; then
    expect_contains "a USBDeviceClaim behind the claimed xhci is refused" \
        "$(message usbdeviceclaim "$TABLET")" "$XHCI_CLAIM" "delete that claim first"
else
    fail "tablet claim refused" "$(reason usbdeviceclaim "$TABLET"): $(message usbdeviceclaim "$TABLET")"
fi
kubectl delete usbdeviceclaim "$TABLET" --wait=false >/dev/null
eventually 30 gone usbdeviceclaim "$TABLET" || fail "refused tablet claim released" "still there"

echo "--- the xhci passed through, then given back"
kubectl delete usbdeviceclaim "$KBD2" --wait=false >/dev/null
if eventually 30 gone usbdeviceclaim "$KBD2"; then pass "keyboard claim released"; else fail "keyboard claim released" "$(reason usbdeviceclaim "$KBD2")"; fi
bound() { [ "$(kubectl get pcideviceclaim "$XHCI_CLAIM" -o jsonpath='{.status.passthroughEnabled}')" = true ]; }
if eventually 90 bound && on_driver "$XHCI" vfio-pci; then
    pass "with no enabled USB device behind it, the xhci claim binds it to vfio-pci"
else
    fail "xhci bound" "$(reason pcideviceclaim "$XHCI_CLAIM"): $(message pcideviceclaim "$XHCI_CLAIM")"
fi
no_usb() { [ -z "$(usbdevs)" ]; }
orphans() { kubectl get usbdevices -o jsonpath='{.items[?(@.status.status=="orphaned")].metadata.name}'; }
if eventually 30 no_usb && [ -z "$(orphans)" ]; then
    pass "its USB devices' objects are gone, none left orphaned"
else
    fail "USB objects after the xhci went" "$(usbdevs); orphans: $(orphans)"
fi
kubectl delete pcideviceclaim "$XHCI_CLAIM" --wait=false >/dev/null
back() { [ "$(usbdevs | tr '\n' ' ')" = "$KBD $TABLET $KBD2 $STICK " ]; }
if eventually 90 gone pcideviceclaim "$XHCI_CLAIM" && on_driver "$XHCI" xhci_hcd && eventually 60 back; then
    pass "xhci restored to xhci_hcd: its four USB devices are back with the same names"
else
    fail "USB devices back" "driver $(guest_driver "$XHCI"); $(usbdevs | tr '\n' ' ')"
fi
echo "--- a claimed device removed, its claim deleted while it is away, then put back"
port4_gone() { ! python3 "$GUESTCTL" "$NODE_DIR/ctl.sock" exec --timeout 5 -- 'test -e /sys/bus/usb/devices/1-4'; }
usb_claim "$KBD2"
eventually 30 has_reason usbdeviceclaim "$KBD2" Enabled || fail "claim enabled again" "$(reason usbdeviceclaim "$KBD2")"
UID3=$(kubectl get usbdevice "$KBD2" -o jsonpath='{.metadata.uid}')
node_hmp 'device_del k2' >/dev/null
eventually 30 field_is "$KBD2" status orphaned || fail "orphaned again" "$(field usbdevice "$KBD2" status)"
kubectl delete usbdeviceclaim "$KBD2" --wait=false >/dev/null
if eventually 30 gone usbdeviceclaim "$KBD2" && eventually 30 gone usbdevice "$KBD2"; then
    pass "the claim of an unplugged device deletes at once, and the orphaned object goes with it"
else
    fail "orphan released" "claim: $(reason usbdeviceclaim "$KBD2"); device: $(field usbdevice "$KBD2" status)"
fi
eventually 10 port4_gone || true
node_hmp 'device_add usb-kbd,id=k2,bus=xhci.0,port=4' >/dev/null
fresh() {
    exists usbdevice "$KBD2" && field_is "$KBD2" enabled false && [ -z "$(field usbdevice "$KBD2" status)" ] &&
        [ "$(kubectl get usbdevice "$KBD2" -o jsonpath='{.metadata.uid}')" != "$UID3" ]
}
if eventually 30 fresh; then pass "put back on port 4: a new object, not enabled, not orphaned, no claim"; else
    fail "put back after release" "$(kubectl get usbdevice "$KBD2" -o yaml 2>&1 | tail -12)"; fi

kill "$WATCH_PID" 2>/dev/null
echo "  hotplug ${STATS:-?}; test $((SECONDS - T_START))s"
finish
