#!/usr/bin/env bash
# test/integration/test_vmaccess.sh - the verb "use" carried to the VM (manifests/
# policies-kubevirt.yaml) on a real control plane with KubeVirt v1.9.0's own CRDs
# (hack/kubevirt-crds.sh). No hostdevd runs: the KubeVirt CR, with the ownership annotation
# the controller writes, is made here. Checks: VMIs and VMs asking for hostdevd's resource
# names (PCI per device, USB, PCI pool, an mdev type; hostDevices and gpus) need "use" on the
# device or the pool, and the refusal names what is missing; foreign names are not checked; a VM update is
# checked for the names it adds only; KubeVirt's virt-controller (and no same-named impostor)
# is exempt; Pods asking for owned names directly are refused to everyone else; Pods without
# extended resources are never evaluated, also before KubeVirt's CRDs exist (and why the Pod
# policy cannot be failurePolicy Fail); the parameter is live; the CEL cost limit of 12 names;
# grants per namespace (a RoleBinding lets that namespace's VMIs and VMs use the device, not
# another's; the refusal says where the grant goes); quota on a resource name (ResourceQuota on
# the extended resource a virt-launcher Pod asks for, and on the DRA class's devices); the doors
# around the check, each on its own KubeVirt CRD: replica sets and pools (their templates, on
# create and for names added), instance types (namespaced: a grant there; cluster: a cluster-wide
# grant; a VM referring to one is not checked), ControllerRevisions holding an instance type
# with owned names (KubeVirt's or with "use" on every device), clones and restores (refused
# without "use" on every device while hostdevd owns names; not checked when it owns none).
SUITE=vmaccess
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

G=devices.harvesterhci.io
X=titan-000001000                # a PCIDevice: alice may use it
Y=titan-000001001                # another: nobody may
USB=titan-0951-1666-2-1-4        # a USBDevice: alice may use it
POOL=intel.com/82574L_GIGABIT_NETWORK_CONNECTION # a PCI pool: alice may use it
FOREIGN=nvidia.com/GA102GL_A10   # listed in permittedHostDevices by someone else
MDEV=devices.harvesterhci.io/mtty-2 # an mdev type (VGPUDevices): a pool of its instances
KVC=system:serviceaccount:kubevirt:kubevirt-controller
MANY=() # 12 more per-device names, for the cost limit
for i in 0 1 2 3 4 5 6 7 8 9 a b c; do MANY+=("intel.com/titan-00000200$i"); done

# The command fails with a refusal by the named policy whose message contains the text.
denied_with() { # policy text command...
    local policy=$1 text=$2 out
    shift 2
    out=$("$@" 2>&1) && return 1
    [[ "$out" == *"ValidatingAdmissionPolicy '$policy'"*"$text"* ]]
}

# Objects, as JSON on stdout.
devices_json() { # deviceName...: hostDevices entries h0, h1, ...
    printf '%s\n' "$@" | jq -R . | jq -sc 'to_entries | map({name: "h\(.key)", deviceName: .value})'
}
vmi() { # name deviceName...
    local name=$1
    shift
    jq -cn --arg n "$name" --argjson h "$(devices_json "$@")" '{apiVersion: "kubevirt.io/v1",
        kind: "VirtualMachineInstance", metadata: {name: $n, namespace: "default"},
        spec: {domain: {devices: {hostDevices: $h}}}}'
}
vmi_in() { # namespace name deviceName...
    local ns=$1
    shift
    vmi "$@" | jq -c --arg ns "$ns" '.metadata.namespace = $ns'
}
vmi_gpu() { # name deviceName
    jq -cn --arg n "$1" --arg d "$2" '{apiVersion: "kubevirt.io/v1", kind: "VirtualMachineInstance",
        metadata: {name: $n, namespace: "default"},
        spec: {domain: {devices: {gpus: [{name: "gpu0", deviceName: $d}]}}}}'
}
vm() { # name deviceName...
    local name=$1
    shift
    jq -cn --arg n "$name" --argjson h "$(devices_json "$@")" '{apiVersion: "kubevirt.io/v1",
        kind: "VirtualMachine", metadata: {name: $n, namespace: "default"},
        spec: {runStrategy: "Halted",
               template: {spec: {domain: {devices: {hostDevices: $h}}}}}}'
}
revision() { # namespace name deviceName...: a ControllerRevision holding an instance type (as
    local ns=$1 name=$2 # virt-controller stores them), with the devices as hostDevices
    shift 2
    jq -cn --arg ns "$ns" --arg n "$name" --argjson h "$(devices_json "$@")" '{apiVersion: "apps/v1",
        kind: "ControllerRevision", metadata: {name: $n, namespace: $ns}, revision: 1,
        data: {apiVersion: "instancetype.kubevirt.io/v1beta1", kind: "VirtualMachineInstancetype",
               metadata: {name: "it"}, spec: {cpu: {guest: 1}, memory: {guest: "1Gi"}, hostDevices: $h}}}'
}
pod() { # name container-resources-json [initContainer-resources-json]
    jq -cn --arg n "$1" --argjson r "$2" --argjson i "${3:-null}" '{apiVersion: "v1", kind: "Pod",
        metadata: {name: $n, namespace: "default"},
        spec: ({containers: [{name: "c", image: "x", resources: $r}]} +
               (if $i then {initContainers: [{name: "i", image: "x", resources: $i}]} else {} end))}'
}

# kubectl for a user (client certificate contexts alice and bob) or a token, creating JSON from
# stdin; --dry-run=server goes through admission without storing anything.
as() { # alice|bob|token:TOKEN kubectl-args...
    local who=$1
    shift
    if [[ "$who" == token:* ]]; then
        kubectl --kubeconfig=/dev/null --server="$K8S_SERVER" --certificate-authority="$K8S_CA" \
            --token="${who#token:}" "$@"
    else
        kubectl --context "$who" "$@"
    fi
}
try() { # who json: create it, dry run
    as "$1" create --dry-run=server -f - <<<"$2"
}

owned_annotation() { # name...: sorted, comma-separated, as the controller writes it
    printf '%s\n' "$@" | sort | paste -sd, -
}

cluster_start
T0=$SECONDS

# Everyone here may make VMs, VMIs and Pods; only alice may use X, the USB device and the pool
# (a pcidevicepools rule: a resource that exists only in RBAC, named with a '/').
expect_ok "roles: VM makers; alice's devices" kubectl apply -f - <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: vm-maker}
rules:
- {apiGroups: [kubevirt.io], resources: [virtualmachineinstances, virtualmachines, virtualmachineinstancereplicasets], verbs: ["*"]}
- {apiGroups: [pool.kubevirt.io], resources: [virtualmachinepools], verbs: ["*"]}
- {apiGroups: [instancetype.kubevirt.io], resources: [virtualmachineinstancetypes, virtualmachineclusterinstancetypes], verbs: ["*"]}
- {apiGroups: [clone.kubevirt.io], resources: [virtualmachineclones], verbs: ["*"]}
- {apiGroups: [snapshot.kubevirt.io], resources: [virtualmachinerestores], verbs: ["*"]}
- {apiGroups: [""], resources: [pods], verbs: [create]}
- {apiGroups: [apps], resources: [controllerrevisions], verbs: [create]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: vm-maker}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: vm-maker}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: developers}
- {kind: ServiceAccount, name: kubevirt-controller, namespace: kubevirt}
- {kind: ServiceAccount, name: kubevirt-controller, namespace: default}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: alice-devices}
rules:
- {apiGroups: [$G], resources: [pcidevices], resourceNames: [$X], verbs: [use]}
- {apiGroups: [$G], resources: [usbdevices], resourceNames: [$USB], verbs: [use]}
- {apiGroups: [$G], resources: [pcidevicepools], resourceNames: ["$POOL"], verbs: [use]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: alice-devices}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: alice-devices}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}]
EOF

echo "--- before KubeVirt: the policies installed first"
expect_ok "policies-kubevirt.yaml applies without KubeVirt's CRDs" \
    kubectl apply -f manifests/policies-kubevirt.yaml
# The same Pod policy with failurePolicy Fail, to show why it is Ignore: the API server cannot
# resolve the paramKind and refuses every Pod the policy matches, matchConditions or not.
sed -e 's/name: hostdevd-pod-use/name: fail-pod-use/; s/policyName: hostdevd-pod-use/policyName: fail-pod-use/' \
    -e 's/failurePolicy: Ignore/failurePolicy: Fail/' manifests/policies-kubevirt.yaml |
    awk 'BEGIN { RS = "---\n"; ORS = "---\n" } /fail-pod-use/' >"$TEST_DIR/fail-pod.yaml"
kubectl apply -f "$TEST_DIR/fail-pod.yaml" >/dev/null
PLAIN=$(pod plain '{"limits": {"cpu": "1"}}')
if eventually 20 denied_with fail-pod-use "failed to find resource referenced by paramKind" try alice "$PLAIN"; then
    pass "(failurePolicy Fail would refuse every Pod without KubeVirt's CRDs, even one without extended resources)"
else
    fail "failurePolicy Fail without KubeVirt's CRDs" "$(try alice "$PLAIN" 2>&1)"
fi
kubectl delete -f "$TEST_DIR/fail-pod.yaml" >/dev/null
expect_ok "hostdevd-pod-use (Ignore): a Pod without extended resources is created" \
    eventually 20 try alice "$PLAIN"
expect_ok "... and one asking for an extended resource (no KubeVirt CR, nothing owned)" \
    try alice "$(pod ext "{\"limits\": {\"$POOL\": 1}}")"
# The same for the ControllerRevision policy: with Fail, every ControllerRevision (StatefulSets',
# DaemonSets') would be refused until KubeVirt is installed.
sed -e 's/name: hostdevd-revision-use/name: fail-revision-use/; s/policyName: hostdevd-revision-use/policyName: fail-revision-use/' \
    -e 's/failurePolicy: Ignore/failurePolicy: Fail/' manifests/policies-kubevirt.yaml |
    awk 'BEGIN { RS = "---\n"; ORS = "---\n" } /fail-revision-use/' >"$TEST_DIR/fail-revision.yaml"
kubectl apply -f "$TEST_DIR/fail-revision.yaml" >/dev/null
PLAINREV=$(revision default plain | jq -c '.data = {spec: {template: {metadata: {labels: {a: "b"}}}}}')
if eventually 20 denied_with fail-revision-use "failed to find resource referenced by paramKind" try alice "$PLAINREV"; then
    pass "(failurePolicy Fail would refuse every ControllerRevision without KubeVirt's CRDs, a StatefulSet's too)"
else
    fail "failurePolicy Fail without KubeVirt's CRDs, ControllerRevisions" "$(try alice "$PLAINREV" 2>&1)"
fi
kubectl delete -f "$TEST_DIR/fail-revision.yaml" >/dev/null
expect_ok "hostdevd-revision-use (Ignore): a ControllerRevision without devices is created" \
    eventually 20 try alice "$PLAINREV"
expect_ok "... and one holding an instance type with a device (nothing owned)" \
    try alice "$(revision default rev "$POOL")"

echo "--- fixtures: KubeVirt's CRDs and CR (ownership annotation), roles"
KVCRDS=$(hack/kubevirt-crds.sh) || fail "hack/kubevirt-crds.sh gives KubeVirt's CRDs"
# With the kinds virt-controller makes VMIs or VMs from (the doors, checked further down).
KVKINDS=(kubevirts.kubevirt.io virtualmachineinstances.kubevirt.io virtualmachines.kubevirt.io
    virtualmachineinstancereplicasets.kubevirt.io virtualmachinepools.pool.kubevirt.io
    virtualmachineinstancetypes.instancetype.kubevirt.io
    virtualmachineclusterinstancetypes.instancetype.kubevirt.io
    virtualmachineclones.clone.kubevirt.io virtualmachinerestores.snapshot.kubevirt.io)
KVFILES=()
for k in "${KVKINDS[@]}"; do KVFILES+=(-f "$KVCRDS/$k.yaml"); done
expect_ok "KubeVirt v1.9.0's CRDs: kubevirts, VMIs, VMs, replica sets, pools, instance types, clones, restores" \
    kubectl create "${KVFILES[@]}"
kubectl wait --for condition=Established --timeout 60s "${KVKINDS[@]/#/crd/}" >/dev/null
OWNED=$(owned_annotation "intel.com/$X" "intel.com/$Y" "kubevirt.io/$USB" "$POOL" "$MDEV" "${MANY[@]}")
expect_ok "namespace kubevirt, KubeVirt's service account, the KubeVirt CR with owned names" \
    kubectl apply -f - <<EOF
apiVersion: v1
kind: Namespace
metadata: {name: kubevirt}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: kubevirt-controller, namespace: kubevirt}
---
# Same name, other namespace: not KubeVirt.
apiVersion: v1
kind: ServiceAccount
metadata: {name: kubevirt-controller, namespace: default}
---
apiVersion: kubevirt.io/v1
kind: KubeVirt
metadata:
  name: kubevirt
  namespace: kubevirt
  annotations: {hostdevd.io/owned-host-devices: "$OWNED"}
spec:
  configuration:
    permittedHostDevices:
      pciHostDevices:
      - {pciVendorSelector: "10de:2236", resourceName: $FOREIGN}
      - {pciVendorSelector: "8086:10d3", resourceName: "intel.com/$X", externalResourceProvider: true}
      - {pciVendorSelector: "8086:10d3", resourceName: "intel.com/$Y", externalResourceProvider: true}
      - {pciVendorSelector: "8086:10d3", resourceName: $POOL, externalResourceProvider: true}
      usb:
      - {resourceName: "kubevirt.io/$USB", selectors: [{vendor: "0951", product: "1666"}], externalResourceProvider: true}
EOF
TKV=$(kubectl create token kubevirt-controller -n kubevirt)
TFAKE=$(kubectl create token kubevirt-controller -n default)

# The API server resolves the new kind a little later (its discovery refresh); until then the
# VM policy (failurePolicy Fail) refuses VMIs with a configuration error, and the Pod policy
# lets everything through.
t=$SECONDS
if eventually 60 denied_with hostdevd-vm-use "may not use" try bob "$(vmi vm1 "intel.com/$X")"; then
    pass "the policies take the KubeVirt CR as parameter ($((SECONDS - t))s after KubeVirt's CRDs)"
else
    fail "the policies become effective" "$(try bob "$(vmi vm1 "intel.com/$X")" 2>&1)"
    finish
fi
eventually 30 denied_with hostdevd-pod-use "may not" try alice "$(pod p "{\"limits\": {\"$POOL\": 1}}")"

echo "--- VirtualMachineInstances"
expect_ok "alice (use on pcidevices/$X): a VMI with intel.com/$X" try alice "$(vmi vm1 "intel.com/$X")"
expect_reject "bob (no grant): refused, the message names what he lacks" \
    "user bob may not use host device intel.com/$X in VirtualMachineInstance default/vm1: it needs the verb \"use\" on pcidevices/$X in API group $G (or on pcidevicepools/intel.com/$X)" \
    try bob "$(vmi vm1 "intel.com/$X")"
expect_ok "alice: intel.com/$X as a GPU (spec.domain.devices.gpus)" try alice "$(vmi_gpu vm1 "intel.com/$X")"
expect_reject "bob: ... refused as well" "needs the verb \"use\" on pcidevices/$X" \
    try bob "$(vmi_gpu vm1 "intel.com/$X")"
expect_ok "alice (use on usbdevices/$USB): kubevirt.io/$USB" try alice "$(vmi vm1 "kubevirt.io/$USB")"
expect_reject "bob: kubevirt.io/$USB refused" \
    "needs the verb \"use\" on usbdevices/$USB in API group $G (or on pcidevicepools/kubevirt.io/$USB)" \
    try bob "$(vmi vm1 "kubevirt.io/$USB")"
expect_ok "alice (use on pcidevicepools/$POOL): the pool" try alice "$(vmi vm1 "$POOL" "$POOL")"
expect_reject "bob: the pool refused" \
    "user bob may not use host device $POOL in VirtualMachineInstance default/vm1: it needs the verb \"use\" on pcidevicepools/$POOL in API group $G" \
    try bob "$(vmi vm1 "$POOL")"
expect_ok "bob: $FOREIGN (a foreign entry's name, not owned) is not checked" \
    try bob "$(vmi vm1 "$FOREIGN")"
expect_ok "bob: an unlisted name is not checked either" try bob "$(vmi vm1 example.com/whatever)"
expect_reject "alice: all of hers and $Y: refused for $Y" \
    "user alice may not use host device intel.com/$Y in VirtualMachineInstance default/vm1" \
    try alice "$(vmi vm1 "intel.com/$X" "kubevirt.io/$USB" "$POOL" "intel.com/$Y")"
expect_ok "KubeVirt's virt-controller ($KVC, a token): exempt" try "token:$TKV" "$(vmi vm1 "intel.com/$Y")"
expect_reject "... a kubevirt-controller of another namespace is not" \
    "user system:serviceaccount:default:kubevirt-controller may not use host device intel.com/$Y" \
    try "token:$TFAKE" "$(vmi vm1 "intel.com/$Y")"

echo "--- VirtualMachines"
expect_reject "bob: a VM with intel.com/$X refused" \
    "user bob may not use host device intel.com/$X in VirtualMachine default/vm-a" \
    try bob "$(vm vm-a "intel.com/$X")"
expect_ok "alice: a VM with intel.com/$X created" as alice create -f - <<<"$(vm vm-a "intel.com/$X")"
expect_ok "alice: adding kubevirt.io/$USB to it" as alice patch vm vm-a --type json -p \
    '[{"op": "add", "path": "/spec/template/spec/domain/devices/hostDevices/-", "value": {"name": "usb", "deviceName": "kubevirt.io/'"$USB"'"}}]'
expect_reject "alice: adding intel.com/$Y refused" "may not use host device intel.com/$Y in VirtualMachine default/vm-a" \
    as alice patch vm vm-a --type json -p \
    '[{"op": "add", "path": "/spec/template/spec/domain/devices/hostDevices/-", "value": {"name": "y", "deviceName": "intel.com/'"$Y"'"}}]'
expect_ok "bob (no grant for the VM's devices): other edits of the VM pass (old names not checked)" \
    as bob patch vm vm-a --type merge -p '{"metadata": {"labels": {"edited-by": "bob"}}, "spec": {"runStrategy": "Always"}}'
expect_reject "bob: adding the pool to it refused" "user bob may not use host device $POOL in VirtualMachine default/vm-a" \
    as bob patch vm vm-a --type json -p \
    '[{"op": "add", "path": "/spec/template/spec/domain/devices/gpus", "value": [{"name": "g", "deviceName": "'"$POOL"'"}]}]'
expect_contains "the VM holds what was admitted" \
    "$(kubectl get vm vm-a -o jsonpath='{.spec.template.spec.domain.devices.hostDevices[*].deviceName} {.spec.runStrategy}')" \
    "intel.com/$X kubevirt.io/$USB Always"

echo "--- Pods"
expect_reject "alice: a Pod asking for intel.com/$X (limits) refused" \
    "user alice may not create Pod default/p asking for host device intel.com/$X: only KubeVirt (system:serviceaccount:kubevirt:kubevirt-controller) may" \
    try alice "$(pod p "{\"limits\": {\"intel.com/$X\": 1}}")"
# (An extended resource must have a limit; requests, if given, must equal it.)
expect_reject "bob: the pool in an initContainer refused" "may not create Pod default/p asking for host device $POOL" \
    try bob "$(pod p '{}' "{\"requests\": {\"$POOL\": 1}, \"limits\": {\"$POOL\": 1}}")"
expect_ok "KubeVirt's virt-controller: the same Pod (a virt-launcher) created" \
    try "token:$TKV" "$(pod p "{\"limits\": {\"intel.com/$X\": 1}}")"
expect_reject "... a kubevirt-controller of another namespace: refused" "may not create Pod" \
    try "token:$TFAKE" "$(pod p "{\"limits\": {\"intel.com/$X\": 1}}")"
expect_ok "alice: a Pod asking for a foreign extended resource" try alice "$(pod p "{\"limits\": {\"$FOREIGN\": 1}}")"
expect_ok "alice: a Pod without extended resources" try alice "$PLAIN"

echo "--- grants per namespace"
# carol and dave (group developers: VM makers) have no cluster-wide grant. A RoleBinding in
# team-a gives carol "use" on $Y through a ClusterRole; a Role of team-b gives dave the pool.
expect_ok "namespaces team-a, team-b; carol's grant in team-a, dave's in team-b" kubectl apply -f - <<EOF2
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-b}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: device-y-user}
rules:
- {apiGroups: [$G], resources: [pcidevices], resourceNames: [$Y], verbs: [use]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: device-y, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: device-y-user}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: carol}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: nic-pool, namespace: team-b}
rules:
- {apiGroups: [$G], resources: [pcidevicepools], resourceNames: ["$POOL"], verbs: [use]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: nic-pool, namespace: team-b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: nic-pool}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: dave}]
EOF2
carol() { as admin --as carol --as-group developers "$@"; }
dave() { as admin --as dave --as-group developers "$@"; }
try_as() { # carol|dave json
    "$1" create --dry-run=server -f - <<<"$2"
}
expect_ok "carol: a VMI in team-a with intel.com/$Y (her RoleBinding there)" \
    try_as carol "$(vmi_in team-a vm1 "intel.com/$Y")"
expect_reject "carol: the same VMI in team-b refused, naming the grant and where it goes" \
    "user carol may not use host device intel.com/$Y in VirtualMachineInstance team-b/vm1: it needs the verb \"use\" on pcidevices/$Y in API group $G (or on pcidevicepools/intel.com/$Y), granted in namespace team-b (a RoleBinding there) or cluster-wide (a ClusterRoleBinding)" \
    try_as carol "$(vmi_in team-b vm1 "intel.com/$Y")"
expect_reject "dave (no grant for $Y anywhere): refused in team-a" \
    "user dave may not use host device intel.com/$Y in VirtualMachineInstance team-a/vm1" \
    try_as dave "$(vmi_in team-a vm1 "intel.com/$Y")"
expect_ok "dave: the pool in team-b (a Role of team-b)" try_as dave "$(vmi_in team-b vm1 "$POOL")"
expect_reject "dave: the pool in team-a refused" "in VirtualMachineInstance team-a/vm1: it needs the verb \"use\" on pcidevicepools/$POOL" \
    try_as dave "$(vmi_in team-a vm1 "$POOL")"
expect_ok "carol: a VM in team-a with intel.com/$Y" \
    try_as carol "$(vm vm-c "intel.com/$Y" | jq -c '.metadata.namespace = "team-a"')"
expect_reject "carol: a VM in team-b refused" "in VirtualMachine team-b/vm-c" \
    try_as carol "$(vm vm-c "intel.com/$Y" | jq -c '.metadata.namespace = "team-b"')"
expect_ok "alice (a ClusterRoleBinding): intel.com/$X in team-b too" try alice "$(vmi_in team-b vm1 "intel.com/$X")"

echo "--- an mdev type (VGPUDevices) is a pool: granted per namespace like a PCI pool"
expect_ok "dave may use $MDEV in team-b (a Role there)" kubectl apply -f - <<EOF2
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: mdev-pool, namespace: team-b}
rules:
- {apiGroups: [$G], resources: [pcidevicepools], resourceNames: ["$MDEV"], verbs: [use]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: mdev-pool, namespace: team-b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: mdev-pool}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: dave}]
EOF2
expect_ok "dave: a VMI in team-b with an mdev as a GPU" try_as dave "$(vmi_gpu vm1 "$MDEV" | jq -c '.metadata.namespace = "team-b"')"
expect_reject "dave: the same in team-a refused, naming the pool grant" \
    "user dave may not use host device $MDEV in VirtualMachineInstance team-a/vm1: it needs the verb \"use\" on pcidevicepools/$MDEV" \
    try_as dave "$(vmi_gpu vm1 "$MDEV" | jq -c '.metadata.namespace = "team-a"')"
expect_reject "carol (no grant): an mdev as a host device refused" "user carol may not use host device $MDEV" \
    try_as carol "$(vmi_in team-b vm1 "$MDEV")"
expect_reject "alice: a Pod asking for the mdev type directly refused (only KubeVirt)" "may not create Pod" \
    try alice "$(pod p "{\"limits\": {\"$MDEV\": 1}}")"

echo "--- quota: a namespace's share of a resource name"
expect_ok "team-a's ResourceQuota: one intel.com/$Y (the extended resource), one device of the DRA class" \
    kubectl apply -f - <<EOF2
apiVersion: v1
kind: ResourceQuota
metadata: {name: devices, namespace: team-a}
spec:
  hard:
    requests.intel.com/$Y: "1"
    vfio-pci.hostdevd.io.deviceclass.resource.k8s.io/devices: "1"
EOF2
quota_known() { [ -n "$(kubectl get resourcequota devices -n team-a -o jsonpath='{.status.hard}')" ]; }
eventually 30 quota_known || fail "the quota controller fills the quota's status" "$(kubectl get resourcequota -n team-a -o yaml)"
launcher() { # name count: a virt-launcher-like Pod in team-a asking for N of intel.com/$Y
    pod "$1" "{\"limits\": {\"intel.com/$Y\": $2}}" | jq -c '.metadata.namespace = "team-a"'
}
expect_ok "virt-controller: a launcher Pod with one intel.com/$Y (within the quota)" \
    try "token:$TKV" "$(launcher virt-launcher-a 1)"
expect_reject "virt-controller: a launcher Pod with two refused by the quota, with its message" \
    "exceeded quota: devices, requested: requests.intel.com/$Y=2, used: requests.intel.com/$Y=0, limited: requests.intel.com/$Y=1" \
    try "token:$TKV" "$(launcher virt-launcher-a 2)"
claim2() { # name count: a ResourceClaim in team-a for N devices of the DRA class
    jq -cn --arg n "$1" --argjson c "$2" '{apiVersion: "resource.k8s.io/v1", kind: "ResourceClaim",
        metadata: {name: $n, namespace: "team-a"},
        spec: {devices: {requests: [{name: "nic", exactly: {deviceClassName: "vfio-pci.hostdevd.io",
               allocationMode: "ExactCount", count: $c}}]}}}'
}
expect_ok "a ResourceClaim for one device of vfio-pci.hostdevd.io (within the quota)" \
    kubectl create --dry-run=server -f - <<<"$(claim2 nic1 1)"
expect_reject "a ResourceClaim for two refused by the quota" \
    "exceeded quota: devices, requested: vfio-pci.hostdevd.io.deviceclass.resource.k8s.io/devices=2" \
    kubectl create --dry-run=server -f - <<<"$(claim2 nic2 2)"

echo "--- the CEL cost limit: 12 new names per request"
kubectl apply -f - >/dev/null <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: alice-many}
rules:
- {apiGroups: [$G], resources: [pcidevicepools], resourceNames: [$(printf '"%s",' "${MANY[@]}" | sed 's/,$//')], verbs: [use]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: alice-many}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: alice-many}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}]
EOF
# Per-device names granted through pools: two checks each, the most expensive case.
expect_ok "alice: 12 per-device names, each allowed by its pool (24 authorization checks)" \
    try alice "$(vmi vm1 "${MANY[@]:0:12}")"
expect_reject "alice: 13 refused with the reason" "asks for 13 hostdevd host devices by distinct resource name; at most 12" \
    try alice "$(vmi vm1 "${MANY[@]}")"
expect_reject "bob: 12, none allowed: refused naming the first" "user bob may not use host device ${MANY[0]} in" \
    try bob "$(vmi vm1 "${MANY[@]:0:12}")"

echo "--- the doors: what virt-controller makes VMIs and VMs from"
# Objects of the other kinds, as JSON: devices as hostDevices h0, h1, ...
rs() { # namespace name deviceName...
    local ns=$1 name=$2
    shift 2
    jq -cn --arg ns "$ns" --arg n "$name" --argjson h "$(devices_json "$@")" '{apiVersion: "kubevirt.io/v1",
        kind: "VirtualMachineInstanceReplicaSet", metadata: {name: $n, namespace: $ns},
        spec: {replicas: 0, selector: {matchLabels: {rs: $n}},
               template: {metadata: {labels: {rs: $n}}, spec: {domain: {devices: {hostDevices: $h}}}}}}'
}
vmpool() { # namespace name deviceName...
    local ns=$1 name=$2
    shift 2
    jq -cn --arg ns "$ns" --arg n "$name" --argjson h "$(devices_json "$@")" '{apiVersion: "pool.kubevirt.io/v1beta1",
        kind: "VirtualMachinePool", metadata: {name: $n, namespace: $ns},
        spec: {replicas: 0, selector: {matchLabels: {pool: $n}},
               virtualMachineTemplate: {metadata: {labels: {pool: $n}}, spec: {runStrategy: "Halted",
                   template: {spec: {domain: {devices: {hostDevices: $h}}}}}}}}'
}
itype() { # namespace|"" name deviceName...: a VirtualMachineInstancetype, or (no namespace) a
    local ns=$1 name=$2 # VirtualMachineClusterInstancetype
    shift 2
    jq -cn --arg ns "$ns" --arg n "$name" --argjson h "$(devices_json "$@")" '{
        apiVersion: "instancetype.kubevirt.io/v1beta1",
        kind: (if $ns == "" then "VirtualMachineClusterInstancetype" else "VirtualMachineInstancetype" end),
        metadata: ({name: $n} + (if $ns == "" then {} else {namespace: $ns} end)),
        spec: {cpu: {guest: 1}, memory: {guest: "1Gi"}, hostDevices: $h}}'
}
vmclone() { # namespace name source-VM
    jq -cn --arg ns "$1" --arg n "$2" --arg s "$3" '{apiVersion: "clone.kubevirt.io/v1beta1",
        kind: "VirtualMachineClone", metadata: {name: $n, namespace: $ns},
        spec: {source: {apiGroup: "kubevirt.io", kind: "VirtualMachine", name: $s},
               target: {apiGroup: "kubevirt.io", kind: "VirtualMachine", name: ($s + "-copy")}}}'
}
vmrestore() { # namespace name target-VM
    jq -cn --arg ns "$1" --arg n "$2" --arg t "$3" '{apiVersion: "snapshot.kubevirt.io/v1beta1",
        kind: "VirtualMachineRestore", metadata: {name: $n, namespace: $ns},
        spec: {target: {apiGroup: "kubevirt.io", kind: "VirtualMachine", name: $t},
               virtualMachineSnapshotName: ($t + "-snap")}}'
}
# erin (a VM maker) may use every device in team-a: a pcidevicepools rule without resourceNames.
expect_ok "erin: every hostdevd device, in team-a" kubectl apply -f - <<EOF2
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: every-device}
rules:
- {apiGroups: [$G], resources: [pcidevicepools], verbs: [use]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: every-device, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: every-device}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: erin}]
EOF2
erin() { as admin --as erin --as-group developers "$@"; }

# Replica sets: the VMI template, like a VM.
expect_reject "replica set: bob refused, the message names the grant" \
    "user bob may not use host device intel.com/$X in VirtualMachineInstanceReplicaSet default/rs1: it needs the verb \"use\" on pcidevices/$X in API group $G (or on pcidevicepools/intel.com/$X), granted in namespace default (a RoleBinding there) or cluster-wide (a ClusterRoleBinding)" \
    try bob "$(rs default rs1 "intel.com/$X")"
expect_ok "replica set: alice's with intel.com/$X created" as alice create -f - <<<"$(rs default rs1 "intel.com/$X")"
expect_reject "replica set: alice adding intel.com/$Y refused" \
    "may not use host device intel.com/$Y in VirtualMachineInstanceReplicaSet default/rs1" \
    as alice patch virtualmachineinstancereplicasets rs1 --type json -p \
    '[{"op": "add", "path": "/spec/template/spec/domain/devices/hostDevices/-", "value": {"name": "y", "deviceName": "intel.com/'"$Y"'"}}]'
expect_ok "replica set: bob scaling it (no names added)" \
    as bob patch virtualmachineinstancereplicasets rs1 --type merge -p '{"spec": {"replicas": 2}}'
expect_ok "replica set: KubeVirt's virt-controller exempt" try "token:$TKV" "$(rs default rs2 "intel.com/$Y")"
expect_reject "... a kubevirt-controller of another namespace is not" \
    "user system:serviceaccount:default:kubevirt-controller may not use host device intel.com/$Y in VirtualMachineInstanceReplicaSet" \
    try "token:$TFAKE" "$(rs default rs2 "intel.com/$Y")"

# Pools: the VM template's VMI template.
expect_reject "pool: bob refused" \
    "user bob may not use host device $POOL in VirtualMachinePool default/pool1: it needs the verb \"use\" on pcidevicepools/$POOL in API group $G" \
    try bob "$(vmpool default pool1 "$POOL")"
expect_ok "pool: alice's with the pool created" as alice create -f - <<<"$(vmpool default pool1 "$POOL")"
expect_reject "pool: bob adding kubevirt.io/$USB to it refused" \
    "user bob may not use host device kubevirt.io/$USB in VirtualMachinePool default/pool1" \
    as bob patch virtualmachinepools pool1 --type json -p \
    '[{"op": "add", "path": "/spec/virtualMachineTemplate/spec/template/spec/domain/devices/hostDevices/-", "value": {"name": "u", "deviceName": "kubevirt.io/'"$USB"'"}}]'
expect_ok "pool: dave's in team-b (a Role of team-b grants the pool)" try_as dave "$(vmpool team-b pool1 "$POOL")"
expect_reject "pool: dave's in team-a refused" "in VirtualMachinePool team-a/pool1" \
    try_as dave "$(vmpool team-a pool1 "$POOL")"

# Instance types: checked themselves; a VM referring to one is not (a policy cannot read it).
expect_ok "instance type: carol's in team-a with intel.com/$Y as a GPU (her RoleBinding there)" \
    carol create -f - <<<"$(itype team-a it-y "intel.com/$Y" | jq -c '.spec.gpus = .spec.hostDevices | del(.spec.hostDevices)')"
expect_reject "instance type: carol's in team-b refused, naming the grant and where" \
    "user carol may not use host device intel.com/$Y in VirtualMachineInstancetype team-b/it-y: it needs the verb \"use\" on pcidevices/$Y in API group $G (or on pcidevicepools/intel.com/$Y), granted in namespace team-b (a RoleBinding there)" \
    try_as carol "$(itype team-b it-y "intel.com/$Y" | jq -c '.spec.gpus = .spec.hostDevices | del(.spec.hostDevices)')"
expect_reject "instance type: bob's in default with intel.com/$X refused" \
    "user bob may not use host device intel.com/$X in VirtualMachineInstancetype default/it-x" \
    try bob "$(itype default it-x "intel.com/$X")"
expect_reject "instance type: carol adding intel.com/$X to hers refused" \
    "user carol may not use host device intel.com/$X in VirtualMachineInstancetype team-a/it-y" \
    carol patch virtualmachineinstancetypes it-y -n team-a --type json -p \
    '[{"op": "add", "path": "/spec/hostDevices", "value": [{"name": "x", "deviceName": "intel.com/'"$X"'"}]}]'
expect_ok "instance type: dave (no grant) may refer to carol's in a VM of team-a (its devices were checked)" \
    try_as dave "$(jq -cn '{apiVersion: "kubevirt.io/v1", kind: "VirtualMachine",
        metadata: {name: "vm-it", namespace: "team-a"},
        spec: {runStrategy: "Halted", instancetype: {kind: "VirtualMachineInstancetype", name: "it-y"},
               template: {spec: {domain: {devices: {}}}}}}')"
expect_reject "cluster instance type: carol (a grant in team-a only) refused, it needs a cluster-wide grant" \
    "user carol may not use host device intel.com/$Y in VirtualMachineClusterInstancetype ci-y: it needs the verb \"use\" on pcidevices/$Y in API group $G (or on pcidevicepools/intel.com/$Y), granted cluster-wide (a ClusterRoleBinding)" \
    try_as carol "$(itype "" ci-y "intel.com/$Y")"
expect_ok "cluster instance type: alice's with intel.com/$X (a ClusterRoleBinding) created" \
    as alice create -f - <<<"$(itype "" ci-x "intel.com/$X")"
expect_reject "cluster instance type: alice adding intel.com/$Y refused" \
    "user alice may not use host device intel.com/$Y in VirtualMachineClusterInstancetype ci-x" \
    as alice patch virtualmachineclusterinstancetypes ci-x --type json -p \
    '[{"op": "add", "path": "/spec/hostDevices/-", "value": {"name": "y", "deviceName": "intel.com/'"$Y"'"}}]'
expect_ok "cluster instance type: bob's with $FOREIGN (not owned)" try bob "$(itype "" ci-f "$FOREIGN")"

# ControllerRevisions: a VM's spec.instancetype.revisionName names one; only KubeVirt writes
# those holding owned names, or a user with "use" on every device.
expect_reject "revision: bob's holding intel.com/$X refused, naming the door and the grant" \
    "user bob may not create ControllerRevision default/rev1 holding host device intel.com/$X: a VirtualMachine naming it in spec.instancetype.revisionName would get it unchecked; only KubeVirt (system:serviceaccount:kubevirt:kubevirt-controller) writes these, or a user with the verb \"use\" on every device: on pcidevicepools in API group $G, a rule without resourceNames, granted in namespace default (a RoleBinding there)" \
    try bob "$(revision default rev1 "intel.com/$X")"
expect_reject "revision: alice (use on intel.com/$X, not on every device) refused too" \
    "user alice may not create ControllerRevision default/rev1 holding host device intel.com/$X" \
    try alice "$(revision default rev1 "intel.com/$X")"
expect_ok "revision: erin's in team-a (every device there)" \
    erin create --dry-run=server -f - <<<"$(revision team-a rev1 "intel.com/$X")"
expect_ok "revision: KubeVirt's virt-controller exempt" try "token:$TKV" "$(revision default rev1 "intel.com/$X")"
expect_reject "... a kubevirt-controller of another namespace is not" \
    "user system:serviceaccount:default:kubevirt-controller may not create ControllerRevision" \
    try "token:$TFAKE" "$(revision default rev1 "intel.com/$X")"
expect_ok "revision: bob's with $FOREIGN (not owned)" try bob "$(revision default rev1 "$FOREIGN")"
expect_ok "revision: bob's without devices (a StatefulSet's, say)" \
    try bob "$(revision default rev1 | jq -c '.data = {spec: {template: {metadata: {labels: {a: "b"}}}}}')"

# Clones and restores: the source cannot be read; refused without "use" on every device.
COPYMSG="user bob may not create VirtualMachineClone default/c1: KubeVirt would make a VirtualMachine with the host devices of a VirtualMachine or snapshot that an admission policy cannot read (and with its patches), so while hostdevd owns host devices it needs the verb \"use\" on every device: on pcidevicepools in API group $G, a rule without resourceNames, granted in namespace default (a RoleBinding there) or cluster-wide (a ClusterRoleBinding)"
expect_reject "clone: bob refused, the message says why and names the grant" "$COPYMSG" \
    try bob "$(vmclone default c1 vm-a)"
expect_reject "clone: alice (grants for some devices, not all) refused" \
    "user alice may not create VirtualMachineClone default/c1" try alice "$(vmclone default c1 vm-a)"
expect_ok "clone: erin in team-a (every device there)" erin create --dry-run=server -f - <<<"$(vmclone team-a c1 vm-c)"
expect_reject "clone: erin in team-b refused" \
    "user erin may not create VirtualMachineClone team-b/c1: KubeVirt would make" \
    erin create --dry-run=server -f - <<<"$(vmclone team-b c1 vm-c)"
expect_ok "clone: a cluster admin" try admin "$(vmclone default c1 vm-a)"
expect_ok "clone: KubeVirt's virt-controller exempt" try "token:$TKV" "$(vmclone default c1 vm-a)"
expect_reject "... a kubevirt-controller of another namespace is not" \
    "user system:serviceaccount:default:kubevirt-controller may not create VirtualMachineClone" \
    try "token:$TFAKE" "$(vmclone default c1 vm-a)"
expect_reject "restore: bob refused" \
    "user bob may not create VirtualMachineRestore default/r1: KubeVirt would make a VirtualMachine" \
    try bob "$(vmrestore default r1 vm-a)"
expect_ok "restore: erin in team-a" erin create --dry-run=server -f - <<<"$(vmrestore team-a r1 vm-c)"
expect_ok "restore: a cluster admin's, stored" as admin create -f - <<<"$(vmrestore default r1 vm-a)"
expect_reject "restore: bob changing its spec refused" "user bob may not change the spec of VirtualMachineRestore default/r1" \
    as bob patch virtualmachinerestores r1 --type merge -p '{"spec": {"virtualMachineSnapshotName": "other"}}'
expect_ok "restore: bob changing its labels (spec unchanged) admitted" \
    as bob label virtualmachinerestores r1 seen-by=bob

echo "--- the parameter is live"
expect_ok "intel.com/$X dropped from the ownership annotation" kubectl annotate kubevirt -n kubevirt kubevirt \
    --overwrite "hostdevd.io/owned-host-devices=$(owned_annotation "intel.com/$Y" "kubevirt.io/$USB" "$POOL")"
if eventually 20 try bob "$(vmi vm1 "intel.com/$X")"; then
    pass "bob: a VMI with intel.com/$X now admitted (no longer hostdevd's name)"
else
    fail "bob: a VMI with intel.com/$X once it is not owned" "$(try bob "$(vmi vm1 "intel.com/$X")" 2>&1)"
fi
expect_ok "... and a Pod" try bob "$(pod p "{\"limits\": {\"intel.com/$X\": 1}}")"
expect_reject "bob: kubevirt.io/$USB still refused" "needs the verb \"use\" on usbdevices/$USB" \
    try bob "$(vmi vm1 "kubevirt.io/$USB")"
expect_ok "the KubeVirt CR deleted" kubectl delete kubevirt -n kubevirt kubevirt
if eventually 20 try bob "$(vmi vm1 "kubevirt.io/$USB")"; then
    pass "no KubeVirt CR: nothing owned, nothing checked (parameterNotFoundAction Allow)"
else
    fail "no KubeVirt CR: nothing checked" "$(try bob "$(vmi vm1 "kubevirt.io/$USB")" 2>&1)"
fi
expect_ok "... clones and restores neither" try bob "$(vmclone default c1 vm-a)"
echo "  checks done in $((SECONDS - T0))s after the control plane"
finish
