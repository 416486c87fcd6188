#!/usr/bin/env bash
# test/integration/test_kvrender.sh - KubeVirt v1.9.0's own virt-controller (built from the Go
# module, hack/kubevirt-build.sh) renders the virt-launcher Pod of a VMI asking for hostdevd's
# resources, on the real control plane with kube-scheduler (hack/cluster.sh --with-scheduler),
# KubeVirt's own CRDs and virt-controller's own RBAC (both generated from the module by
# hack/kubevirt-crds.sh), the admission policies of manifests/policies-kubevirt.yaml, and
# virt-controller running on the host as the ServiceAccount kubevirt/kubevirt-controller (a
# token of it, as its Pod would have). No hostdevd controller runs: the KubeVirt CR, with the
# ownership annotation and permittedHostDevices entry the controller writes, is made here; no
# kubelet runs: the Node's extended resource is written into its status as kubelet does from our
# device plugin's ListAndWatch. Checks:
#   - device plugin path: the VMI's hostDevices deviceName (permitted, externalResourceProvider)
#     becomes exactly one unit of the resource in the compute container's limits and requests, in
#     no other container (PCI pool; USB through permittedHostDevices.usb the same); a name
#     missing from permittedHostDevices renders no Pod;
#   - hostdevd-pod-use against the real Pod: virt-controller's create (audited as
#     system:serviceaccount:kubevirt:kubevirt-controller) is admitted; the same spec created by a
#     user is refused with the policy's message; with the policy's exemption naming another
#     account, virt-controller's own create is refused (so its create does pass through it);
#   - kube-scheduler: the Pod stays Pending (FailedScheduling naming the resource) while the
#     Node has 0 of it, and is bound to the Node once its allocatable lists 1; a second launcher
#     Pod waits while the one device is taken;
#   - virt-operator's RBAC for virt-controller is enough (RBAC refuses it nothing);
#   - DRA path (feature gate HostDevicesWithDRA): a VMI whose host device names a ResourceClaim
#     renders a Pod with spec.resourceClaims and the compute container's resources.claims, and
#     kube-scheduler allocates the claim from the ResourceSlice hostdevd's agent publishes (the
#     real agent on a fake sysfs tree).
# Prints the times: VMI created -> Pod rendered, Pod created -> scheduled.
SUITE=kvrender
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

NODE=kv-node
RES=intel.com/82574L_GIGABIT_NETWORK_CONNECTION # a PCI pool of hostdevd's (8086:10d3)
USBDEV=kv-node-0951-1666-1-4                     # a USBDevice of hostdevd's
USB=kubevirt.io/$USBDEV
KVC=system:serviceaccount:kubevirt:kubevirt-controller
DRIVER=vfio-pci.hostdevd.io
AGENT=$TEST_BIN/hostdevd
NS=hostdevd-system

# virt-controller: the cached build (hack/kubevirt-build.sh), or KUBEVIRT_BIN naming its directory.
if [ -z "${KUBEVIRT_BIN:-}" ]; then
    KUBEVIRT_BIN=$(hack/kubevirt-build.sh virt-controller) || {
        fail "hack/kubevirt-build.sh builds virt-controller"
        finish
    }
fi
VIRT_CONTROLLER=$KUBEVIRT_BIN/virt-controller
[ -x "$VIRT_CONTROLLER" ] || { fail "virt-controller in $KUBEVIRT_BIN"; finish; }

cluster_start --with-scheduler
VC_PID=""
stop_virt_controller() {
    [ -n "$VC_PID" ] || return 0
    kill -TERM "$VC_PID" 2>/dev/null
    wait "$VC_PID" 2>/dev/null
    VC_PID=""
}
trap 'stop_virt_controller; cluster_stop' EXIT

echo "--- KubeVirt: CRDs, virt-controller's RBAC, the KubeVirt CR, the policies"
KVCRDS=$(hack/kubevirt-crds.sh) || { fail "hack/kubevirt-crds.sh"; finish; }
CRDFILES=("$KVCRDS"/*.yaml "$KVCRDS"/virt-controller/*.*.yaml)
expect_ok "KubeVirt v1.9.0's CRDs (${#CRDFILES[@]}: every kind virt-controller watches)" \
    kubectl create "${CRDFILES[@]/#/-f}"
expect_ok "... Established" eventually 60 kubectl wait --for condition=Established --timeout 10s "${CRDFILES[@]/#/-f}"
kubectl create namespace kubevirt >/dev/null
expect_ok "virt-controller's ServiceAccount, ClusterRole, Role and bindings as virt-operator makes them" \
    kubectl create -f "$KVCRDS/virt-controller/kubevirt-controller-rbac.yaml"
expect_ok "the admission policies (manifests/policies-kubevirt.yaml)" \
    kubectl apply -f manifests/policies-kubevirt.yaml
# As hostdevd's controller leaves it for a Ready claim of an 8086:10d3 pool; the status phase as
# virt-operator sets it (virt-controller ignores a KubeVirt CR without one). HostDevicesWithDRA is
# Beta in v1.9.0, so on unless disabled (disabledFeatureGates): named anyway.
expect_ok "the KubeVirt CR: feature gates, permittedHostDevices, owned names" kubectl create -f - <<EOF
apiVersion: kubevirt.io/v1
kind: KubeVirt
metadata:
  name: kubevirt
  namespace: kubevirt
  annotations: {hostdevd.io/owned-host-devices: "$RES,$USB"}
spec:
  configuration:
    developerConfiguration:
      featureGates: [HostDevices, HostDevicesWithDRA]
      useEmulation: true
    permittedHostDevices:
      pciHostDevices:
      - {pciVendorSelector: "8086:10d3", resourceName: "$RES", externalResourceProvider: true}
      usb:
      - {resourceName: "$USB", selectors: [{vendor: "0951", product: "1666"}], externalResourceProvider: true}
EOF
expect_ok "... its status phase Deployed" \
    kubectl patch kubevirt -n kubevirt kubevirt --subresource status --type merge -p '{"status":{"phase":"Deployed"}}'

# alice (group developers) may make VMIs and Pods, and use the pool.
expect_ok "alice: VMIs, Pods, ResourceClaims; use on the pool" kubectl apply -f - <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: vm-maker}
rules:
- {apiGroups: [kubevirt.io], resources: [virtualmachineinstances], verbs: ["*"]}
- {apiGroups: [""], resources: [pods], verbs: [create]}
- {apiGroups: [resource.k8s.io], resources: [resourceclaims], verbs: ["*"]}
- {apiGroups: [devices.harvesterhci.io], resources: [pcidevicepools], resourceNames: ["$RES"], verbs: [use]}
- {apiGroups: [devices.harvesterhci.io], resources: [usbdevices], resourceNames: ["$USBDEV"], verbs: [use]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: vm-maker}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: vm-maker}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}]
EOF

echo "--- virt-controller, as kubevirt/kubevirt-controller"
sa_kubeconfig kubevirt kubevirt-controller "$TEST_DIR/vc.kubeconfig"
# (The namespace is KubeVirt's default, kubevirt: no service account files on the host.)
start_virt_controller() {
    "$VIRT_CONTROLLER" --kubeconfig "$TEST_DIR/vc.kubeconfig" --listen 127.0.0.1 --port "$(free_port)" \
        --launcher-image localhost/virt-launcher:v1.9.0 --exporter-image localhost/virt-exportserver:v1.9.0 \
        --node-topology-update-period 1h >>"$TEST_DIR/virt-controller.log" 2>&1 &
    VC_PID=$!
}
leader() { kubectl get lease -n kubevirt virt-controller -o jsonpath='{.spec.holderIdentity}' | grep -q .; }
t=$SECONDS
start_virt_controller
if eventually 120 leader; then
    pass "virt-controller leads ($((SECONDS - t))s after its start)"
else
    fail "virt-controller leads" "$(tail -20 "$TEST_DIR/virt-controller.log")"
    finish
fi

# A VMI as virt-api's defaults would leave it (no virt-api runs): q35, one vCPU, 128 MiB, no pod
# network; host devices as given (JSON array).
vmi_json() { # name hostDevices-json [resourceClaims-json]
    jq -cn --arg n "$1" --argjson h "$2" --argjson rc "${3:-null}" '{apiVersion: "kubevirt.io/v1",
        kind: "VirtualMachineInstance", metadata: {name: $n, namespace: "default"},
        spec: ({terminationGracePeriodSeconds: 0,
                domain: {machine: {type: "q35"}, cpu: {cores: 1, sockets: 1, threads: 1},
                         memory: {guest: "128Mi"}, resources: {requests: {memory: "128Mi"}},
                         devices: {autoattachPodInterface: false, hostDevices: $h}}}
               + (if $rc then {resourceClaims: $rc} else {} end))}'
}
launcher() { # vmi-name: its virt-launcher Pod (JSON), if virt-controller made one
    kubectl get pods -n default -l "kubevirt.io/created-by=$(kubectl get vmi -n default "$1" \
        -o jsonpath='{.metadata.uid}')" -o json | jq -ce '.items[0] // empty'
}
# Milliseconds since START (epoch ms, the test's clock; checks poll every 0.5 s).
ms_since() { # start-epoch-ms: now minus it
    echo $(($(date +%s%3N) - $1))
}
# The API server's times, from its audit log (microseconds): "RENDER BIND" in ms, from the VMI's
# create to virt-controller's first Pod create after it, and from that to the Pod's binding by
# kube-scheduler ("-" when not bound).
audit_times() { # vmi-name pod-name
    python3 - "$TEST_DIR/cluster/audit.log" "$1" "$2" "$KVC" <<'PY'
import datetime, json, sys
log, vmi, pod, kvc = sys.argv[1:]
t = lambda e: datetime.datetime.fromisoformat(e["stageTimestamp"].replace("Z", "+00:00")).timestamp()
vmi_at = pod_at = bind_at = None
for line in open(log):
    e = json.loads(line)
    o = e.get("objectRef", {})
    if e.get("stage") != "ResponseComplete" or e.get("verb") != "create" or "dryRun" in e["requestURI"]:
        continue
    if e.get("responseStatus", {}).get("code") != 201:
        continue
    if o.get("resource") == "virtualmachineinstances" and o.get("name") == vmi:
        vmi_at = t(e)
    elif (vmi_at and not pod_at and o.get("resource") == "pods" and not o.get("subresource")
          and e["user"]["username"] == kvc):
        pod_at = t(e)
    elif o.get("resource") == "pods" and o.get("subresource") == "binding" and o.get("name") == pod:
        bind_at = t(e)
ms = lambda a, b: "%.0f" % ((b - a) * 1000) if a and b else "-"
print(ms(vmi_at, pod_at), ms(pod_at, bind_at))
PY
}

echo "--- the Node: kubelet and virt-handler stand-ins"
# No kubelet, no virt-handler runs: the Node is labelled as virt-handler's node labeller would
# label it (what the launcher Pod's nodeSelector asks, checked below), its status written as
# kubelet writes it, with our device plugin's count of the resource (virt-handler's
# devices.kubevirt.io/* are not asked for: useEmulation and no pod network).
expect_ok "Node $NODE (kubevirt.io/schedulable, machine-type.node.kubevirt.io/q35)" kubectl create -f - <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $NODE
  labels: {kubernetes.io/hostname: $NODE, kubevirt.io/schedulable: "true", machine-type.node.kubevirt.io/q35: "true"}
EOF
node_res() { # count: the Node's capacity and allocatable of $RES
    kubectl patch node "$NODE" --subresource status --type merge -p "$(jq -cn --arg r "$RES" --arg n "$1" '{status: {
        capacity: {cpu: "4", memory: "8Gi", pods: "110", "ephemeral-storage": "50Gi", ($r): $n},
        allocatable: {cpu: "4", memory: "8Gi", pods: "110", "ephemeral-storage": "50Gi", ($r): $n},
        conditions: [{type: "Ready", status: "True", reason: "KubeletReady", message: "stand-in",
                      lastHeartbeatTime: (now | todate), lastTransitionTime: (now | todate)}]}}')"
}
expect_ok "$NODE Ready, listing $RES: 0" node_res 0
# The API server taints a new Node not-ready; the node lifecycle controller (not run here) lifts
# the taint once kubelet reports Ready: lifted here as it would.
expect_ok "... its not-ready taint lifted" kubectl taint node "$NODE" node.kubernetes.io/not-ready:NoSchedule-
node_of() { kubectl get pod -n default "$1" -o jsonpath='{.spec.nodeName}'; }
bound() { [ "$(node_of "$1")" = "$NODE" ]; } # pod
failed_scheduling() { # pod: its FailedScheduling event names the resource
    kubectl get events -n default --field-selector "involvedObject.name=$1,reason=FailedScheduling" \
        -o jsonpath='{.items[*].message}' | grep -F "Insufficient $RES"
}

echo "--- device plugin path: the rendered Pod"
t0=$(date +%s%3N)
expect_ok "alice (use on the pool) creates VMI vm-a asking for $RES" \
    kubectl --context alice create -f - <<<"$(vmi_json vm-a "[{\"name\": \"nic\", \"deviceName\": \"$RES\"}]")"
if eventually 60 launcher vm-a; then
    RENDER_MS=$(ms_since "$t0")
    pass "virt-controller rendered vm-a's virt-launcher Pod (${RENDER_MS} ms after the VMI was created)"
else
    fail "virt-controller rendered vm-a's virt-launcher Pod" \
        "$(kubectl get events -n default 2>&1 | tail -5; grep -i 'error\|fail' "$TEST_DIR/virt-controller.log" | tail -10)"
    finish
fi
POD=$(launcher vm-a)
PODNAME=$(jq -r .metadata.name <<<"$POD")
echo "  rendered $PODNAME: containers $(jq -c '[.spec.containers[] | {(.name): .resources}]' <<<"$POD")"
OUT=$(jq -c --arg r "$RES" '[.spec.containers[], .spec.initContainers[]?
    | select(.resources.limits[$r] or .resources.requests[$r])
    | {name, limit: .resources.limits[$r], request: .resources.requests[$r]}]' <<<"$POD")
expect_contains "exactly one container asks for $RES: compute, limit 1 and request 1" "$OUT" \
    "[{\"name\":\"compute\",\"limit\":\"1\",\"request\":\"1\"}]"
expect_contains "the Pod is virt-controller's (owner VMI vm-a)" \
    "$(jq -c '.metadata.ownerReferences' <<<"$POD")" '"kind":"VirtualMachineInstance","name":"vm-a"'
expect_contains "its nodeSelector: what virt-handler labels a schedulable q35 node with, nothing of ours" \
    "$(jq -c '.spec.nodeSelector' <<<"$POD")" '{"kubevirt.io/schedulable":"true","machine-type.node.kubevirt.io/q35":"true"}'

# USB (permittedHostDevices.usb): the same shape, under KubeVirt's domain.
expect_ok "alice (use on usbdevices/$USBDEV) creates VMI vm-u asking for $USB" \
    kubectl --context alice create -f - <<<"$(vmi_json vm-u "[{\"name\": \"stick\", \"deviceName\": \"$USB\"}]")"
if eventually 60 launcher vm-u; then pass "vm-u's Pod rendered"; else fail "vm-u's Pod rendered"; fi
expect_contains "... its compute container, and no other, asks for one $USB" \
    "$(launcher vm-u | jq -c --arg r "$USB" '[.spec.containers[], .spec.initContainers[]?
        | select(.resources.limits[$r] or .resources.requests[$r])
        | {name, limit: .resources.limits[$r], request: .resources.requests[$r]}]')" \
    "[{\"name\":\"compute\",\"limit\":\"1\",\"request\":\"1\"}]"
POD_U=$(launcher vm-u | jq -r .metadata.name)
kubectl delete vmi -n default vm-u --wait=false >/dev/null
kubectl delete pod -n default "$POD_U" --grace-period 0 --force >/dev/null 2>&1

echo "--- hostdevd-pod-use against the rendered Pod"
# The API server's audit log: who created Pods (not dry runs), and what it answered. (The Pod has
# a generateName: the audit record names no Pod.)
pod_creates() {
    jq -r 'select(.stage == "ResponseComplete" and .verb == "create" and .objectRef.resource == "pods"
        and .objectRef.subresource == null and (.requestURI | contains("dryRun") | not))
        | "\(.user.username) \(.userAgent | split(" ")[0]) \(.responseStatus.code)"' "$TEST_DIR/cluster/audit.log"
}
ONE="$KVC virt-controller/v0.0.0 201"
only_creates() { [ "[$(pod_creates)]" = "[$ONE"$'\n'"$ONE]" ]; }
eventually 10 only_creates # (the audit record may be written a moment after the Pod is seen)
expect_contains "the launcher Pods' creates (vm-a's, vm-u's: the only ones so far): by $KVC, virt-controller's user agent, answered 201 (audit log)" \
    "[$(pod_creates)]" "[$ONE"$'\n'"$ONE]"
# The same Pod as a user would submit it (server-set fields dropped), dry run.
user_pod() {
    jq -c '{apiVersion: "v1", kind: "Pod", metadata: {name: "copy-of-launcher", namespace: "default"},
        spec: (.spec | del(.nodeName))}' <<<"$POD"
}
expect_reject "alice submitting the same Pod spec: refused by hostdevd-pod-use, with its message" \
    "ValidatingAdmissionPolicy 'hostdevd-pod-use' with binding 'hostdevd-pod-use' denied request: user alice may not create Pod default/copy-of-launcher asking for host device $RES: only KubeVirt ($KVC) may" \
    kubectl --context alice create --dry-run=server -f - <<<"$(user_pod)"
expect_ok "virt-controller's token submitting that spec: admitted" \
    kt "$(kubectl create token kubevirt-controller -n kubevirt)" create --dry-run=server -f - <<<"$(user_pod)"

echo "--- kube-scheduler: the Node's capacity of $RES"
if eventually 60 failed_scheduling "$PODNAME"; then
    pass "with 0 of it: $PODNAME Pending, FailedScheduling: $(failed_scheduling "$PODNAME" | head -c 160)"
else
    fail "with 0 of it: FailedScheduling naming $RES" \
        "$(kubectl get events -n default --field-selector "involvedObject.name=$PODNAME" 2>&1 | tail -5)"
fi
[ -z "$(node_of "$PODNAME")" ] && pass "... and not bound" || fail "... and not bound" "$(node_of "$PODNAME")"
t0=$(date +%s%3N)
expect_ok "$NODE lists $RES: 1" node_res 1
if eventually 60 bound "$PODNAME"; then
    pass "kube-scheduler binds $PODNAME to $NODE ($(ms_since "$t0") ms after the Node listed the resource)"
else
    fail "kube-scheduler binds $PODNAME to $NODE" "$(kubectl get pod -n default "$PODNAME" -o wide 2>&1)"
fi
# A second VMI: its Pod is created while the Node's one device is taken.
t0=$(date +%s%3N)
kubectl --context alice create -f - <<<"$(vmi_json vm-b "[{\"name\": \"nic\", \"deviceName\": \"$RES\"}]")" >/dev/null
if eventually 60 launcher vm-b; then
    RENDER_B_MS=$(ms_since "$t0")
    pass "vm-b's Pod rendered ($RENDER_B_MS ms)"
else
    fail "vm-b's Pod rendered"
fi
POD_B=$(launcher vm-b | jq -r .metadata.name)
if eventually 60 failed_scheduling "$POD_B"; then
    pass "with the one device taken: $POD_B Pending, FailedScheduling naming $RES"
else
    fail "with the one device taken: $POD_B FailedScheduling" "$(kubectl get pod -n default "$POD_B" -o wide 2>&1)"
fi
# vm-a gone, its Pod deleted (virt-controller), then the device is free for vm-b.
t0=$(date +%s%3N)
kubectl delete vmi -n default vm-a --wait=false >/dev/null
kubectl delete pod -n default "$PODNAME" --grace-period 0 --force >/dev/null 2>&1 # no kubelet to end it
if eventually 60 bound "$POD_B"; then
    SCHED_MS=$(ms_since "$t0")
    pass "once vm-a's Pod is gone, $POD_B is bound to $NODE ($SCHED_MS ms)"
else
    fail "$POD_B bound once the device is free" "$(kubectl get pod -n default "$POD_B" -o wide 2>&1)"
fi

# A third VMI with a device free: from the VMI to the Pod's binding, uninterrupted.
expect_ok "$NODE lists $RES: 2" node_res 2
kubectl --context alice create -f - <<<"$(vmi_json vm-e "[{\"name\": \"nic\", \"deviceName\": \"$RES\"}]")" >/dev/null
POD_E=""
pod_e_bound() { POD_E=$(launcher vm-e | jq -r .metadata.name) && bound "$POD_E"; }
if eventually 60 pod_e_bound; then
    read -r E_RENDER E_BIND < <(audit_times vm-e "$POD_E")
    pass "with a device free, vm-e's Pod is rendered and bound (API server: VMI -> Pod $E_RENDER ms, Pod -> bound $E_BIND ms)"
else
    fail "vm-e's Pod rendered and bound" "$(kubectl get pods -n default -o wide 2>&1)"
fi

echo "--- a name missing from permittedHostDevices"
kubectl --context alice create -f - <<<"$(vmi_json vm-x '[{"name": "nic", "deviceName": "example.com/not-permitted"}]')" >/dev/null
not_permitted() { # virt-controller's reason, in the VMI's conditions
    kubectl get vmi -n default vm-x -o jsonpath='{.status.conditions[*].message}' |
        grep -F "HostDevice example.com/not-permitted is not permitted in permittedHostDevices configuration"
}
if eventually 60 not_permitted; then pass "virt-controller renders no Pod: 'HostDevice ... is not permitted'"; else
    fail "not permitted: no Pod" "$(kubectl get vmi -n default vm-x -o jsonpath='{.status}' 2>&1)"
fi
[ -z "$(launcher vm-x)" ] && pass "... and no Pod exists" || fail "... and no Pod exists"
kubectl delete vmi -n default vm-x >/dev/null

echo "--- the policy's exemption naming another account: virt-controller's create is refused"
# The exemption of hostdevd-pod-use changed to another service account: the same virt-controller
# request must now be refused, so the admitted create above passed the policy as KVC (and was
# not left out of it by the failurePolicy Ignore or a missing parameter).
sed 's/+ '"'"':kubevirt-controller'"'"'$/+ '"'"':someone-else'"'"'/' manifests/policies-kubevirt.yaml |
    awk 'BEGIN { RS = "---\n"; ORS = "---\n" } /name: hostdevd-pod-use/ && /kind: ValidatingAdmissionPolicy\n/' \
        >"$TEST_DIR/pod-use-other.yaml"
expect_contains "(the copy exempts someone-else)" "$(cat "$TEST_DIR/pod-use-other.yaml")" "':someone-else'"
kubectl apply -f "$TEST_DIR/pod-use-other.yaml" >/dev/null
sa_denied() { # the policy in effect for the service account (dry run)
    ! OUT=$(kt "$(kubectl create token kubevirt-controller -n kubevirt)" create --dry-run=server -f - <<<"$(user_pod)" 2>&1) &&
        [[ "$OUT" == *"hostdevd-pod-use"* ]]
}
eventually 30 sa_denied
kubectl --context alice create -f - <<<"$(vmi_json vm-c "[{\"name\": \"nic\", \"deviceName\": \"$RES\"}]")" >/dev/null
refused_event() {
    kubectl get events -n default --field-selector involvedObject.name=vm-c,reason=FailedCreate \
        -o jsonpath='{.items[*].message}' | grep -F "user $KVC may not create Pod default/virt-launcher-vm-c-"
}
if eventually 60 refused_event; then
    pass "vm-c: virt-controller's create refused by hostdevd-pod-use (event FailedCreate: 'user $KVC may not create Pod ...')"
else
    fail "vm-c: virt-controller's create refused" \
        "$(kubectl get events -n default --field-selector involvedObject.name=vm-c 2>&1 | tail -3)"
fi
[ -z "$(launcher vm-c)" ] && pass "... and vm-c has no Pod" || fail "... and vm-c has no Pod"
kubectl apply -f manifests/policies-kubevirt.yaml >/dev/null
kubectl delete vmi -n default vm-c >/dev/null

echo "--- DRA path: a host device naming a ResourceClaim"
# hostdevd's agent publishes the Node's ResourceSlice from a fake sysfs tree with one 82574L
# (8086:10d3); its RBAC, admission policies and DeviceClasses are the manifests'.
install_crds
expect_ok "the agent's RBAC, its policies and the DeviceClasses" \
    kubectl apply -f manifests/agent-rbac.yaml -f manifests/policies-agent.yaml -f manifests/deviceclasses.yaml
TOKEN=$(kubectl create token hostdevd-agent -n $NS --bound-object-kind Node --bound-object-name "$NODE" --duration 2h)
(
    umask 077
    printf 'apiVersion: v1\nkind: Config\nclusters:\n- {name: c, cluster: {server: "%s", certificate-authority: "%s"}}\nusers:\n- {name: a, user: {token: "%s"}}\ncontexts:\n- {name: c, context: {cluster: c, user: a}}\ncurrent-context: c\n' \
        "$K8S_SERVER" "$K8S_CA" "$TOKEN" >"$TEST_DIR/agent.kubeconfig"
)
printf '0000:00:04.0 0200 8086:10d3 sub=8086:a01f rev=00 driver=e1000e iommu=4 numa=0 irq=20\n' >"$TEST_DIR/desc.txt"
hack/mk-sysfs-fixture.sh "$TEST_DIR/desc.txt" "$TEST_DIR/sys" >/dev/null
mkdir -p "$TEST_DIR/dev"
fake_proc "$TEST_DIR/proc"
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
"$AGENT" agent --node-name "$NODE" --kubeconfig "$TEST_DIR/agent.kubeconfig" --sysfs-root "$TEST_DIR/sys" \
    --proc-root "$TEST_DIR/proc" --dev-root "$TEST_DIR/dev" --listen "127.0.0.1:$(free_port)" \
    --resync 3600 --uevent-source none -v 2 >>"$TEST_DIR/agent.log" 2>&1 &
track $!
AGENT_PID=$!
DEV=pci-0000-00-04-0
slice_has_dev() {
    kubectl get resourceslice "$NODE-vfio-pci-0" -o json | jq -e --arg d "$DEV" '.spec.devices[] | select(.name == $d)'
}
if eventually 60 slice_has_dev; then pass "the agent's ResourceSlice $NODE-vfio-pci-0 offers $DEV"; else
    fail "the agent's ResourceSlice offers $DEV" "$(tail -10 "$TEST_DIR/agent.log")"
fi
expect_ok "alice: ResourceClaim nic (class nic.$DRIVER, 8086:10d3)" kubectl --context alice create -f - <<YAML
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: nic, namespace: default}
spec:
  devices:
    requests:
    - name: nic
      exactly:
        deviceClassName: nic.$DRIVER
        selectors:
        - cel: {expression: "device.attributes['$DRIVER'].vendorID == '8086' && device.attributes['$DRIVER'].deviceID == '10d3'"}
YAML
t0=$(date +%s%3N)
expect_ok "alice: VMI vm-d, host device nic from claim nic (request nic)" \
    kubectl --context alice create -f - <<<"$(vmi_json vm-d '[{"name": "nic", "claimName": "nic", "requestName": "nic"}]' \
        '[{"name": "nic", "resourceClaimName": "nic"}]')"
if eventually 60 launcher vm-d; then
    DRA_RENDER_MS=$(ms_since "$t0")
    pass "virt-controller rendered vm-d's Pod ($DRA_RENDER_MS ms)"
else
    fail "virt-controller rendered vm-d's Pod" "$(kubectl get vmi -n default vm-d -o jsonpath='{.status.conditions}' 2>&1)"
    finish
fi
t0=$(date +%s%3N)
POD_D=$(launcher vm-d)
POD_D_NAME=$(jq -r .metadata.name <<<"$POD_D")
expect_contains "the Pod's spec.resourceClaims: nic from ResourceClaim nic" \
    "$(jq -c .spec.resourceClaims <<<"$POD_D")" '[{"name":"nic","resourceClaimName":"nic"}]'
expect_contains "the compute container claims request nic of it, and asks for no extended resource of ours" \
    "$(jq -c --arg r "$RES" '[.spec.containers[] | select(.resources.claims)
        | {name, claims: .resources.claims, ours: (.resources.limits[$r] // null)}]' <<<"$POD_D")" \
    '[{"name":"compute","claims":[{"name":"nic","request":"nic"}],"ours":null}]'
allocated() {
    kubectl get resourceclaim -n default nic -o json |
        jq -e --arg d "$DEV" --arg drv "$DRIVER" '.status.allocation.devices.results[0]
            | select(.driver == $drv and .device == $d)' >/dev/null &&
        bound "$POD_D_NAME"
}
if eventually 60 allocated; then
    DRA_SCHED_MS=$(ms_since "$t0")
    read -r D_RENDER D_BIND < <(audit_times vm-d "$POD_D_NAME")
    pass "kube-scheduler allocated claim nic to $DEV of $DRIVER and bound the Pod to $NODE ($DRA_SCHED_MS ms)"
else
    fail "claim allocated from the agent's slice, Pod bound" \
        "$(kubectl get resourceclaim -n default nic -o jsonpath='{.status}' 2>&1)
$(kubectl get events -n default --field-selector involvedObject.name="$POD_D_NAME" 2>&1 | tail -3)"
fi
expect_contains "the claim is reserved for the launcher Pod" \
    "$(kubectl get resourceclaim -n default nic -o jsonpath='{.status.reservedFor[*].name}')" "$POD_D_NAME"

# virt-operator's RBAC for it was enough: no request of virt-controller's refused by RBAC.
rbac_refusals() { grep -o 'User \\*"system:serviceaccount:kubevirt:kubevirt-controller\\*" cannot [^"\\]*\\*"[^"\\]*' \
    "$TEST_DIR/virt-controller.log" | sort | uniq -c; }
expect_contains "virt-operator's RBAC was enough: RBAC refused virt-controller nothing" "[$(rbac_refusals)]" "[]"
kill -TERM "$AGENT_PID" 2>/dev/null
wait "$AGENT_PID" 2>/dev/null
stop_virt_controller
echo "  times (API server's audit log): VMI created -> Pod created ${E_RENDER:-?} ms, Pod created ->" \
    "bound ${E_BIND:-?} ms (device plugin, vm-e); DRA: ${D_RENDER:-?} ms, ${D_BIND:-?} ms (claim allocated" \
    "and Pod bound, vm-d); (test's polling: vm-a rendered ${RENDER_MS:-?} ms, device freed -> bound" \
    "${SCHED_MS:-?} ms); suite $((SECONDS))s"
finish
