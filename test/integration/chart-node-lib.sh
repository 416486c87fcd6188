# shellcheck shell=bash
# test/integration/chart-node-lib.sh - the node the chart tests run on (test_chart_node.sh,
# test_chart_sockets.sh), sourced after test/integration/lib.sh: chart_node_up builds or finds
# helm, containerd and `make image`'s archive, starts the control plane with kube-scheduler
# plus a second kube-controller-manager with the workload controllers (DaemonSet, Deployment, Job,
# EndpointSlice,
# ReplicaSet, node lifecycle, root CA publisher) that the shared one does not run, kubelet in
# hack/kubelet.sh's containerd mode, imports the image with ctr (pull policy Never: no
# registry), applies KubeVirt's CRD and CR and makes the namespace $NS (privileged). Sets HELM,
# TAG, ARCHIVE, CTR_CMD, T_ALL; the helpers below print what the checks need. Needs root.
# shellcheck disable=SC2034 # NS, WAIT and T_ALL are the sourcing tests'
NS=hostdevd-system
WAIT=${CHART_NODE_WAIT:-240}
ms() { date +%s%N; }
elapsed() { echo $((($(date +%s%N) - $1) / 1000000)); }
T_ALL=$(ms)
helm() { GOGC=off GOMEMLIMIT=512MiB "$HELM" "$@" 2> >(grep -v 'found symbolic link in path' >&2); }

chart_node_up() {
    local t0 out
    echo "--- tools: helm, containerd, the image"
    HELM=$("$ROOT/hack/helm-build.sh") || { fail "hack/helm-build.sh builds helm"; finish; }
    t0=$(ms)
    "$ROOT/hack/containerd-build.sh" >/dev/null || { fail "hack/containerd-build.sh builds containerd"; finish; }
    echo "  containerd ready in $(elapsed "$t0") ms (built once, then cached)"
    out=$(mktemp "${TMPDIR:-/tmp}/hostdevd-chart-node-image.XXXXXX")
    make -s image ARCH=amd64 >"$out" 2>&1 || { fail "make image" "$(tail -5 "$out")"; rm -f "$out"; finish; }
    ARCHIVE=$(sed -n 's/^image: \(build\/image\/hostdevd-.*\.tar\) (.*/\1/p' "$out")
    rm -f "$out"
    TAG=${ARCHIVE#build/image/hostdevd-}
    TAG=${TAG%.tar}
    [ -f "$ARCHIVE" ] || { fail "make image names its archive"; finish; }

    cluster_start --with-scheduler
    kube-controller-manager --kubeconfig "$TEST_DIR/cluster/controller-manager.kubeconfig" \
        --controllers daemonset-controller,deployment-controller,replicaset-controller,job-controller,endpointslice-controller,node-lifecycle-controller,root-ca-certificate-publisher-controller \
        --secure-port 0 --leader-elect=false --v=1 >"$TEST_DIR/workload-controllers.log" 2>&1 </dev/null &
    track $!
    disown # (killed by cluster_stop; no "Killed" notice)
    KUBELET_RUNTIME=containerd kubelet_start
    echo "  node $KUBELET_NODE Ready on $(kubectl get node "$KUBELET_NODE" -o jsonpath='{.status.nodeInfo.containerRuntimeVersion}')"
    read -r -a CTR_CMD <<<"$CTR"
    install_kubevirt "{}" || fail "KubeVirt's CRD and CR"
    # CHART_NODE_USER_STEPS=1: the test imports the image and makes the namespace itself, with
    # the words of docs/real-node.md.
    [ -z "${CHART_NODE_USER_STEPS:-}" ] || return 0
    expect_ok "ctr imports $ARCHIVE into containerd's k8s.io namespace" "${CTR_CMD[@]}" images import "$ARCHIVE"
    expect_contains "... as localhost/hostdevd:$TAG" "$("${CTR_CMD[@]}" images ls -q 2>/dev/null)" "localhost/hostdevd:$TAG"
    kubectl create namespace "$NS" >/dev/null
    kubectl label namespace "$NS" pod-security.kubernetes.io/enforce=privileged >/dev/null
}

agent_pod() { kubectl -n "$NS" get pods -l app.kubernetes.io/name=hostdevd-agent -o jsonpath='{.items[0].metadata.name}'; }
ready_pods() { # app name -> names of Ready pods
    kubectl -n "$NS" get pods -l "app.kubernetes.io/name=$1" -o json |
        jq -r '.items[] | select(.metadata.deletionTimestamp == null) | select(any(.status.conditions[]?; .type == "Ready" and .status == "True")) | .metadata.name'
}
agent_ready() { [ -n "$(ready_pods hostdevd-agent)" ]; }
controller_ready() { [ -n "$(ready_pods hostdevd-controller)" ]; }
pod_state() { kubectl -n "$NS" get pods -o wide; kubectl -n "$NS" get events --sort-by=.lastTimestamp | tail -15; }
# The agent's sockets left in kubelet's directories.
sockets() { find "$DEVICE_PLUGIN_DIR" "$PLUGINS_REGISTRY_DIR" "$KUBELET_ROOT/plugins" -type s ! -name kubelet.sock 2>/dev/null; }
no_sockets() { [ -z "$(sockets)" ]; }
