#!/usr/bin/env bash
# test/integration/test_unhealthy.sh - the consumers keep off an unhealthy device (issue 46,
# docs/agent.md "Device health"): `hostdevd agent` (sanitizer build, admin kubeconfig) on the fake
# tree test/fixtures/sysfs/small-server.txt against the real control plane with kube-scheduler.
# A device is made unhealthy as an agent restarted would find it: its PCIDevice's Healthy
# condition patched False (controllers/health takes it back). Checks: a new PCIDeviceClaim of
# it is refused, Ready=False DeviceUnhealthy with the health reason, message and the way back,
# and a Warning Event; the pool's slice keeps it with the taint hostdevd.io/unhealthy=<reason>
# NoSchedule; a ResourceClaim for the unhealthy GPU is not allocated by the real kube-scheduler
# (its pod stays Pending with the scheduler's reason), and the same claim that tolerates the taint
# is; the administrator's recheck (annotation hostdevd.io/recheck-health) clears the device and
# the refused claim binds by itself; the agent restarted, the GPU's taint (taken back) keeps its
# time and the restart writes no slice; a bound claim whose device turns unhealthy keeps its
# device, and its deletion releases it. NoExecute where the administrator asks, with
# kube-controller-manager's device-taint-eviction-controller (hack/cluster.sh runs it) and pods
# the real kube-scheduler bound (no kubelet: a deleted pod stays Terminating): with the default
# NoSchedule no pod is evicted while a DeviceTaintRule the administrator writes (NoExecute, one
# device) evicts its device's pod and the agent writes no slice for it; the agent restarted with
# --unhealthy-taint-effect NoExecute taints NoExecute, the pod whose claim has an unhealthy
# device is evicted (DisruptionTarget DeletionByDeviceTaintManager, an Event), the one whose
# claim tolerates the taint stays, and the evicted pod's claim is deallocated once it is gone.
# The device plugins' Unhealthy is in test_plugins.sh (a real kubelet); the DRA prepare's
# refusal uses the same sentence (unit: test_pciclaim_decide.c).
SUITE=unhealthy
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

AGENT=$TEST_BIN/hostdevd
NODE=fix-node
DRIVER=vfio-pci.hostdevd.io
SLICE=$NODE-vfio-pci-0
NIC=0000:d8:00.3 # on vfio-pci already, alone in its group: its claim binds on a fake tree
GPU=0000:18:00.0 # the only NVIDIA GPU in the pool
OTHER=0000:3b:00.4
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

cluster_start --with-scheduler
ADMIN=$TEST_DIR/cluster/admin.kubeconfig
install_crds
expect_ok "the DeviceClasses are applied" kubectl apply -f manifests/deviceclasses.yaml
create_node "$NODE"
# the scheduler binds a pod to a node only when it has room for one
kubectl patch node "$NODE" --subresource=status --type=merge -p \
    '{"status":{"capacity":{"pods":"10","cpu":"4","memory":"8Gi"},"allocatable":{"pods":"10","cpu":"4","memory":"8Gi"}}}' >/dev/null
SYS=$TEST_DIR/sys
expect_ok "fake sysfs tree built" hack/mk-sysfs-fixture.sh test/fixtures/sysfs/small-server.txt "$SYS"
mkdir -p "$SYS/module/vfio_iommu_type1" "$TEST_DIR/proc/1" "$TEST_DIR/proc/net" "$TEST_DIR/dev" # the modules a bind loads: loaded
fake_proc "$TEST_DIR/proc"
PORT=$(free_port)
start_agent() {
    agent_run --kubeconfig "$ADMIN" --proc-root "$TEST_DIR/proc" --dev-root "$TEST_DIR/dev" \
        --kubelet-dir "$TEST_DIR/nokubelet" --resync 3600 --uevent-source none -v 2 "$@"
}
ready() { curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null; }
writes() { hack/audit-requests.py "$TEST_DIR/cluster/audit.log" ${1:+--resource "$1"} | cut -d" " -f2; }
name_of() { local a=${1//:/}; echo "$NODE-${a//./}"; }
dev_name() { local a=${1//:/-}; echo "pci-${a//./-}"; }
# health ADDRESS STATUS REASON MESSAGE: the PCIDevice's Healthy condition, as an admin writes it
health() {
    kubectl patch pcidevice "$(name_of "$1")" --subresource status --type merge -p \
        "{\"status\":{\"conditions\":[{\"type\":\"Healthy\",\"status\":\"$2\",\"reason\":\"$3\",\"message\":\"$4\",\"lastTransitionTime\":\"2026-11-29T00:00:00Z\"}]}}" >/dev/null
}
# the taint of ADDRESS's device in the slice: "key=value:effect@timeAdded", or ""
taint() {
    kubectl get resourceslice "$SLICE" -o json 2>/dev/null | jq -r --arg d "$(dev_name "$1")" \
        '.spec.devices[]? | select(.name == $d) | .taints[]? | "\(.key)=\(.value):\(.effect)@\(.timeAdded)"'
}
in_pool() { kubectl get resourceslice "$SLICE" -o json 2>/dev/null | jq -e --arg d "$(dev_name "$1")" '.spec.devices[]? | select(.name == $d)' >/dev/null; }
claim() { # address
    printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: %s}\nspec: {address: "%s", nodeName: %s, userName: alice}\n' \
        "$(name_of "$1")" "$1" "$NODE" | kubectl create -f - >/dev/null
}
ready_of() { kubectl get pcideviceclaim "$(name_of "$1")" -o jsonpath='{.status.conditions[?(@.type=="Ready")].reason}' 2>/dev/null; }
message_of() { kubectl get pcideviceclaim "$(name_of "$1")" -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}'; }
has_reason() { [ "$(ready_of "$1")" = "$2" ]; }
bound() { [ "$(kubectl get pcideviceclaim "$(name_of "$1")" -o jsonpath='{.status.passthroughEnabled}/{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = true/True ]; }

echo "--- an unhealthy device"
start_agent
if eventually 60 ready; then pass "agent ready"; else fail "agent ready" "$(tail -20 "$TEST_DIR/agent.log")"; finish; fi
if eventually 30 in_pool "$NIC"; then pass "$NIC in the pool"; else fail "$NIC in the pool" "$(kubectl get resourceslices -o yaml | head -20)"; fi
[ -z "$(taint "$NIC")" ] && pass "a healthy device has no taint" || fail "no taint" "$(taint "$NIC")"
health "$NIC" False ResetFailed "the reset on release failed (reset_method flr: write error); power-cycle the host"
has_taint() { [[ "$(taint "$1")" == "hostdevd.io/unhealthy=$2:${3:-NoSchedule}@20"* ]]; } # address reason [effect]
if eventually 20 has_taint "$NIC" ResetFailed; then pass "its Healthy=False taken back: the slice taints it hostdevd.io/unhealthy=ResetFailed NoSchedule, with a time"; else
    fail "the slice taints it" "$(taint "$NIC")"; fi

echo "--- a new claim of it is refused, and says the way back"
claim "$NIC"
if eventually 20 has_reason "$NIC" DeviceUnhealthy; then pass "claim refused: Ready=False DeviceUnhealthy"; else
    fail "claim refused DeviceUnhealthy" "$(ready_of "$NIC"): $(message_of "$NIC")"; fi
expect_contains "the message names the reason, what was seen and the way back" "$(message_of "$NIC")" \
    "device $NIC is unhealthy (ResetFailed): the reset on release failed (reset_method flr: write error); power-cycle the host" \
    "kubectl annotate --overwrite pcidevice $(name_of "$NIC") hostdevd.io/recheck-health=\$(date +%s)"
OUT=$(kubectl get pcideviceclaim "$(name_of "$NIC")" -o jsonpath='{.status.passthroughEnabled}')
[ "$OUT" = false ] && pass "not passthroughEnabled" || fail "not passthroughEnabled" "$OUT"
ev() { kubectl get events -n default --field-selector "reason=DeviceUnhealthy,involvedObject.name=$(name_of "$NIC")" -o jsonpath='{.items[*].type}' 2>/dev/null; }
has_ev() { [ "$(ev)" = Warning ]; }
if eventually 20 has_ev; then pass "a Warning Event DeviceUnhealthy"; else fail "a Warning Event DeviceUnhealthy" "$(ev)"; fi

echo "--- the scheduler keeps off a tainted device"
health "$GPU" False AERFatal "its aer_dev_fatal count grew from 0 to 1; reseat the card or reboot"
if eventually 20 has_taint "$GPU" AERFatal; then pass "the GPU tainted AERFatal"; else fail "the GPU tainted" "$(taint "$GPU")"; fi
GPU_TAINT=$(taint "$GPU")
rclaim() { # name address [the effect of hostdevd.io/unhealthy it tolerates]
    local tol=""
    [ -n "${3:-}" ] && tol="tolerations: [{key: hostdevd.io/unhealthy, operator: Exists, effect: $3}]"
    kubectl apply -f - >/dev/null <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: $1, namespace: default}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: $DRIVER
        selectors:
        - cel: {expression: "device.attributes['resource.kubernetes.io'].pciBusID == '$2'"}
        $tol
EOF
}
pod() { # name claim
    kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default}
spec:
  automountServiceAccountToken: false
  tolerations: [{operator: Exists}]
  resourceClaims: [{name: gpu, resourceClaimName: $2}]
  containers:
  - name: c
    image: busybox
    resources: {claims: [{name: gpu}]}
EOF
}
allocated() { kubectl get resourceclaim "$1" -o jsonpath='{.status.allocation.devices.results[*].device}' 2>/dev/null; }
unschedulable() { kubectl get pod "$1" -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].reason}' 2>/dev/null | grep -qx Unschedulable; }
rclaim plain "$GPU"
pod vm1 plain
if eventually 60 unschedulable vm1; then pass "a pod whose claim needs the tainted GPU stays Pending (Unschedulable)"; else
    fail "vm1 unschedulable" "$(kubectl get pod vm1 -o yaml | tail -15)"; fi
expect_contains "the scheduler's reason" \
    "$(kubectl get pod vm1 -o jsonpath='{.status.conditions[?(@.type=="PodScheduled")].message}')" "cannot allocate all claims"
[ -z "$(allocated plain)" ] && pass "its claim is not allocated" || fail "its claim is not allocated" "$(allocated plain)"
rclaim tolerant "$GPU" NoSchedule
pod vm2 tolerant
is_allocated() { [ -n "$(allocated "$1")" ]; }
if eventually 60 is_allocated tolerant; then pass "the same claim tolerating hostdevd.io/unhealthy is allocated"; else
    fail "the tolerant claim allocated" "$(kubectl describe pod vm2 | tail -8)"; fi
expect_contains "... the GPU (so the taint is what kept vm1 off it)" "$(allocated tolerant)" "$(dev_name "$GPU")"
kubectl delete pod vm1 vm2 --grace-period=0 --force >/dev/null 2>&1
kubectl delete resourceclaim plain tolerant --wait=false >/dev/null 2>&1

echo "--- fixed: the administrator's recheck clears it, and the refused claim binds by itself"
# (the fake tree's config space answers with the ids sysfs has: the recheck passes)
kubectl annotate --overwrite pcidevice "$(name_of "$NIC")" hostdevd.io/recheck-health="$(date +%s)" >/dev/null
if eventually 30 bound "$NIC"; then pass "the claim, no longer refused, bound $NIC (passthroughEnabled, Ready) on health_changed"; else
    fail "the claim bound" "$(ready_of "$NIC"): $(message_of "$NIC")"; fi
out_of_pool() { ! in_pool "$NIC"; }
if eventually 20 out_of_pool; then pass "the claimed $NIC is out of the pool"; else fail "$NIC out of the pool" "$(taint "$NIC")"; fi

echo "--- the agent restarted: the taint comes back as it was"
stop_agent "agent stopped cleanly (SIGTERM; no leaks under ASan)"
before=$(writes resourceslices)
start_agent
if eventually 60 ready; then pass "agent ready again"; else fail "agent ready again" "$(tail -20 "$TEST_DIR/agent.log")"; fi
[ -n "$GPU_TAINT" ] && [ "$(taint "$GPU")" = "$GPU_TAINT" ] && pass "the GPU's taint, taken back from its PCIDevice, keeps its time" ||
    fail "the GPU's taint kept" "before: $GPU_TAINT; now: $(taint "$GPU")"
after=$(writes resourceslices)
[ "$after" -eq "$before" ] && pass "no slice write after the restart (the taint as it was)" ||
    fail "no slice write after the restart" "$((after - before)) writes"
bound "$NIC" && pass "the bound claim is still bound" || fail "still bound" "$(ready_of "$NIC"): $(message_of "$NIC")"

echo "--- a bound claim is not touched; its release works"
health "$NIC" False NotResponding "config space reads all ones"
health "$OTHER" False IdChanged "vendor/device ids read 8086:ffff, not 15b3:1018"
if eventually 20 has_taint "$OTHER" IdChanged; then pass "(a later device's state taken back: the store has both)"; else fail "the later device tainted" "$(taint "$OTHER")"; fi
bound "$NIC" && [ "$(ready_of "$NIC")" = Bound ] && pass "the bound claim keeps its device (Ready=True Bound)" ||
    fail "the bound claim kept" "$(ready_of "$NIC"): $(message_of "$NIC")"
expect_ok "the bound claim deleted" kubectl delete pcideviceclaim "$(name_of "$NIC")" --wait=false
gone() { ! kubectl get pcideviceclaim "$(name_of "$NIC")" >/dev/null 2>&1; }
if eventually 30 gone; then pass "its release went through (finalizer removed)"; else fail "its release" "$(ready_of "$NIC"): $(message_of "$NIC")"; fi
if eventually 20 has_taint "$NIC" NotResponding; then pass "back in the pool, tainted NotResponding"; else fail "back in the pool, tainted" "$(taint "$NIC")"; fi

echo "--- NoExecute where the administrator asks (kube-controller-manager's device-taint-eviction-controller)"
D1=0000:d8:00.2 # unhealthy; its pod's claim tolerates nothing
D2=0000:d9:00.0 # unhealthy; its pod's claim tolerates the taint's NoExecute
D3=0000:3b:00.3 # healthy; drained by the administrator's DeviceTaintRule
rclaim e1 "$D1"
rclaim e2 "$D2" NoExecute
rclaim e3 "$D3"
pod p1 e1
pod p2 e2
pod p3 e3
on_node() { for p in "$@"; do [ "$(kubectl get pod "$p" -o jsonpath='{.spec.nodeName}')" = "$NODE" ] || return 1; done; }
if eventually 60 on_node p1 p2 p3; then pass "three pods bound by kube-scheduler, each with a claim allocated on its device"; else
    fail "three pods bound" "$(kubectl get pods -o wide; kubectl get resourceclaims)"; fi
expect_contains "... the devices asked for" \
    "$(kubectl get resourceclaims e1 e2 e3 -o jsonpath='{.items[*].status.allocation.devices.results[*].device}')" \
    "$(dev_name "$D1") $(dev_name "$D2") $(dev_name "$D3")"
health "$D1" False AERFatal "its aer_dev_fatal count grew from 0 to 1; reseat the card or reboot"
health "$D2" False AERFatal "its aer_dev_fatal count grew from 0 to 1; reseat the card or reboot"
both_tainted() { has_taint "$D1" AERFatal && has_taint "$D2" AERFatal; }
if eventually 20 both_tainted; then pass "both tainted, NoSchedule (the default)"; else
    fail "both tainted NoSchedule" "$(taint "$D1") $(taint "$D2")"; fi
# evicted POD: deleted by the device-taint-eviction-controller (Terminating here: no kubelet)
evicted() {
    kubectl get pod "$1" -o json | jq -e '.metadata.deletionTimestamp != null and any(.status.conditions[]?;
        .type == "DisruptionTarget" and .status == "True" and .reason == "DeletionByDeviceTaintManager")'
}
deleting() { [ -n "$(kubectl get pods "$@" -o jsonpath='{.items[*].metadata.deletionTimestamp}')" ]; } # any of PODS
conditions() { kubectl get pod "$1" -o json | jq -c '{deleted: .metadata.deletionTimestamp, conditions: .status.conditions}'; }
before=$(writes resourceslices)
expect_ok "the administrator's DeviceTaintRule (resource.k8s.io/v1, no feature gate in 1.37): NoExecute on $D3" \
    kubectl create -f - <<EOF
apiVersion: resource.k8s.io/v1
kind: DeviceTaintRule
metadata: {name: drain-d3}
spec:
  deviceSelector: {driver: $DRIVER, pool: $NODE, device: $(dev_name "$D3")}
  taint: {key: example.com/maintenance, value: drain, effect: NoExecute}
EOF
if eventually 30 evicted p3; then pass "its device's pod p3 evicted: deleted, DisruptionTarget=True DeletionByDeviceTaintManager"; else
    fail "p3 evicted" "$(conditions p3)"; fi
ev_of() { kubectl get events --field-selector "involvedObject.name=$1,reason=DeviceTaintManagerEviction" -o jsonpath='{.items[*].message}' 2>/dev/null; }
has_ev_of() { [ -n "$(ev_of "$1")" ]; }
if eventually 20 has_ev_of p3; then pass "... and an Event DeviceTaintManagerEviction: $(ev_of p3)"; else fail "an Event DeviceTaintManagerEviction" "$(kubectl get events)"; fi
if ! deleting p1 p2; then pass "the default NoSchedule evicts nothing: p1 (its device unhealthy, its claim tolerating nothing) runs on"; else
    fail "NoSchedule evicts nothing" "$(conditions p1)"; fi
if [ "$(writes resourceslices)" -eq "$before" ] && [ -z "$(taint "$D3")" ]; then
    pass "the agent does not fight the rule: no slice write, the rule's taint not in the slice"; else
    fail "the agent leaves the rule alone" "$(($(writes resourceslices) - before)) writes; $(taint "$D3")"; fi

stop_agent "agent stopped cleanly"
switched=$(date -u +%Y-%m-%dT%H:%M:%SZ)
start_agent --unhealthy-taint-effect NoExecute
if eventually 60 ready; then pass "agent ready with --unhealthy-taint-effect NoExecute"; else fail "agent ready (NoExecute)" "$(tail -20 "$TEST_DIR/agent.log")"; fi
if eventually 20 has_taint "$D1" AERFatal NoExecute; then pass "the unhealthy devices tainted NoExecute: $(taint "$D1")"; else
    fail "tainted NoExecute" "$(taint "$D1")"; fi
added=$(taint "$D1")
added=${added#*@}
# (timeAdded: when the restarted agent took the state back, as Kubernetes renews a DeviceTaintRule's
# on a change of effect: a claim's tolerationSeconds count from the switch)
[[ ! "$added" < "$switched" ]] && pass "... timeAdded $added, not before the switch ($switched)" ||
    fail "timeAdded not before the switch" "$added < $switched"
if eventually 30 evicted p1; then pass "p1, whose claim has the unhealthy $D1, evicted (DisruptionTarget=True DeletionByDeviceTaintManager)"; else
    fail "p1 evicted" "$(conditions p1)"; fi
if ! deleting p2; then pass "p2, whose claim tolerates hostdevd.io/unhealthy NoExecute, stays (the same slice write)"; else
    fail "p2 stays" "$(conditions p2)"; fi
if [ -z "$(taint "$D3")" ] && kubectl get devicetaintrule drain-d3 >/dev/null; then
    pass "the rule's taint still not in the slice, the rule as it was"; else fail "the rule left alone" "$(taint "$D3")"; fi
kubectl delete pod p1 --grace-period=0 --force >/dev/null 2>&1 # (what kubelet does once the containers stopped)
deallocated() { [ -z "$(allocated e1)" ]; }
if eventually 30 deallocated; then pass "p1 gone (as kubelet would end it), its claim deallocated by the resourceclaim-controller"; else
    fail "e1 deallocated" "$(allocated e1)"; fi
stop_agent "agent stopped cleanly (no leaks under ASan)"
finish
