#!/usr/bin/env bash
# test/long/test_removal.sh - surprise removal of a claimed PCI device on a real kernel (issue 46;
# make test-long: it boots a node and waits on the guest's hotplug). A qemu node booted with
# hack/qemu-node.sh --hotplug has an e1000e (qemu id hotnic) behind a hotplug-capable PCIe root
# port of its own; QMP `device_del` takes it away while the node runs (q35's ACPI PCI hotplug: the
# guest's acpiphp ejects it), `device_add` with the same id, bus and address puts it back. The
# controller runs on the host (KubeVirt v1.9.0's kubevirts CRD and a CR), kubelet's own device
# manager (test/kubeletpeer, watching) in the guest.
#   (a) claimed (PCIDeviceClaim, bound to vfio-pci), no VM: device_del -> the agent sees it from
#       the kernel's uevent; the PCIDevice is kept, Healthy=False Removed, with a Warning Event
#       DeviceRemoved that says what to do; the claim says Ready=False DeviceRemoved and stays
#       passthroughEnabled (not deleted); kubelet's device manager holds the device Unhealthy
#       (allocatable 0); KubeVirt's CR keeps its permittedHostDevices entry; the DRA pool offers it
#       nowhere; the agent neither restarted nor logged an error.
#   (b) device_add: the same ids -> Healthy again (Event DeviceReturned), the claim binds it again
#       (Ready, vfio-pci), kubelet's device manager Healthy again.
#   (c) a VMM in the guest holds /dev/vfio/<group>: device_del -> the guest's removal blocks in
#       vfio (the kernel relays the request to the VMM); the device stays on vfio-pci, nothing is
#       marked; the VMM stopped -> the removal completes -> Removed as in (a); added back ->
#       healthy and bound again. At the end the claim is deleted: e1000e again, in the DRA pool
#       untainted.
# Prints device_del -> gone from the guest's sysfs, -> the agent's log line, -> the PCIDevice's
# condition, -> the claim's, -> kubelet's device manager Unhealthy; and the way back.
SUITE=long-removal
# shellcheck source=test/e2e/lib.sh
. "$(dirname "$0")/../e2e/lib.sh"
cd "$ROOT" || exit 1
T_START=$SECONDS
NODE=qhot
NIC=0000:01:00.0 # the hotplug e1000e (hack/qemu-node.sh devices, --hotplug)
DEV=$NODE-000001000
HOTNIC=e1000e,netdev=n4,id=hotnic,bus=hotrp,addr=00.0,mac=52:54:00:00:08:00,romfile=

PEER=$(hack/kubeletpeer-build.sh) || { fail "kubelet's device manager builds (hack/kubeletpeer-build.sh)"; finish; }
[ -x "$E2E_AGENT" ] || make -C "$ROOT" bin/hostdevd >/dev/null
cluster_start
install_crds
create_node "$NODE"
install_kubevirt '{pciHostDevices: []}' || fail "KubeVirt's CRD and CR"
CTL_PORT=$(free_port)
"$E2E_AGENT" controller --kubeconfig "$TEST_DIR/cluster/admin.kubeconfig" --listen "127.0.0.1:$CTL_PORT" \
    --id removal -v 1 >"$TEST_DIR/controller.log" 2>&1 &
track $!

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

echo "--- boot (with the hotplug e1000e, a VMM and kubelet's device manager in the guest)"
if node_boot "$NODE" --hotplug --vmm --memory 1024 --extra "$PEER:/usr/bin/kubeletpeer"; then
    pass "node $NODE boots (${BOOT_SECONDS}s)"; else fail "node boots"; finish; fi
if eventually 120 guest_agent_ready; then pass "agent ready"; else fail "agent ready" "$(node_logs)"; finish; fi
# The guest's clock minus the host's (the middle of a round trip), to place guest times.
H0=$(now)
G=$(guest 'date +%s.%N')
SKEW=$(awk -v g="$G" -v a="$H0" -v b="$(now)" 'BEGIN {printf "%.3f", g - (a + b) / 2}')

echo "--- the layout: the other devices as before, the hotplug e1000e alone in its group"
OUT=$(guest "for d in 0000:00:04.0 0000:00:05.0 0000:00:08.0 $NIC; do p=/sys/bus/pci/devices/\$d
echo \$d \$(cat \$p/vendor):\$(cat \$p/device) \$(basename \$(readlink \$p/iommu_group)) \$(basename \$(readlink \$p/driver)); done")
WANT="0000:00:04.0 0x8086:0x10d3 3 e1000e
0000:00:05.0 0x8086:0x10d3 4 e1000e
0000:00:08.0 0x1b36:0x000c 6 pcieport
$NIC 0x8086:0x10d3 8 e1000e"
[ "$OUT" = "$WANT" ] && pass "00:04.0 and 00:05.0 in groups 3 and 4 as without --hotplug; the root port 00:08.0 group 6, $NIC group 8 on e1000e" ||
    fail "the layout" "$OUT"
GROUP=$(guest "basename \$(readlink /sys/bus/pci/devices/$NIC/iommu_group)")
expect_ok "group $GROUP holds $NIC only" test "$(guest "ls /sys/kernel/iommu_groups/$GROUP/devices")" = "$NIC"
HP=$(guest 'dmesg | grep -i -e acpiphp -e pciehp')
echo "  the guest's hotplug drivers: $(tr '\n' ';' <<<"$HP")"
if grep -q 'acpiphp: Slot' <<<"$HP" && ! grep -q 'pciehp 0000:00:08.0' <<<"$HP"; then
    pass "the root port's slot is ACPI's (acpiphp registered it; pciehp did not take 00:08.0)"
else fail "ACPI PCI hotplug" "$HP"; fi

echo "--- kubelet's device manager, then the claim"
RES=$(kubectl get pcidevice "$DEV" -o jsonpath='{.status.resourceName}')
# it allocates the device to a pod once offered (KEP-4680's device-plugin path: that pod's
# allocatedResourcesStatus, as kubelet makes it, is in every line of the watch)
guest "kubeletpeer --wait-resources 1 --timeout 300s --allocate '$RES' --watch-file /tmp/peer.watch \
    --watch-for 1200s >/tmp/peer.json 2>/tmp/peer.log &"
eventually 120 guest 'test -S /var/lib/kubelet/device-plugins/kubelet.sock' ||
    fail "kubelet.sock served in the guest" "$(guest 'cat /tmp/peer.log')"
claim "$NIC"
if eventually 90 enabled "$NIC"; then pass "claim $DEV passthroughEnabled"; else fail "claim bound" "$(reason "$NIC"): $(message "$NIC")"; finish; fi
expect_ok "$NIC on vfio-pci" on_driver "$NIC" vfio-pci
cr_json() { kubectl get kubevirt -n kubevirt kubevirt -o json; }
has_entry() { cr_json | jq -e --arg r "$RES" '[.spec.configuration.permittedHostDevices.pciHostDevices[]? | select(.resourceName == $r)] | length == 1' >/dev/null; }
no_entry() { ! has_entry; }
if eventually 30 has_entry; then pass "KubeVirt's CR permits $RES"; else fail "CR entry" "$(cr_json | jq -c .spec.configuration); $(tail -5 "$TEST_DIR/controller.log")"; fi
# What kubelet's device manager holds of the NIC, from a line of the watch: "<its health in the
# pod's allocatedResourcesStatus>/<capacity>/<allocatable>" of the resource (Healthy/1/1;
# Unhealthy/1/0: listed Unhealthy; a device the plugin no longer lists leaves capacity 0 and the
# pod's status Healthy). peer_first: the guest time of the first line after guest time $2 that says $1.
PEER_STATE='"\([.pod[]? | select(.name == $r) | .resources[]? | select(.resourceID == $id) | .health] | first // "none")/\(.capacity[$r] // 0)/\(.allocatable[$r] // 0)"'
peer_state() { guest 'tail -1 /tmp/peer.watch 2>/dev/null' | jq -r --arg r "$RES" --arg id "$NIC" "$PEER_STATE"; }
peer_is() { [ "$(peer_state)" = "$1" ]; }
peer_first() {
    guest 'cat /tmp/peer.watch' | jq -r --arg r "$RES" --arg id "$NIC" --arg s "$1" --argjson after "$2" \
        "select(.t > \$after and ($PEER_STATE) == \$s) | .t" | head -1
}
if eventually 60 peer_is Healthy/1/1; then pass "kubelet's device manager holds $NIC Healthy, allocated to a pod"; else
    fail "device manager" "$(peer_state); $(guest 'tail -3 /tmp/peer.watch; tail -5 /tmp/peer.log')"; fi
APID=$(guest 'pidof hostdevd')

# The state of the device, claim, Event and CR; the guest's clocks for the agent's log lines.
healthy() { kget pcidevice "$DEV" '.status.conditions[]? | select(.type == "Healthy") | "\(.status)/\(.reason)"'; }
is_health() { [ "$(healthy)" = "$1" ]; }
health_message() { kget pcidevice "$DEV" '.status.conditions[]? | select(.type == "Healthy") | .message'; }
passthrough() { kget pcideviceclaim "$DEV" .status.passthroughEnabled; }
claim_is() { [ "$(reason "$NIC")/$(passthrough)" = "$1" ]; }
# "KIND TYPE REASON: MESSAGE" of the Events on objects named $1 last seen at or after host time $2
# (their times are the agent's: the guest's clock, which may be seconds behind the host's)
events_of() {
    local since
    since=$(awk -v h="$2" -v k="$SKEW" 'BEGIN {printf "%d", h + k - 1}')
    kubectl get events -A --field-selector "involvedObject.name=$1" -o json | jq -r --arg since "$(date -u -d "@$since" +%FT%TZ)" \
        '.items[] | select([.series.lastObservedTime, .lastTimestamp, .eventTime] | map(select(. != null)) | max >= $since)
        | "\(.involvedObject.kind) \(.type) \(.reason): \(.message)"'
}
gone_in_guest() { ! guest "test -e /sys/bus/pci/devices/$NIC"; }
# the guest time (Unix seconds) of the last agent log line with fixed string $1 (klog: HH:MM:SS.us)
log_time() {
    local hms
    hms=$(guest "grep -F '$1' /var/log/hostdevd.log | tail -1" | awk '{print $2}')
    [ -n "$hms" ] && date -u -d "$(date -u +%F) $hms" +%s.%N
}
in_pool() { kubectl get resourceslices -o json | jq -e --arg a "$NIC" '[.items[].spec.devices[]? | select(.attributes["resource.kubernetes.io/pciBusID"].string == $a)] | length > 0' >/dev/null; }
tainted_in_pool() { kubectl get resourceslices -o json | jq -r --arg a "$NIC" '.items[].spec.devices[]? | select(.attributes["resource.kubernetes.io/pciBusID"].string == $a) | .taints // [] | map(.key) | join(",")'; }
# host seconds from host time $1 to guest time $2 (the skew taken out)
to_guest() { awk -v g="$2" -v k="$SKEW" -v h="$1" 'BEGIN {printf "%.2f", g - k - h}'; }

# removed LABEL T0: the checks after a removal that completed at host time T0 (device_del, or the
# VMM's exit in (c)); prints the times
removed() {
    local t0=$2 t_gone t_cond t_claim t_log t_peer why
    if eventually 60 gone_in_guest; then t_gone=$(now); pass "$1: $NIC gone from the guest's sysfs"; else
        fail "$1: gone from the guest" "$(guest 'dmesg | tail -5')"; return; fi
    if eventually 30 is_health False/Removed; then t_cond=$(now); pass "$1: PCIDevice $DEV kept, Healthy=False Removed"; else
        fail "$1: PCIDevice Removed" "$(healthy): $(kubectl get pcidevices -o wide 2>&1 | tail -3)"; fi
    expect_contains "$1: its message says what to do" "$(health_message)" "Put the device back"
    if eventually 30 claim_is DeviceRemoved/true; then t_claim=$(now); pass "$1: claim $DEV Ready=False DeviceRemoved, still passthroughEnabled"; else
        fail "$1: the claim says so" "$(reason "$NIC")/$(passthrough): $(message "$NIC")"; fi
    expect_contains "$1: the claim's message names the device and what to do" "$(message "$NIC")" "device $NIC: it is gone from the PCI bus while PCIDeviceClaim $DEV holds it"
    # (a repeat of the same Event is counted in its series, written at most every 30 s)
    event_seen() { grep -q "^$1" <<<"$(events_of "$DEV" "$t0")"; }
    if eventually 40 event_seen "PCIDevice Warning DeviceRemoved: it is gone from the PCI bus while PCIDeviceClaim $DEV holds it"; then
        pass "$1: Warning Event DeviceRemoved on the PCIDevice"; else fail "$1: Event DeviceRemoved" "since $t0: $(events_of "$DEV" "$t0"); all: $(kubectl get events -A -o json | jq -c '.items[] | [.involvedObject.kind, .involvedObject.name, .reason, .eventTime, .lastTimestamp, .series]')"; fi
    if eventually 40 event_seen "PCIDeviceClaim Warning DeviceRemoved: device $NIC: it is gone"; then
        pass "$1: Warning Event DeviceRemoved on the claim"; else fail "$1: the claim's Event" "$(events_of "$DEV" 0)"; fi
    if eventually 30 peer_is Unhealthy/1/0; then pass "$1: kubelet's device manager holds $NIC Unhealthy (capacity 1, allocatable 0; the pod's allocatedResourcesStatus Unhealthy)"; else
        fail "$1: device manager Unhealthy" "$(peer_state); $(guest 'tail -2 /tmp/peer.watch')"; fi
    # the entry stays: a VM may hold the device (the controller answered the claim's change at once
    # in the old code, which removed it)
    if has_entry && ! eventually 5 no_entry; then pass "$1: KubeVirt's CR keeps its permittedHostDevices entry"; else
        fail "$1: CR entry kept" "$(cr_json | jq -c .spec.configuration.permittedHostDevices)"; fi
    if in_pool; then fail "$1: the DRA pool does not offer it" "$(tainted_in_pool)"; else pass "$1: the DRA pool offers it nowhere (claimed, and gone)"; fi
    kexists pcideviceclaim "$DEV" && pass "$1: the claim is not deleted" || fail "$1: the claim exists"
    [ "$(guest 'pidof hostdevd')" = "$APID" ] && pass "$1: the agent did not restart (pid $APID)" ||
        fail "$1: agent pid" "$(guest 'pidof hostdevd; agentctl status')"
    t_log=$(log_time "Held PCI device is gone; marked unhealthy")
    why=$(guest "grep -B5 -F 'Held PCI device is gone' /var/log/hostdevd.log | grep -F 'Scanned PCI devices' | tail -1" | grep -o 'why=[a-z"]*')
    echo "  the agent saw it from: $why; $(guest "grep -F 'Held PCI device is gone' /var/log/hostdevd.log | tail -1")"
    t_peer=$(peer_first Unhealthy/1/0 "$(awk -v h="$t0" -v k="$SKEW" 'BEGIN {printf "%.3f", h + k}')")
    echo "  times from $1's start: gone from sysfs $(secs "$t0" "$t_gone") s, agent log $(to_guest "$t0" "$t_log") s," \
        "PCIDevice Removed $(secs "$t0" "${t_cond:-$t0}") s (polled), claim $(secs "$t0" "${t_claim:-$t0}") s (polled)," \
        "device manager Unhealthy $([ -n "$t_peer" ] && echo "$(to_guest "$t0" "$t_peer") s" || echo "before (it follows the driver link, gone when the removal began)");" \
        "slice taint: none (not in the pool)"
}

# back LABEL: device_add, then the checks of a device back with its ids
back() {
    local t0 t_there t_cond t_bound t_peer g
    qemu_has_nic() { node_hmp 'qom-list /machine/peripheral' | grep -q '^hotnic '; }
    eventually 30 eval '! qemu_has_nic' || fail "$1: QEMU finished the unplug" "$(node_hmp 'qom-list /machine/peripheral')"
    t0=$(now)
    OUT=$(node_hmp "device_add $HOTNIC")
    [ -z "$OUT" ] || fail "$1: device_add" "$OUT"
    if eventually 60 guest "test -e /sys/bus/pci/devices/$NIC"; then t_there=$(now); pass "$1: $NIC back in the guest"; else
        fail "$1: back in the guest" "$(guest 'dmesg | tail -5')"; return; fi
    if eventually 30 is_health True/Healthy; then t_cond=$(now); pass "$1: PCIDevice Healthy=True again"; else fail "$1: healthy again" "$(healthy)"; fi
    returned() { grep -q "^PCIDevice Normal DeviceReturned: it is on the PCI bus again with the ids it had (8086:10d3)" <<<"$(events_of "$DEV" "$t0")"; }
    if eventually 15 returned; then pass "$1: Normal Event DeviceReturned"; else fail "$1: Event DeviceReturned" "$(events_of "$DEV" "$t0")"; fi
    if eventually 60 claim_is Bound/true; then t_bound=$(now); pass "$1: the claim binds it again (Ready, Bound)"; else
        fail "$1: bound again" "$(reason "$NIC")/$(passthrough): $(message "$NIC")"; fi
    expect_ok "$1: $NIC on vfio-pci" on_driver "$NIC" vfio-pci
    g=$(guest "basename \$(readlink /sys/bus/pci/devices/$NIC/iommu_group)")
    echo "  its IOMMU group after the re-add: $g (before: $GROUP)"
    if eventually 30 peer_is Healthy/1/1; then pass "$1: kubelet's device manager holds it Healthy again"; else fail "$1: device manager Healthy" "$(peer_state)"; fi
    expect_ok "$1: KubeVirt's CR permits $RES" has_entry
    t_peer=$(peer_first Healthy/1/1 "$(awk -v h="$t0" -v k="$SKEW" 'BEGIN {printf "%.3f", h + k}')")
    echo "  times from device_add: in sysfs $(secs "$t0" "$t_there") s, Healthy $(secs "$t0" "${t_cond:-$t0}") s," \
        "claim Bound $(secs "$t0" "${t_bound:-$t0}") s, device manager Healthy $(to_guest "$t0" "${t_peer:-0}") s"
    GROUP=$g
}

echo "--- (a) device_del while claimed, no VM"
T0=$(now)
OUT=$(node_hmp 'device_del hotnic')
[ -z "$OUT" ] || fail "device_del" "$OUT"
removed "(a)" "$T0"

echo "--- (b) device_add: the same device back"
back "(b)"

echo "--- (c) device_del while a VMM holds /dev/vfio/$GROUP"
vmm_start "-device vfio-pci,host=$NIC,id=hostdev0"
# (the group open is not enough: the VMM then asks for the device; its query-pci lists it once it has it)
vmm_has_nic() { vmm_query && [ -n "$(vmm_bars 32902 4307)" ]; } # 8086:10d3
if eventually 120 vmm_has_nic && vmm_holds_group "$GROUP"; then pass "(c): the VMM holds /dev/vfio/$GROUP, its machine has the e1000e"; else
    fail "(c): the VMM holds the device" "$(guest 'cat /tmp/vmm.err')"; finish; fi
guest 'dmesg -c >/dev/null'
OUT=$(node_hmp 'device_del hotnic')
[ -z "$OUT" ] || fail "(c): device_del" "$OUT"
relayed() { guest 'dmesg' | grep -q "vfio-pci $NIC: Relaying device request to user"; }
if eventually 60 relayed; then pass "(c): the kernel relays the removal to the VMM ($(guest 'dmesg' | grep -F 'Relaying' | head -1 | sed 's/^\[[ 0-9.]*\] //'))"; else
    fail "(c): the request relayed" "$(guest 'dmesg | tail -5')"; fi
BLOCKED=$(guest 'for p in /proc/[0-9]*; do [ "$(cat $p/wchan 2>/dev/null)" = vfio_unregister_group_dev ] && echo "${p#/proc/} $(cat $p/comm)"; done; true')
[ -n "$BLOCKED" ] && pass "(c): the guest's removal waits in vfio_unregister_group_dev: $BLOCKED" || fail "(c): a removal blocked in vfio"
# the agent is asked to look now (SIGHUP: a scan) and after it nothing has changed
hups() { guest "grep -c 'Scanned PCI devices.*SIGHUP' /var/log/hostdevd.log"; }
N_HUP=$(hups)
guest 'kill -HUP $(pidof hostdevd)'
hupped() { [ "$(hups)" -gt "$N_HUP" ]; }
eventually 20 hupped || fail "(c): the agent rescans on SIGHUP" "$(guest 'tail -3 /var/log/hostdevd.log')"
# the kernel unbinds first (the driver link goes), then waits in vfio-pci's remove: the claim's
# job sees the device on no driver with its group held and writes nothing (a bind would wait on
# the device's lock as long as the VM holds it)
expect_ok "(c): $NIC still in sysfs" guest "test -e /sys/bus/pci/devices/$NIC"
echo "  its driver: '$(guest_driver "$NIC")' (the kernel unbinds before vfio-pci's remove waits)"
pending() { guest "grep -F \"PCIDeviceClaim's device is being removed; left as it is\" /var/log/hostdevd.log | grep -q RemovalPending"; }
if eventually 30 pending; then pass "(c): the claim's job leaves it alone (RemovalPending): $(guest "grep -F RemovalPending /var/log/hostdevd.log | tail -1" | grep -o 'message=.*')"; else
    fail "(c): the claim's job leaves it alone" "$(guest 'tail -5 /var/log/hostdevd.log')"; fi
[ "$(healthy)" = True/Healthy ] && pass "(c): PCIDevice still Healthy=True (nothing marked while the removal waits)" || fail "(c): not marked" "$(healthy)"
claim_is Bound/true && pass "(c): the claim still Bound" || fail "(c): claim" "$(reason "$NIC")/$(passthrough)"
[ "$(guest 'pidof hostdevd')" = "$APID" ] && pass "(c): the agent did not restart" || fail "(c): agent pid"
echo "  the VMM's stderr: $(guest 'tail -3 /tmp/vmm.err' | tr '\n' ';')"
T1=$(now)
vmm_quit
eventually 30 vmm_gone || fail "(c): the VMM exits"
removed "(c) VMM quit" "$T1"
back "(c)"

echo "--- the claim deleted: e1000e again, in the DRA pool untainted"
kubectl delete pcideviceclaim "$DEV" --wait=false >/dev/null
if eventually 60 claim_gone "$NIC"; then pass "the claim released"; else fail "claim released" "$(reason "$NIC"): $(message "$NIC")"; fi
expect_ok "$NIC back on e1000e" on_driver "$NIC" e1000e
if eventually 30 in_pool; then pass "in the DRA pool, taints: '$(tainted_in_pool)'"; else fail "in the DRA pool" "$(kubectl get resourceslices -o json | jq -c '[.items[].spec.devices[]?.name]')"; fi
[ -z "$(tainted_in_pool)" ] || fail "untainted" "$(tainted_in_pool)"
[ "$(guest 'pidof hostdevd')" = "$APID" ] && pass "the agent never restarted (pid $APID)" || fail "agent pid at the end"
ERRS=$(guest "grep -E '^[EF][0-9]{4} |AddressSanitizer|runtime error' /var/log/hostdevd.log" | head -5)
[ -z "$ERRS" ] && pass "no error in the agent's log" || fail "the agent's log has errors" "$ERRS"
echo "  ($((SECONDS - T_START)) s in all)"
finish
