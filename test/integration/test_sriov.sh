#!/usr/bin/env bash
# test/integration/test_sriov.sh - SRIOVNetworkDevice in `hostdevd agent` (sanitizer build) on a
# fake sysfs tree (test/fixtures/sysfs/sriov-node.txt) against the real control plane: one
# object per SR-IOV network PF, named and shaped as harvester's, adopting the count the kernel
# has; the host's PF published with its blocker, not hidden; the VFs' PCIDevices carry their PF;
# spec.numVFs written to sriov_numvfs (one write from 0, two through 0 otherwise); the refusals
# (a VF claimed, the host's PF raised, a VF setting the driver cannot take) with their reasons
# and nothing written; the count re-asserted by a restart (as after a reboot); a PF that goes
# takes its object; an idle agent, and a restart with nothing changed, write nothing. The
# kernel's side (VFs appearing, EBUSY over a non-zero count, VF settings) is test/e2e/test_sriov.sh.
SUITE=sriov
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

AGENT=$TEST_BIN/hostdevd
DESC=test/fixtures/sysfs/sriov-node.txt
NODE=fix-node
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

cluster_start
ADMIN=$TEST_DIR/cluster/admin.kubeconfig
install_crds
create_node "$NODE"
SYS=$TEST_DIR/sys
hack/mk-sysfs-fixture.sh "$DESC" "$SYS" >/dev/null
mkdir -p "$TEST_DIR/proc/1" "$TEST_DIR/proc/net"
fake_proc "$TEST_DIR/proc"
# the host's default route goes through hdfakehost0
printf 'hdfakehost0\t00000000\t0102A8C0\t0003\t0\t0\t100\t00000000\t0\t0\t0\n' >>"$TEST_DIR/proc/net/route"
PORT=$(free_port)

start_agent() {
    agent_run --kubeconfig "$ADMIN" --proc-root "$TEST_DIR/proc" --dev-root "$TEST_DIR/dev" \
        --resync 3600 --uevent-source none -v 2
}
ready() { curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null; }
rescan() { kill -HUP "$AGENT_PID"; }
get() { kubectl get sriovnetworkdevice "$1" -o jsonpath="{$2}" 2>/dev/null; }
reason() { get "$1" '.status.conditions[?(@.type=="Ready")].reason'; }
message() { get "$1" '.status.conditions[?(@.type=="Ready")].message'; }
has_reason() { [ "$(reason "$1")" = "$2" ]; }
is() { [ "$(get "$1" "$2")" = "$3" ]; }
numvfs_file() { cat "$SYS/bus/pci/devices/$1/sriov_numvfs"; }
file_is() { [ "$(numvfs_file "$1")" = "$2" ]; }
patch() { kubectl patch sriovnetworkdevice "$1" --type merge -p "$2" >/dev/null; }
writes() { hack/audit-requests.py "$TEST_DIR/cluster/audit.log" | cut -d" " -f2; }
sriov_writes() { writes | grep -c sriovnetworkdevices || true; }
expect_reason() { # description object reason message-patterns...
    local what=$1 o=$2 r=$3
    shift 3
    if ! eventually 30 has_reason "$o" "$r"; then
        fail "$what" "reason \"$(reason "$o")\", message \"$(message "$o")\""
        return
    fi
    expect_contains "$what" "$(message "$o")" "$@"
}

PF0=$NODE-hdfakepf0
PF1=$NODE-hdfakepf1
HOST=$NODE-hdfakehost0

echo "--- published"
start_agent
if eventually 60 ready; then pass "agent ready (/readyz)"; else fail "agent ready" "$(tail -20 "$TEST_DIR/agent.log")"; fi
eventually 30 is "$PF0" '.status.conditions[0].reason' Configured || true
N=$(kubectl get sriovnetworkdevices -l "nodename=$NODE" -o name | sort | tr '\n' ' ')
expect_contains "one object per SR-IOV network PF, the host's too; none for the NVMe drive" "$N" \
    "sriovnetworkdevice.devices.harvesterhci.io/$HOST " "sriovnetworkdevice.devices.harvesterhci.io/$PF0 " \
    "sriovnetworkdevice.devices.harvesterhci.io/$PF1 "
[ "$(kubectl get sriovnetworkdevices -o name | wc -l)" -eq 3 ] && pass "exactly three" ||
    fail "exactly three" "$(kubectl get sriovnetworkdevices -o name)"
OUT=$(kubectl get sriovnetworkdevice "$PF0" -o json)
expect_contains "harvester's name, label, annotation and spec; the count adopted as the kernel has it" "$OUT" \
    "\"nodename\": \"$NODE\"" '"sriov.devices.harvesterhi.io/interface-name": "hdfakepf0"' \
    '"address": "0000:3b:00.0"' "\"nodeName\": \"$NODE\"" '"numVFs": 2'
expect_contains "harvester's status and ours" "$OUT" \
    '"vfAddresses": [' '"0000:3b:10.0"' '"0000:3b:10.4"' "\"$NODE-00003b100\"" "\"$NODE-00003b104\"" \
    '"status": "sriovNetworkDeviceEnabled"' '"interfaceName": "hdfakepf0"' '"driver": "igb"' \
    '"totalVFs": 7' '"index": 1' '"pciDevice":' '"type": "Ready"' '"reason": "Configured"'
OUT=$(kubectl get sriovnetworkdevice "$PF1" -o jsonpath='{.spec.numVFs} {.status.status} {.status.vfAddresses}')
expect_contains "a PF without VFs is Disabled" "$OUT" "0 sriovNetworkDeviceDisabled"
OUT=$(kubectl get sriovnetworkdevice "$HOST" -o jsonpath='{.status.passthroughBlockers[0].reason}: {.status.passthroughBlockers[0].message}')
expect_contains "the host's PF is published with its blocker, not hidden" "$OUT" "HostNetwork: " "hdfakehost0"
OUT=$(kubectl get pcidevice "$NODE-00003b104" -o json)
expect_contains "a VF's PCIDevice names its PF and index, and carries harvester's parent label" "$OUT" \
    '"physicalFunction": "0000:3b:00.0"' '"vfIndex": 1' "\"harvesterhci.io/parent-sriov-network-device\": \"$PF0\""
slice_vf() { kubectl get resourceslices -o jsonpath='{.items[*].spec.devices[?(@.name=="pci-0000-3b-10-4")].attributes}' 2>/dev/null; }
has_slice_vf() { [ -n "$(slice_vf)" ]; }
eventually 30 has_slice_vf || true
expect_contains "a VF in the DRA pool carries its PF and index (a claim can ask for a VF of this PF)" \
    "$(slice_vf)" '"sriovPhysicalFunction":{"string":"0000:3b:00.0"}' '"sriovVFIndex":{"int":1}'
OUT=$(kubectl get pcidevice "$NODE-00003b000" -o jsonpath='{.status.passthroughBlockers[*].reason}')
expect_contains "the PF with VFs cannot be passed through whole (SRIOVEnabled)" "$OUT" SRIOVEnabled
OUT=$(kubectl get pcidevice "$NODE-00003b001" -o jsonpath='{.status.passthroughBlockers[*].reason}')
[ -z "$OUT" ] && pass "the PF without VFs has no blocker" || fail "the PF without VFs has no blocker" "$OUT"
OUT=$(kubectl get sriovnetworkdevices -o wide 2>&1)
expect_contains "kubectl get: harvester's columns and ours" "$OUT" "ADDRESS" "NODE NAME" "NUMVFS" \
    "TOTAL" "VF ADDRESSES" "READY" "REASON" "INTERFACE" "hdfakepf0"

echo "--- spec.numVFs"
patch "$PF1" '{"spec":{"numVFs":3}}'
if eventually 30 file_is 0000:3b:00.1 3; then pass "numVFs 0 -> 3: written to sriov_numvfs"; else fail "numVFs 0 -> 3" "file: $(numvfs_file 0000:3b:00.1)"; fi
eventually 30 is "$PF1" .status.numVFs 3 && pass "status.numVFs follows at once (a rescan after the write)" ||
    fail "status.numVFs follows" "$(get "$PF1" .status)"
expect_contains "one write from 0" "$(grep 'Configuring SR-IOV PF' "$TEST_DIR/agent.log" | grep "$PF1" | tail -1)" "writes=1"
patch "$PF1" '{"spec":{"numVFs":5}}'
if eventually 30 file_is 0000:3b:00.1 5; then pass "numVFs 3 -> 5"; else fail "numVFs 3 -> 5" "file: $(numvfs_file 0000:3b:00.1)"; fi
expect_contains "two writes from a non-zero count: 0, then 5" \
    "$(grep 'Configuring SR-IOV PF' "$TEST_DIR/agent.log" | grep "$PF1" | tail -1)" "writes=2" "numVFs=3"
expect_reason "then Ready, Configured" "$PF1" Configured "hdfakepf1 has 5 of 7 VFs"

echo "--- refusals"
OUT=$(kubectl patch sriovnetworkdevice "$PF1" --type merge -p '{"spec":{"numVFs":9}}' 2>&1) &&
    fail "more VFs than the PF has is refused by the API server" "$OUT" ||
    expect_contains "more VFs than the PF has is refused by the API server" "$OUT" "write 7 or less"
patch "$HOST" '{"spec":{"numVFs":2}}'
expect_reason "raising the host's PF is refused (HostNeedsDevice)" "$HOST" HostNeedsDevice \
    "cannot raise the VF count from 0 to 2: the host needs this PF (HostNetwork:" "hdfakehost0"
file_is 0000:04:00.0 0 && pass "and nothing is written" || fail "nothing written" "$(numvfs_file 0000:04:00.0)"
patch "$HOST" '{"spec":{"numVFs":0}}'
eventually 30 has_reason "$HOST" Configured && pass "back to 0: Configured" || fail "back to 0" "$(reason "$HOST")"

printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: %s}\nspec: {address: "0000:3b:10.4", nodeName: %s, userName: alice}\n' \
    "$NODE-00003b104" "$NODE" | kubectl create -f - >/dev/null
patch "$PF0" '{"spec":{"numVFs":4}}'
expect_reason "changing the count while a VF is claimed is refused, naming it (VFsInUse)" "$PF0" VFsInUse \
    "cannot change the VF count from 2 to 4" "through 0, which removes every VF" \
    "0000:3b:10.4 (PCIDeviceClaim $NODE-00003b104)"
file_is 0000:3b:00.0 2 && pass "and sriov_numvfs is left at 2" || fail "left at 2" "$(numvfs_file 0000:3b:00.0)"
expect_contains "the refusal is logged once" "$(grep -c 'SR-IOV change refused' "$TEST_DIR/agent.log")" 2
kubectl delete pcideviceclaim "$NODE-00003b104" --wait=false >/dev/null
gone_claim() { ! kubectl get pcideviceclaim "$NODE-00003b104" >/dev/null 2>&1; }
eventually 60 gone_claim || fail "the claim goes" "$(kubectl get pcideviceclaim "$NODE-00003b104" -o yaml)"
if eventually 30 file_is 0000:3b:00.0 4; then pass "the claim gone: the count changes (2 -> 0 -> 4)"; else fail "the claim gone: the count changes" "$(numvfs_file 0000:3b:00.0); $(message "$PF0")"; fi

patch "$PF0" '{"spec":{"vfs":[{"index":1,"mac":"52:54:00:00:00:11","vlan":100}]}}'
expect_reason "a VF setting the PF's interface cannot take is shown with the kernel's answer" "$PF0" WriteFailed "hdfakepf0"
N1=$(grep -c 'SR-IOV change failed' "$TEST_DIR/agent.log")
rescan
sleep 2
N2=$(grep -c 'SR-IOV change failed' "$TEST_DIR/agent.log")
[ "$N1" = "$N2" ] && pass "a failed change is not tried again for the same spec and count" ||
    fail "a failed change is not tried again" "$N1 then $N2"
patch "$PF0" '{"spec":{"vfs":null}}'
eventually 30 has_reason "$PF0" Configured && pass "without the setting: Configured again" || fail "Configured again" "$(message "$PF0")"

echo "--- idle and restart"
eventually 30 has_reason "$PF1" Configured >/dev/null || true
BEFORE=$(sriov_writes)
rescan
rescan
sleep 3
AFTER=$(sriov_writes)
[ "$BEFORE" = "$AFTER" ] && pass "an idle agent writes no SRIOVNetworkDevice (two rescans)" ||
    fail "idle: no writes" "$BEFORE then $AFTER: $(writes | grep sriov | tail -5)"
stop_agent "the agent stops cleanly (SIGTERM)"
# as after a reboot: the kernel starts with no VFs; the objects remember the counts
printf '0\n' >"$SYS/bus/pci/devices/0000:3b:00.1/sriov_numvfs"
BEFORE=$(sriov_writes)
start_agent
eventually 60 ready || fail "agent ready again" "$(tail -20 "$TEST_DIR/agent.log")"
if eventually 30 file_is 0000:3b:00.1 5; then pass "a restart re-asserts spec.numVFs (0 -> 5, as after a reboot)"; else fail "a restart re-asserts numVFs" "$(numvfs_file 0000:3b:00.1)"; fi
eventually 30 is "$PF1" .status.numVFs 5 || true
sleep 2
W=$(($(sriov_writes) - BEFORE))
[ "$W" -le 2 ] && pass "the restart wrote only what changed ($W status writes: 0 VFs seen, then 5)" ||
    fail "the restart wrote only what changed" "$W: $(writes | grep sriov | tail -8)"

echo "--- a hostile SR-IOV tree: the agent starts, what cannot be read is said, nothing is rejected"
# (the API server's answers to the agent's writes: a status the CRD rejects is a 422, retried)
rejected() {
    jq -r 'select(.stage == "ResponseComplete" and (.userAgent // "" | startswith("hostdevd/"))
        and .responseStatus.code == 422) | .objectRef.resource' "$TEST_DIR/cluster/audit.log" | wc -l
}
pcidevs() { kubectl get pcidevices -l "nodename=$NODE" -o name | wc -l; }
N_DEV=$(pcidevs)
R0=$(rejected)
stop_agent "the agent stops cleanly before the tree is spoilt"
D=$SYS/bus/pci/devices
V1=$(readlink "$D/0000:3b:00.0/virtfn1")
rm "$D/0000:3b:00.0/virtfn1"                      # VF 0000:3b:10.4's index cannot be read
echo abc >"$D/0000:3b:00.1/sriov_numvfs"          # garbage
printf '99999999\n' >"$D/0000:04:00.0/sriov_numvfs" # above any 16-bit count
start_agent
if eventually 60 ready; then pass "the agent gets ready on the hostile tree"; else fail "agent ready on the hostile tree" "$(tail -20 "$TEST_DIR/agent.log")"; fi
expect_reason "a VF no virtfn link leads to: its PF says so (SysfsUnreadable)" "$PF0" SysfsUnreadable \
    "cannot read the index of VF 0000:3b:10.4 of 0000:3b:00.0" "left out of status.vfs"
OUT=$(get "$PF0" '.status.vfs[*].index')/$(get "$PF0" '.status.vfAddresses[*]')/$(get "$PF0" .status.numVFs)
[ "$OUT" = "0/0000:3b:10.0 0000:3b:10.4/4" ] && pass "... the VFs whose index is read in status.vfs, every VF in vfAddresses" ||
    fail "the VFs whose index is read in status.vfs" "$OUT"
OUT=$(kubectl get pcidevice "$NODE-00003b104" -o json)
expect_contains "... the VF's PCIDevice: its PF, no vfIndex, the reason it is not passed through" "$OUT" \
    '"physicalFunction": "0000:3b:00.0"' '"reason": "SysfsUnreadable"' "VF index: no virtfnN link of its PF leads to it"
! grep -q '"vfIndex"' <<<"$OUT" && pass "... and no vfIndex" || fail "no vfIndex" "$OUT"
expect_reason "sriov_numvfs \"abc\": the count is not changed while it cannot be read" "$PF1" SysfsUnreadable \
    "cannot read the VF count of 0000:3b:00.1"
file_is 0000:3b:00.1 abc && pass "... nothing written to it" || fail "nothing written" "$(numvfs_file 0000:3b:00.1)"
is "$PF1" .status.numVFs "" && pass "... status.numVFs left out" || fail "status.numVFs left out" "$(get "$PF1" .status.numVFs)"
expect_reason "sriov_numvfs 99999999: the same" "$HOST" SysfsUnreadable "cannot read the VF count of 0000:04:00.0"
OUT=$(kubectl get pcidevice "$NODE-000004000" -o jsonpath='{.status.sriov}/{.status.passthroughBlockers[*].message}')
expect_contains "... its PCIDevice: totalVFs, no numVFs, the problem" "$OUT" '"totalVFs":7' "sriov_numvfs: out of range"
[ "$(pcidevs)" -eq "$N_DEV" ] && pass "every PCIDevice still published ($N_DEV)" || fail "every PCIDevice published" "$(pcidevs) of $N_DEV"
rescan
rescan
eventually 30 ready || true
R1=$(rejected)
[ "$R1" -eq "$R0" ] && pass "no write rejected (422) on the hostile tree, two rescans after" ||
    fail "no write rejected (422)" "$R0 -> $R1: $(grep -E '^[EW]' "$TEST_DIR/agent.log" | grep -i 'unprocessable\|422\|invalid' | tail -3)"
n=$(grep -E '^W[0-9]{4} ' "$TEST_DIR/agent.log" | grep 'PCI device partly unreadable' | grep -c 'device="0000:3b:10.4"')
[ "$n" -eq 1 ] && pass "the VF's problem is logged once" || fail "the VF's problem logged once" "$n lines"
ln -s "$V1" "$D/0000:3b:00.0/virtfn1"
printf '5\n' >"$D/0000:3b:00.1/sriov_numvfs"
printf '0\n' >"$D/0000:04:00.0/sriov_numvfs"
rescan
repaired() { has_reason "$PF0" Configured && has_reason "$PF1" Configured && has_reason "$HOST" Configured; }
eventually 30 repaired && pass "the tree repaired: Configured again" ||
    fail "the tree repaired" "$(reason "$PF0") $(reason "$PF1") $(reason "$HOST"): $(message "$PF0")"

echo "--- a PF that goes"
mkdir -p "$TEST_DIR/gone"
mv "$SYS/bus/pci/devices/0000:3b:00.1" "$TEST_DIR/gone/"
rescan
gone_pf() { ! kubectl get sriovnetworkdevice "$PF1" >/dev/null 2>&1; }
eventually 30 gone_pf && pass "its object is deleted" || fail "its object is deleted" "$(kubectl get sriovnetworkdevices -o name)"
stop_agent "the agent stops cleanly at the end"
expect_contains "no sanitizer report" "$(grep -c 'ERROR: AddressSanitizer\|runtime error' "$TEST_DIR/agent.log")" 0

finish
