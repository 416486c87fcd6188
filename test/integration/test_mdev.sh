#!/usr/bin/env bash
# test/integration/test_mdev.sh - VGPUDevice in `hostdevd agent` (sanitizer build) on a fake
# sysfs tree (test/fixtures/sysfs/mdev-node.txt) against the real control plane, with
# test/integration/mdev-kernel.py playing the kernel (a UUID written to `create` makes the
# instance, "1" written to `remove` takes it away): one free slot per parent with capacity; an
# instance made by hand adopted; a slot enabled -> its UUID in status first, the instance
# created, Created with the resource name and IOMMU group; a type by its name; the refusals
# (NoCapacity, TypeUnknown) with what to write and nothing created; a disabled slot's instance
# removed; a deleted object's instance removed before it goes; an idle agent and a restart write
# nothing; after a "reboot" (instances gone) the same UUIDs are created again. One path per
# device, on the PCI parent 0000:00:02.0: with an instance it is out of the DRA pool and a
# PCIDeviceClaim of it is refused (ParentHasInstances, naming the instance and its VGPUDevice,
# nothing changed); the instance disabled, the claim binds by itself and the parent's free slot
# is refused (ParentClaimed); the claim deleted, an instance is made again. A process holding
# an instance (DeviceInUse) needs a real /dev/vfio: test/e2e/test_vmm.sh.
SUITE=mdev
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

AGENT=$TEST_BIN/hostdevd
DESC=test/fixtures/sysfs/mdev-node.txt
NODE=fix-node
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

cluster_start
ADMIN=$TEST_DIR/cluster/admin.kubeconfig
install_crds
create_node "$NODE"
SYS=$TEST_DIR/sys
hack/mk-sysfs-fixture.sh "$DESC" "$SYS" >/dev/null
fake_proc "$TEST_DIR/proc"
mkdir -p "$TEST_DIR/dev/vfio" "$SYS/module/vfio_iommu_type1"
PORT=$(free_port)
python3 test/integration/mdev-kernel.py "$SYS" &
track $!

start_agent() {
    agent_run --kubeconfig "$ADMIN" --proc-root "$TEST_DIR/proc" --dev-root "$TEST_DIR/dev" \
        --resync 3600 --uevent-source none -v 2
}
ready() { curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null; }
rescan() { kill -HUP "$AGENT_PID"; }
get() { kubectl get vgpudevice "$1" -o jsonpath="{$2}" 2>/dev/null; }
reason() { get "$1" '.status.conditions[?(@.type=="Ready")].reason'; }
message() { get "$1" '.status.conditions[?(@.type=="Ready")].message'; }
has_reason() { [ "$(reason "$1")" = "$2" ]; }
is() { [ "$(get "$1" "$2")" = "$3" ]; }
gone() { ! kubectl get vgpudevice "$1" >/dev/null 2>&1; }
patch() { kubectl patch vgpudevice "$1" --type merge -p "$2" >/dev/null; }
# hostdevd's writes of VGPUDevices (and their status), from the API server's audit log.
vgpu_writes() {
    echo $(($(hack/audit-requests.py "$TEST_DIR/cluster/audit.log" --resource vgpudevices | cut -d" " -f2)))
}
instance() { [ -e "$SYS/bus/mdev/devices/$1" ]; }
no_instance() { ! instance "$1"; }
avail() { cat "$SYS/devices/virtual/mtty/mtty/mdev_supported_types/$1/available_instances"; }
# The node's disabled slots of parent mtty, sorted.
slots() {
    kubectl get vgpudevices -l "nodename=$NODE,devices.harvesterhci.io/mdev-parent=mtty" -o json |
        jq -r '.items[] | select((.spec.enabled // false) == false and .metadata.deletionTimestamp == null) | .metadata.name' | sort | tr '\n' ' '
}
slots_are() { [ "$(slots)" = "$1" ]; }
expect_reason() { # description object reason message-patterns...
    local what=$1 o=$2 r=$3
    shift 3
    if ! eventually 30 has_reason "$o" "$r"; then
        fail "$what" "reason \"$(reason "$o")\", message \"$(message "$o")\""
        return
    fi
    expect_contains "$what" "$(message "$o")" "$@"
}

S0=$NODE-mtty-0
S1=$NODE-mtty-1
S2=$NODE-mtty-2
HAND=0b7c2a1e-5d4f-4c3b-9a8e-7f6d5c4b3a21
ADOPTED=$NODE-$HAND
U0=83b8f4f2-509f-382f-3c1e-e6bfe0fa1001

echo "--- published"
start_agent
if eventually 60 ready; then pass "agent ready (/readyz)"; else fail "agent ready" "$(tail -20 "$TEST_DIR/agent.log")"; fi
expect_reason "a free slot of parent mtty, Ready Available" "$S0" Available "a free slot"
expect_contains "... disabled, with the parent's types and capacity" \
    "$(get "$S0" '.spec.enabled} {.spec.parentGPUDeviceAddress} {.metadata.labels} {.status.availableTypes} {.status.mdevTypes[*].id} {.status.mdevTypes[*].available}')" \
    'false mtty' '"devices.harvesterhci.io/mdev-parent":"mtty"' '"nodename":"fix-node"' \
    '"Dual port serial":"mtty-2"' '"Single port serial":"mtty-1"' 'mtty-1 mtty-2 1 1'
expect_reason "the instance made by hand is adopted, Created" "$ADOPTED" Created "$HAND" "exists"
expect_contains "... enabled, its type and UUID, resource name, IOMMU group, finalizer" \
    "$(get "$ADOPTED" '.spec.enabled} {.spec.vGPUTypeName} {.status.uuid} {.status.vGPUStatus} {.status.configureVGPUTypeName} {.status.resourceName} {.status.iommuGroup} {.metadata.finalizers}')" \
    "true mtty-1 $HAND vGPUConfigured mtty-1 devices.harvesterhci.io/mtty-1 30 [\"devices.harvesterhci.io/mdev\"]"
eventually 10 slots_are "$S0 " || true
expect_contains "exactly one free slot" "$(slots)" "$S0 "

echo "--- a slot enabled: UUID in status first, then the instance, then Created"
T0=$(date +%s.%N)
patch "$S0" "{\"spec\":{\"enabled\":true,\"vGPUTypeName\":\"mtty-2\",\"uuid\":\"$U0\"}}"
if eventually 30 is "$S0" .status.vGPUStatus vGPUConfigured; then
    T1=$(date +%s.%N)
    pass "enabled -> vGPUConfigured in $(printf '%.2f' "$(echo "$T1 - $T0" | bc)") s"
else
    fail "enabled -> vGPUConfigured" "$(kubectl get vgpu "$S0" -o yaml | tail -30)"
fi
if instance "$U0"; then pass "the instance exists on the node with spec.uuid"; else fail "instance $U0" "$(ls "$SYS/bus/mdev/devices")"; fi
expect_contains "... Created, its type, resource name and IOMMU group, finalizer" \
    "$(get "$S0" '.status.conditions[0].reason} {.status.uuid} {.status.configureVGPUTypeName} {.status.resourceName} {.status.iommuGroup} {.metadata.finalizers}')" \
    "Created $U0 mtty-2 devices.harvesterhci.io/mtty-2 2" 'devices.harvesterhci.io/mdev'
# the agent's log: the status patch with the UUID, then the create
W=$(grep -nF "name=\"$S0\" patch=\"{\\\"status\\\":{\\\"uuid\\\":\\\"$U0" "$TEST_DIR/agent.log" | head -1 | cut -d: -f1)
C=$(grep -nF "Creating mediated device\" vgpudevice=\"$S0\"" "$TEST_DIR/agent.log" | head -1 | cut -d: -f1)
[ -n "$W" ] && [ -n "$C" ] && [ "$W" -lt "$C" ] && pass "status.uuid written before the create (agent log lines $W, $C)" ||
    fail "status.uuid written before the create" "uuid write at '$W', create at '$C'"
vg_events() { # NAME REASON: the messages of the VGPUDevice's Events with that reason
    kubectl get events -n default --field-selector "involvedObject.name=$1,reason=$2" -o jsonpath='{.items[*].message}'
}
created_event() { [ -n "$(vg_events "$S0" Created)" ]; }
if eventually 10 created_event; then
    expect_contains "... an Event Created says what was made where" "$(vg_events "$S0" Created)" \
        "mediated device $U0 of type mtty-2 created on parent mtty"
else fail "an Event Created" "$(kubectl get events -n default 2>&1 | tail -5)"; fi
[ "$(avail mtty-2)" = 0 ] && pass "mtty-2 has no capacity left" || fail "mtty-2 capacity" "$(avail mtty-2)"
if eventually 30 slots_are "$S1 "; then pass "a new free slot $S1 (mtty-1 has capacity)"; else fail "a new free slot" "$(slots)"; fi

echo "--- refusals: nothing is created, the message says what to write"
C1=$(avail mtty-1)
patch "$S1" '{"spec":{"enabled":true,"vGPUTypeName":"mtty-2"}}'
expect_reason "no capacity for mtty-2: NoCapacity" "$S1" NoCapacity \
    "cannot make another mtty-2" "mtty-1 (Single port serial, 1 left)"
expect_contains "... nothing created, no UUID written" "$(avail mtty-1) $(get "$S1" .status.uuid)|" "$C1 |"
patch "$S1" '{"spec":{"enabled":false}}'
patch "$S1" '{"spec":{"enabled":true,"vGPUTypeName":"mtty-9"}}'
expect_reason "a type the parent lacks: TypeUnknown, listing its types" "$S1" TypeUnknown \
    'parent mtty has no type "mtty-9"' "mtty-1 (Single port serial" "mtty-2 (Dual port serial, 0 left)"
patch "$S1" '{"spec":{"enabled":false}}'
patch "$S1" '{"spec":{"enabled":true,"vGPUTypeName":"Single port serial"}}'
if eventually 30 is "$S1" .status.vGPUStatus vGPUConfigured; then pass "a type by its name: created"; else fail "a type by its name" "$(reason "$S1"): $(message "$S1")"; fi
U1=$(get "$S1" .status.uuid)
if [ -n "$U1" ] && instance "$U1"; then pass "... with a UUID the agent made ($U1)"; else fail "instance of $S1" "uuid '$U1'"; fi
[ "$(avail mtty-1)" = 0 ] && pass "mtty-1 has no capacity left" || fail "mtty-1 capacity" "$(avail mtty-1)"
if eventually 30 slots_are ""; then pass "no capacity: no free slot"; else fail "no free slot" "$(slots)"; fi

echo "--- idle and restart"
[ "$(vgpu_writes)" -gt 10 ] && pass "the audit log counts the agent's VGPUDevice writes ($(vgpu_writes))" ||
    fail "the audit log counts VGPUDevice writes" "$(vgpu_writes)"
sleep 2
BEFORE=$(vgpu_writes)
rescan
rescan
sleep 3
AFTER=$(vgpu_writes)
[ "$BEFORE" = "$AFTER" ] && pass "an idle agent writes no VGPUDevice (two rescans)" ||
    fail "idle: no writes" "$BEFORE then $AFTER: $(grep -F "Patching device object" "$TEST_DIR/agent.log" | tail -4)"
stop_agent "the agent stops cleanly (SIGTERM)"
BEFORE=$(vgpu_writes)
start_agent
eventually 60 ready || fail "agent ready again" "$(tail -20 "$TEST_DIR/agent.log")"
sleep 3
AFTER=$(vgpu_writes)
[ "$BEFORE" = "$AFTER" ] && pass "a restart finds the instances and writes nothing" ||
    fail "restart: no writes" "$BEFORE then $AFTER: $(grep -F "device object" "$TEST_DIR/agent.log" | tail -4)"

echo "--- reboot: the instances are gone; the same UUIDs are created again"
stop_agent "the agent stops cleanly again"
for u in "$U0" "$U1" "$HAND"; do echo 1 >"$SYS/bus/mdev/devices/$u/remove"; done
eventually 10 no_instance "$U0" || fail "the fake kernel removed the instances" "$(ls "$SYS/bus/mdev/devices")"
start_agent
eventually 60 ready || fail "agent ready again" "$(tail -20 "$TEST_DIR/agent.log")"
back() { instance "$U0" && instance "$U1" && instance "$HAND"; }
if eventually 30 back; then pass "the three instances are created again with their UUIDs"; else fail "re-created" "$(ls "$SYS/bus/mdev/devices"); $(tail -5 "$TEST_DIR/agent.log")"; fi

echo "--- disable and delete"
patch "$S0" '{"spec":{"enabled":false}}'
if eventually 30 no_instance "$U0"; then pass "disabled: the instance is removed"; else fail "disabled: removed" "$(reason "$S0"): $(message "$S0")"; fi
removed_event() { [ -n "$(vg_events "$S0" Removed)" ]; }
if eventually 10 removed_event; then
    expect_contains "... an Event Removed" "$(vg_events "$S0" Removed)" "mediated device $U0 of type mtty-2 removed from parent mtty"
else fail "an Event Removed" "$(kubectl get events -n default 2>&1 | tail -5)"; fi
cleared() { is "$S0" '{.status.uuid}{.status.vGPUStatus}{.metadata.finalizers}' ""; }
if eventually 30 cleared; then pass "... status.uuid, vGPUStatus and the finalizer cleared"; else fail "cleared" "$(kubectl get vgpu "$S0" -o json | jq -c '[.status, .metadata.finalizers]')"; fi
if eventually 30 slots_are "$S0 "; then pass "... and it is the free slot again"; else fail "free slot again" "$(slots)"; fi
kubectl delete vgpudevice "$S1" --wait=false >/dev/null
if eventually 30 no_instance "$U1"; then pass "deleted: the instance is removed"; else fail "deleted: removed" "$(reason "$S1"): $(message "$S1")"; fi
if eventually 30 gone "$S1"; then pass "... and then the object goes (finalizer removed)"; else fail "deleted object gone" "$(kubectl get vgpu "$S1" -o json | jq -c .metadata)"; fi
if eventually 30 slots_are "$S0 "; then pass "still exactly one free slot"; else fail "one free slot" "$(slots)"; fi

echo "--- one path per device: a PCI parent with instances is not claimed whole"
GPU=0000:00:02.0
P0=$NODE-000000020-0
CLAIM=$NODE-000000020
U2=5f0c7d3e-2b1a-4c9d-8e7f-6a5b4c3d2e10
in_pool() { kubectl get resourceslices -o json | jq -e --arg d "$1" '[.items[].spec.devices[]?.name] | index($d) != null' >/dev/null; }
not_in_pool() { ! in_pool "$1"; }
claim_get() { kubectl get pcideviceclaim "$CLAIM" -o jsonpath="{$1}" 2>/dev/null; }
claim_reason() { claim_get '.status.conditions[?(@.type=="Ready")].reason'; }
claim_has() { [ "$(claim_reason)" = "$1" ]; }
expect_reason "the PCI parent's free slot" "$P0" Available "a free slot"
if eventually 30 in_pool pci-0000-00-02-0; then pass "a PCI parent with no instances is in the DRA pool"; else fail "parent in the pool" "$(kubectl get resourceslices -o json | jq -c '[.items[].spec.devices[]?.name]')"; fi
patch "$P0" "{\"spec\":{\"enabled\":true,\"vGPUTypeName\":\"i915-GVTg_V5_4\",\"uuid\":\"$U2\"}}"
if eventually 30 is "$P0" .status.vGPUStatus vGPUConfigured && instance "$U2"; then pass "an instance on the PCI parent"; else fail "instance on $GPU" "$(reason "$P0"): $(message "$P0")"; fi
if eventually 30 not_in_pool pci-0000-00-02-0; then pass "... and the parent leaves the DRA pool (its instance stays in it)"; else fail "parent out of the pool" "$(kubectl get resourceslices -o json | jq -c '[.items[].spec.devices[]?.name]')"; fi
in_pool "mdev-$U2" && pass "... the instance is in the pool" || fail "instance in the pool" "$(kubectl get resourceslices -o json | jq -c '[.items[].spec.devices[]?.name]')"
printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: %s}\nspec: {address: "%s", nodeName: %s, userName: alice}\n' \
    "$CLAIM" "$GPU" "$NODE" | kubectl create -f - >/dev/null
if eventually 30 claim_has ParentHasInstances; then
    expect_contains "a PCIDeviceClaim of the parent is refused: ParentHasInstances, naming the instance, its VGPUDevice and what to do" \
        "$(claim_get '.status.conditions[?(@.type=="Ready")].message')" "device $GPU is the parent of mediated devices" \
        "instance $U2 (VGPUDevice $P0)" "disable or delete that VGPUDevice (or remove the instance) first, then this claim binds"
else
    fail "claim of the parent refused" "$(claim_reason): $(claim_get '.status.conditions[?(@.type=="Ready")].message')"
fi
expect_contains "... nothing changed: not passed through, the instance and its object as they were" \
    "$(claim_get .status.passthroughEnabled) $(instance "$U2" && echo there) $(reason "$P0")" "false there Created"
patch "$P0" '{"spec":{"enabled":false}}'
if eventually 30 no_instance "$U2"; then pass "the instance disabled: removed"; else fail "instance removed" "$(reason "$P0"): $(message "$P0")"; fi
T0=$(date +%s.%N)
if eventually 30 claim_has Bound; then
    pass "... and the claim binds by itself, no retry by hand ($(printf '%.2f' "$(echo "$(date +%s.%N) - $T0" | bc)") s after the removal was seen)"
else
    fail "claim binds once the instance is gone" "$(claim_reason): $(claim_get '.status.conditions[?(@.type=="Ready")].message')"
fi
N=$(find "$SYS/bus/mdev/devices" -mindepth 1 | wc -l)
patch "$P0" '{"spec":{"enabled":true,"vGPUTypeName":"i915-GVTg_V5_4"}}'
expect_reason "an instance on the claimed parent is refused: ParentClaimed" "$P0" ParentClaimed "$CLAIM"
[ "$(find "$SYS/bus/mdev/devices" -mindepth 1 | wc -l)" = "$N" ] && pass "... and nothing is created" ||
    fail "nothing created on the claimed parent" "$(ls "$SYS/bus/mdev/devices")"
kubectl delete pcideviceclaim "$CLAIM" --wait=false >/dev/null
claim_gone() { ! kubectl get pcideviceclaim "$CLAIM" >/dev/null 2>&1; }
if eventually 30 claim_gone && eventually 30 is "$P0" .status.vGPUStatus vGPUConfigured; then
    pass "the claim deleted: the enabled object's instance is created"
else
    fail "instance after the claim" "$(reason "$P0"): $(message "$P0")"
fi
patch "$P0" '{"spec":{"enabled":false}}'
if eventually 30 is "$P0" .status.vGPUStatus "" && eventually 30 in_pool pci-0000-00-02-0; then
    pass "its last instance removed: the parent is back in the DRA pool"
else
    fail "parent back in the pool" "$(reason "$P0"); $(kubectl get resourceslices -o json | jq -c '[.items[].spec.devices[]?.name]')"
fi
stop_agent "the agent stops cleanly at the end"
if grep -q "ERROR: AddressSanitizer\|runtime error" "$TEST_DIR/agent.log"; then fail "sanitizers quiet" "$(grep -A5 Sanitizer "$TEST_DIR/agent.log" | head)"; else pass "sanitizers quiet"; fi

finish
