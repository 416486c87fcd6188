#!/usr/bin/env bash
# test/integration/test_usb.sh - USB in `hostdevd agent` (sanitizer build) on a fake sysfs tree
# (test/fixtures/sysfs/usb-server.txt) against the real control plane: USBDevices appear with
# harvester's fields and ours, named by port (two identical devices are two objects); a
# re-plug with new bus/device numbers updates devicePath in place; an unplugged device is
# deleted; a harvester-shaped USBDeviceClaim is enabled (Ready, device enabled, Event); a
# claimed device that is unplugged turns orphaned and comes back, still claimed; a restart with
# nothing changed makes zero writes (audit log); the USB/PCI conflicts are refused with their
# reasons; deleting a claim disables the device and releases it, also when it is orphaned.
# Rescans are triggered with SIGHUP (the kernel's uevents are tested in the qemu node).
SUITE=usb
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

AGENT=$TEST_BIN/hostdevd
DESC=test/fixtures/sysfs/usb-server.txt
NODE=fix-node
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

cluster_start
ADMIN=$TEST_DIR/cluster/admin.kubeconfig
install_crds
create_node "$NODE"
NODE_UID=$(kubectl get node "$NODE" -o jsonpath='{.metadata.uid}')
SYS=$TEST_DIR/sys
DEV=$TEST_DIR/dev
hack/mk-sysfs-fixture.sh "$DESC" "$SYS" >/dev/null
mkdir -p "$TEST_DIR/proc/1" "$TEST_DIR/proc/net"
fake_proc "$TEST_DIR/proc"
PORT=$(free_port)

# The fake tree's device directory of port path $1 (through its bus/usb/devices link).
devdir() { readlink -f "$SYS/bus/usb/devices/$1"; }
# The device nodes the agent checks for (plain files stand in for them here).
mknodes() {
    local p d
    for p in "$SYS"/bus/usb/devices/*; do
        d=$(readlink -f "$p")
        [ -f "$d/devnum" ] && [ -f "$d/idVendor" ] || continue
        mkdir -p "$DEV/bus/usb/$(printf %03d "$(cat "$d/busnum")")"
        : >"$DEV/bus/usb/$(printf %03d "$(cat "$d/busnum")")/$(printf %03d "$(cat "$d/devnum")")"
    done
}
mknodes
start_agent() {
    agent_run --kubeconfig "$ADMIN" --proc-root "$TEST_DIR/proc" --dev-root "$DEV" \
        --usb-ids /usr/share/misc/usb.ids --resync 3600 --uevent-source none -v 2
}
ready() { curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null; }
why_not_ready() { curl -sS "http://127.0.0.1:$PORT/readyz?verbose" 2>&1; }
rescan() { kill -HUP "$AGENT_PID"; }
usbname() { echo "$NODE-$1-${2//./-}"; } # vid:pid-less: usbname VID-PID PORT
field() { kubectl get usbdevice "$1" -o jsonpath="{.status.$2}" 2>/dev/null; }
uid_of() { kubectl get "$1" "$2" -o jsonpath='{.metadata.uid}' 2>/dev/null; }
exists() { kubectl get "$1" "$2" >/dev/null 2>&1; }
gone() { ! exists "$1" "$2"; }
field_is() { [ "$(field "$1" "$2")" = "$3" ]; }
reason() { kubectl get "$1" "$2" -o jsonpath='{.status.conditions[?(@.type=="Ready")].reason}' 2>/dev/null; }
message() { kubectl get "$1" "$2" -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}' 2>/dev/null; }
has_reason() { [ "$(reason "$1" "$2")" = "$3" ]; }
# Moves device $1 to device number $2 (a re-plug into the same port).
replug() {
    local d
    d=$(devdir "$1")
    printf '%s\n' "$2" >"$d/devnum"
    sed -i "s/^DEVNUM=.*/DEVNUM=$(printf %03d "$2")/; s|^DEVNAME=\(bus/usb/[0-9]*\)/.*|DEVNAME=\1/$(printf %03d "$2")|" "$d/uevent"
    mknodes
}
# Unplugs port $1 (its directory and bus/usb/devices links go; kept aside for a re-plug).
unplug() {
    local d
    d=$(devdir "$1")
    mkdir -p "$TEST_DIR/unplugged"
    mv "$d" "$TEST_DIR/unplugged/$1"
    printf '%s\n' "$d" >"$TEST_DIR/unplugged/$1.path"
    mv "$SYS/bus/usb/devices/$1" "$TEST_DIR/unplugged/$1.link"
}
plug() {
    mv "$TEST_DIR/unplugged/$1" "$(cat "$TEST_DIR/unplugged/$1.path")"
    mv "$TEST_DIR/unplugged/$1.link" "$SYS/bus/usb/devices/$1"
}
writes() { hack/audit-requests.py "$TEST_DIR/cluster/audit.log" | cut -d" " -f2; }

STICK=$(usbname 0951-1666 3-2)
TAB3=$(usbname 0627-0001 1-3)
TAB4=$(usbname 0627-0001 1-4)
MOUSE=$(usbname 046d-c52b 1-1.2)
HUB=$(usbname 05e3-0610 1-1)

echo "--- inventory"
start_agent
if eventually 60 ready; then pass "agent ready (/readyz)"; else fail "agent ready (/readyz)" "$(tail -20 "$TEST_DIR/agent.log")"; fi
N=$(kubectl get usbdevices -l "nodename=$NODE" -o name | wc -l)
[ "$N" -eq 5 ] && pass "5 USBDevices (hub and devices; root hubs left out)" || fail "5 USBDevices" "have $N: $(kubectl get usbdevices -o name)"
STICK_DEVNUM=$(cat "$(devdir 3-2)/devnum")
# "<product> (<vendor>)" from usb.ids, then the product string the device reports.
STICK_DESC=$(awk -F'  ' '/^0951 /{v=$2; f=1; next} f && /^\t1666 /{print $2 " (" v ")"; exit} f && /^[0-9a-f]/{exit}' /usr/share/misc/usb.ids)
OUT=$(kubectl get usbdevice "$STICK" -o json 2>&1)
expect_contains "the stick has harvester's fields and ours, a label and an owner" "$OUT" \
    '"vendorID": "0951"' '"productID": "1666"' "\"nodeName\": \"$NODE\"" \
    "\"resourceName\": \"kubevirt.io/$STICK\"" \
    "\"devicePath\": \"/dev/bus/usb/003/$(printf %03d "$STICK_DEVNUM")\"" \
    "\"description\": \"$STICK_DESC [DataTraveler 3.0]\"" \
    '"classType": "Mass Storage"' '"pciAddress": "0000:af:00.2"' '"portPath": "3-2"' \
    '"serial": "E0D55EA573DCF450E9A00B2C"' '"busNum": 3' "\"devNum\": $STICK_DEVNUM" \
    '"speed": "5000"' '"enabled": false' "\"nodename\": \"$NODE\"" "\"uid\": \"$NODE_UID\""
expect_contains "two identical tablets in two ports are two objects" \
    "$(kubectl get usbdevices -o name)" "usbdevice.devices.harvesterhci.io/$TAB3" \
    "usbdevice.devices.harvesterhci.io/$TAB4"
field_is "$MOUSE" classType HID && field_is "$MOUSE" pciAddress 0000:00:14.0 &&
    field_is "$HUB" classType Hub &&
    pass "class from the first interface when the device class is 00; hub behind hub" ||
    fail "class and controller of the device behind the hub" "$(kubectl get usbdevice "$MOUSE" -o yaml)"

echo "--- re-plug and unplug"
UID3=$(uid_of usbdevice "$TAB3")
replug 1-3 42
rescan
if eventually 20 field_is "$TAB3" devicePath /dev/bus/usb/001/042; then
    [ "$(uid_of usbdevice "$TAB3")" = "$UID3" ] && field_is "$TAB3" devNum 42 &&
        pass "a re-plug with a new device number updates devicePath in place (same object)" ||
        fail "re-plug keeps the object" "uid $(uid_of usbdevice "$TAB3") vs $UID3"
else
    fail "a re-plug updates devicePath" "$(field "$TAB3" devicePath)"
fi
unplug 1-4
rescan
if eventually 20 gone usbdevice "$TAB4"; then pass "an unplugged device's object is deleted"; else fail "unplugged device deleted" "still there"; fi

echo "--- claims"
# harvester-shaped: a name, an owner reference to the device, spec.userName; no node.
kubectl create -f - >/dev/null <<EOF
apiVersion: devices.harvesterhci.io/v1beta1
kind: USBDeviceClaim
metadata:
  name: $TAB3
  ownerReferences:
  - {apiVersion: devices.harvesterhci.io/v1beta1, kind: USBDevice, name: $TAB3, uid: $UID3}
spec: {userName: alice}
EOF
if eventually 30 has_reason usbdeviceclaim "$TAB3" Enabled && eventually 20 field_is "$TAB3" enabled true; then
    OUT=$(kubectl get usbdeviceclaim "$TAB3" -o json)
    expect_contains "a harvester-shaped claim is enabled: Ready, node, controller, finalizer; device enabled" \
        "$OUT" "\"nodeName\": \"$NODE\"" '"pciAddress": "0000:00:14.0"' \
        '"devices.harvesterhci.io/release-usb"' "/dev/bus/usb/001/042"
else
    fail "harvester-shaped claim enabled" "reason $(reason usbdeviceclaim "$TAB3"): $(message usbdeviceclaim "$TAB3")"
fi
ev_reasons() { kubectl get events -A --field-selector "involvedObject.name=$1" -o jsonpath='{.items[*].reason}'; }
has_event() { grep -qw "$2" <<<"$(ev_reasons "$1")"; }
if eventually 20 has_event "$TAB3" Enabled; then pass "Event Enabled on the claim"; else fail "Event Enabled" "$(ev_reasons "$TAB3")"; fi

echo "--- orphan and recovery"
unplug 1-3
rescan
if eventually 20 field_is "$TAB3" status orphaned; then
    expect_contains "a claimed device that is unplugged is orphaned, not deleted, and says what to do" \
        "$(field "$TAB3" message) enabled=$(field "$TAB3" enabled)" "unplugged from port 1-3" \
        "plug it back into the same port" "delete the claim" "enabled=true"
else
    fail "claimed device orphaned" "$(kubectl get usbdevice "$TAB3" -o yaml 2>&1 | tail -20)"
fi
if eventually 20 has_reason usbdeviceclaim "$TAB3" DeviceUnplugged; then pass "the claim says DeviceUnplugged"; else fail "claim DeviceUnplugged" "$(reason usbdeviceclaim "$TAB3")"; fi
plug 1-3
replug 1-3 43
rescan
if eventually 20 field_is "$TAB3" devicePath /dev/bus/usb/001/043 && eventually 20 has_reason usbdeviceclaim "$TAB3" Enabled; then
    [ "$(uid_of usbdevice "$TAB3")" = "$UID3" ] && [ -z "$(field "$TAB3" status)" ] && field_is "$TAB3" enabled true &&
        pass "plugged back into its port: the same object, unmarked, still claimed and enabled" ||
        fail "recovered device" "$(kubectl get usbdevice "$TAB3" -o yaml)"
else
    fail "orphan recovers" "$(field "$TAB3" devicePath) $(reason usbdeviceclaim "$TAB3")"
fi

echo "--- restart"
stop_agent "agent exits 0 on SIGTERM (no leaks)"
BEFORE=$(writes)
start_agent
if eventually 60 ready; then pass "agent ready again"; else fail "agent ready again" "$(why_not_ready; tail -5 "$TEST_DIR/agent.log")"; fi
sleep 2
AFTER=$(writes)
[ "$AFTER" -eq "$BEFORE" ] && pass "a restart with nothing changed makes zero writes (audit log)" ||
    fail "zero writes on restart" "$((AFTER - BEFORE)) writes; $(grep -E 'Creating|Patching|Deleting' "$TEST_DIR/agent.log" | tail -5)"

echo "--- conflicts"
PCI_CLAIM=$NODE-000000140
printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: %s}\nspec: {address: "0000:00:14.0", nodeName: %s, userName: alice}\n' \
    "$PCI_CLAIM" "$NODE" | kubectl create -f - >/dev/null
if eventually 30 has_reason pcideviceclaim "$PCI_CLAIM" USBDevicesEnabled; then
    expect_contains "a PCIDeviceClaim on a USB controller with enabled devices is refused, naming them" \
        "$(message pcideviceclaim "$PCI_CLAIM")" "$TAB3" "delete their USBDeviceClaims first"
else
    fail "PCI claim on the USB controller refused" "$(reason pcideviceclaim "$PCI_CLAIM"): $(message pcideviceclaim "$PCI_CLAIM")"
fi
printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: USBDeviceClaim\nmetadata: {name: %s}\nspec: {userName: alice}\n' \
    "$MOUSE" | kubectl create -f - >/dev/null
if eventually 30 has_reason usbdeviceclaim "$MOUSE" ControllerPassedThrough; then
    expect_contains "a USBDeviceClaim behind a controller claimed for PCI passthrough is refused" \
        "$(message usbdeviceclaim "$MOUSE") enabled=$(field "$MOUSE" enabled)" "$PCI_CLAIM" "delete that claim first" "enabled=false"
else
    fail "USB claim behind a claimed controller refused" "$(reason usbdeviceclaim "$MOUSE"): $(message usbdeviceclaim "$MOUSE")"
fi
kubectl delete pcideviceclaim "$PCI_CLAIM" --wait=false >/dev/null
if eventually 30 gone pcideviceclaim "$PCI_CLAIM" && eventually 30 has_reason usbdeviceclaim "$MOUSE" Enabled; then
    pass "once the PCI claim is gone, the USB claim is enabled"
else
    fail "USB claim enabled after the PCI claim went" "$(reason usbdeviceclaim "$MOUSE")"
fi
NOPE=$(usbname 0951-1666 3-9)
printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: USBDeviceClaim\nmetadata: {name: %s}\nspec: {userName: alice}\n' \
    "$NOPE" | kubectl create -f - >/dev/null
if eventually 30 has_reason usbdeviceclaim "$NOPE" DeviceNotFound; then pass "a claim of a device that is not there: DeviceNotFound"; else fail "DeviceNotFound" "$(reason usbdeviceclaim "$NOPE")"; fi

echo "--- release"
kubectl delete usbdeviceclaim "$MOUSE" --wait=false >/dev/null
if eventually 30 gone usbdeviceclaim "$MOUSE" && field_is "$MOUSE" enabled false; then
    pass "deleting a claim disables the device and releases the claim"
else
    fail "claim released" "claim exists: $(exists usbdeviceclaim "$MOUSE" && echo yes), enabled $(field "$MOUSE" enabled)"
fi
unplug 1-3
rescan
eventually 20 field_is "$TAB3" status orphaned || fail "orphaned again" "$(field "$TAB3" status)"
kubectl delete usbdeviceclaim "$TAB3" --wait=false >/dev/null
if eventually 30 gone usbdeviceclaim "$TAB3" && eventually 30 gone usbdevice "$TAB3"; then
    pass "deleting the claim of an orphan releases it and the orphan's object goes"
else
    fail "orphan cleaned up" "claim: $(exists usbdeviceclaim "$TAB3" && echo exists), device: $(exists usbdevice "$TAB3" && echo exists)"
fi
kubectl delete usbdeviceclaim "$NOPE" --wait=false >/dev/null
if eventually 30 gone usbdeviceclaim "$NOPE"; then pass "a claim that never enabled anything is released at once"; else fail "NOPE released" "still there"; fi
OUT=$(curl -fsS "http://127.0.0.1:$PORT/metrics")
expect_contains "USB metrics" "$OUT" "hostdevd_usb_devices 3" "hostdevd_usb_scans_total" \
    'hostdevd_usb_claim_results_total{result="released"}' 'controller_runtime_reconcile_total{controller="usbdevice"'
stop_agent "agent exits 0 at the end"
finish
