#!/usr/bin/env bash
# test/integration/test_drahealth.sh - device health in the Pod's status through the agent's DRA
# kubelet plugin (KEP-4680, docs/dra.md "Device health in the Pod's status") against a real kubelet
# v1.37.1 (hack/kubelet.sh: fake CRI) and a real kube-scheduler, the agent (sanitizer build) on the
# fake small-server tree. Checks: GetInfo lists v1.DRAResourceHealth; kubelet opens
# /v1.DRAResourceHealth/NodeWatchResources on the DRA socket; the list goes again within kubelet's
# 30 s timeout with nothing changed; a pod whose claim the agent prepared shows the device Healthy
# in status.containerStatuses[].allocatedResourcesStatus (resourceID: the device's CDI id); the
# device made unhealthy (its PCIDevice's Healthy condition patched to False ResetFailed, which the
# agent's health store takes back) shows Unhealthy there with the reason and message; the
# administrator's recheck (annotation hostdevd.io/recheck-health) makes it Healthy again; the
# agent restarted (stopped with the stream open: no sanitizer report), kubelet opens the stream
# again and the pod still shows Healthy. Prints condition patched -> pod status, and recheck ->
# pod status.
# test-lock: kubelet (the kubelet harness: its sysctls are global; see hack/run-tests.sh)
SUITE=drahealth
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

AGENT=$TEST_BIN/hostdevd
GRPCTOOL=$TEST_BIN/grpctool
DRIVER=vfio-pci.hostdevd.io
X710=0000:d8:00.3 # on vfio-pci, IOMMU group 74
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
SYS=$TEST_DIR/sys
hack/mk-sysfs-fixture.sh test/fixtures/sysfs/small-server.txt "$SYS" >/dev/null
mkdir -p "$SYS/module/vfio_iommu_type1" "$TEST_DIR/dev"
fake_proc "$TEST_DIR/proc"
PORT=$(free_port)
start_agent() {
    agent_run --kubeconfig "$ADMIN" --proc-root "$TEST_DIR/proc" --dev-root "$TEST_DIR/dev" \
        --kubelet-dir "$KROOT" --cdi-dir "$TEST_DIR/cdi" --resync 3600 --uevent-source none -v 1
}
start_agent
ready() { curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null; }
if eventually 60 ready; then pass "agent ready next to kubelet"; else fail "agent ready" "$(tail -20 "$TEST_DIR/agent.log")"; finish; fi
metric() { curl -fsS "http://127.0.0.1:$PORT/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
expect_contains "GetInfo lists the health service (kubelet never calls one a plugin does not list)" \
    "$("$GRPCTOOL" reginfo "$KROOT/plugins_registry/$DRIVER-reg.sock")" "v1=true health=true"
streams() { [ "$(metric hostdevd_dra_health_streams)" = "$1" ]; }
if eventually 60 streams 1; then
    pass "kubelet opened the health stream (NodeWatchResources) on the DRA socket"
else
    fail "health stream" "$(metric hostdevd_dra_health_streams); $(grep -i 'health' "$KUBELET_LOG" | tail -5)"
fi
expect_contains "... and the agent says so" "$(grep 'Kubelet watches the DRA devices' "$TEST_DIR/agent.log")" 'driver="vfio-pci.hostdevd.io"'
# Kubelet takes a device not reported for 30 s as Unknown: the list goes again with nothing changed.
SENT=$(metric hostdevd_dra_health_reports_total)
resent() { [ "$(metric hostdevd_dra_health_reports_total)" -gt "$SENT" ]; }
T0=$SECONDS
if eventually 25 resent; then pass "the list went again within kubelet's timeout, nothing changed ($((SECONDS - T0)) s)"; else
    fail "resent within 30 s" "$(metric hostdevd_dra_health_reports_total) (was $SENT)"; fi

dra_template x710 "$DRIVER" "device.attributes[\"resource.kubernetes.io\"].pciBusID == \"$X710\""
dra_pod vm1 x710
running() { [ "$(kubectl get pod vm1 -o jsonpath='{.status.phase}' 2>/dev/null)" = Running ]; }
if eventually 60 running; then pass "the pod with a claim of the X710 port runs"; else
    fail "pod running" "$(kubectl describe pod vm1 | tail -15; tail -10 "$TEST_DIR/agent.log")"
    finish
fi
CLAIM=$(kubectl get pod vm1 -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}')
UID_=$(kubectl get resourceclaim "$CLAIM" -o jsonpath='{.metadata.uid}')
RID="$DRIVER/vfio=$UID_-pci-0000-d8-00-3" # kubelet's resourceID: the device's first CDI id
health() { kubectl get pod vm1 -o json | jq -c '.status.containerStatuses[0].allocatedResourcesStatus // []'; }
health_is() { # health [message]
    health | jq -e --arg r "$RID" --arg h "$1" --arg m "${2:-}" \
        '.[] | select(.name == "claim:nic") | .resources[] | select(.resourceID == $r and .health == $h and (.message // "") == $m)' >/dev/null
}
if eventually 60 health_is Healthy; then pass "pod status: claim:nic's device Healthy (resourceID its CDI id)"; else
    fail "Healthy in pod status" "$(health)"; fi

echo "--- the device made unhealthy"
PCIDEV="$NODE-${X710//[:.]/}"
MSG="the reset on release failed (test): reboot the host, then kubectl annotate --overwrite pcidevice $PCIDEV hostdevd.io/recheck-health=1"
cond() { # status reason message
    printf '{"status":{"conditions":[{"type":"Healthy","status":"%s","reason":"%s","message":"%s","lastTransitionTime":"%s"}]}}' \
        "$1" "$2" "$3" "$(date -u +%FT%TZ)"
}
T0=$(date +%s.%N)
expect_ok "the PCIDevice's Healthy condition patched to False (ResetFailed)" \
    kubectl patch pcidevice "$PCIDEV" --subresource status --type merge -p "$(cond False ResetFailed "$MSG")"
if eventually 60 health_is Unhealthy "ResetFailed: $MSG"; then
    pass "pod status: the device Unhealthy with the reason and the message"
    echo "  condition patched -> pod status Unhealthy: $(awk -v a="$(date +%s.%N)" -v b="$T0" 'BEGIN {printf "%.2f", a - b}') s"
else
    fail "Unhealthy in pod status" "$(health); $(tail -5 "$TEST_DIR/agent.log")"
fi

echo "--- fixed: the administrator's recheck, then an agent restart"
T0=$(date +%s.%N)
expect_ok "kubectl annotate pcidevice ... hostdevd.io/recheck-health" \
    kubectl annotate --overwrite pcidevice "$PCIDEV" hostdevd.io/recheck-health="$(date +%s)"
if eventually 60 health_is Healthy; then
    pass "pod status: the device Healthy again, no message"
    echo "  recheck annotated -> pod status Healthy: $(awk -v a="$(date +%s.%N)" -v b="$T0" 'BEGIN {printf "%.2f", a - b}') s"
else
    fail "Healthy again after the recheck" "$(health); $(tail -5 "$TEST_DIR/agent.log")"
fi
kill -TERM "$AGENT_PID"
wait "$AGENT_PID" 2>/dev/null
# (its health stream cancelled as it went: the sanitizers say nothing of it)
if grep -q 'Sanitizer' "$TEST_DIR/agent.log"; then fail "the agent exits clean" "$(grep -A12 'Sanitizer' "$TEST_DIR/agent.log" | head -30)"; else
    pass "the agent stopped with kubelet's health stream open: no sanitizer report"; fi
start_agent
if eventually 60 ready; then pass "agent restarted"; else fail "agent restart" "$(tail -10 "$TEST_DIR/agent.log")"; fi
if eventually 60 streams 1; then pass "kubelet opened the health stream again"; else fail "stream again" "$(metric hostdevd_dra_health_streams)"; fi
if eventually 60 health_is Healthy; then pass "pod status: still Healthy after the restart (the PCIDevice says Healthy: nothing taken back)"; else fail "Healthy after the restart" "$(health)"; fi
finish
