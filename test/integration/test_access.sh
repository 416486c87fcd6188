#!/usr/bin/env bash
# test/integration/test_access.sh - access control on a real control plane: the manifests of
# manifests/ applied (RBAC and admission policies for real, the DaemonSet and Deployment with a
# server-side dry run, as no kubelet runs them here), then per-device RBAC for users (the verb
# "use" checked by the CEL authorizer), agents confined to their node by the node name in a
# Node-bound service-account token, claim specs that cannot change or lie about the user, and
# what the two service accounts may and may not do (kubectl auth can-i). Every refused request
# must be refused with a message that says why.
SUITE=access
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

G=devices.harvesterhci.io
API=/apis/$G/v1beta1
NS=hostdevd-system
AGENT=system:serviceaccount:$NS:hostdevd-agent
CONTROLLER=system:serviceaccount:$NS:hostdevd-controller
REJECTS=0 # bad requests checked (expect_reject calls)

reject() {
    REJECTS=$((REJECTS + 1))
    expect_reject "$@"
}

# kt, api, denied_by: lib.sh.

# A device as the agent creates it: metadata only (status goes through /status afterwards).
device_json() { # kind name label-node [owner-node]
    local owner=null
    if [ -n "${4:-}" ]; then
        owner=$(jq -cn --arg n "$4" --arg u "$(kubectl get node "$4" -o jsonpath='{.metadata.uid}')" \
            '[{apiVersion: "v1", kind: "Node", name: $n, uid: $u}]')
    fi
    jq -cn --arg k "$1" --arg n "$2" --arg l "$3" --argjson o "$owner" \
        '{apiVersion: "devices.harvesterhci.io/v1beta1", kind: $k,
          metadata: ({name: $n, labels: {nodename: $l}} + (if $o then {ownerReferences: $o} else {} end))}'
}

# A SRIOVNetworkDevice as the agent creates it (the status comes next, through /status).
sriov_json() { # name spec-node label-node [owner-node] [numVFs]
    local owner=null
    if [ -n "${4:-}" ]; then
        owner=$(jq -cn --arg n "$4" --arg u "$(kubectl get node "$4" -o jsonpath='{.metadata.uid}')" \
            '[{apiVersion: "v1", kind: "Node", name: $n, uid: $u}]')
    fi
    jq -cn --arg n "$1" --arg s "$2" --arg l "$3" --argjson o "$owner" --argjson v "${5:-0}" \
        '{apiVersion: "devices.harvesterhci.io/v1beta1", kind: "SRIOVNetworkDevice",
          metadata: ({name: $n, labels: {nodename: $l},
                      annotations: {"sriov.devices.harvesterhi.io/interface-name": ($n | sub("^node-[ab]-"; ""))}}
                     + (if $o then {ownerReferences: $o} else {} end)),
          spec: {address: "0000:3b:00.0", nodeName: $s, numVFs: $v}}'
}

# A SRIOVNetworkDevice read by the admin, changed by a jq filter and PUT back as USER: the
# object (kubectl edit's way) or, with "status", its status subresource.
sriov_put() { # user name jq-filter [status]
    if [ "${4:-}" = status ]; then
        kubectl get sriovnd "$2" -o json | jq -c "$3" |
            kubectl --as "$1" replace --raw "$API/sriovnetworkdevices/$2/status" -f -
    else
        kubectl --as "$1" get sriovnd "$2" -o json | jq -c "$3" | kubectl --as "$1" replace -f -
    fi
}

# A VGPUDevice as the agent creates it: a free slot of parent mtty (disabled).
vgpu_json() { # name spec-node label-node [owner-node]
    local owner=null
    if [ -n "${4:-}" ]; then
        owner=$(jq -cn --arg n "$4" --arg u "$(kubectl get node "$4" -o jsonpath='{.metadata.uid}')" \
            '[{apiVersion: "v1", kind: "Node", name: $n, uid: $u}]')
    fi
    jq -cn --arg n "$1" --arg s "$2" --arg l "$3" --argjson o "$owner" \
        '{apiVersion: "devices.harvesterhci.io/v1beta1", kind: "VGPUDevice",
          metadata: ({name: $n, labels: {nodename: $l, "devices.harvesterhci.io/mdev-parent": "mtty"}}
                     + (if $o then {ownerReferences: $o} else {} end)),
          spec: {address: "mtty", parentGPUDeviceAddress: "mtty", nodeName: $s, enabled: false}}'
}

# Creates a device, then writes its status, as the agent does.
create_with_status() { # token resource name object-json status-json
    api "$1" POST "$API/$2" "$4" >/dev/null && api "$1" PATCH "$API/$2/$3/status" "$5"
}

pci_status() { # node address
    jq -cn --arg n "$1" --arg a "$2" \
        '{status: {address: $a, vendorId: "10de", deviceId: "2236", classId: "0302", nodeName: $n}}'
}

usb_status() { # node vendor product port
    jq -cn --arg n "$1" --arg v "$2" --arg p "$3" --arg port "$4" \
        '{status: {vendorID: $v, productID: $p, nodeName: $n, portPath: $port}}'
}

pci_claim() { # name address node [userName]
    printf 'apiVersion: %s/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: %s}\nspec: {address: "%s", nodeName: %s%s}\n' \
        "$G" "$1" "$2" "$3" "${4:+, userName: $4}"
}

usb_claim() { # name [userName]
    printf 'apiVersion: %s/v1beta1\nkind: USBDeviceClaim\nmetadata: {name: %s}\nspec: {%s}\n' \
        "$G" "$1" "${2:+userName: $2}"
}

# A PUT of a claim as read by the admin and changed by a jq filter (the agent's other way of
# changing finalizers: an update conditional on resourceVersion).
put_claim() { # token name jq-filter
    api "$1" PUT "$API/pcideviceclaims/$2" "$(kubectl get pcideviceclaim "$2" -o json | jq -c "$3")"
}


# kubectl auth can-i with the expected answer.
can_i() { # description yes|no can-i-args...
    local what=$1 want=$2 got
    shift 2
    got=$(kubectl auth can-i "$@" 2>/dev/null) # stderr: warnings about cluster scope
    if [ "$got" = "$want" ]; then
        pass "$what"
    else
        fail "$what" "kubectl auth can-i $*: $got (expected $want)"
    fi
}

cluster_start

echo "--- install"
# Everything but the workloads is applied for real, as `kubectl apply -k manifests/` (the
# install command) applies it; the DaemonSet and Deployment get a server-side dry run (full
# validation and admission, nothing stored), since no kubelet or workload controller runs in
# this control plane. The split is by kind, from kustomize's own output.
expect_ok "manifests/ builds with kustomize" kubectl kustomize manifests/ -o "$TEST_DIR/all.yaml"
awk -v work="$TEST_DIR/workloads.yaml" -v rest="$TEST_DIR/rest.yaml" '
    function flush() { if (doc != "") printf "---\n%s", doc > (wl ? work : rest); doc = ""; wl = 0 }
    /^---$/ { flush(); next }
    /^kind: (DaemonSet|Deployment)$/ { wl = 1 }
    { doc = doc $0 "\n" }
    END { flush() }' "$TEST_DIR/all.yaml"
expect_ok "namespace, CRDs, RBAC and admission policies apply" \
    kubectl apply -f "$TEST_DIR/rest.yaml"
expect_ok "the CRDs become Established" kubectl wait --for condition=Established --timeout 60s \
    crd/pcidevices.$G crd/pcideviceclaims.$G crd/usbdevices.$G crd/usbdeviceclaims.$G \
    crd/sriovnetworkdevices.$G crd/vgpudevices.$G
expect_ok "the DaemonSet and the Deployment pass a server-side dry run" \
    kubectl apply --server-side --dry-run=server -f "$TEST_DIR/workloads.yaml" -o json
WL=$OUT
expect_contains "the dry run returned both workloads" \
    "$(jq -r '.items[] | .kind + "/" + .metadata.name' <<<"$WL" 2>&1)" \
    "DaemonSet/hostdevd-agent" "Deployment/hostdevd-controller"
DS=$(jq -c '.items[] | select(.kind == "DaemonSet") | .spec.template.spec' <<<"$WL" 2>/dev/null)
expect_contains "the agent Pod: privileged, host network, NODE_NAME from spec.nodeName, its image" \
    "$(jq -c '{sa: .serviceAccountName, net: .hostNetwork, c: .containers[0] |
        {p: .securityContext.privileged, img: .image, pull: .imagePullPolicy, cmd: .command,
         env: (.env[] | select(.name == "NODE_NAME") | .valueFrom.fieldRef.fieldPath)}}' <<<"$DS")" \
    '"sa":"hostdevd-agent"' '"net":true' '"p":true' '"img":"localhost/hostdevd:0.1.0"' '"pull":"IfNotPresent"' \
    '"cmd":["hostdevd","agent"]' '"env":"spec.nodeName"'
expect_contains "the agent's host paths (read-only where it only reads)" \
    "$(jq -r '. as $s | .containers[0].volumeMounts[] | . as $m |
        ($s.volumes[] | select(.name == $m.name) | .hostPath.path) + " -> " + $m.mountPath +
        (if $m.readOnly then " ro" else " rw" end)' <<<"$DS")" \
    "/sys -> /sys rw" "/dev -> /dev ro" "/lib/modules -> /lib/modules ro" \
    "/var/lib/kubelet/device-plugins -> /var/lib/kubelet/device-plugins rw" "/run/udev -> /run/udev ro"
expect_contains "the agent's probes and resources" \
    "$(jq -c '.containers[0] | {l: .livenessProbe.httpGet, r: .readinessProbe.httpGet,
        req: .resources.requests, lim: .resources.limits}' <<<"$DS")" \
    '"l":{"path":"/healthz","port":9808' '"r":{"path":"/readyz","port":9808' \
    '"req":{"cpu":"10m","memory":"32Mi"}' '"lim":{"cpu":"200m","memory":"128Mi"}'
expect_ok "kubectl apply -k manifests/ as a whole passes a server-side dry run" \
    kubectl apply -k manifests/ --dry-run=server

echo "--- fixtures: KubeVirt's CRDs, two nodes, a KubeVirt CR, team roles, node-bound agent tokens"
# KubeVirt v1.9.0's own CRDs (hack/kubevirt-crds.sh: virt-operator's generator, from the Go
# module), created rather than applied: they are too large for kubectl's last-applied annotation.
if KVCRDS=$("$ROOT/hack/kubevirt-crds.sh"); then
    expect_ok "KubeVirt v1.9.0's kubevirts, virtualmachineinstances and virtualmachines CRDs" \
        kubectl create -f "$KVCRDS/kubevirts.kubevirt.io.yaml" \
        -f "$KVCRDS/virtualmachineinstances.kubevirt.io.yaml" -f "$KVCRDS/virtualmachines.kubevirt.io.yaml"
else
    fail "hack/kubevirt-crds.sh gives KubeVirt's CRDs"
fi
expect_ok "KubeVirt's CRDs Established" kubectl wait --for condition=Established --timeout 60s \
    crd/kubevirts.kubevirt.io crd/virtualmachineinstances.kubevirt.io crd/virtualmachines.kubevirt.io
expect_ok "nodes node-a and node-b, a KubeVirt CR" kubectl apply -f - <<'EOF'
apiVersion: v1
kind: Node
metadata: {name: node-a}
---
apiVersion: v1
kind: Node
metadata: {name: node-b}
---
apiVersion: v1
kind: Namespace
metadata: {name: kubevirt}
---
apiVersion: kubevirt.io/v1
kind: KubeVirt
metadata: {name: kubevirt, namespace: kubevirt}
spec: {configuration: {permittedHostDevices: {pciHostDevices: []}}}
EOF
# KubeVirt's schema, not a stand-in: permittedHostDevices as hostdevd writes it passes, a PCI
# entry without resourceName, a non-boolean externalResourceProvider or a USB selector without
# product is refused by the API server with KubeVirt's field paths.
kv_cr() { # pciHostDevices-json usb-json
    jq -cn --argjson p "$1" --argjson u "$2" '{apiVersion: "kubevirt.io/v1", kind: "KubeVirt",
        metadata: {name: "kubevirt-schema", namespace: "kubevirt"},
        spec: {configuration: {permittedHostDevices: {pciHostDevices: $p, usb: $u}}}}'
}
PCI_OK='[{"pciVendorSelector":"10de:2236","resourceName":"nvidia.com/GA102GL_A10","externalResourceProvider":true}]'
USB_OK='[{"resourceName":"kingston.com/DataTraveler","selectors":[{"vendor":"0951","product":"1666"}],"externalResourceProvider":true}]'
KVP=spec.configuration.permittedHostDevices
expect_ok "KubeVirt's schema accepts well-formed permittedHostDevices (PCI and USB)" \
    kubectl create --dry-run=server -f - <<<"$(kv_cr "$PCI_OK" "$USB_OK")"
reject "... refuses a pciHostDevices entry without resourceName" \
    "$KVP.pciHostDevices[0].resourceName: Required value" \
    kubectl create --dry-run=server -f - <<<"$(kv_cr '[{"pciVendorSelector":"10de:2236"}]' "$USB_OK")"
reject "... refuses a non-boolean externalResourceProvider" \
    "$KVP.pciHostDevices[0].externalResourceProvider: Invalid value: \"string\"" \
    kubectl create --dry-run=server -f - <<<"$(kv_cr "$(jq -c '.[0].externalResourceProvider = "yes"' <<<"$PCI_OK")" "$USB_OK")"
reject "... refuses a USB selector without product" "$KVP.usb[0].selectors[0].product: Required value" \
    kubectl create --dry-run=server -f - <<<"$(kv_cr "$PCI_OK" '[{"resourceName":"kingston.com/DataTraveler","selectors":[{"vendor":"0951"}]}]')"


# Team A (alice) may use GPU X on node-a; team B (bob) the USB dongle on node-b; both are in
# group developers, which may read devices and create claims (hostdevd-device-user). As in
# docs/access-control.md. dave has write verbs on devices by (mis)configuration; erin is a
# cluster admin (ClusterRole cluster-admin); carol has nothing; nora administers the nodes'
# devices (hostdevd-device-admin: SR-IOV VF counts and settings).
X=node-a-000001000
Y=node-a-000001001
DONGLE=node-b-0951-1666-2-1-4
expect_ok "team roles" kubectl apply -f - <<EOF
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: developers-device-user}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: hostdevd-device-user}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: developers}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: team-a-gpu}
rules:
- {apiGroups: [$G], resources: [pcidevices], resourceNames: [$X], verbs: [use]}
- {apiGroups: [$G], resources: [pcideviceclaims], resourceNames: [$X], verbs: [delete]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: team-a-gpu}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: team-a-gpu}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: team-b-dongle}
rules:
- {apiGroups: [$G], resources: [usbdevices], resourceNames: [$DONGLE], verbs: [use]}
- {apiGroups: [$G], resources: [usbdeviceclaims], resourceNames: [$DONGLE], verbs: [delete]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: team-b-dongle}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: team-b-dongle}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: bob}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: device-writer}
rules:
- {apiGroups: [$G], resources: ["*"], verbs: [get, list, create, update, patch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: dave-device-writer}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: device-writer}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: dave}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: erin-cluster-admin}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: erin}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: nora-device-admin}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: hostdevd-device-admin}
subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: nora}]
EOF

# TokenRequest bound to the Node objects: the tokens carry the node name, as the Pod-bound
# token of the DaemonSet's Pod on that node would.
TA=$(kubectl create token hostdevd-agent -n $NS --bound-object-kind Node --bound-object-name node-a)
TB=$(kubectl create token hostdevd-agent -n $NS --bound-object-kind Node --bound-object-name node-b)
TU=$(kubectl create token hostdevd-agent -n $NS)
TC=$(kubectl create token hostdevd-controller -n $NS)
LAPI=/apis/coordination.k8s.io/v1/namespaces/hostdevd-node-lease/leases
lease() { # name holder [resourceVersion]
    printf '{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"%s"%s},"spec":{"holderIdentity":"%s","leaseDurationSeconds":180}}' \
        "$1" "${3:+,\"resourceVersion\":\"$3\"}" "$2"
}
RAPI=/apis/resource.k8s.io/v1/resourceslices
slice() { # name node [pool] [driver]: a ResourceSlice as the agent of NODE makes it
    jq -cn --arg n "$1" --arg node "$2" --arg p "${3:-$2}" --arg d "${4:-vfio-pci.hostdevd.io}" \
        '{apiVersion: "resource.k8s.io/v1", kind: "ResourceSlice", metadata: {name: $n},
          spec: {driver: $d, nodeName: $node, pool: {name: $p, generation: 1, resourceSliceCount: 1}}}'
}
lease_rv() { kubectl get lease -n hostdevd-node-lease "$1" -o jsonpath='{.metadata.resourceVersion}'; }
expect_ok "whoami with node-a's token" kt "$TA" auth whoami -o json
expect_contains "node-a's agent token carries its node name" \
    "$(jq -c '.status.userInfo | {username, node: .extra["authentication.kubernetes.io/node-name"]}' <<<"$OUT")" \
    "\"username\":\"$AGENT\"" '"node":["node-a"]'
expect_ok "whoami with an unbound agent token" kt "$TU" auth whoami -o json
expect_contains "an unbound token carries no node name" \
    "$(jq -c '.status.userInfo | {username, node: .extra["authentication.kubernetes.io/node-name"]}' <<<"$OUT")" \
    "\"username\":\"$AGENT\"" '"node":null'

# A claim for the readiness checks below, made by the admin in its own name (valid whether or
# not the policies are in effect yet).
expect_ok "a claim for the readiness checks" \
    kubectl create -f - <<<"$(pci_claim node-b-000009000 0000:09:00.0 node-b admin)"

# Policies and RBAC bindings take effect asynchronously (the API server's informers): wait
# until each policy denies a known-bad request, the mutating policy fills in a userName, and
# the test users' bindings are visible, before any check counts. All requests are dry runs.
ready() {
    denied_by hostdevd-agent-devices \
        api "$TU" POST "$API/pcidevices?dryRun=All" "$(device_json PCIDevice node-a-0000010ff node-a)" &&
        denied_by hostdevd-agent-claims api "$TA" PATCH \
            "$API/pcideviceclaims/node-b-000009000/status?dryRun=All" '{"status":{"passthroughEnabled":true}}' &&
        denied_by hostdevd-agent-lease api "$TU" POST "$LAPI?dryRun=All" "$(lease node-c node-c)" &&
        denied_by hostdevd-agent-sriov api "$TA" POST "$API/sriovnetworkdevices?dryRun=All" \
            "$(sriov_json node-b-eth9 node-b node-b)" &&
        denied_by hostdevd-agent-vgpu api "$TA" POST "$API/vgpudevices?dryRun=All" \
            "$(vgpu_json node-b-mtty-9 node-b node-b)" &&
        denied_by hostdevd-agent-resourceslices api "$TA" POST "$RAPI?dryRun=All" "$(slice node-b-vfio-pci-0 node-b)" &&
        denied_by hostdevd-controller-claims api "$TC" PATCH \
            "$API/pcideviceclaims/node-b-000009000?dryRun=All" '{"metadata":{"labels":{"x":"y"}}}' &&
        denied_by hostdevd-agent-written kubectl --as dave create --dry-run=server -f - \
            <<<"$(device_json PCIDevice node-b-0000010ff node-b)" &&
        denied_by hostdevd-claim-use kubectl --context bob create --dry-run=server -f - \
            <<<"$(pci_claim $Y 0000:01:00.1 node-a)" &&
        denied_by hostdevd-claim-spec kubectl --context alice create --dry-run=server -f - \
            <<<"$(pci_claim $X 0000:01:00.0 node-a bob)" &&
        [ "$(kubectl --context alice create --dry-run=server -o jsonpath='{.spec.userName}' -f - \
            <<<"$(pci_claim $X 0000:01:00.0 node-a)")" = alice ] &&
        kubectl auth can-i use usbdevices.$G/$DONGLE --as bob &&
        kubectl auth can-i '*' '*' --as erin &&
        kubectl auth can-i patch sriovnetworkdevices.$G --as nora &&
        kubectl auth can-i patch vgpudevices.$G --as nora
}
if eventually 60 ready; then
    pass "the admission policies and the test users' bindings are in effect"
else
    fail "the admission policies and the test users' bindings are in effect" \
        "a readiness request did not give the expected answer within 60s"
    finish
fi

echo "--- agents write their own node's devices"
expect_ok "node-a's agent creates PCIDevice $X (label and ownerReference node-a)" \
    api "$TA" POST "$API/pcidevices" "$(device_json PCIDevice $X node-a node-a)"
expect_ok "node-a's agent writes its status" \
    api "$TA" PATCH "$API/pcidevices/$X/status" "$(pci_status node-a 0000:01:00.0)"
expect_ok "node-a's agent creates PCIDevice $Y" \
    api "$TA" POST "$API/pcidevices" "$(device_json PCIDevice $Y node-a node-a)"
expect_ok "node-a's agent writes its status" \
    api "$TA" PATCH "$API/pcidevices/$Y/status" "$(pci_status node-a 0000:01:00.1)"
expect_ok "node-a's agent creates USBDevice node-a-046d-c52b-1-2" \
    api "$TA" POST "$API/usbdevices" "$(device_json USBDevice node-a-046d-c52b-1-2 node-a node-a)"
expect_ok "node-a's agent writes its status" api "$TA" PATCH "$API/usbdevices/node-a-046d-c52b-1-2/status" \
    "$(usb_status node-a 046d c52b 1-2)"
expect_ok "node-a's agent patches an annotation of its device" \
    api "$TA" PATCH "$API/pcidevices/$X" '{"metadata":{"annotations":{"example.com/seen":"yes"}}}'
expect_ok "node-a's agent creates a device of its node" \
    api "$TA" POST "$API/pcidevices" "$(device_json PCIDevice node-a-000003000 node-a node-a)"
expect_ok "node-a's agent deletes it" api "$TA" DELETE "$API/pcidevices/node-a-000003000"
expect_ok "node-b's agent creates PCIDevice node-b-000002000 and its status" \
    create_with_status "$TB" pcidevices node-b-000002000 \
    "$(device_json PCIDevice node-b-000002000 node-b node-b)" "$(pci_status node-b 0000:02:00.0)"
expect_ok "node-b's agent creates USBDevice $DONGLE and its status" \
    create_with_status "$TB" usbdevices $DONGLE \
    "$(device_json USBDevice $DONGLE node-b node-b)" "$(usb_status node-b 0951 1666 2-1.4)"

echo "--- agents cannot write other nodes' devices"
OWN="may only write PCIDevices of its own node"
reject "node-a's agent cannot create a device of node-b" "$OWN, named \"node-a-...\": node-b-000001000 is not" \
    api "$TA" POST "$API/pcidevices" "$(device_json PCIDevice node-b-000001000 node-b node-b)"
reject "... nor one of its own name labelled for node-b" "may only write PCIDevices labelled nodename=node-a" \
    api "$TA" POST "$API/pcidevices" "$(device_json PCIDevice node-a-000001002 node-b)"
reject "... nor one named for node-b labelled for itself" "$OWN" \
    api "$TA" POST "$API/pcidevices" "$(device_json PCIDevice node-b-000001003 node-a)"
reject "... nor one owned by Node node-b" "may only make PCIDevices owned by Node node-a" \
    api "$TA" POST "$API/pcidevices" "$(device_json PCIDevice node-a-000001004 node-a node-b)"
reject "... nor pass off a device of node \"node-a-x\" (prefix of its name)" "$OWN" \
    api "$TA" POST "$API/pcidevices" "$(device_json PCIDevice node-a-x-000001000 node-a)"
reject "node-a's agent cannot write node-b's device status" "$OWN" \
    api "$TA" PATCH "$API/pcidevices/node-b-000002000/status" "$(pci_status node-b 0000:02:00.0)"
reject "... nor its labels" "$OWN" \
    api "$TA" PATCH "$API/pcidevices/node-b-000002000" '{"metadata":{"labels":{"x":"y"}}}'
reject "... nor delete it" "$OWN" api "$TA" DELETE "$API/pcidevices/node-b-000002000"
reject "node-a's agent cannot give its device to node-b" "labelled nodename=node-a (before and after the change)" \
    api "$TA" PATCH "$API/pcidevices/$X" '{"metadata":{"labels":{"nodename":"node-b"}}}'
reject "node-a's agent cannot create a USBDevice of node-b" "may only write USBDevices of its own node" \
    api "$TA" POST "$API/usbdevices" "$(device_json USBDevice node-b-0951-1666-2-1-5 node-b)"
reject "... nor write the status of node-b's USBDevice" "may only write USBDevices of its own node" \
    api "$TA" PATCH "$API/usbdevices/$DONGLE/status" "$(usb_status node-b 0951 1666 2-1.4)"
reject "an agent token without a node name cannot create devices" "only with a token that names its node" \
    api "$TU" POST "$API/pcidevices" "$(device_json PCIDevice node-a-000001005 node-a)"
reject "... nor write a device's status" "only with a token that names its node" \
    api "$TU" PATCH "$API/pcidevices/$X/status" "$(pci_status node-a 0000:01:00.0)"

echo "--- SR-IOV PFs: agents publish their own node's; numVFs and spec.vfs are the users'"
PA=node-a-enp1s0f0
PB=node-b-ens2f0
expect_ok "node-a's agent creates SRIOVNetworkDevice $PA (numVFs 2: the kernel's count)" \
    api "$TA" POST "$API/sriovnetworkdevices" "$(sriov_json $PA node-a node-a node-a 2)"
expect_ok "node-a's agent writes its status" api "$TA" PATCH "$API/sriovnetworkdevices/$PA/status" \
    '{"status":{"totalVFs":8,"numVFs":2,"status":"sriovNetworkDeviceEnabled","vfAddresses":["0000:3b:02.0","0000:3b:02.1"]}}'
expect_ok "node-a's agent patches an annotation of its PF" \
    api "$TA" PATCH "$API/sriovnetworkdevices/$PA" '{"metadata":{"annotations":{"example.com/seen":"yes"}}}'
expect_ok "node-a's agent creates a PF of its node" \
    api "$TA" POST "$API/sriovnetworkdevices" "$(sriov_json node-a-eth3 node-a node-a node-a)"
expect_ok "... and deletes it" api "$TA" DELETE "$API/sriovnetworkdevices/node-a-eth3"
expect_ok "node-b's agent creates SRIOVNetworkDevice $PB and its status" \
    create_with_status "$TB" sriovnetworkdevices $PB "$(sriov_json $PB node-b node-b node-b)" \
    '{"status":{"totalVFs":64,"numVFs":0,"status":"sriovNetworkDeviceDisabled"}}'
SOWN="the agent of node node-a may only write SRIOVNetworkDevices of its own node, with spec.nodeName node-a and label nodename=node-a (before and after the change)"
reject "node-a's agent cannot create a PF of node-b" "$SOWN; node-b-eth9 has spec.nodeName node-b and nodename=node-b" \
    api "$TA" POST "$API/sriovnetworkdevices" "$(sriov_json node-b-eth9 node-b node-b)"
reject "... nor one of node-b labelled for node-a" "$SOWN; node-a-eth9 has spec.nodeName node-b and nodename=node-a" \
    api "$TA" POST "$API/sriovnetworkdevices" "$(sriov_json node-a-eth9 node-b node-a)"
reject "... nor one of node-a labelled for node-b" "$SOWN; node-a-eth9 has spec.nodeName node-a and nodename=node-b" \
    api "$TA" POST "$API/sriovnetworkdevices" "$(sriov_json node-a-eth9 node-a node-b)"
reject "... nor one owned by Node node-b" "may only make SRIOVNetworkDevices owned by Node node-a" \
    api "$TA" POST "$API/sriovnetworkdevices" "$(sriov_json node-a-eth9 node-a node-a node-b)"
reject "node-a's agent cannot write node-b's PF status" "$SOWN; $PB has spec.nodeName node-b" \
    api "$TA" PATCH "$API/sriovnetworkdevices/$PB/status" '{"status":{"numVFs":0}}'
reject "... nor its labels" "$SOWN; $PB has spec.nodeName node-b" \
    api "$TA" PATCH "$API/sriovnetworkdevices/$PB" '{"metadata":{"labels":{"x":"y"}}}'
reject "... nor its numVFs" "$SOWN; $PB has spec.nodeName node-b" \
    api "$TA" PATCH "$API/sriovnetworkdevices/$PB" '{"spec":{"numVFs":1}}'
reject "... nor delete it" "$SOWN; $PB has spec.nodeName node-b" \
    api "$TA" DELETE "$API/sriovnetworkdevices/$PB"
reject "node-a's agent cannot give its PF to node-b (label)" "$SOWN" \
    api "$TA" PATCH "$API/sriovnetworkdevices/$PA" '{"metadata":{"labels":{"nodename":"node-b"}}}'
SUSER="the hostdevd agent may not change spec.numVFs or spec.vfs of SRIOVNetworkDevice $PA: users set them"
reject "node-a's agent cannot change spec.numVFs of its own PF" "$SUSER" \
    api "$TA" PATCH "$API/sriovnetworkdevices/$PA" '{"spec":{"numVFs":0}}'
reject "... nor spec.vfs" "$SUSER" \
    api "$TA" PATCH "$API/sriovnetworkdevices/$PA" '{"spec":{"vfs":[{"index":0,"vlan":7}]}}'
reject "an agent token without a node name writes no PF" "may write SRIOVNetworkDevices only with a token that names its node" \
    api "$TU" POST "$API/sriovnetworkdevices" "$(sriov_json node-a-eth9 node-a node-a)"
reject "... nor a PF's status" "only with a token that names its node" \
    api "$TU" PATCH "$API/sriovnetworkdevices/$PA/status" '{"status":{"numVFs":2}}'
expect_ok "nora (hostdevd-device-admin) sets numVFs of node-a's PF" \
    kubectl --as nora patch sriovnd $PA --type merge -p '{"spec":{"numVFs":4}}'
expect_ok "... and a VF's MAC address and VLAN" \
    kubectl --as nora patch sriovnd $PA --type merge -p '{"spec":{"vfs":[{"index":3,"mac":"02:00:00:00:00:03","vlan":10}]}}'
expect_contains "... which the PF's object keeps" \
    "$(kubectl get sriovnd $PA -o jsonpath='{.spec.numVFs} {.spec.vfs[0].mac}')" "4 02:00:00:00:00:03"
expect_ok "... and may edit it (update: get, then PUT)" \
    sriov_put nora $PA '.spec.numVFs = 3 | .spec.vfs = null'
reject "nora cannot write a PF's status (the agent's report)" \
    "User \"nora\" cannot update resource \"sriovnetworkdevices/status\"" \
    sriov_put nora $PA '.status.numVFs = 4' status
reject "... nor create a PF (the agents publish them)" "User \"nora\" cannot create resource \"sriovnetworkdevices\"" \
    kubectl --as nora create --dry-run=server -f - <<<"$(sriov_json node-a-eth9 node-a node-a)"
expect_contains "alice (hostdevd-device-user) reads the PFs" \
    "$(kubectl --context alice get sriovnetworkdevices -o name 2>&1)" "sriovnetworkdevice.$G/$PA" "sriovnetworkdevice.$G/$PB"
reject "... but cannot change numVFs" "User \"alice\" cannot patch resource \"sriovnetworkdevices\"" \
    kubectl --context alice patch sriovnd $PA --type merge -p '{"spec":{"numVFs":8}}'
reject "dave (write verbs on everything by mistake) still cannot create a PF" \
    "only the hostdevd agent (for its own node) and cluster admins may create sriovnetworkdevices; dave is neither" \
    kubectl --as dave create --dry-run=server -f - <<<"$(sriov_json node-b-eth9 node-b node-b)"
reject "... nor write its status" "may update sriovnetworkdevices/status; dave is neither" \
    kubectl --as dave patch sriovnd $PB --subresource status --type merge -p '{"status":{"totalVFs":128}}'

echo "--- mediated devices: agents publish their own node's slots; enabled, type and UUID are the users'"
VA=node-a-mtty-0
VB=node-b-mtty-0
expect_ok "node-a's agent creates VGPUDevice $VA (a free slot)" \
    api "$TA" POST "$API/vgpudevices" "$(vgpu_json $VA node-a node-a node-a)"
expect_ok "node-a's agent writes its status" api "$TA" PATCH "$API/vgpudevices/$VA/status" \
    '{"status":{"availableTypes":{"Dual port serial":"mtty-2"},"mdevTypes":[{"id":"mtty-2","available":12}]}}'
expect_ok "node-a's agent adds its finalizer" \
    api "$TA" PATCH "$API/vgpudevices/$VA" '{"metadata":{"finalizers":["devices.harvesterhci.io/mdev"]}}'
expect_ok "... and removes it" api "$TA" PATCH "$API/vgpudevices/$VA" '{"metadata":{"finalizers":null}}'
expect_ok "node-a's agent creates another slot" \
    api "$TA" POST "$API/vgpudevices" "$(vgpu_json node-a-mtty-1 node-a node-a node-a)"
expect_ok "... and deletes it" api "$TA" DELETE "$API/vgpudevices/node-a-mtty-1"
expect_ok "node-b's agent creates VGPUDevice $VB and its status" \
    create_with_status "$TB" vgpudevices $VB "$(vgpu_json $VB node-b node-b node-b)" \
    '{"status":{"vGPUStatus":""}}'
VOWN="the agent of node node-a may only write VGPUDevices of its own node, with spec.nodeName node-a and label nodename=node-a (before and after the change)"
reject "node-a's agent cannot create a slot of node-b" "$VOWN; node-b-mtty-9 has spec.nodeName node-b and nodename=node-b" \
    api "$TA" POST "$API/vgpudevices" "$(vgpu_json node-b-mtty-9 node-b node-b)"
reject "... nor one of node-b labelled for node-a" "$VOWN; node-a-mtty-9 has spec.nodeName node-b and nodename=node-a" \
    api "$TA" POST "$API/vgpudevices" "$(vgpu_json node-a-mtty-9 node-b node-a)"
reject "... nor one owned by Node node-b" "may only make VGPUDevices owned by Node node-a" \
    api "$TA" POST "$API/vgpudevices" "$(vgpu_json node-a-mtty-9 node-a node-a node-b)"
reject "node-a's agent cannot write node-b's status" "$VOWN; $VB has spec.nodeName node-b" \
    api "$TA" PATCH "$API/vgpudevices/$VB/status" '{"status":{"uuid":"83b8f4f2-509f-382f-3c1e-e6bfe0fa1001"}}'
reject "... nor enable it" "$VOWN; $VB has spec.nodeName node-b" \
    api "$TA" PATCH "$API/vgpudevices/$VB" '{"spec":{"enabled":true,"vGPUTypeName":"mtty-2"}}'
reject "... nor delete it" "$VOWN; $VB has spec.nodeName node-b" \
    api "$TA" DELETE "$API/vgpudevices/$VB"
reject "node-a's agent cannot give its slot to node-b (label)" "$VOWN" \
    api "$TA" PATCH "$API/vgpudevices/$VA" '{"metadata":{"labels":{"nodename":"node-b"}}}'
VUSER="the hostdevd agent may not change spec.enabled, spec.vGPUTypeName or spec.uuid of VGPUDevice $VA: users set them"
reject "node-a's agent cannot enable its own slot" "$VUSER" \
    api "$TA" PATCH "$API/vgpudevices/$VA" '{"spec":{"enabled":true,"vGPUTypeName":"mtty-2"}}'
reject "... nor set its spec.uuid" "$VUSER" \
    api "$TA" PATCH "$API/vgpudevices/$VA" '{"spec":{"uuid":"83b8f4f2-509f-382f-3c1e-e6bfe0fa1001"}}'
reject "an agent token without a node name writes no slot" "may write VGPUDevices only with a token that names its node" \
    api "$TU" POST "$API/vgpudevices" "$(vgpu_json node-a-mtty-9 node-a node-a)"
expect_ok "nora (hostdevd-device-admin) enables node-a's slot with a type" \
    kubectl --as nora patch vgpu $VA --type merge -p '{"spec":{"enabled":true,"vGPUTypeName":"mtty-2"}}'
reject "nora cannot write its status (the agent's report)" \
    "User \"nora\" cannot get resource \"vgpudevices/status\"" \
    kubectl --as nora patch vgpu $VA --subresource status --type merge -p '{"status":{"vGPUStatus":"vGPUConfigured"}}'
reject "... nor create a slot (the agents publish them)" "User \"nora\" cannot create resource \"vgpudevices\"" \
    kubectl --as nora create --dry-run=server -f - <<<"$(vgpu_json node-a-mtty-9 node-a node-a)"
expect_ok "... but may delete one (the agent removes its instance first)" \
    kubectl --as nora delete vgpu $VA --dry-run=server
expect_contains "alice (hostdevd-device-user) reads the slots" \
    "$(kubectl --context alice get vgpudevices -o name 2>&1)" "vgpudevice.$G/$VA" "vgpudevice.$G/$VB"
reject "... but cannot enable one" "User \"alice\" cannot patch resource \"vgpudevices\"" \
    kubectl --context alice patch vgpu $VB --type merge -p '{"spec":{"enabled":true,"vGPUTypeName":"mtty-2"}}'
reject "dave (write verbs on everything by mistake) still cannot create a slot" \
    "only the hostdevd agent (for its own node) and cluster admins may create vgpudevices; dave is neither" \
    kubectl --as dave create --dry-run=server -f - <<<"$(vgpu_json node-b-mtty-9 node-b node-b)"
reject "... nor write its status" "may update vgpudevices/status; dave is neither" \
    kubectl --as dave patch vgpu $VB --subresource status --type merge -p '{"status":{"vGPUStatus":"vGPUConfigured"}}'

echo "--- only agents and cluster admins write devices"
reject "a user granted write verbs on devices still cannot create one" \
    "only the hostdevd agent (for its own node) and cluster admins may create pcidevices; dave is neither" \
    kubectl --as dave create --dry-run=server -f - <<<"$(device_json PCIDevice node-b-000001006 node-b)"
reject "... nor change a device's status" "may update pcidevices/status; dave is neither" \
    kubectl --as dave patch pcidevice $X --subresource status --type merge \
    -p '{"status":{"description":"forged"}}'
reject "alice (no write verbs) cannot create a device" \
    "User \"alice\" cannot create resource \"pcidevices\"" \
    kubectl --context alice create --dry-run=server -f - <<<"$(device_json PCIDevice node-a-000001007 node-a)"
expect_ok "a cluster admin (ClusterRole cluster-admin) can" \
    kubectl --as erin create --dry-run=server -f - <<<"$(device_json PCIDevice node-b-000001006 node-b)"
expect_ok "the shipped example claims apply as they are for another user than their author" \
    kubectl --as erin create --dry-run=server -f examples/pcideviceclaims.yaml -f examples/usbdeviceclaims.yaml

echo "--- claims need the verb \"use\" on the device"
can_i "alice may use GPU X" yes use pcidevices.$G/$X --as alice --as-group developers
can_i "alice may not use GPU Y" no use pcidevices.$G/$Y --as alice --as-group developers
can_i "bob may use the USB dongle" yes use usbdevices.$G/$DONGLE --as bob --as-group developers
expect_ok "alice claims GPU X with her own userName (dry run)" \
    kubectl --context alice create --dry-run=server -f - <<<"$(pci_claim $X 0000:01:00.0 node-a alice)"
expect_ok "alice claims GPU X without a userName" \
    kubectl --context alice create -f - <<<"$(pci_claim $X 0000:01:00.0 node-a)"
expect_contains "the claim's userName is filled in with alice" \
    "$(kubectl get pcideviceclaim $X -o jsonpath='userName={.spec.userName}')" "userName=alice"
expect_contains "\"which claims are mine\": --field-selector spec.userName=alice" \
    "$(kubectl get pcideviceclaims --field-selector spec.userName=alice -o name 2>&1)" "pcideviceclaim.$G/$X"
[ -z "$(kubectl get pcideviceclaims --field-selector spec.userName=bob -o name 2>&1)" ] &&
    pass "... and none of bob's" || fail "no claim of bob's yet" "$(kubectl get pcideviceclaims --field-selector spec.userName=bob -o name 2>&1)"
reject "dave's write verbs do not let him write a claim's status" \
    "may update pcideviceclaims/status; dave is neither" \
    kubectl --as dave patch pcideviceclaim $X --subresource status --type merge \
    -p '{"status":{"passthroughEnabled":true}}'
reject "server-side apply of a claim needs patch, which device users are not granted (docs/access-control.md)" \
    "User \"alice\" cannot patch resource \"pcideviceclaims\"" \
    kubectl --context alice apply --server-side -f - <<<"$(pci_claim $X 0000:01:00.0 node-a)"
reject "alice cannot claim GPU Y" \
    "user alice may not claim pcidevices/$Y: claiming needs the verb \"use\" on pcidevices/$Y" \
    kubectl --context alice create -f - <<<"$(pci_claim $Y 0000:01:00.1 node-a)"
reject "bob cannot claim GPU X" \
    "user bob may not claim pcidevices/$X: claiming needs the verb \"use\" on pcidevices/$X" \
    kubectl --context bob create --dry-run=server -f - <<<"$(pci_claim $X 0000:01:00.0 node-a)"
reject "bob cannot claim GPU Y" "claiming needs the verb \"use\" on pcidevices/$Y" \
    kubectl --context bob create -f - <<<"$(pci_claim $Y 0000:01:00.1 node-a)"
reject "alice cannot claim the USB dongle" "claiming needs the verb \"use\" on usbdevices/$DONGLE" \
    kubectl --context alice create -f - <<<"$(usb_claim $DONGLE)"
expect_ok "bob claims the USB dongle with kubectl apply (client-side: a create, which device users may)" \
    kubectl --context bob apply -f - <<<"$(usb_claim $DONGLE)"
expect_contains "its userName is bob" \
    "$(kubectl get usbdeviceclaim $DONGLE -o jsonpath='userName={.spec.userName}')" "userName=bob"
expect_contains "USB claims select by spec.userName too" \
    "$(kubectl get usbdeviceclaims --field-selector spec.userName=bob -o name 2>&1)" "usbdeviceclaim.$G/$DONGLE"
reject "carol, with no grant at all, cannot claim" \
    "User \"carol\" cannot create resource \"pcideviceclaims\"" \
    kubectl --as carol create -f - <<<"$(pci_claim $Y 0000:01:00.1 node-a)"
reject "bob cannot delete alice's claim" "User \"bob\" cannot delete resource \"pcideviceclaims\"" \
    kubectl --context bob delete pcideviceclaim $X
expect_ok "alice may delete her claim (dry run)" kubectl --context alice delete pcideviceclaim $X --dry-run=server

echo "--- claims cannot lie about the user, nor change"
USERMSG='spec.userName must be the user who creates the claim, "alice", not "bob"'
reject "alice cannot claim in bob's name" "$USERMSG" \
    kubectl --context alice create --dry-run=server -f - <<<"$(pci_claim $X 0000:01:00.0 node-a bob)"
reject "bob cannot claim the dongle in alice's name" \
    'spec.userName must be the user who creates the claim, "bob", not "alice"' \
    kubectl --context bob create --dry-run=server -f - <<<"$(usb_claim $DONGLE alice)"
reject "a changed claim address is rejected" "spec is immutable" \
    kubectl patch pcideviceclaim $X --type merge -p '{"spec":{"address":"0000:01:00.1"}}'
reject "a changed claim userName is rejected" "spec is immutable" \
    kubectl patch pcideviceclaim $X --type merge -p '{"spec":{"userName":"bob"}}'
reject "a changed USB claim userName is rejected" "spec is immutable" \
    kubectl patch usbdeviceclaim $DONGLE --type merge -p '{"spec":{"userName":"alice"}}'
reject "a USBDeviceClaim must be named like a USBDevice" "is not such a name" \
    kubectl create --dry-run=server -f - <<<"$(usb_claim my-dongle)"
reject "a claim cannot be owned by another device" "may only be owned by the PCIDevice it claims, $Y" \
    kubectl create --dry-run=server -f - <<<"$(pci_claim $Y 0000:01:00.1 node-a | sed \
        "s|^metadata: {name: $Y}|metadata: {name: $Y, ownerReferences: [{apiVersion: $G/v1beta1, kind: PCIDevice, name: $X, uid: 0d0a0a0a-0000-4000-8000-000000000001}]}|")"

echo "--- agents act only on their own node's claims"
expect_ok "admin claims node-b's GPU" kubectl create -f - <<<"$(pci_claim node-b-000002000 0000:02:00.0 node-b)"
expect_ok "admin claims node-a's USB device" kubectl create -f - <<<"$(usb_claim node-a-046d-c52b-1-2)"
expect_ok "node-a's agent writes the status of alice's claim" \
    api "$TA" PATCH "$API/pcideviceclaims/$X/status" '{"status":{"passthroughEnabled":true}}'
expect_ok "node-a's agent adds its finalizer to alice's claim" \
    api "$TA" PATCH "$API/pcideviceclaims/$X" '{"metadata":{"finalizers":["devices.harvesterhci.io/restore-driver"]}}'
expect_ok "node-a's agent removes its finalizer by update (PUT)" \
    put_claim "$TA" $X 'del(.metadata.finalizers)'
expect_ok "node-a's agent adds it back by update (PUT)" \
    put_claim "$TA" $X '.metadata.finalizers = ["devices.harvesterhci.io/restore-driver"]'
reject "node-a's agent cannot label a claim by update" \
    "may only add or remove its finalizer devices.harvesterhci.io/restore-driver" \
    put_claim "$TA" $X '.metadata.labels = {"x": "y"}'
expect_ok "node-a's agent writes the status of its USB claim" \
    api "$TA" PATCH "$API/usbdeviceclaims/node-a-046d-c52b-1-2/status" '{"status":{"nodeName":"node-a"}}'
expect_ok "node-a's agent adds its finalizer to its USB claim" \
    api "$TA" PATCH "$API/usbdeviceclaims/node-a-046d-c52b-1-2" \
    '{"metadata":{"finalizers":["devices.harvesterhci.io/release-usb"]}}'
expect_ok "node-a's agent removes it" \
    api "$TA" PATCH "$API/usbdeviceclaims/node-a-046d-c52b-1-2" '{"metadata":{"finalizers":null}}'
expect_ok "node-b's agent writes the status of bob's USB claim" \
    api "$TB" PATCH "$API/usbdeviceclaims/$DONGLE/status" '{"status":{"nodeName":"node-b"}}'
reject "node-a's agent cannot change a claim's spec" "spec is immutable" \
    api "$TA" PATCH "$API/pcideviceclaims/$X" '{"spec":{"userName":"mallory"}}'
FIN="may only add or remove its finalizer devices.harvesterhci.io/restore-driver"
reject "... nor label a claim" "$FIN" \
    api "$TA" PATCH "$API/pcideviceclaims/$X" '{"metadata":{"labels":{"x":"y"}}}'
reject "... nor add another finalizer" "$FIN" \
    api "$TA" PATCH "$API/pcideviceclaims/$X" \
    '{"metadata":{"finalizers":["devices.harvesterhci.io/restore-driver","example.com/keep"]}}'
reject "node-a's agent cannot write the status of node-b's claim" \
    "may only write PCIDeviceClaims of its own node; node-b-000002000 is for node-b" \
    api "$TA" PATCH "$API/pcideviceclaims/node-b-000002000/status" '{"status":{"passthroughEnabled":true}}'
reject "... nor put its finalizer on it" "node-b-000002000 is for node-b" \
    api "$TA" PATCH "$API/pcideviceclaims/node-b-000002000" \
    '{"metadata":{"finalizers":["devices.harvesterhci.io/restore-driver"]}}'
reject "... nor write the status of node-b's USB claim" \
    "may only write USBDeviceClaims of its own node; $DONGLE is for node-b" \
    api "$TA" PATCH "$API/usbdeviceclaims/$DONGLE/status" '{"status":{"nodeName":"node-a"}}'
reject "... nor move its own USB claim to node-b" \
    "the status.nodeName of USBDeviceClaim node-a-046d-c52b-1-2 must be node-a, the node in its name" \
    api "$TA" PATCH "$API/usbdeviceclaims/node-a-046d-c52b-1-2/status" '{"status":{"nodeName":"node-b"}}'
reject "an agent cannot create a claim" "cannot create resource \"pcideviceclaims\"" \
    api "$TA" POST "$API/pcideviceclaims" "$(kubectl create --dry-run=client -o json -f - \
        <<<"$(pci_claim $Y 0000:01:00.1 node-a)")"
reject "an agent cannot delete a claim" "cannot delete resource \"pcideviceclaims\"" \
    api "$TA" DELETE "$API/pcideviceclaims/$X"
reject "an agent token without a node name cannot write a claim's status" \
    "only with a token that names its node" \
    api "$TU" PATCH "$API/pcideviceclaims/$X/status" '{"status":{"passthroughEnabled":false}}'

echo "--- each agent keeps its own heartbeat"
expect_ok "node-a's agent creates its heartbeat Lease" api "$TA" POST "$LAPI" "$(lease node-a node-a)"
expect_ok "... and gives it up (empty holder)" api "$TA" PUT "$LAPI/node-a" "$(lease node-a "" "$(lease_rv node-a)")"
reject "node-a's agent cannot write node-b's heartbeat" "may only write its heartbeat, the Lease named like its node (node-a)" \
    api "$TA" POST "$LAPI" "$(lease node-b node-b)"
reject "... nor hold its own for another node" "held by it or no" \
    api "$TA" PUT "$LAPI/node-a" "$(lease node-a node-b "$(lease_rv node-a)")"
reject "... nor make another Node its owner" "owned by its Node only" \
    api "$TA" PUT "$LAPI/node-a" "$(lease node-a node-a "$(lease_rv node-a)" | jq -c '.metadata.ownerReferences = [{"apiVersion":"v1","kind":"Node","name":"node-b","uid":"00000000-0000-0000-0000-000000000001"}]')"
reject "... nor delete it" "cannot delete resource \"leases\"" api "$TA" DELETE "$LAPI/node-a"
reject "an agent token without a node name writes no heartbeat" "its token names none" \
    api "$TU" POST "$LAPI" "$(lease node-c node-c)"

echo "--- each agent publishes only its own node's DRA ResourceSlices (dry runs)"
expect_ok "node-a's agent creates its pool's slice" api "$TA" POST "$RAPI?dryRun=All" "$(slice node-a-vfio-pci-0 node-a)"
expect_ok "node-b's agent creates its own" api "$TB" POST "$RAPI?dryRun=All" "$(slice node-b-vfio-pci-3 node-b)"
reject "node-a's agent cannot create node-b's slice" \
    "may only write ResourceSlices named \"node-a-vfio-pci-<index>\": node-b-vfio-pci-0 is not" \
    api "$TA" POST "$RAPI?dryRun=All" "$(slice node-b-vfio-pci-0 node-b)"
reject "... nor one of its name for node-b" "may only write ResourceSlices with spec.nodeName node-a" \
    api "$TA" POST "$RAPI?dryRun=All" "$(slice node-a-vfio-pci-0 node-b node-a)"
reject "... nor one in node-b's pool" "spec.pool.name node-a (before and after the change)" \
    api "$TA" POST "$RAPI?dryRun=All" "$(slice node-a-vfio-pci-0 node-a node-b)"
reject "... nor one of another driver" "spec.driver vfio-pci.hostdevd.io" \
    api "$TA" POST "$RAPI?dryRun=All" "$(slice node-a-vfio-pci-0 node-a node-a gpu.example.com)"
reject "an agent token without a node name publishes no slice" "only with a token that names its node" \
    api "$TU" POST "$RAPI?dryRun=All" "$(slice node-a-vfio-pci-0 node-a)"

echo "--- the controller only removes claim finalizers and says why no agent serves a claim"
reject "the controller cannot label a claim" "the hostdevd controller may only remove finalizers of claims" \
    kt "$TC" patch pcideviceclaim $X --type merge -p '{"metadata":{"labels":{"x":"y"}}}'
reject "... nor add a finalizer" "may only remove finalizers of claims" \
    kt "$TC" patch pcideviceclaim $X --type merge \
    -p '{"metadata":{"finalizers":["devices.harvesterhci.io/restore-driver","example.com/keep"]}}'
reject "... nor write the agent's facts in a claim's status" "may only remove finalizers of claims" \
    api "$TC" PATCH "$API/pcideviceclaims/$X/status" '{"status":{"kernelDriverToUnbind":"evil"}}'
cond() { # status reason
    printf '{"status":{"conditions":[{"type":"Ready","status":"%s","reason":"%s","message":"m","lastTransitionTime":"2026-11-23T07:00:00Z"}]}}' "$1" "$2"
}
reject "... nor make a claim Ready" "or set their Ready condition to False for NodeNotFound" \
    api "$TC" PATCH "$API/pcideviceclaims/$X/status" "$(cond True Bound)"
reject "... nor give a claim another reason" "may only remove finalizers of claims" \
    api "$TC" PATCH "$API/pcideviceclaims/$X/status" "$(cond False IOMMUGroupUnsafe)"
expect_ok "the controller sets Ready=False NodeNotFound on a claim" \
    api "$TC" PATCH "$API/pcideviceclaims/$X/status?dryRun=All" "$(cond False NodeNotFound)"
expect_ok "... and AgentNotRunning on a USB claim" \
    api "$TC" PATCH "$API/usbdeviceclaims/$DONGLE/status?dryRun=All" "$(cond False AgentNotRunning)"
reject "... nor create a device" "cannot create resource \"pcidevices\"" \
    kt "$TC" create --dry-run=server -f - <<<"$(device_json PCIDevice node-a-000001008 node-a)"
expect_ok "the controller removes the agent's finalizer from a claim (its node gone)" \
    kt "$TC" patch pcideviceclaim $X --type merge -p '{"metadata":{"finalizers":null}}'
expect_ok "the controller patches the KubeVirt CR's permittedHostDevices (dry run)" \
    kt "$TC" -n kubevirt patch kubevirt kubevirt --type merge --dry-run=server \
    -p '{"spec":{"configuration":{"permittedHostDevices":{"pciHostDevices":[{"pciVendorSelector":"10de:2236","resourceName":"nvidia.com/GA102GL_A10"}]}}}}'
reject "an agent cannot read the KubeVirt CR" "cannot get resource \"kubevirts\"" \
    kt "$TA" -n kubevirt get kubevirt kubevirt
reject "... nor patch it" "cannot patch resource \"kubevirts\"" \
    api "$TA" PATCH /apis/kubevirt.io/v1/namespaces/kubevirt/kubevirts/kubevirt '{"spec":{}}'

echo "--- what the service accounts may do (kubectl auth can-i)"
can_i "agent: no get on the KubeVirt CR" no get kubevirts.kubevirt.io -n kubevirt --as "$AGENT"
can_i "agent: no patch on the KubeVirt CR" no patch kubevirts.kubevirt.io -n kubevirt --as "$AGENT"
can_i "agent: no update on the KubeVirt CR" no update kubevirts.kubevirt.io -n kubevirt --as "$AGENT"
can_i "agent: creates PCIDevices" yes create pcidevices.$G --as "$AGENT"
can_i "agent: patches USBDevice status" yes patch usbdevices.$G --subresource status --as "$AGENT"
can_i "agent: no create on claims" no create pcideviceclaims.$G --as "$AGENT"
can_i "agent: creates SRIOVNetworkDevices" yes create sriovnetworkdevices.$G --as "$AGENT"
can_i "agent: deletes SRIOVNetworkDevices" yes delete sriovnetworkdevices.$G --as "$AGENT"
can_i "agent: patches SRIOVNetworkDevice status" yes patch sriovnetworkdevices.$G --subresource status --as "$AGENT"
can_i "agent: no PUT of SRIOVNetworkDevices" no update sriovnetworkdevices.$G --as "$AGENT"
can_i "device admin: changes numVFs (patch)" yes patch sriovnetworkdevices.$G --as nora
can_i "device admin: ... and update" yes update sriovnetworkdevices.$G --as nora
can_i "device admin: no delete of PFs" no delete sriovnetworkdevices.$G --as nora
can_i "device admin: no patch of their status" no patch sriovnetworkdevices.$G --subresource status --as nora
can_i "device admin: no claims" no create pcideviceclaims.$G --as nora
can_i "device user: reads PFs" yes list sriovnetworkdevices.$G --as alice --as-group developers
can_i "device user: no numVFs" no patch sriovnetworkdevices.$G --as alice --as-group developers
can_i "controller: no patch on SRIOVNetworkDevices" no patch sriovnetworkdevices.$G --as "$CONTROLLER"
can_i "agent: no delete on claims" no delete usbdeviceclaims.$G --as "$AGENT"
can_i "agent: reads Nodes" yes get nodes --as "$AGENT"
can_i "agent: no patch on Nodes" no patch nodes --as "$AGENT"
can_i "agent: creates Events in default" yes create events.events.k8s.io -n default --as "$AGENT"
can_i "agent: no Events elsewhere" no create events -n kube-system --as "$AGENT"
can_i "agent: creates ResourceSlices" yes create resourceslices.resource.k8s.io --as "$AGENT"
can_i "agent: deletes ResourceSlices" yes delete resourceslices.resource.k8s.io --as "$AGENT"
can_i "agent: no PUT of ResourceSlices" no update resourceslices.resource.k8s.io --as "$AGENT"
can_i "agent: no ResourceClaims" no update resourceclaims.resource.k8s.io -A --as "$AGENT"
can_i "controller: no ResourceSlices" no create resourceslices.resource.k8s.io --as "$CONTROLLER"
can_i "agent: no Secrets" no list secrets -A --as "$AGENT"
can_i "agent: no Pods" no create pods -n $NS --as "$AGENT"
can_i "agent: no Leases" no update leases.coordination.k8s.io -n $NS --as "$AGENT"
can_i "agent: its heartbeat" yes update leases.coordination.k8s.io -n hostdevd-node-lease --as "$AGENT"
can_i "agent: does not delete heartbeats" no delete leases.coordination.k8s.io -n hostdevd-node-lease --as "$AGENT"
can_i "controller: patches the KubeVirt CR" yes patch kubevirts.kubevirt.io -n kubevirt --as "$CONTROLLER"
can_i "controller: no create on the KubeVirt CR" no create kubevirts.kubevirt.io -n kubevirt --as "$CONTROLLER"
can_i "controller: no create on PCIDevices" no create pcidevices.$G --as "$CONTROLLER"
can_i "controller: no patch on PCIDevices" no patch pcidevices.$G --as "$CONTROLLER"
can_i "controller: no patch on PCIDevice status" no patch pcidevices.$G --subresource status --as "$CONTROLLER"
can_i "controller: no delete on USBDevices" no delete usbdevices.$G --as "$CONTROLLER"
can_i "controller: no update on USBDevices" no update usbdevices.$G --as "$CONTROLLER"
can_i "controller: lists devices" yes list pcidevices.$G --as "$CONTROLLER"
can_i "controller: patches claims (finalizers)" yes patch pcideviceclaims.$G --as "$CONTROLLER"
can_i "controller: claim status (NodeNotFound, AgentNotRunning)" yes patch pcideviceclaims.$G --subresource status --as "$CONTROLLER"
can_i "controller: reads the agents' heartbeats" yes watch leases.coordination.k8s.io -n hostdevd-node-lease --as "$CONTROLLER"
can_i "controller: writes no heartbeat" no update leases.coordination.k8s.io -n hostdevd-node-lease --as "$CONTROLLER"
can_i "controller: Events in default" yes create events.events.k8s.io -n default --as "$CONTROLLER"
can_i "controller: no create on claims" no create usbdeviceclaims.$G --as "$CONTROLLER"
can_i "controller: its Lease" yes update leases.coordination.k8s.io -n $NS --as "$CONTROLLER"
can_i "controller: no Lease elsewhere" no update leases.coordination.k8s.io -n kube-system --as "$CONTROLLER"
can_i "controller: no Secrets" no get secrets -n $NS --as "$CONTROLLER"

if [ "$REJECTS" -ge 20 ]; then
    pass "$REJECTS bad requests checked, each rejected with its message"
else
    fail "at least 20 bad requests checked" "only $REJECTS"
fi

echo "--- KubeVirt's VMI schema (once the policies know the kind)"
vmi() { # hostDevices-json
    jq -cn --argjson h "$1" '{apiVersion: "kubevirt.io/v1", kind: "VirtualMachineInstance",
        metadata: {name: "vmi", namespace: "kubevirt"},
        spec: {domain: {devices: {hostDevices: $h}}}}'
}
vmi_gpu() { kubectl create --dry-run=server -f - <<<"$(vmi '[{"name":"gpu1","deviceName":"nvidia.com/GA102GL_A10"}]')"; }
# The KubeVirt CR is the parameter of hostdevd-vm-use (manifests/policies-kubevirt.yaml),
# applied before KubeVirt's CRDs existed: the API server resolves the new kind with its next
# discovery refresh (about 20 s) and refuses VMIs until then (failurePolicy Fail); checked last,
# so that the wait overlaps the rest of the suite.
eventually 60 vmi_gpu
expect_ok "a VirtualMachineInstance asking for a host device passes KubeVirt's schema" vmi_gpu
reject "... one without a name does not" "spec.domain.devices.hostDevices[0].name: Required value" \
    kubectl create --dry-run=server -f - <<<"$(vmi '[{"deviceName":"nvidia.com/GA102GL_A10"}]')"
finish
