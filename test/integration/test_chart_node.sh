#!/usr/bin/env bash
# test/long/test_chart_node.sh - the chart on a real node (`make test-long`; issue 30): kubelet
# with containerd 2.4.2 and runc (hack/kubelet.sh's containerd mode) runs the agent DaemonSet and
# the controller Deployment of `helm install`, from the image `make image` built and `ctr`
# imported (pull policy Never: no registry). The control plane of hack/cluster.sh with
# kube-scheduler, plus a second kube-controller-manager with the workload controllers
# (DaemonSet, Deployment, ReplicaSet, node lifecycle, root CA publisher) that the shared one does
# not run. Checks: the agent's pod Running and Ready by its own probes, publishing this machine's
# PCI functions from the host's /sys (`kubectl get pcidevices` = `lspci -D`, function for
# function; nothing is ever claimed), its metrics served through the pod; the controller's two
# replicas Running, one Ready holding the Lease, the other standing by; helm upgrade with a
# changed value rolls the agent without a write to a device (audit log); helm uninstall leaves
# the CRDs and the devices, no hostdevd pod and no agent socket in kubelet's directories.
# Needs root; skipped otherwise. Prints the times (helm install -> pods Ready -> devices).
# shellcheck disable=SC2317 # the small functions run through expect_ok and eventually
# test-lock: kubelet (the kubelet harness: its sysctls are global; see hack/run-tests.sh)
SUITE=chart-node
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=test/integration/chart-node-lib.sh
. "$(dirname "$0")/chart-node-lib.sh"
# shellcheck source=test/integration/chart-metrics-lib.sh
. "$(dirname "$0")/chart-metrics-lib.sh"
cd "$ROOT" || exit 1

if [ "$(id -u)" -ne 0 ]; then
    echo "  SKIP chart on a containerd node: needs root (namespaces, mounts, containerd)"
    finish
fi

# /lib/modules: the chart's agent mounts it (DirectoryOrCreate); on a machine without one, what
# kubelet creates for it is removed again at the end.
MODULES_EXISTED=yes
[ -e /lib/modules ] || MODULES_EXISTED=

CHART_NODE_USER_STEPS=1 chart_node_up

# docs/real-node.md's steps, to the letter (hack/doc-blocks.py reads them out of the page): ctr is
# this node's (its containerd's address), the archive is make image's, helm the one built here.
doc_run() { # heading
    local line cmd
    while IFS= read -r line; do
        [ -n "$line" ] || continue
        cmd=${line//ctr -n k8s.io /${CTR} }
        cmd=${cmd//hostdevd-<version>.tar/$ARCHIVE}
        expect_ok "docs/real-node.md, \"$1\": $line" eval "$cmd"
        [ -z "$OUT" ] || printf '%s\n' "$OUT" | sed 's/^/       > /' | head -12
    done < <("$ROOT/hack/doc-blocks.py" docs/real-node.md "$1" || fail "docs/real-node.md has a block \"$1\"")
}
echo "--- docs/real-node.md: the image without a registry, then helm install"
doc_run "1. The image, without a registry"
expect_contains "... containerd has localhost/hostdevd:$TAG" "$("${CTR_CMD[@]}" images ls -q 2>/dev/null)" "localhost/hostdevd:$TAG"
T_INSTALL=$(ms)
# (--wait: every Deployment Available and the DaemonSet's pods Ready; a controller whose standby
# is never Ready would never be Available: helm would time out)
doc_run "2. Install"
T_HELM=$(elapsed "$T_INSTALL")
echo "  helm install --wait: $T_HELM ms"
doc_run "3. What a healthy node looks like"
if eventually "$WAIT" agent_ready; then
    T_AGENT=$(elapsed "$T_INSTALL")
    pass "the agent's pod is Running and Ready by its own probes ($T_AGENT ms after helm install)"
else
    fail "the agent's pod is Running and Ready" "$(pod_state)"
fi
if eventually "$WAIT" controller_ready; then
    T_CONTROLLER=$(elapsed "$T_INSTALL")
    pass "a controller pod is Running and Ready ($T_CONTROLLER ms after helm install)"
else
    fail "a controller pod is Running and Ready" "$(pod_state)"
fi

lspci_functions() { lspci -D | awk '{print $1}' | sort; }
published() { kubectl get pcidevices -o jsonpath='{range .items[*]}{.status.nodeName} {.status.address}{"\n"}{end}' | awk -v n="$KUBELET_NODE" '$1 == n {print $2}' | sort; }
all_published() { [ "$(published)" = "$(lspci_functions)" ]; }
if eventually "$WAIT" all_published; then
    pass "kubectl get pcidevices = lspci -D, function for function: $(lspci_functions | wc -l) ($(elapsed "$T_INSTALL") ms after helm install)"
else
    fail "kubectl get pcidevices = lspci -D" "$(diff <(lspci_functions) <(published))"
fi
expect_ok "no claim was made" test "$(kubectl get pcideviceclaims,usbdeviceclaims -A --no-headers 2>/dev/null | wc -l)" -eq 0
AGENT=$(agent_pod)
expect_ok "the agent runs under runc with its DaemonSet's mounts: its /readyz answers on the node's address" \
    nsenter -t "$NODE_NS_PID" -n curl -fsS "http://$NODE_IP:9808/readyz"
metrics() { nsenter -t "$NODE_NS_PID" -n curl -fsS "http://$NODE_IP:9808/metrics"; }
expect_contains "its metrics are served through the pod" "$(metrics)" "hostdevd_ready 1"
LOGS=$(cat "$KUBELET_ROOT"/../../varlog/pods/${NS}_"$AGENT"_*/agent/0.log 2>/dev/null)
expect_contains "its log is kubelet's container log" "$LOGS" "hostdevd"

HOLDER=$(kubectl -n "$NS" get lease hostdevd-controller -o jsonpath='{.spec.holderIdentity}' 2>/dev/null)
READY_CTL=$(ready_pods hostdevd-controller)
expect_ok "both controller replicas are Ready (the standby can take over): $(tr "\n" " " <<<"$READY_CTL")" test "$(wc -w <<<"$READY_CTL")" -eq 2
expect_contains "... one of them holds the Lease" "$READY_CTL" "${HOLDER:-no holder}"
expect_ok "kubectl rollout status deploy/hostdevd-controller completes (docs/install.md's check)" \
    kubectl -n "$NS" rollout status deploy/hostdevd-controller --timeout 60s
available() { kubectl -n "$NS" get deploy hostdevd-controller -o jsonpath='{.status.conditions[?(@.type=="Available")].status}'; }
expect_ok "the controller Deployment is Available" test "$(available)" = True
ctl_log() { cat "$KUBELET_ROOT"/../../varlog/pods/${NS}_"$1"_*/controller/0.log 2>/dev/null; }
STANDBY=$(grep -vx "$HOLDER" <<<"$READY_CTL" | head -1)
expect_contains "the leader says so in its log" "$(ctl_log "$HOLDER")" '"Leading:'
expect_ok "... the other does not" bash -c "! grep -q '\"Leading:' <<<\"\$1\"" _ "$(ctl_log "$STANDBY")"

echo "--- a real Prometheus scrapes both roles; the alerts over what it scraped"
t0=$(ms)
prometheus_up
targets_up() { # job count
    [ "$(prom_query "count(up{job=\"$1\"} == 1)" 2>/dev/null | jq -r '.[0].value[1] // 0')" = "$2" ]
}
if eventually 60 targets_up hostdevd-agent 1 && eventually 60 targets_up hostdevd-controller 2; then
    pass "Prometheus $(prometheus --version 2>&1 | awk 'NR == 1 {print $3}') found and scraped the agent and both controller replicas through the Services ($(elapsed "$t0") ms)"
else
    fail "Prometheus scrapes the agent and both controller replicas" \
        "$(prom_get /api/v1/targets 2>&1 | jq -c '.data.activeTargets[] | {job: .labels.job, health, lastError}' 2>&1; tail -5 "$TEST_DIR/prometheus/prometheus.log")"
fi
rules_ok() { [ "$(prom_get /api/v1/rules | jq '[.data.groups[].rules[] | select(.health == "ok")] | length')" = "$(alert_exprs | wc -l)" ]; }
expect_ok "it evaluates all $(alert_exprs | wc -l) alert rules of manifests/prometheus/alerts.yaml without error" eventually 30 rules_ok
expect_contains "it has hostdevd's series: the agent's devices, the leader, the claims gauge" \
    "$(prom_query 'count by (__name__) ({__name__=~"hostdevd_pci_devices|hostdevd_leader|hostdevd_ready"})')" \
    hostdevd_pci_devices hostdevd_leader hostdevd_ready
firing=()
while IFS=$'\t' read -r name expr; do
    [ "$(prom_query "$expr")" = "[]" ] || firing+=("$name: $(prom_query "$expr")")
done < <(alert_exprs)
expect_ok "a healthy install: no alert's expression returns anything" test ${#firing[@]} -eq 0
[ ${#firing[@]} -eq 0 ] || printf '       | %s\n' "${firing[@]}"
# A claim no agent serves (its node does not exist): the leader marks it NodeNotFound, the gauge
# says so, the alert's expression returns it.
printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: nowhere-000001000}\nspec: {address: "0000:01:00.0", nodeName: nowhere}\n' |
    kubectl create -f - >/dev/null
NOT_READY=$(alert_exprs | awk -F'\t' '$1 == "HostdevdClaimsNotReady" {print $2}')
claim_alert() { [ "$(prom_query "$NOT_READY" | jq -r '.[0].metric.reason // ""')" = NodeNotFound ]; }
if eventually 60 claim_alert; then
    pass "a claim of a node that does not exist: HostdevdClaimsNotReady's expression returns {kind=pci, reason=NodeNotFound} ($(prom_query "$NOT_READY" | jq -c '.[0].value[1]'))"
else
    fail "HostdevdClaimsNotReady's expression returns the NodeNotFound claim" "$(prom_query 'hostdevd_claims')"
fi
kubectl delete pcideviceclaim nowhere-000001000 --wait=false >/dev/null
claim_gone_prom() { [ "$(prom_query "$NOT_READY")" = "[]" ]; }
expect_ok "... and nothing once the claim is deleted" eventually 60 claim_gone_prom
echo "  Prometheus: $(elapsed "$t0") ms in all"
kill "$PROM_PID" 2>/dev/null

echo "--- helm upgrade with a changed value"
AUDIT=$TEST_DIR/cluster/audit.log
device_writes() { # from line N of the audit log: the agent's writes to PCIDevices
    tail -n +"$1" "$AUDIT" | jq -c 'select(.stage == "ResponseComplete" and .objectRef.resource == "pcidevices"
        and (.verb | IN("create", "update", "patch", "delete"))
        and (.user.username | endswith(":hostdevd-agent")))' | wc -l
}
LINE=$(($(wc -l <"$AUDIT") + 1))
t0=$(ms)
# The Lease's holder through the upgrade, every change the API server sends.
kubectl -n "$NS" get lease hostdevd-controller -w -o jsonpath='{.spec.holderIdentity}{"\n"}' >"$TEST_DIR/holders.txt" 2>/dev/null &
WATCH_PID=$!
track "$WATCH_PID"
OLD_RS=$(kubectl -n "$NS" get rs -l app.kubernetes.io/name=hostdevd-controller -o jsonpath='{.items[0].metadata.name}')
expect_ok "helm upgrade --wait --set agent.logLevel=2 --set controller.logLevel=2 returns (both pod templates change)" \
    helm upgrade hostdevd charts/hostdevd -n "$NS" --set image.tag="$TAG" --set image.pullPolicy=Never \
    --set agent.logLevel=2 --set controller.logLevel=2 --wait --timeout "${WAIT}s"
T_UPGRADE=$(elapsed "$t0")
echo "  helm upgrade --wait: $T_UPGRADE ms"
expect_ok "kubectl rollout status deploy/hostdevd-controller completes" \
    kubectl -n "$NS" rollout status deploy/hostdevd-controller --timeout 60s
expect_ok "the controller Deployment is Available" test "$(available)" = True
# The last old leader released the Lease on SIGTERM; a new replica takes it at its next try
# (every retry period, 2 s with jitter).
holder() { kubectl -n "$NS" get lease hostdevd-controller -o jsonpath='{.spec.holderIdentity}'; }
holder_args() { kubectl -n "$NS" get pod "$(holder)" -o jsonpath='{.spec.containers[0].args}' 2>/dev/null; }
holder_rs() { kubectl -n "$NS" get pod "$(holder)" -o jsonpath='{.metadata.ownerReferences[0].name}' 2>/dev/null; }
new_leads() { [ -n "$(holder)" ] && [[ $(holder_args) == *'"-v","2"'* ]] && [ -n "$(holder_rs)" ] && [ "$(holder_rs)" != "$OLD_RS" ]; }
if eventually 30 new_leads; then pass "the new pod template leads: the Lease's holder $(holder) runs with -v 2, of the new ReplicaSet (not $OLD_RS)"; else
    fail "the new pod template leads" "holder '$(holder)' args $(holder_args) rs $(holder_rs)"; fi
ctl_pods() { kubectl -n "$NS" get pods -l app.kubernetes.io/name=hostdevd-controller -o jsonpath='{.items[*].metadata.name}' | wc -w; }
no_old_ctl() { [ "$(ctl_pods)" -eq 2 ]; }
expect_ok "two controller pods, no old one left" eventually 60 no_old_ctl
kill "$WATCH_PID" 2>/dev/null
# One leader at every moment: the holder changes only through an empty Lease (the old leader
# released it on SIGTERM before the next took it), never from one live holder to another.
handovers() {
    awk 'NR > 1 && $0 != prev && prev != "" && $0 != "" {bad++} {prev = $0} END {print bad + 0}' "$TEST_DIR/holders.txt"
}
echo "  the Lease's holders through the upgrade: $(uniq "$TEST_DIR/holders.txt" | sed 's/^$/(released)/' | tr '\n' ' ')"
expect_ok "the Lease went from holder to holder only through a release (one leader at every moment)" test "$(handovers)" -eq 0
expect_ok "... and changed hands at least once" test "$(sort -u "$TEST_DIR/holders.txt" | grep -c .)" -ge 2
rolled() { local p; p=$(ready_pods hostdevd-agent); [ -n "$p" ] && [ "$p" != "$AGENT" ]; }
if eventually "$WAIT" rolled; then
    pass "the agent's pod is replaced and Ready again ($(elapsed "$t0") ms)"
else
    fail "the agent's pod is replaced and Ready again" "$(pod_state)"
fi
agent_args() { kubectl -n "$NS" get pod "$(ready_pods hostdevd-agent | head -1)" -o jsonpath='{.spec.containers[0].args}'; }
expect_contains "... with -v 2" "$(agent_args)" '"-v","2"'
expect_ok "the devices are not rewritten (0 writes to PCIDevices by the agent in the audit log)" \
    test "$(device_writes "$LINE")" -eq 0
expect_ok "all devices still published" all_published

echo "--- helm uninstall while a claim remains: refused by the pre-delete hook"
printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: left-000001000}\nspec: {address: "0000:01:00.0", nodeName: left}\n' |
    kubectl create -f - >/dev/null
t0=$(ms)
expect_reject "helm uninstall fails: its pre-delete hook's Job (hostdevd uninstall-check) finds a claim" \
    "Job/$NS/hostdevd-uninstall-check" helm uninstall hostdevd -n "$NS" --wait --timeout 120s
echo "  helm says: $(tr '\n' ' ' <<<"$OUT" | cut -c1-300) ($(elapsed "$t0") ms)"
# (kubectl logs cannot reach this harness's kubelet by name: the container's log file instead)
hook_log() { cat "$KUBELET_ROOT"/../../varlog/pods/"${NS}"_hostdevd-uninstall-check-*/check/0.log 2>/dev/null; }
expect_contains "its log (kubectl logs job/hostdevd-uninstall-check) names the claim and what to do" "$(hook_log)" \
    "PCIDeviceClaim left-000001000 (node left, 0000:01:00.0)" "kubectl delete pcideviceclaims,usbdeviceclaims --all --wait=true" "--no-hooks"
expect_contains "... so does its pod's termination message" \
    "$(kubectl -n "$NS" get pods -l app.kubernetes.io/name=hostdevd-uninstall-check -o jsonpath='{.items[0].status.containerStatuses[0].state.terminated.message}')" \
    "PCIDeviceClaim left-000001000"
expect_ok "nothing was removed: the agent DaemonSet, the controller Deployment, the policies, the CRDs" \
    kubectl get -n "$NS" ds/hostdevd-agent deploy/hostdevd-controller validatingadmissionpolicy/hostdevd-claim-use crd/pcidevices.devices.harvesterhci.io
expect_ok "... the agent and both controllers still Ready" test "$(ready_pods hostdevd-agent | wc -l) $(ready_pods hostdevd-controller | wc -l)" = "1 2"
expect_contains "Helm left the release \"uninstalling\"" "$(helm status hostdevd -n "$NS" 2>&1)" "STATUS: uninstalling"
REV=$(helm status hostdevd -n "$NS" -o json | jq -r .version)
expect_ok "... and helm rollback hostdevd $REV (its own revision) --wait makes it deployed again (docs/helm.md)" \
    helm rollback hostdevd "$REV" -n "$NS" --wait --timeout "${WAIT}s"
expect_contains "... STATUS: deployed" "$(helm status hostdevd -n "$NS" 2>&1)" "STATUS: deployed"
kubectl delete pcideviceclaim left-000001000 --wait=true >/dev/null

echo "--- helm uninstall"
expect_ok "helm uninstall (the hook finds no claim now)" helm uninstall hostdevd -n "$NS" --wait --timeout 120s
expect_ok "... and leaves no hook object behind" test -z "$(kubectl -n "$NS" get job,sa -o name 2>/dev/null | grep uninstall-check; kubectl get clusterrole,clusterrolebinding -o name | grep uninstall-check)"
no_pods() { [ -z "$(kubectl -n "$NS" get pods -o name)" ]; }
if eventually "$WAIT" no_pods; then pass "no hostdevd pod left"; else fail "no hostdevd pod left" "$(pod_state)"; fi
expect_ok "the CRDs and the devices stay" bash -c "kubectl get crd pcidevices.devices.harvesterhci.io >/dev/null &&
    test \"\$(kubectl get pcidevices --no-headers | wc -l)\" -eq $(lspci_functions | wc -l)"
expect_ok "no agent socket left in kubelet's directories" eventually 30 no_sockets
no_plugin_dir() { [ ! -e "$KUBELET_ROOT/plugins/vfio-pci.hostdevd.io" ]; }
expect_ok "... nor the DRA plugin's directory (kubelet's plugins/vfio-pci.hostdevd.io)" eventually 30 no_plugin_dir
[ -z "$(sockets)" ] || echo "  left: $(sockets | tr '\n' ' ')"

T_TOTAL=$(elapsed "$T_ALL")
echo "  times: helm install -> agent Ready ${T_AGENT:-?} ms, -> controller Ready ${T_CONTROLLER:-?} ms; the whole test $T_TOTAL ms"
"$ROOT/hack/kubelet.sh" down "$TEST_DIR/kubelet" >/dev/null 2>&1
KUBELET_UP=
if [ -z "$MODULES_EXISTED" ] && [ -d /lib/modules ]; then
    rmdir /lib/modules 2>/dev/null && echo "  (removed the empty /lib/modules kubelet made for the agent's volume)"
fi
finish
