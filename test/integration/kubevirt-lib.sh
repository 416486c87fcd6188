# shellcheck shell=bash disable=SC2034 # variables set here are for the tests
# test/integration/kubevirt-lib.sh - KubeVirt v1.9.0's own virt-controller against the private
# control plane (sourced after test/integration/lib.sh or test/e2e/lib.sh, with the control plane
# up): KubeVirt's CRDs and virt-controller's RBAC as virt-operator makes them (both generated from
# the module by hack/kubevirt-crds.sh), the KubeVirt CR, and virt-controller built from the module
# (hack/kubevirt-build.sh) running on the host as the ServiceAccount kubevirt/kubevirt-controller
# (a token of it, as its Pod would have). Used by test_kvrender.sh's way of running it and by
# test/long/test_kvchain.sh.
#
#   kv_install                       KubeVirt's CRDs (Established), namespace kubevirt,
#                                    virt-controller's ServiceAccount, roles and bindings
#   kv_cr CONFIGURATION [ANNOTATIONS]  the KubeVirt CR kubevirt/kubevirt with that
#                                    spec.configuration and metadata.annotations (JSON), its status phase Deployed (as
#                                    virt-operator sets it; virt-controller ignores a CR without)
#   kv_controller_start [LAUNCHER_IMAGE]  virt-controller as kubevirt/kubevirt-controller (log in
#                                    $TEST_DIR/virt-controller.log; KV_CONTROLLER_PID), rendering
#                                    launcher Pods with LAUNCHER_IMAGE (default
#                                    localhost/virt-launcher:v1.9.0)
#   kv_controller_leads              it holds the virt-controller Lease
#   kv_controller_stop               SIGTERM, waited for
#   kv_launcher_pod VMI [NAMESPACE]  the VMI's virt-launcher Pod as JSON (kubevirt.io/created-by)
#   kv_vmi_json NAME HOSTDEVICES-JSON [EXTRA-SPEC-JSON]  a VMI as virt-api's defaults would
#                                    leave it (no virt-api runs): q35, one vCPU, 128 MiB, no pod
#                                    network, the host devices given; EXTRA-SPEC-JSON merged
#                                    into spec.domain.devices ... (jq's *, deep)
#
# KUBEVIRT_BIN names the directory of virt-controller (default: hack/kubevirt-build.sh's).

KV_CONTROLLER_PID=""
KV_CONTROLLER_SA=system:serviceaccount:kubevirt:kubevirt-controller

kv_install() {
    local crds files
    crds=$("$ROOT/hack/kubevirt-crds.sh") || return 1
    files=("$crds"/*.yaml "$crds"/virt-controller/*.*.yaml)
    kubectl create "${files[@]/#/-f}" >/dev/null || return 1
    eventually 60 kubectl wait --for condition=Established --timeout 10s "${files[@]/#/-f}" || return 1
    kubectl create namespace kubevirt >/dev/null || return 1
    kubectl create -f "$crds/virt-controller/kubevirt-controller-rbac.yaml" >/dev/null
}

kv_cr() { # configuration [annotations]
    local a=${2:-}
    [ -n "$a" ] || a='{}'
    jq -n --argjson c "$1" --argjson a "$a" \
        '{apiVersion: "kubevirt.io/v1", kind: "KubeVirt",
          metadata: {name: "kubevirt", namespace: "kubevirt", annotations: $a},
          spec: {configuration: $c}}' | kubectl create -f - >/dev/null || return 1
    kubectl patch kubevirt -n kubevirt kubevirt --subresource status --type merge \
        -p '{"status":{"phase":"Deployed"}}' >/dev/null
}

kv_controller_start() { # [launcher-image]
    local image=${1:-localhost/virt-launcher:v1.9.0}
    if [ -z "${KUBEVIRT_BIN:-}" ]; then
        KUBEVIRT_BIN=$("$ROOT/hack/kubevirt-build.sh" virt-controller) || return 1
    fi
    [ -x "$KUBEVIRT_BIN/virt-controller" ] || return 1
    [ -f "$TEST_DIR/vc.kubeconfig" ] || sa_kubeconfig kubevirt kubevirt-controller "$TEST_DIR/vc.kubeconfig" || return 1
    # (The namespace is KubeVirt's default, kubevirt: no service account files on the host.)
    "$KUBEVIRT_BIN/virt-controller" --kubeconfig "$TEST_DIR/vc.kubeconfig" --listen 127.0.0.1 \
        --port "$(free_port)" --launcher-image "$image" \
        --exporter-image localhost/virt-exportserver:v1.9.0 \
        --node-topology-update-period 1h >>"$TEST_DIR/virt-controller.log" 2>&1 &
    KV_CONTROLLER_PID=$!
}

kv_controller_leads() {
    kubectl get lease -n kubevirt virt-controller -o jsonpath='{.spec.holderIdentity}' | grep -q .
}

kv_controller_stop() {
    [ -n "$KV_CONTROLLER_PID" ] || return 0
    kill -TERM "$KV_CONTROLLER_PID" 2>/dev/null
    wait "$KV_CONTROLLER_PID" 2>/dev/null
    KV_CONTROLLER_PID=""
}

kv_launcher_pod() { # vmi [namespace]
    local ns=${2:-default} uid
    uid=$(kubectl get vmi -n "$ns" "$1" -o jsonpath='{.metadata.uid}') && [ -n "$uid" ] || return 1
    kubectl get pods -n "$ns" -l "kubevirt.io/created-by=$uid" -o json | jq -ce '.items[0] // empty'
}

kv_vmi_json() { # name hostDevices-json [extra-spec-json]
    local x=${3:-}
    [ -n "$x" ] || x='{}'
    jq -cn --arg n "$1" --argjson h "$2" --argjson x "$x" '{apiVersion: "kubevirt.io/v1",
        kind: "VirtualMachineInstance", metadata: {name: $n, namespace: "default"},
        spec: ({terminationGracePeriodSeconds: 0,
                domain: {machine: {type: "q35"}, cpu: {cores: 1, sockets: 1, threads: 1},
                         memory: {guest: "128Mi"}, resources: {requests: {memory: "128Mi"}},
                         devices: {autoattachPodInterface: false, hostDevices: $h}}} * $x)}'
}
