#!/usr/bin/env bash
# test/integration/test_drakubelet.sh - the agent's DRA kubelet plugin (docs/dra.md) against a
# real kubelet v1.37.1 (hack/kubelet.sh: fake CRI, registered with the private control plane)
# and a real kube-scheduler that allocates ResourceClaims from the agent's ResourceSlices. The
# agent (sanitizer build) runs on a fake sysfs tree (test/fixtures/sysfs/small-server.txt), where
# binding needs no kernel for devices already on vfio-pci (the e2e suite binds for real).
# Checks: kubelet registers the plugin; a pod with a ResourceClaimTemplate whose CEL picks the
# X710 port on vfio-pci is scheduled, kubelet calls NodePrepareResources, and the container the
# fake CRI records gets our two CDI ids; the CDI spec has /dev/vfio/vfio, /dev/vfio/<group> and
# the metadata mount at the path KubeVirt reads; the metadata file (v1alpha1) has the pciBusID,
# and KubeVirt v1.9.0's own reader finds the address in it; a PCIDeviceClaim on the device is
# refused (AllocatedByDRA); kubelet restarted while its NodePrepareResources waits (the agent
# frozen) calls again and both calls are answered with one checkpoint entry; a repeated prepare
# answers the same without binding again; a device that cannot be bound fails its pod's preparation with
# the reason and is left as it was; deleting the pod unprepares (files gone, checkpoint empty)
# and the waiting PCIDeviceClaim binds; a claim of two devices (ports first seen on i40e, then on
# vfio-pci) records i40e for each and, unprepared, gives each one back (its driver_override
# cleared); a malformed DRA request is refused and the plugin serves on; a device found on
# vfio-pci whose PCIDevice says another driver at first sight gets that one recorded and given
# back on unprepare; a mediated device instance (the fixture's, adopted by the agent) is in
# the pool, allocated by class mdev.vfio-pci.hostdevd.io, prepared with its group's node and the
# metadata's mdevUUID, which KubeVirt's builder turns into an mdev hostdev; one path per instance:
# while a claim has it prepared, the agent's device plugin lists it Unhealthy (kubelet's
# allocatable 0 of 1), refuses Allocate and PreStartContainer of it naming the claim, and lists it
# Healthy again once unprepared; a pod that got it from the device plugin and whose "VMM" holds
# its group makes a claim of it fail to prepare, naming the holder and the device plugin, until
# the VMM lets go. Prints pod created -> device prepared.
# test-lock: kubelet (the kubelet harness: its sysctls are global; see hack/run-tests.sh)
SUITE=drakubelet
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

AGENT=$TEST_BIN/hostdevd
GRPCTOOL=$TEST_BIN/grpctool
DRIVER=vfio-pci.hostdevd.io
X710=0000:d8:00.3 # on vfio-pci, IOMMU group 74, NUMA node 1
IGB=0000:04:00.0  # on igb: a fake tree cannot bind it
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

if [ "$(id -u)" -ne 0 ]; then
    echo "SKIP $SUITE: needs root (a real kubelet)"
    finish
fi
cluster_start --with-scheduler
ADMIN=$TEST_DIR/cluster/admin.kubeconfig
install_crds
expect_ok "the DeviceClasses are applied" kubectl apply -f manifests/deviceclasses.yaml
kubelet_start dra-node
NODE=$KUBELET_NODE
KROOT=$(dirname "$DEVICE_PLUGIN_DIR")
PLUGIN_DIR=$KROOT/plugins/$DRIVER
CDI=$TEST_DIR/cdi
SYS=$TEST_DIR/sys
DEV=$TEST_DIR/dev
MD=0c7ac1d4-6e2a-4f3b-9b1e-1d2c3e4f5a71 # an mtty-2 instance (the agent adopts it as a VGPUDevice)
printf 'mdev_type mtty mtty-2 available=10 name=Dual_port_serial\nmdev %s mtty mtty-2 iommu=200\n' "$MD" |
    cat test/fixtures/sysfs/small-server.txt - >"$TEST_DIR/desc.txt"
hack/mk-sysfs-fixture.sh "$TEST_DIR/desc.txt" "$SYS" >/dev/null
mkdir -p "$SYS/module/vfio_iommu_type1" "$DEV" "$TEST_DIR/proc/1" "$TEST_DIR/proc/net"
fake_proc "$TEST_DIR/proc"
PORT=$(free_port)
# Without CAP_SYS_ADMIN, as the DaemonSet's agent: a tty opened with TIOCEXCL then refuses it
# with EBUSY, the fake /dev/vfio/<group> a VMM holds (one path per instance, below).
start_agent() {
    agent_run --without-sys-admin --kubeconfig "$ADMIN" --proc-root "$TEST_DIR/proc" \
        --dev-root "$DEV" --kubelet-dir "$KROOT" --cdi-dir "$CDI" --resync 3600 \
        --uevent-source none -v 1
}
start_agent
ready() { curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null; }
if eventually 60 ready; then pass "agent ready next to kubelet"; else fail "agent ready" "$(tail -20 "$TEST_DIR/agent.log")"; finish; fi
metric() { curl -fsS "http://127.0.0.1:$PORT/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
registered() { [ "$(metric 'hostdevd_dra_registrations_total{result="ok"}')" -ge 1 ] 2>/dev/null; }
if eventually 30 registered; then pass "kubelet registered the DRA plugin (NotifyRegistrationStatus ok)"; else
    fail "registered" "$(grep -i dra "$KUBELET_LOG" | tail -5)"; fi
expect_contains "the registration socket answers GetInfo with the DRA socket" \
    "$("$GRPCTOOL" reginfo "$KROOT/plugins_registry/$DRIVER-reg.sock")" \
    "type=DRAPlugin name=$DRIVER endpoint=$PLUGIN_DIR/dra.sock v1=true"
in_slice() { kubectl get resourceslices -o json | jq -e --arg d "pci-${X710//[:.]/-}" \
    '[.items[].spec.devices[]?.name] | index($d) != null' >/dev/null; }
if eventually 30 in_slice; then pass "the X710 port is in the node's pool"; else fail "slice" "$(kubectl get resourceslices -o yaml | head -40)"; fi

now() { date +%s.%N; }
since() { awk -v a="$(now)" -v b="$1" 'BEGIN {printf "%.2f", a - b}'; }
template() { # name CEL [count]
    kubectl apply -f - >/dev/null <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: $1, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: nic
        exactly:
          deviceClassName: $DRIVER
          allocationMode: ExactCount
          count: ${3:-1}
          selectors:
          - cel: {expression: '$2'}
EOF
}
pod() { dra_pod "$1" "$2"; } # name template
claim_of() { kubectl get pod "$1" -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}' 2>/dev/null; }
phase() { kubectl get pod "$1" -o jsonpath='{.status.phase}' 2>/dev/null; }
running() { [ "$(phase "$1")" = Running ]; }
# A device's driver and driver_override in the fake tree (which keeps the last value written).
driver_of() { basename "$(readlink "$SYS/bus/pci/devices/$1/driver")"; }
override() { tr -d '\n' <"$SYS/bus/pci/devices/$1/driver_override"; }

echo "--- a pod's claim allocated by the scheduler and prepared by the agent"
template x710 'device.attributes["vfio-pci.hostdevd.io"].vendorID == "8086" && device.attributes["vfio-pci.hostdevd.io"].deviceID == "1572" && device.attributes["vfio-pci.hostdevd.io"].driver == "vfio-pci" && device.attributes["resource.kubernetes.io"].numaNode == 1'
T0=$(now)
pod vm1 x710
if eventually 60 running vm1; then
    pass "the pod runs on $NODE ($(since "$T0") s from creation)"
else
    fail "pod running" "$(kubectl describe pod vm1 | tail -15; tail -10 "$TEST_DIR/agent.log")"
    finish
fi
CLAIM=$(claim_of vm1)
UID_=$(kubectl get resourceclaim "$CLAIM" -o jsonpath='{.metadata.uid}')
expect_contains "the scheduler allocated the X710 port from our pool" \
    "$(kubectl get resourceclaim "$CLAIM" -o jsonpath='{.status.allocation.devices.results[0].driver}/{.status.allocation.devices.results[0].pool}/{.status.allocation.devices.results[0].device}')" \
    "$DRIVER/$NODE/pci-0000-d8-00-3"
PREP_MS=$(python3 - "$TEST_DIR/agent.log" "$T0" <<'PY'
import datetime, re, sys
t0 = float(sys.argv[2])
day = datetime.datetime.fromtimestamp(t0, datetime.timezone.utc).date()
for line in open(sys.argv[1]):
    m = re.match(r"I\d{4} (\d\d):(\d\d):(\d\d\.\d+) .*\"Prepared a ResourceClaim\"", line)
    if m:
        t = datetime.datetime.combine(day, datetime.time(), datetime.timezone.utc).timestamp()
        t += int(m[1]) * 3600 + int(m[2]) * 60 + float(m[3])
        print(int((t - t0) * 1000))
        break
PY
)
echo "  pod created -> device prepared: ${PREP_MS:-?} ms"
REC=$(grep "\"pod\":\"vm1\"" "$CRI_RECORD" | tail -1)
expect_contains "the container got the device's CDI id" "$(jq -r '.cdi_devices | join(" ")' <<<"$REC")" \
    "$DRIVER/vfio=$UID_-pci-0000-d8-00-3"
expect_contains "... and the metadata mount's" "$(jq -r '.cdi_devices | join(" ")' <<<"$REC")" "$DRIVER/vfio=${UID_}_nic"
SPEC=$CDI/$DRIVER-$UID_.json
expect_ok "the CDI spec is valid JSON" jq -e . "$SPEC"
expect_contains "CDI: /dev/vfio/vfio and the group's node" \
    "$(jq -r '.devices[0].containerEdits.deviceNodes[].path' "$SPEC" | tr '\n' ' ')" "/dev/vfio/vfio /dev/vfio/74"
expect_contains "CDI: the metadata file mounted where KubeVirt reads it (template claim)" \
    "$(jq -r '.devices[1].containerEdits.mounts[0].containerPath' "$SPEC")" \
    "/var/run/kubernetes.io/dra-device-attributes/resourceclaimtemplates/nic/nic/$DRIVER-metadata.json"
META=$(jq -r '.devices[1].containerEdits.mounts[0].hostPath' "$SPEC")
expect_contains "metadata: v1alpha1 with the pciBusID" \
    "$(jq -c '{apiVersion, podClaimName, b: .requests[0].devices[0].attributes["resource.kubernetes.io/pciBusID"].string}' "$META")" \
    "{\"apiVersion\":\"metadata.resource.k8s.io/v1alpha1\",\"podClaimName\":\"nic\",\"b\":\"$X710\"}"
# KubeVirt's own reader on the file, placed where the container sees it.
KVENV=$(hack/kubevirtenv-build.sh 2>/dev/null || true)
if [ -x "$KVENV" ]; then
    BASE=$TEST_DIR/ctr/var/run/kubernetes.io/dra-device-attributes
    mkdir -p "$BASE/resourceclaimtemplates/nic/nic" && cp "$META" "$BASE/resourceclaimtemplates/nic/nic/$DRIVER-metadata.json"
    KV=$("$KVENV" --dra-base "$BASE" --dra-claim nic --dra-request nic 2>&1)
    expect_contains "KubeVirt v1.9.0's DRA reader finds the PCI address" \
        "$(jq -r .pciAddress <<<"$KV" 2>&1)" "$X710"
    expect_contains "... and its host-device builder makes the libvirt hostdev of it" \
        "$(jq -r .hostDevicesXML <<<"$KV" 2>&1)" '<address type="pci" domain="0x0000" bus="0xd8" slot="0x00" function="0x3">'

else
    fail "KubeVirt's reader builds" "$KVENV"
fi

echo "--- the device is DRA's: a PCIDeviceClaim on it is refused"
pci_name() { local a=${1//:/}; echo "$NODE-${a//./}"; }
printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: %s}\nspec: {address: "%s", nodeName: %s, userName: alice}\n' \
    "$(pci_name $X710)" "$X710" "$NODE" | kubectl create -f - >/dev/null
reason() { kubectl get pcideviceclaim "$(pci_name $X710)" -o jsonpath='{.status.conditions[?(@.type=="Ready")].reason}' 2>/dev/null; }
is_reason() { [ "$(reason)" = "$1" ]; }
if eventually 30 is_reason AllocatedByDRA; then pass "refused: AllocatedByDRA"; else fail "AllocatedByDRA" "$(reason)"; fi
expect_contains "... the message names the ResourceClaim" \
    "$(kubectl get pcideviceclaim "$(pci_name $X710)" -o jsonpath='{.status.conditions[0].message}')" "default/$CLAIM"

echo "--- a mediated device instance (VGPUDevice) allocated by the scheduler and prepared"
RES_MDEV=devices.harvesterhci.io/mtty-2
allocatable() { kubectl get node "$NODE" -o jsonpath="{.status.allocatable['${1//./\\.}']}" 2>/dev/null; }
capacity() { kubectl get node "$NODE" -o jsonpath="{.status.capacity['${1//./\\.}']}" 2>/dev/null; }
mdev_counts() { [ "$(capacity $RES_MDEV)/$(allocatable $RES_MDEV)" = "$1" ]; }
if eventually 60 mdev_counts 1/1; then pass "the device plugin offers the instance too, Healthy ($RES_MDEV capacity 1, allocatable 1)"; else
    fail "mdev offered by the device plugin" "$(capacity $RES_MDEV)/$(allocatable $RES_MDEV)"; fi
# the agent adopts the fixture's instance as a configured VGPUDevice (with its group)
mdev_in_slice() { kubectl get resourceslices -o json | jq -e --arg d "mdev-$MD" --arg u "$MD" \
    '[.items[].spec.devices[]? | select(.name == $d) | .attributes] | length == 1 and
     .[0]["dra.kubevirt.io/mdevUUID"].string == $u and .[0].mdevType.string == "mtty-2" and .[0].iommuGroup.int == 200' >/dev/null; }
if eventually 60 mdev_in_slice; then pass "the instance is in the node's pool: mdev-<uuid> with dra.kubevirt.io/mdevUUID, mdevType, iommuGroup"; else
    fail "mdev in slice" "$(kubectl get resourceslices -o json | jq -c '[.items[].spec.devices[]?.name]')"; fi
dra_template vgpu "mdev.$DRIVER" "device.attributes[\"$DRIVER\"].mdevType == \"mtty-2\"" gpu
dra_pod vm-mdev vgpu gpu
if eventually 60 running vm-mdev; then
    MCLAIM=$(claim_of vm-mdev)
    MUID=$(kubectl get resourceclaim "$MCLAIM" -o jsonpath='{.metadata.uid}')
    expect_contains "the scheduler allocated the instance (class mdev.$DRIVER, a selector on mdevType)" \
        "$(kubectl get resourceclaim "$MCLAIM" -o jsonpath='{.status.allocation.devices.results[0].device}')" "mdev-$MD"
    MSPEC=$CDI/$DRIVER-$MUID.json
    expect_contains "CDI: /dev/vfio/vfio and the instance's group's node" \
        "$(jq -r '.devices[0].containerEdits.deviceNodes[].path' "$MSPEC" | tr '\n' ' ')" "/dev/vfio/vfio /dev/vfio/200"
    MMETA=$(jq -r '.devices[1].containerEdits.mounts[0].hostPath' "$MSPEC")
    expect_contains "metadata: the UUID under mdevUUID (the key KubeVirt v1.9.0 reads), no pciBusID" \
        "$(jq -c '.requests[0].devices[0].attributes | {u: .mdevUUID.string, p: has("resource.kubernetes.io/pciBusID")}' "$MMETA")" \
        "{\"u\":\"$MD\",\"p\":false}"
    if [ -x "$KVENV" ]; then
        mkdir -p "$BASE/resourceclaimtemplates/gpu/gpu" && cp "$MMETA" "$BASE/resourceclaimtemplates/gpu/gpu/$DRIVER-metadata.json"
        KV=$("$KVENV" --dra-base "$BASE" --dra-claim gpu --dra-request gpu 2>&1)
        expect_contains "KubeVirt v1.9.0's DRA host-device builder makes an mdev hostdev of it" \
            "$(jq -r .hostDevicesXML <<<"$KV" 2>&1)" 'type="mdev"' "uuid=\"$MD\""
    fi
    echo "--- one path per instance: prepared for a claim, the device plugin does not give it out"
    if eventually 30 mdev_counts 1/0; then pass "listed Unhealthy: kubelet's device manager has it, allocates none (capacity 1, allocatable 0)"; else
        fail "Unhealthy while prepared" "$(capacity $RES_MDEV)/$(allocatable $RES_MDEV); $(tail -5 "$TEST_DIR/agent.log")"; fi
    # the resource's socket (its name cut and hashed here: the test's directory is long), called
    # from its directory (its whole path is longer than a unix socket address takes)
    MSOCK=$(sed -n 's|.*"Registered device plugin with kubelet" resource="'"$RES_MDEV"'" socket=".*/\([^/"]*\)".*|\1|p' \
        "$TEST_DIR/agent.log" | tail -1)
    dp_call() { (cd "$DEVICE_PLUGIN_DIR" && "$GRPCTOOL" call "$MSOCK" "$@" 2>&1); }
    # AllocateRequest {container_requests {devices_ids: MD}}; PreStartContainerRequest {devices_ids: MD}
    expect_contains "Allocate of it is refused, naming the claim" \
        "$(dp_call /v1beta1.DevicePlugin/Allocate $'\n&\n$'"$MD")" \
        "code=9 msg=\"mediated device $MD is prepared for ResourceClaim default/$MCLAIM (DRA driver $DRIVER)"
    expect_contains "... and so is PreStartContainer (a pod it was given to just before)" \
        "$(dp_call /v1beta1.DevicePlugin/PreStartContainer $'\n$'"$MD")" \
        "code=9 msg=\"mediated device $MD is prepared for ResourceClaim default/$MCLAIM"
    kubectl delete pod vm-mdev --wait=false >/dev/null
    unprepared() { [ ! -e "$MSPEC" ]; }
    if eventually 60 unprepared; then pass "the pod deleted: the instance's claim unprepared (CDI spec gone)"; else fail "mdev unprepared" "$(tail -5 "$TEST_DIR/agent.log")"; fi
    if eventually 30 mdev_counts 1/1; then pass "unprepared: Healthy again (allocatable 1)"; else
        fail "Healthy after unprepare" "$(capacity $RES_MDEV)/$(allocatable $RES_MDEV)"; fi
else
    fail "mdev pod running" "$(kubectl describe pod vm-mdev | tail -15; tail -10 "$TEST_DIR/agent.log")"
fi

echo "--- one path per instance: given out by the device plugin and in use, a claim of it waits"
kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: dp-mdev, namespace: default}
spec:
  automountServiceAccountToken: false
  hostNetwork: true
  tolerations: [{operator: Exists}]
  containers:
  - name: c
    image: busybox
    resources: {limits: {$RES_MDEV: 1}}
EOF
if eventually 60 running dp-mdev; then pass "a pod gets the instance from the device plugin ($RES_MDEV)"; else
    fail "dp-mdev running" "$(kubectl describe pod dp-mdev | tail -10)"; fi
# Its "VMM": the fake /dev/vfio/200 (the instance's group), a pty held with TIOCEXCL (the agent's
# open gets EBUSY, as from a vfio group a VMM holds), named by the fake /proc.
mkdir -p "$DEV/vfio"
fake_vmm 200
holding() { [ -s "$TEST_DIR/proc/$HOLDER/comm" ]; }
holding_not() { [ ! -e "$TEST_DIR/proc/$HOLDER/comm" ]; }
eventually 10 holding || fail "the VMM holds /dev/vfio/200" "$(cat "$TEST_DIR/holder.log")"
dra_pod vm-mdev2 vgpu gpu
held_msg() { kubectl get events -n default --field-selector involvedObject.name=vm-mdev2 -o jsonpath='{.items[*].message}' 2>/dev/null; }
refused_held() {
    held_msg | grep -qF "mediated device $MD is held by qemu-system-x86 (pid $HOLDER): /dev/vfio/200 (its IOMMU group) is open, given out by the device plugin as $RES_MDEV"
}
if eventually 60 refused_held; then
    pass "the claim's prepare is refused, naming the VMM and the device plugin (FailedPrepareDynamicResources)"
else
    fail "prepare refused while held" "$(held_msg | tail -c 600; tail -3 "$TEST_DIR/agent.log")"
fi
if [ "$(phase vm-mdev2)" != Running ]; then pass "... and that pod does not run"; else fail "vm-mdev2 ran" "$(phase vm-mdev2)"; fi
kill -TERM "$HOLDER"
eventually 10 holding_not || fail "the VMM let go" "$(cat "$TEST_DIR/holder.log")"
# kubelet calls again on its own (90 s later here: a fake CRI's pod resyncs); a change of the pod
# makes it sync, and prepare, at once
T0=$(now)
kubectl annotate pod vm-mdev2 hostdevd.io/test-nudge=1 >/dev/null
if eventually 60 running vm-mdev2; then pass "the VMM let go: kubelet's next prepare takes the instance and the pod runs ($(since "$T0") s)"; else
    fail "vm-mdev2 running after release" "$(kubectl describe pod vm-mdev2 | tail -8; tail -3 "$TEST_DIR/agent.log")"; fi
if eventually 30 mdev_counts 1/0; then pass "... and the device plugin lists it Unhealthy"; else
    fail "Unhealthy after the claim took it" "$(capacity $RES_MDEV)/$(allocatable $RES_MDEV)"; fi
kubectl delete pod vm-mdev2 dp-mdev --wait=false >/dev/null
mdev_unprepared() { [ "$(jq '[.claims[].devices[] | select(.address == "'"$MD"'")] | length' "$PLUGIN_DIR/checkpoint.json")" = 0 ]; }
eventually 60 mdev_unprepared || fail "vm-mdev2's claim unprepared" "$(tail -3 "$TEST_DIR/agent.log")"

echo "--- kubelet restarts in the middle of a prepare; the call repeats"
# The agent frozen (SIGSTOP) holds kubelet's NodePrepareResources for a new pod unanswered in its
# socket; kubelet restarts; the agent thawed serves the first call (to a kubelet that went) and
# the restarted kubelet's repeat.
template gpu 'device.attributes["resource.kubernetes.io"].pciBusID == "0000:18:00.0"'
BEFORE=$(metric 'hostdevd_dra_prepare_total{result="ok"}')
allocated() { [ -n "$(kubectl get resourceclaim "$(claim_of vm4)" -o jsonpath='{.status.allocation}' 2>/dev/null)" ]; }
kill -STOP "$AGENT_PID"
pod vm4 gpu
eventually 30 allocated || fail "vm4's claim allocated" "$(kubectl describe pod vm4 | tail -5)"
sleep 2 # kubelet's call sent, unanswered
if "$ROOT/hack/kubelet.sh" restart "$TEST_DIR/kubelet" >"$TEST_DIR/restart.log" 2>&1; then
    pass "kubelet restarted while its call waited"; else fail "kubelet restart" "$(tail -5 "$TEST_DIR/restart.log")"; fi
kill -CONT "$AGENT_PID"
# (the restarted kubelet's GetInfo to the frozen agent failed: kubelet registers the DRA plugin
# again after its own backoff, which doubles from 0.5 s up to 2 min; on a loaded machine the
# freeze spans several failures)
if eventually 150 running vm4; then pass "the pod runs after the restart"; else fail "vm4 running" "$(kubectl describe pod vm4 | tail -8)"; fi
twice() { [ "$(metric 'hostdevd_dra_prepare_total{result="ok"}')" -ge $((BEFORE + 2)) ]; }
if eventually 10 twice; then pass "both calls were answered (the first one's kubelet had gone)"; else
    fail "two prepares" "$(metric 'hostdevd_dra_prepare_total{result="ok"}') (was $BEFORE)"; fi
U4=$(kubectl get resourceclaim "$(claim_of vm4)" -o jsonpath='{.metadata.uid}')
expect_contains "... one checkpoint entry for the claim, prepared once" \
    "$(jq -c --arg u "$U4" '[.claims | to_entries[] | select(.key == $u) | .value.devices[].address]' "$PLUGIN_DIR/checkpoint.json")" \
    '["0000:18:00.0"]'
if eventually 30 running vm1; then pass "pod vm1 still runs"; else fail "pod after restart" "$(phase vm1)"; fi
expect_ok "pod vm4 deleted" kubectl delete pod vm4 --wait=true --timeout=60s
CK1=$(jq -c . "$PLUGIN_DIR/checkpoint.json")
OUT=$("$GRPCTOOL" dra "$PLUGIN_DIR/dra.sock" prepare "default/$CLAIM/$UID_")
expect_contains "a repeated NodePrepareResources answers the same CDI ids" "$OUT" \
    "uid=$UID_ error=\"\" device=$NODE/pci-0000-d8-00-3 requests=nic cdi=$DRIVER/vfio=$UID_-pci-0000-d8-00-3,$DRIVER/vfio=${UID_}_nic"
[ "$(jq -c . "$PLUGIN_DIR/checkpoint.json")" = "$CK1" ] && pass "... and the checkpoint is unchanged (nothing bound twice)" ||
    fail "checkpoint changed" "$(cat "$PLUGIN_DIR/checkpoint.json")"

echo "--- a device that cannot be bound"
template igb 'device.attributes["vfio-pci.hostdevd.io"].driver == "igb" && device.attributes["resource.kubernetes.io"].pciBusID == "'$IGB'"'
pod vm2 igb
failed_prepare() { kubectl get events -n default --field-selector involvedObject.name=vm2 -o jsonpath='{.items[*].message}' | grep -q "device $IGB: BindFailed"; }
if eventually 60 failed_prepare; then pass "the pod's preparation fails with the agent's reason (BindFailed)"; else
    fail "prepare error" "$(kubectl get events -n default --field-selector involvedObject.name=vm2 -o jsonpath='{.items[*].message}'; tail -5 "$TEST_DIR/agent.log")"; fi
[ "$(phase vm2)" != Running ] && pass "... and the pod does not run" || fail "vm2 runs" "$(phase vm2)"
C2=$(claim_of vm2)
U2=$(kubectl get resourceclaim "$C2" -o jsonpath='{.metadata.uid}')
[ "$(jq --arg u "$U2" '.claims | has($u)' "$PLUGIN_DIR/checkpoint.json")" = false ] &&
    pass "... the failed claim leaves no checkpoint entry" || fail "checkpoint" "$(cat "$PLUGIN_DIR/checkpoint.json")"
GOT="$(driver_of "$IGB") override=$(override "$IGB")"
[ "$GOT" = "igb override=" ] && pass "... and its device restored: on igb, the driver_override the bind set cleared" ||
    fail "igb restored" "$GOT"
[ ! -e "$CDI/$DRIVER-$U2.json" ] && pass "... and no CDI spec" || fail "CDI spec left" "$(ls "$CDI")"
expect_ok "the igb device's pod is deleted" kubectl delete pod vm2 --wait=true --timeout=60s

echo "--- malformed requests"
OUT=$("$GRPCTOOL" call "$PLUGIN_DIR/dra.sock" /k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/NodePrepareResources $'\x0a\x05\x0a\x01a\x12' 2>&1)
expect_contains "a truncated NodePrepareResourcesRequest: INVALID_ARGUMENT with a reason" "$OUT" "code=3 msg=\"malformed NodePrepareResourcesRequest"
OUT=$("$GRPCTOOL" dra "$PLUGIN_DIR/dra.sock" prepare "default/no-such-claim/0000" 2>&1)
expect_contains "a claim that does not exist: its error says so" "$OUT" "cannot read ResourceClaim default/no-such-claim"
OUT=$("$GRPCTOOL" dra "$PLUGIN_DIR/dra.sock" prepare "default/$CLAIM/not-its-uid" 2>&1)
expect_contains "a uid that is not the claim's: refused" "$OUT" "deleted and made again"
OUT=$("$GRPCTOOL" dra "$PLUGIN_DIR/dra.sock" unprepare "default/never-prepared/1234" 2>&1)
expect_contains "unpreparing a claim never prepared is done at once" "$OUT" "uid=1234 error=\"\""
kill -0 "$AGENT_PID" && pass "the agent serves on" || fail "agent died" "$(tail -20 "$TEST_DIR/agent.log")"

echo "--- the pod deleted: the claim unprepared"
expect_ok "pod vm1 deleted" kubectl delete pod vm1 --wait=true --timeout=60s
gone() { [ "$(jq '.claims | length' "$PLUGIN_DIR/checkpoint.json")" = 0 ] && [ ! -e "$SPEC" ] && [ ! -e "$META" ]; }
if eventually 60 gone; then pass "unprepared: checkpoint empty, CDI spec and metadata gone"; else
    fail "unprepare" "$(cat "$PLUGIN_DIR/checkpoint.json"; ls "$CDI")"; fi
bound() { [ "$(kubectl get pcideviceclaim "$(pci_name $X710)" -o jsonpath='{.status.passthroughEnabled}')" = true ]; }
if eventually 30 bound; then pass "the waiting PCIDeviceClaim now binds the device"; else fail "claim after DRA" "$(reason)"; fi
kubectl delete pcideviceclaim "$(pci_name $X710)" --wait=false >/dev/null

echo "--- a claim of two devices: each one given back on unprepare"
# The X710's two i40e ports bound to vfio-pci after the agent first saw them (their PCIDevices
# keep i40e as the driver at first sight: the original to give back), and a rescan to see it.
# A fake tree cannot take a device off vfio-pci (no kernel: docs/testing.md), so before the Pod
# goes the ports are moved back to i40e by hand, the kernel's part; what is left to each
# device's restore is clearing the driver_override its prepare set, which a skipped device keeps.
PORTS=(0000:d8:00.0 0000:d8:00.1)
relink() { ln -sfn "../../../bus/pci/drivers/$2" "$(readlink -f "$SYS/bus/pci/devices/$1")/driver"; }
overrides() { local a; for a in "${PORTS[@]}"; do printf '%s=%s ' "$a" "$(override "$a")"; done; }
for a in "${PORTS[@]}"; do relink "$a" vfio-pci; done
kill -HUP "$AGENT_PID"
on_vfio() { [ "$(kubectl get resourceslices -o json | jq --arg a "pci-${PORTS[0]//[:.]/-}" --arg b "pci-${PORTS[1]//[:.]/-}" \
    '[.items[].spec.devices[]? | select(.name == $a or .name == $b) | .attributes.driver.string] | map(select(. == "vfio-pci")) | length')" = 2 ]; }
if eventually 30 on_vfio; then pass "both ports in the pool on vfio-pci"; else fail "ports on vfio-pci" "$(kubectl get resourceslices -o yaml | grep -B2 -A30 d8-00-0 | head -40)"; fi
template pair 'device.attributes["resource.kubernetes.io"].pciBusID in ["'"${PORTS[0]}"'", "'"${PORTS[1]}"'"] && device.attributes["vfio-pci.hostdevd.io"].driver == "vfio-pci"' 2
pod vm5 pair
if eventually 60 running vm5; then pass "a pod with a claim of both ports runs"; else fail "vm5 running" "$(kubectl describe pod vm5 | tail -8; tail -5 "$TEST_DIR/agent.log")"; fi
U5=$(kubectl get resourceclaim "$(claim_of vm5)" -o jsonpath='{.metadata.uid}')
expect_contains "the checkpoint records both ports, with i40e to give back" \
    "$(jq -c --arg u "$U5" '[.claims[$u].devices[] | "\(.address)=\(.original)"] | sort' "$PLUGIN_DIR/checkpoint.json")" \
    "[\"${PORTS[0]}=i40e\",\"${PORTS[1]}=i40e\"]"
expect_contains "... and each port's driver_override says vfio-pci" "$(overrides)" \
    "${PORTS[0]}=vfio-pci ${PORTS[1]}=vfio-pci"
for a in "${PORTS[@]}"; do relink "$a" i40e; done
expect_ok "pod vm5 deleted" kubectl delete pod vm5 --wait=true --timeout=60s
unprepared() { [ "$(jq --arg u "$U5" '.claims | has($u)' "$PLUGIN_DIR/checkpoint.json")" = false ] && [ ! -e "$CDI/$DRIVER-$U5.json" ]; }
if eventually 30 unprepared; then pass "unprepared: no checkpoint entry, no CDI spec"; else
    fail "two-device unprepare" "$(cat "$PLUGIN_DIR/checkpoint.json"; ls "$CDI"; tail -5 "$TEST_DIR/agent.log")"; fi
GOT=$(overrides)
[ "$GOT" = "${PORTS[0]}= ${PORTS[1]}= " ] && pass "... and every port given back: its driver_override cleared" ||
    fail "every port given back" "$GOT"
dev_said() { # address text: an Event on its PCIDevice says it
    kubectl get events -n default --field-selector "involvedObject.name=$(pci_name "$1")" \
        -o jsonpath='{range .items[*]}{.reason}: {.message}{"\n"}{end}' | grep -qF "$2"
}
# What each release did and saw (node/pcireset.h), on the port's PCIDevice: not reset (the
# ports were moved off vfio-pci by hand above, as the kernel would have after the unbind; the
# reset itself is test_health.sh's and test/e2e/test_claims.sh's), back on i40e, the ids.
for a in "${PORTS[@]}"; do
    if eventually 20 dev_said "$a" "Restored: device $a not reset: it was not on vfio-pci when this release began (a release resumed); back on driver \"i40e\"; it answers as 8086:1572"; then
        pass "... $a: the unprepare's findings in an Event on its PCIDevice"
    else
        fail "$a: the unprepare's findings on its PCIDevice" "$(kubectl get events -n default -o jsonpath='{range .items[*]}{.reason}: {.message}{"\n"}{end}' | grep "$a")"
    fi
done
kill -HUP "$AGENT_PID"

echo "--- a restarted agent keeps its checkpoint"
template x710b 'device.attributes["resource.kubernetes.io"].pciBusID == "0000:18:00.0"'
pod vm3 x710b
if eventually 60 running vm3; then pass "a GPU function prepared for vm3"; else fail "vm3" "$(kubectl describe pod vm3 | tail -8)"; fi
kill -TERM "$AGENT_PID"
wait "$AGENT_PID" 2>/dev/null
start_agent
if eventually 60 ready; then pass "agent restarted"; else fail "agent restart" "$(tail -10 "$TEST_DIR/agent.log")"; fi
expect_contains "... it knows the prepared claim" "$(grep 'Serving the DRA plugin' "$TEST_DIR/agent.log" | tail -1)" 'preparedClaims=1'
expect_ok "pod vm3 deleted" kubectl delete pod vm3 --wait=true --timeout=60s
if eventually 60 bash -c "[ \"\$(jq '.claims | length' '$PLUGIN_DIR/checkpoint.json')\" = 0 ]"; then
    pass "... and unprepares it when the pod goes"; else fail "unprepare after restart" "$(cat "$PLUGIN_DIR/checkpoint.json")"; fi

echo "--- a device found on vfio-pci gets its driver at first sight back, not vfio-pci"
# As after a checkpoint set aside as malformed while the device was bound: it is on vfio-pci now,
# its PCIDevice's annotation (its driver at first sight) says mlx5_core.
T_ORIG=$(now)
VF=0000:3b:00.4 # a ConnectX-5 VF on vfio-pci, IOMMU group 44 alone
kubectl annotate pcidevice "$(pci_name $VF)" --overwrite harvesterhci.io/pcideviceDriver=mlx5_core >/dev/null
template vf 'device.attributes["resource.kubernetes.io"].pciBusID == "'$VF'"'
pod vm5 vf
if eventually 60 running vm5; then pass "the VF prepared for vm5"; else fail "vm5" "$(kubectl describe pod vm5 | tail -8)"; fi
C5=$(claim_of vm5)
U5=$(kubectl get resourceclaim "$C5" -o jsonpath='{.metadata.uid}')
original() { jq -r --arg u "$U5" '.claims[$u].devices[0].original // "(no entry)"' "$PLUGIN_DIR/checkpoint.json"; }
[ "$(original)" = mlx5_core ] && pass "the checkpoint records mlx5_core (the PCIDevice's), not the driver it was found on" ||
    fail "recorded original" "$(original)"
kubectl delete pod vm5 --wait=false >/dev/null
# No kernel probes mlx5_core in a fake tree: the restore is tried, does not take effect, and the
# claim stays in the checkpoint (a restore to vfio-pci would have been nothing to do).
restore_tried() { grep '"Cannot unprepare a ResourceClaim"' "$TEST_DIR/agent.log" | grep "uid=\"$U5\"" | grep -q "device $VF: RestoreFailed"; }
tried_or_gone() { restore_tried || [ "$(original)" = "(no entry)" ]; }
if eventually 60 tried_or_gone && restore_tried && [ "$(original)" = mlx5_core ]; then
    pass "the pod deleted: unprepare gives mlx5_core back (RestoreFailed here, no kernel; the entry kept)"
else
    fail "restore to mlx5_core tried" "$(original); $(grep -F "$U5" "$TEST_DIR/agent.log" | tail -3)"
fi
# The kernel's part: the driver probed, the device on mlx5_core; the next unprepare verifies it.
DRV=$SYS/bus/pci/devices/$VF/driver
ln -sfn "$(dirname "$(readlink "$DRV")")/mlx5_core" "$DRV"
OUT=$("$GRPCTOOL" dra "$PLUGIN_DIR/dra.sock" unprepare "default/$C5/$U5" 2>&1)
expect_contains "... once on mlx5_core, unprepared" "$OUT" "uid=$U5 error=\"\""
[ "$(original)" = "(no entry)" ] && pass "... and the claim leaves the checkpoint" || fail "checkpoint after restore" "$(cat "$PLUGIN_DIR/checkpoint.json")"
echo "  driver at first sight restored: $(since "$T_ORIG") s"
finish
