#!/usr/bin/env bash
# test/integration/test_nokubevirt.sh - `hostdevd controller` (sanitizer build) on a cluster
# without KubeVirt, as docs/install.md allows: it is Ready (/readyz 200) although the kubevirts
# CRD is missing, says so once at info level (no warning per retry), and, once KubeVirt v1.9.0's
# own CRD and CR are installed, keeps permittedHostDevices without a restart. Then: a claim
# deleted while a VM still holds its device (Ready=False DeviceInUse, as its agent writes it)
# keeps its entry until the claim is gone.
SUITE=nokubevirt
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1

CTL=$TEST_BIN/hostdevd
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
LOG=$TEST_DIR/controller.log

cluster_start
ADMIN=$TEST_DIR/cluster/admin.kubeconfig
install_crds
create_node n1
agent_heartbeat n1 3600

PORT=$(free_port)
"$CTL" controller --kubeconfig "$ADMIN" --listen "127.0.0.1:$PORT" --id only -v 0 >"$LOG" 2>&1 &
PID=$!
track "$PID"
ready() { curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1; }
if eventually 30 ready; then pass "Ready without KubeVirt (/readyz 200)"; else
    fail "Ready without KubeVirt" "$(curl -sS "http://127.0.0.1:$PORT/readyz" 2>&1; tail -5 "$LOG")"; fi
sleep 5 # (the informer's LIST is refused with 404 a few times meanwhile: 0.8, 1.6, 3.2 s)
SAID=$(grep -c "KubeVirt is not installed" "$LOG")
[ "$SAID" = 1 ] && pass "... and says once that KubeVirt is not installed" ||
    fail "KubeVirt's absence said once" "said $SAID times: $(grep -i kubevirt "$LOG" | tail -3)"
grep -q '^W.*Watch failed.*kubevirt' "$LOG" && fail "no warning per retry" "$(grep '^W' "$LOG" | tail -3)" ||
    pass "... with no warning per retry"

D=$(agent_device pci n1 1 10de 1e01 nvidia.com/A)
agent_claim pci "$D" n1
agent_ready pci "$D"
install_kubevirt '{}' || fail "KubeVirt's CRD and CR"
T_KV=$(date +%s.%N)
entries() {
    kubectl get kubevirt -n kubevirt kubevirt -o json | python3 -c '
import json, sys
c = json.load(sys.stdin)["spec"]["configuration"].get("permittedHostDevices") or {}
print(" ".join(sorted(e["resourceName"] for e in (c.get("pciHostDevices") or []))))'
}
has_a() { [ "$(entries)" = nvidia.com/A ]; }
# (the informer's retries back off up to 30 s)
if eventually 45 has_a; then pass "KubeVirt installed later: the entry appears without a restart"; else
    fail "the entry once KubeVirt is installed" "$(entries); $(tail -5 "$LOG")"; fi
KV_S=$(awk -v a="$T_KV" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
# The CRD's arrival is an event (a watch on that one CRD), not the end of the LIST's backoff
# (up to 30 s; 22 s seen): the entry within seconds of the CR.
expect_ok "... noticed by a watch on KubeVirt's CRD (its log says so)" grep -q "KubeVirt's CRD appeared" "$LOG"
expect_ok "... and written $KV_S s after the CR was created (bound 5 s; the LIST's backoff took up to 30)" \
    awk -v s="$KV_S" 'BEGIN {exit !(s < 5)}'
kill -0 "$PID" 2>/dev/null && pass "... by the same process" || fail "the controller still runs"

echo "--- a deleted claim whose device a VM holds keeps its entry"
kubectl patch pcideviceclaim "$D" --type merge -p '{"metadata":{"finalizers":["example.com/test-hold"]}}' >/dev/null
kubectl delete pcideviceclaim "$D" --wait=false >/dev/null
NOW=$(date -u +%FT%TZ)
kubectl patch pcideviceclaim "$D" --subresource status --type merge -p \
    "{\"status\":{\"passthroughEnabled\":true,\"conditions\":[{\"type\":\"Ready\",\"status\":\"False\",\"reason\":\"DeviceInUse\",\"message\":\"qemu-system-x86 (pid 1) holds /dev/vfio/3\",\"lastTransitionTime\":\"$NOW\"}]}}" >/dev/null
sleep 3
has_a && pass "DeviceInUse: the entry stays while the VM holds the device" || fail "the entry stays (DeviceInUse)" "$(entries)"
kubectl patch pcideviceclaim "$D" --type merge -p '{"metadata":{"finalizers":null}}' >/dev/null
none() { [ -z "$(entries)" ]; }
if eventually 30 none; then pass "... and goes with the claim"; else fail "the entry goes with the claim" "$(entries)"; fi

kill -TERM "$PID"
wait "$PID" 2>/dev/null
RC=$?
[ "$RC" = 0 ] && pass "the controller exits 0 on SIGTERM (no leaks)" || fail "controller exit" "rc=$RC; $(tail -20 "$LOG")"
finish
