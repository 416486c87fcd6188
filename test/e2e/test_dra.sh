#!/usr/bin/env bash
# test/e2e/test_dra.sh - the agent's kubelet DRA plugin (docs/dra.md) on a real kernel: a qemu
# node (hack/qemu-node.sh --vmm: the host's qemu-system-x86_64 in the guest) whose agent runs
# with a node-bound token and a kubelet directory whose plugins_registry exists; the test plays
# kubelet with build/release/grpctool in the guest (no kubelet runs under TCG) and plays the
# scheduler by writing the allocation of a ResourceClaim (default/nic1: the e1000e 0000:00:04.0
# of the node's pool) itself.
# Checks: the registration socket answers GetInfo with the DRA socket; NodePrepareResources
# binds the e1000e to vfio-pci and answers the device with its two CDI ids; the CDI spec names
# /dev/vfio/vfio and /dev/vfio/<the guest's group>, which exists; the metadata file (v1alpha1)
# has the pciBusID; the checkpoint records e1000e. KubeVirt v1.9.0's DRA reader
# (test/kubevirtenv, on the host) reads the metadata file where the CDI spec's mount puts it and
# makes a <hostdev type='pci' managed='no'> of the address; a VMM in the guest started with
# libvirt's argument for it (-device vfio-pci,host=DDDD:BB:SS.F) lists 8086:10d3 with the
# e1000e's BARs in query-pci, holds /dev/vfio/<group>, and its SeaBIOS reads the device. While it
# runs: a repeated prepare answers the same without binding again (/dev/vfio/<group> keeps its
# inode); a PCIDeviceClaim on the device is refused (AllocatedByDRA); an unprepare answers an
# error naming the VMM (qemu-system-x86 (pid N) holds /dev/vfio/<group>) and changes nothing
# (vfio-pci, no e1000e probe, checkpoint, CDI spec and metadata kept, the VMM still holding the
# group). Once the VMM exits, unprepare restores e1000e (probed, its network interface
# registered: kernel log) and removes the CDI spec, the metadata and the checkpoint entry, and
# the waiting PCIDeviceClaim binds; the agent aborted right after a prepare's unbind
# (HOSTDEVD_FAULT=bind:unbind) and restarted restores e1000e on unprepare. Prints the time from
# KubeVirt's read of the metadata to the device in the nested machine, from the VMM's quit to
# e1000e, and the prepare and unprepare round trips (grpctool's clock, in the guest).
SUITE=e2e-dra
# shellcheck source=test/e2e/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1
NODE=qdra
NIC=0000:00:04.0 # e1000e
DEV=pci-0000-00-04-0
DRIVER=vfio-pci.hostdevd.io
KDIR=/var/lib/kubelet
PDIR=$KDIR/plugins/$DRIVER
SOCK=$PDIR/dra.sock
CDI=/var/run/cdi
GRPCTOOL=$ROOT/build/release/grpctool
PCI_CLAIM=$NODE-${NIC//[:.]/}

[ -x "$GRPCTOOL" ] || make -C "$ROOT" build/release/grpctool >/dev/null ||
    { fail "build/release/grpctool builds"; finish; }
KUBEVIRTENV=$(hack/kubevirtenv-build.sh) || fail "KubeVirt's DRA reader builds (hack/kubevirtenv-build.sh)"
cluster_start
install_crds
create_node "$NODE"
expect_ok "the DeviceClasses are applied" kubectl apply -f manifests/deviceclasses.yaml

echo "--- boot"
# kubelet makes plugins_registry before any plugin starts: the agent is started after it.
if node_boot "$NODE" --no-agent --vmm --memory 1024 --extra "$GRPCTOOL:/usr/bin/grpctool" \
    --agent-args "--kubelet-dir $KDIR --cdi-dir $CDI"; then pass "node $NODE boots (${BOOT_SECONDS}s)"; else
    fail "node boots"; finish; fi
OUT=$(guest "mkdir -p $KDIR/plugins_registry && agentctl start" 2>&1)
if eventually 120 guest_agent_ready; then pass "agent ready with $KDIR/plugins_registry in place"; else
    fail "agent ready" "$OUT"$'\n'"$(node_logs)"; finish; fi
OUT=$(guest 'grpctool 2>&1')
expect_contains "grpctool runs in the guest (the agent's libraries)" "$OUT" "usage: grpctool"
OUT=$(guest "grpctool reginfo $KDIR/plugins_registry/$DRIVER-reg.sock" 2>&1)
expect_contains "the registration socket answers GetInfo: DRAPlugin, the DRA socket, v1" "$OUT" \
    "type=DRAPlugin name=$DRIVER endpoint=$SOCK v1=true"

guest_driver() { guest "basename \$(readlink /sys/bus/pci/devices/$NIC/driver) 2>/dev/null"; }
on_driver() { [ "$(guest_driver)" = "$1" ]; }
GROUP=$(guest "basename \$(readlink /sys/bus/pci/devices/$NIC/iommu_group)")
expect_ok "$NIC starts on e1000e" on_driver e1000e
metric() { guest 'wget -qO- http://127.0.0.1:9808/metrics' | awk -v m="$1" '$1 == m {print $2}'; }
# dra prepare|unprepare: kubelet's call for default/nic1, from the guest; its answer in OUT, its
# round trip (grpctool's clock) in RT_MS.
dra() {
    local all
    all=$(guest "GRPCTOOL_TIME=1 grpctool dra $SOCK $1 default/nic1/$CLAIM_UID 2>/tmp/rt; cat /tmp/rt")
    OUT=$(grep -av '^round_trip_ms=' <<<"$all")
    RT_MS=$(sed -n 's/^round_trip_ms=//p' <<<"$all")
}
checkpoint() { guest "cat $PDIR/checkpoint.json"; }

echo "--- a ResourceClaim allocated by hand (no scheduler runs)"
kubectl create -f - >/dev/null <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: nic1, namespace: default}
spec:
  devices:
    requests:
    - name: nic
      exactly: {deviceClassName: $DRIVER}
EOF
CLAIM_UID=$(kubectl get resourceclaim nic1 -n default -o jsonpath='{.metadata.uid}')
[ -n "$CLAIM_UID" ] && pass "ResourceClaim default/nic1 created" || { fail "ResourceClaim created"; finish; }
# The allocation as the scheduler writes it; the API does not require the node selector (v1.37),
# the scheduler sets it for a node-local pool and so does this test.
ALLOC=$(jq -cn --arg d "$DRIVER" --arg p "$NODE" --arg n "$DEV" \
    '{status: {allocation: {devices: {results: [{request: "nic", driver: $d, pool: $p, device: $n}]},
      nodeSelector: {nodeSelectorTerms: [{matchFields: [{key: "metadata.name", operator: "In", values: [$p]}]}]}}}}')
expect_ok "its status.allocation written (the e1000e of pool $NODE)" \
    kubectl patch resourceclaim nic1 -n default --subresource=status --type=merge -p "$ALLOC"

echo "--- NodePrepareResources"
CDI_IDS="$DRIVER/vfio=$CLAIM_UID-$DEV,$DRIVER/vfio=${CLAIM_UID}_nic"
WANT="uid=$CLAIM_UID error=\"\" device=$NODE/$DEV requests=nic cdi=$CDI_IDS"
dra prepare
PREP_MS=$RT_MS
expect_contains "prepare answers the device and its two CDI ids" "$OUT" "$WANT"
if on_driver vfio-pci; then pass "$NIC is on vfio-pci in the guest"; else fail "$NIC on vfio-pci" "$(guest_driver); $(node_logs)"; fi
SPEC_JSON=$(guest "cat $CDI/$DRIVER-$CLAIM_UID.json")
OUT=$(jq -r '[.devices[0].containerEdits.deviceNodes[].path] | join(" ")' <<<"$SPEC_JSON" 2>&1)
expect_contains "the CDI spec names /dev/vfio/vfio and /dev/vfio/$GROUP (the guest's group of $NIC)" "$OUT" \
    "/dev/vfio/vfio" "/dev/vfio/$GROUP"
expect_ok "/dev/vfio/$GROUP exists in the guest" guest "test -c /dev/vfio/$GROUP"
META=$PDIR/dra-device-metadata/default_nic1/nic/metadata.json
OUT=$(jq -r '.devices[1].containerEdits.mounts[0].hostPath' <<<"$SPEC_JSON" 2>&1)
[ "$OUT" = "$META" ] && pass "the CDI spec mounts the metadata file $META" || fail "metadata mount" "$OUT"
OUT=$(guest "cat $META" | jq -c '{apiVersion, b: .requests[0].devices[0].attributes["resource.kubernetes.io/pciBusID"].string}' 2>&1)
expect_contains "metadata: v1alpha1 with the pciBusID $NIC" "$OUT" \
    "{\"apiVersion\":\"metadata.resource.k8s.io/v1alpha1\",\"b\":\"$NIC\"}"
CK1=$(checkpoint)
OUT=$(jq -c --arg u "$CLAIM_UID" '.claims[$u] | {prepared, d: [.devices[] | {address, original, group}]}' <<<"$CK1" 2>&1)
expect_contains "the checkpoint records the original driver e1000e (and the group)" "$OUT" \
    "{\"prepared\":true,\"d\":[{\"address\":\"$NIC\",\"original\":\"e1000e\",\"group\":$GROUP}]}"

echo "--- KubeVirt's DRA reader, then a VMM with the device it names"
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
T0=$(now)
# The container runtime's part: the CDI spec's mount puts the metadata file at its containerPath,
# below what virt-launcher reads (DRA_BASE). The VMI: claim "nic" = ResourceClaim nic1, one
# hostDevices entry with claimRequest {nic, nic}.
DRA_BASE=$TEST_DIR/launcher/var/run/kubernetes.io/dra-device-attributes
CPATH=$(jq -r '.devices[1].containerEdits.mounts[0].containerPath' <<<"$SPEC_JSON")
mkdir -p "$(dirname "$DRA_BASE${CPATH#/var/run/kubernetes.io/dra-device-attributes}")" &&
    guest "cat $META" >"$DRA_BASE${CPATH#/var/run/kubernetes.io/dra-device-attributes}"
KV=$("${KUBEVIRTENV:-false}" --dra-base "$DRA_BASE" --dra-claim nic:nic1 --dra-request nic 2>&1)
echo "$KV" >"$TEST_DIR/kubevirtenv-dra.json"
OUT=$(jq -c '{pciAddress, error}' <<<"$KV" 2>&1)
if [ "$OUT" = "{\"pciAddress\":\"$NIC\",\"error\":\"\"}" ]; then
    pass "KubeVirt v1.9.0's DRA reader finds $NIC in the metadata file (at $CPATH)"; else fail "KubeVirt's DRA reader" "$KV"; fi
OUT=$(jq -c '.hostDevices | map({type, managed})' <<<"$KV" 2>&1)
if [ "$OUT" = '[{"type":"pci","managed":"no"}]' ]; then pass "... and makes one <hostdev type='pci' managed='no'> of it"; else
    fail "KubeVirt's DRA host device" "$OUT"; fi
# libvirt's argument for that <hostdev>: -device vfio-pci,host=DDDD:BB:SS.F from its source
# address (virPCIDeviceAddressAsString: %04x:%02x:%02x.%d).
read -r D B S F < <(jq -r '.hostDevices[0] | "\(.domain) \(.bus) \(.slot) \(.function)"' <<<"$KV" 2>/dev/null)
HOSTDEV=$(printf '%04x:%02x:%02x.%d' "$D" "$B" "$S" "$F" 2>/dev/null)
vmm_start "-device vfio-pci,host=$HOSTDEV,id=hostdev0"
vmm_query
lists_e1000e() { [ -n "$(vmm_bars 32902 4307)" ]; } # 8086:10d3
if eventually 90 lists_e1000e; then pass "a VMM with -device vfio-pci,host=$HOSTDEV realizes it: query-pci lists 8086:10d3"; else
    fail "the VMM realizes the device" "host=$HOSTDEV; $(guest 'cat /tmp/vmm.err; tail -c 1500 /tmp/vmm.out')"; fi
T_SEEN=$(now)
BARS=$(vmm_bars 32902 4307)
if [ "$BARS" = "0:131072 1:131072 2:32 3:16384" ]; then pass "... with the e1000e's BARs (128 KiB, 128 KiB, 32 ports, 16 KiB)"; else
    fail "... with the e1000e's BARs" "$BARS"; fi
if eventually 10 vmm_holds_group "$GROUP"; then pass "the VMM holds /dev/vfio/$GROUP open"; else
    fail "the VMM holds /dev/vfio/$GROUP" "$(guest "ls -l /proc/\$(cat /tmp/vmm.pid)/fd")"; fi
if eventually 90 vmm_bios_saw 8086:10d3; then pass "the nested SeaBIOS reads the device through vfio (PCI: init ... id=8086:10d3)"; else
    fail "the nested SeaBIOS reads the device" "$(guest 'tail -20 /tmp/vmm.bios')"; fi
echo "  metadata file read by KubeVirt's reader -> device listed by the nested machine: $(secs "$T0" "$T_SEEN") s"

echo "--- a repeated prepare (kubelet repeats calls after restarts), the VMM running"
INODE=$(guest "stat -c %i /dev/vfio/$GROUP")
dra prepare
REPEAT_MS=$RT_MS
expect_contains "it answers the same" "$OUT" "$WANT"
[ "$(guest "stat -c %i /dev/vfio/$GROUP")" = "$INODE" ] && on_driver vfio-pci &&
    pass "... without binding again (/dev/vfio/$GROUP keeps its inode: the group never went away)" ||
    fail "no second bind" "inode $INODE -> $(guest "stat -c %i /dev/vfio/$GROUP"), driver $(guest_driver)"
[ "$(checkpoint)" = "$CK1" ] && pass "... and the checkpoint is unchanged" || fail "checkpoint unchanged" "$(checkpoint)"
N=$(metric 'hostdevd_dra_prepare_total{result="ok"}')
[ "$N" = 2 ] && pass "hostdevd_dra_prepare_total{result=\"ok\"} is 2" || fail "prepare_total ok" "$N"

echo "--- the device is DRA's: a PCIDeviceClaim on it is refused"
printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: %s}\nspec: {address: "%s", nodeName: %s}\n' \
    "$PCI_CLAIM" "$NIC" "$NODE" | kubectl create -f - >/dev/null
field() { kubectl get pcideviceclaim "$PCI_CLAIM" -o jsonpath="$1" 2>/dev/null; }
reason() { field '{.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].reason}'; }
refused() { [ "$(reason)" = "False AllocatedByDRA" ]; }
if eventually 60 refused; then pass "PCIDeviceClaim $PCI_CLAIM: Ready=False AllocatedByDRA"; else fail "AllocatedByDRA" "$(reason)"; fi
expect_contains "... the message names the ResourceClaim" "$(field '{.status.conditions[?(@.type=="Ready")].message}')" "default/nic1"
dra prepare
expect_contains "a repeated prepare still answers the same while the refused PCIDeviceClaim waits" "$OUT" "$WANT"

echo "--- unprepare while the VMM holds the group"
VMM_PID=$(guest 'cat /tmp/vmm.pid')
# The waiting PCIDeviceClaim takes the device as soon as it is released: e1000e's probe in the
# kernel log tells a restore, not the driver a moment later.
probes() { guest "dmesg | grep -c 'e1000e $NIC .*Network Connection'"; }
P0=$(probes)
dra unprepare
expect_contains "unprepare answers that qemu-system-x86 (pid $VMM_PID) holds /dev/vfio/$GROUP" "$OUT" \
    "uid=$CLAIM_UID error=\"device $NIC: qemu-system-x86 (pid $VMM_PID) holds /dev/vfio/$GROUP"
if on_driver vfio-pci && [ "$(probes)" = "$P0" ]; then pass "the device stays on vfio-pci (e1000e did not probe it)"; else
    fail "the device stays on vfio-pci" "$(guest_driver); e1000e probes $P0 -> $(probes)"; fi
[ "$(checkpoint)" = "$CK1" ] && guest "test -e $CDI/$DRIVER-$CLAIM_UID.json && test -e $META" &&
    pass "... its checkpoint entry, CDI spec and metadata stay" || fail "nothing changes while held" "$(checkpoint)"
expect_ok "... and the VMM still holds /dev/vfio/$GROUP" vmm_holds_group "$GROUP"
T1=$(now)
vmm_quit
if eventually 30 vmm_gone; then pass "the VMM exits"; else fail "the VMM exits" "$(guest 'cat /tmp/vmm.err')"; fi
P0=$(probes)
dra unprepare
UNPREP_MS=$RT_MS
[ "$OUT" = "uid=$CLAIM_UID error=\"\"" ] && pass "once it lets go, unprepare answers no error" || fail "unprepare" "$OUT"
P1=$(probes)
T_BACK=$(now)
[ "$P1" -eq $((P0 + 1)) ] && pass "$NIC went back to e1000e (e1000e probed it: kernel log)" ||
    fail "$NIC back on e1000e" "e1000e probes $P0 -> $P1; driver now $(guest_driver)"
# Its network interface: e1000e logs "Network Connection" through the net device right after
# registering it, so the line names the interface (before, its lines say "<address>
# (uninitialized)"); sysfs would race the waiting PCIDeviceClaim, which takes the device at once.
LINE=$(guest "dmesg | grep 'e1000e $NIC .*Network Connection' | tail -n +$((P0 + 1))")
if [[ "$LINE" =~ e1000e\ $NIC\ ([a-z][a-z0-9]*):\ Intel ]]; then
    pass "... and registered its network interface again (${BASH_REMATCH[1]}: kernel log)"; else fail "network interface back" "$LINE"; fi
echo "  VMM quit -> unprepare answered, $NIC back on e1000e: $(secs "$T1" "$T_BACK") s"
guest "test ! -e $CDI/$DRIVER-$CLAIM_UID.json && test ! -e $PDIR/dra-device-metadata/default_nic1" &&
    pass "the CDI spec and the metadata are gone" || fail "files gone" "$(guest "ls -R $CDI $PDIR")"
OUT=$(checkpoint | jq -c .claims 2>&1)
[ "$OUT" = "{}" ] && pass "the checkpoint is empty" || fail "checkpoint empty" "$OUT"
dra unprepare
[ "$OUT" = "uid=$CLAIM_UID error=\"\"" ] && pass "a repeated unprepare is done at once" || fail "repeated unprepare" "$OUT"

echo "--- the waiting PCIDeviceClaim"
enabled() { [ "$(field '{.status.passthroughEnabled}')" = true ]; }
if eventually 60 enabled && on_driver vfio-pci; then pass "it binds now (passthroughEnabled, vfio-pci)"; else
    fail "PCIDeviceClaim binds after the unprepare" "$(reason); $(guest_driver)"; fi
OUT=$(field '{.status.kernelDriverToUnbind}')
[ "$OUT" = e1000e ] && pass "... having found it on e1000e (kernelDriverToUnbind)" || fail "kernelDriverToUnbind" "$OUT"
kubectl delete pcideviceclaim "$PCI_CLAIM" --wait=false >/dev/null
gone() { ! kubectl get pcideviceclaim "$PCI_CLAIM" >/dev/null 2>&1; }
if eventually 60 gone && on_driver e1000e; then pass "deleted, it restores e1000e"; else
    fail "PCIDeviceClaim deleted and restored" "$(reason); $(guest_driver)"; fi

echo "--- the agent aborted right after a prepare's unbind, then restarted"
guest 'agentctl stop' >/dev/null
guest "rm -f /tmp/once.rc; (agentctl run-once --timeout 90 HOSTDEVD_FAULT=bind:unbind -- -v 0 >/tmp/once.log 2>&1; echo \$? >/tmp/once.rc) >/dev/null 2>&1 &"
if eventually 60 guest_agent_ready; then pass "the agent runs with HOSTDEVD_FAULT=bind:unbind"; else
    fail "faulty agent ready" "$(guest 'tail -5 /tmp/once.log')"; fi
dra prepare
once_done() { guest 'test -s /tmp/once.rc'; }
eventually 30 once_done
OUT=$(guest 'echo exit=$(cat /tmp/once.rc); grep "Fault point reached" /tmp/once.log')
if [[ "$OUT" == *"exit=134"* && "$OUT" == *"Fault point reached"* ]]; then
    pass "it aborts during the prepare, right after the unbind"
else
    fail "abort after bind:unbind" "$OUT"$'\n'"$(guest 'tail -5 /tmp/once.log')"
fi
OUT=$(checkpoint | jq -c --arg u "$CLAIM_UID" '.claims[$u] | {prepared, o: .devices[0].original}' 2>&1)
[ "$OUT" = '{"prepared":false,"o":"e1000e"}' ] && pass "the checkpoint had e1000e before the unbind (entry not prepared)" ||
    fail "checkpoint before the bind" "$OUT"
D=$(guest_driver)
[ "$D" != e1000e ] && pass "the device was left off e1000e (${D:-no driver})" || fail "left unbound" "$D"
guest 'agentctl start' >/dev/null
if eventually 60 guest_agent_ready; then pass "agent restarted"; else fail "agent restarted" "$(node_logs)"; fi
dra unprepare
[ "$OUT" = "uid=$CLAIM_UID error=\"\"" ] && pass "unprepare after the restart answers no error" || fail "unprepare after the abort" "$OUT"
if on_driver e1000e; then pass "$NIC is back on e1000e"; else fail "restored after the abort" "$(guest_driver)"; fi
OUT=$(checkpoint | jq -c .claims 2>&1)
[ "$OUT" = "{}" ] && pass "the checkpoint is empty" || fail "checkpoint empty after the abort case" "$OUT"

echo "  grpctool round trips in the guest (TCG): prepare (GET, bind, files, checkpoint) ${PREP_MS:-?} ms," \
    "again (from the checkpoint) ${REPEAT_MS:-?} ms, unprepare (restore to e1000e) ${UNPREP_MS:-?} ms"
mkdir -p "$ROOT/build/results" &&
    echo "prepare ${PREP_MS:-?} ms; again ${REPEAT_MS:-?} ms; unprepare ${UNPREP_MS:-?} ms" >"$ROOT/build/results/e2e-dra.txt"
finish
