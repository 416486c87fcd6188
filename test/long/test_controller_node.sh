#!/usr/bin/env bash
# test/long/test_controller_node.sh - `hostdevd controller` end to end (make test-long: the same
# with fake agents is make test's test/integration/test_controller.sh): the controller (sanitizer
# build) runs on the host with the token of its own service account under manifests/
# controller-rbac.yaml, KubeVirt v1.9.0's own kubevirts CRD holds the CR, and a qemu node's agent
# (node-bound token, the project's RBAC and admission policies) binds a real e1000e. Checks: the
# CR has no entry for the device before its claim is Ready; once the claim is passthroughEnabled
# the CR gains {pciVendorSelector: "8086:10d3", resourceName: <the PCIDevice's>,
# externalResourceProvider: true} and the ownership annotation names it; deleting the claim
# removes the entry and empties the annotation; the foreign entry stays, in place; every CR write
# came from the controller's service account. Prints the time from claim Ready to entry present
# (both as seen by polling the API server).
SUITE=long-controller-node
# shellcheck source=test/e2e/lib.sh
. "$(dirname "$0")/../e2e/lib.sh"
cd "$ROOT" || exit 1
NODE=qctl
NIC=0000:00:04.0 # e1000e 8086:10d3
CTL=${E2E_CONTROLLER:-$ROOT/build/asan/hostdevd}
SA=system:serviceaccount:hostdevd-system:hostdevd-controller
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
[ -x "$CTL" ] || make -C "$ROOT" "${CTL#"$ROOT"/}" >/dev/null

cluster_start
install_crds
create_node "$NODE"
agent_rbac
kubectl apply -f manifests/controller-rbac.yaml >/dev/null
FOREIGN='{"pciVendorSelector":"15b3:1017","resourceName":"mellanox.com/CX5"}'
install_kubevirt "{pciHostDevices: [$FOREIGN]}" || fail "KubeVirt's CRD and CR"

# The controller's identity: a token of its ServiceAccount (as its Pod would have), on the host.
CTL_KUBECONFIG=$TEST_DIR/controller.kubeconfig
sa_kubeconfig hostdevd-system hostdevd-controller "$CTL_KUBECONFIG" || fail "controller kubeconfig"
CTL_PORT=$(free_port)
"$CTL" controller --kubeconfig "$CTL_KUBECONFIG" --listen "127.0.0.1:$CTL_PORT" --id e2e \
    -v 1 >>"$TEST_DIR/controller.log" 2>&1 &
CTL_PID=$!
# The controller stops with the test, whatever way it ends (then the node and the control plane).
eval "$(declare -f cluster_stop | sed '1s/^cluster_stop/_ctl_cluster_stop/')"
cluster_stop() {
    kill -KILL "$CTL_PID" 2>/dev/null
    _ctl_cluster_stop
}
leading() { curl -fsS "http://127.0.0.1:$CTL_PORT/metrics" 2>/dev/null | grep -qx "hostdevd_leader 1"; }

echo "--- boot"
if node_boot "$NODE"; then pass "node $NODE boots (${BOOT_SECONDS}s)"; else fail "node boots"; finish; fi
if eventually 30 leading; then pass "the controller leads, with its service account's token"; else
    fail "the controller leads" "$(tail -20 "$TEST_DIR/controller.log")"; finish; fi
if eventually 120 guest_agent_ready; then pass "agent ready with its node-bound token"; else fail "agent ready" "$(node_logs)"; finish; fi

DEV=$NODE-000000040
CLAIM=$DEV
RES=$(kubectl get pcidevice "$DEV" -o jsonpath='{.status.resourceName}')
IDS=$(kubectl get pcidevice "$DEV" -o jsonpath='{.status.vendorId}:{.status.deviceId}')
[ -n "$RES" ] && [ "$IDS" = 8086:10d3 ] && pass "PCIDevice $DEV: $IDS, resourceName $RES" ||
    fail "PCIDevice $DEV published" "ids '$IDS', resourceName '$RES'"

cr_json() { kubectl get kubevirt -n kubevirt kubevirt -o json; }
# The pciHostDevices entries, one JSON object a line, keys sorted, in the CR's order.
entries() {
    cr_json | python3 -c '
import json, sys
c = json.load(sys.stdin)["spec"]["configuration"].get("permittedHostDevices") or {}
for e in c.get("pciHostDevices") or []: print(json.dumps(e, sort_keys=True, separators=(",", ":")))'
}
owned() { kubectl get kubevirt -n kubevirt kubevirt -o jsonpath='{.metadata.annotations.hostdevd\.io/owned-host-devices}'; }
WANT_ENTRY="{\"externalResourceProvider\":true,\"pciVendorSelector\":\"8086:10d3\",\"resourceName\":\"$RES\"}"
WANT_FOREIGN=$(python3 -c 'import json, sys; print(json.dumps(json.loads(sys.argv[1]), sort_keys=True, separators=(",", ":")))' "$FOREIGN")
has_entry() { grep -qF "\"resourceName\":\"$RES\"" <<<"$(entries)"; }
enabled() { [ "$(kubectl get pcideviceclaim "$CLAIM" -o jsonpath='{.status.passthroughEnabled}' 2>/dev/null)" = true ]; }
claim_gone() { ! kubectl get pcideviceclaim "$CLAIM" >/dev/null 2>&1; }
now() { date +%s.%N; }
# CR writes (create/update/patch of kubevirts) by user, from the audit log.
cr_writers() {
    python3 - "$TEST_DIR/cluster/audit.log" <<'EOF'
import collections, json, sys
n = collections.Counter()
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("stage") == "ResponseComplete" and e.get("verb") in ("create", "update", "patch", "delete") \
            and e.get("objectRef", {}).get("resource") == "kubevirts":
        n[(e["user"]["username"], e.get("responseStatus", {}).get("code"))] += 1
for (u, c), k in sorted(n.items()): print(u, c, k)
EOF
}

echo "--- claim the e1000e: the CR follows"
[ "$(entries)" = "$WANT_FOREIGN" ] && [ -z "$(owned)" ] && pass "before the claim: only the foreign entry, no ownership record" ||
    fail "CR before the claim" "$(entries; owned)"
# Both objects are watched from before the claim exists; each version arrives as a line
# "<receive time> <resourceVersion> <state>". The resourceVersions of one etcd are one sequence
# across kinds, so they order the claim's versions against the CR's.
stamp() { while IFS= read -r l; do echo "$(now) $l"; done; }
kubectl get pcideviceclaims -w -o jsonpath='{.metadata.name} {.metadata.resourceVersion} {.status.passthroughEnabled}/{.status.conditions[?(@.type=="Ready")].status}{"\n"}' 2>/dev/null |
    stamp >"$TEST_DIR/claim.watch" &
W1=$!
kubectl get kubevirt -n kubevirt kubevirt -w -o jsonpath='{.metadata.resourceVersion} {.spec.configuration.permittedHostDevices.pciHostDevices[*].resourceName}{"\n"}' 2>/dev/null |
    stamp >"$TEST_DIR/cr.watch" &
W2=$!
# kubectl's watch of the claims is established (audit log) before the claim is made.
claim_watch() {
    python3 - "$TEST_DIR/cluster/audit.log" <<'PY'
import json, sys
sys.exit(not any((e := json.loads(l)).get("verb") == "watch" and e.get("stage") == "ResponseStarted"
                 and e.get("objectRef", {}).get("resource") == "pcideviceclaims"
                 and e.get("userAgent", "").startswith("kubectl") for l in open(sys.argv[1])))
PY
}
watching() { [ -s "$TEST_DIR/cr.watch" ] && claim_watch; }
eventually 20 watching || fail "watches started" "$(cat "$TEST_DIR/cr.watch")"
printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: %s}\nspec: {address: "%s", nodeName: %s}\n' \
    "$CLAIM" "$NIC" "$NODE" | kubectl create -f - >/dev/null
if eventually 90 enabled; then pass "claim Ready and passthroughEnabled"; else
    fail "claim passthroughEnabled" "$(kubectl get pcideviceclaim "$CLAIM" -o jsonpath='{.status.conditions}'; node_logs)"
    finish
fi
if eventually 30 has_entry; then pass "the CR gains an entry for $RES"; else
    fail "entry present after Ready" "$(entries; tail -20 "$TEST_DIR/controller.log")"; fi
has_entry_version() { awk -v r="$RES" '{for (i = 3; i <= NF; i++) if ($i == r) f = 1} END {exit !f}' "$TEST_DIR/cr.watch"; }
eventually 10 has_entry_version
kill "$W1" "$W2" 2>/dev/null
# first claim version Ready and passthroughEnabled; first CR version listing the resource
read -r T_READY RV_READY < <(awk -v c="$CLAIM" '$2 == c && $4 == "true/True" {print $1, $3; exit}' "$TEST_DIR/claim.watch")
read -r T_ENTRY RV_ENTRY < <(awk -v r="$RES" '{for (i = 3; i <= NF; i++) if ($i == r) {print $1, $2; exit}}' "$TEST_DIR/cr.watch")
BEFORE=$(awk -v rv="${RV_READY:-0}" '$2 < rv' "$TEST_DIR/cr.watch" | wc -l)
if [ -n "${RV_READY:-}" ] && [ -n "${RV_ENTRY:-}" ] && [ "$RV_ENTRY" -gt "$RV_READY" ]; then
    WLAT=$(awk -v a="$T_ENTRY" -v b="$T_READY" 'BEGIN {printf "%.3f", a - b}')
    pass "no entry before Ready: the claim is Ready at resourceVersion $RV_READY, the entry first appears at $RV_ENTRY ($BEFORE CR versions before Ready, none with it)"
else
    fail "entry only after Ready" "claim watch:"$'\n'"$(cat "$TEST_DIR/claim.watch")"$'\n'"CR watch:"$'\n'"$(cat "$TEST_DIR/cr.watch")"
fi
[ "$(entries)" = "$WANT_FOREIGN"$'\n'"$WANT_ENTRY" ] && pass "pciHostDevices: the foreign entry, then $WANT_ENTRY" ||
    fail "pciHostDevices after Ready" "$(entries)"
[ "$(owned)" = "$RES" ] && pass "hostdevd.io/owned-host-devices: $RES" || fail "ownership annotation" "'$(owned)'"
# The same interval in the API server's clock (audit log): the agent's last claim status write
# before the controller's first CR patch, to that patch (both completed).
LAT=$(python3 - "$TEST_DIR/cluster/audit.log" "$SA" <<'EOF'
import datetime, json, sys
ts = lambda e: datetime.datetime.fromisoformat(e["stageTimestamp"].replace("Z", "+00:00")).timestamp()
done = [e for l in open(sys.argv[1]) if (e := json.loads(l)).get("stage") == "ResponseComplete"]
patch = next(e for e in done if e["user"]["username"] == sys.argv[2] and e["verb"] == "patch"
             and e.get("objectRef", {}).get("resource") == "kubevirts")
ready = [e for e in done if e["user"]["username"].endswith(":hostdevd-agent")
         and e.get("objectRef", {}).get("resource") == "pcideviceclaims"
         and e.get("objectRef", {}).get("subresource") == "status" and ts(e) < ts(patch)]
print("%.3f" % (ts(patch) - ts(ready[-1])))
EOF
)

echo "--- delete the claim: the entry goes"
kubectl delete pcideviceclaim "$CLAIM" --wait=false >/dev/null
if eventually 60 claim_gone; then pass "claim released (device restored by the agent)"; else fail "claim released" "$(node_logs)"; fi
only_foreign() { [ "$(entries)" = "$WANT_FOREIGN" ]; }
if eventually 30 only_foreign; then pass "entry removed, the foreign entry kept"; else fail "entry removed" "$(entries)"; fi
[ -z "$(owned)" ] && pass "ownership record emptied" || fail "ownership annotation after release" "'$(owned)'"
on_e1000e() { [ "$(guest "basename \$(readlink /sys/bus/pci/devices/$NIC/driver)")" = e1000e ]; }
expect_ok "$NIC back on e1000e in the guest" on_e1000e

WRITERS=$(cr_writers)
OTHERS=$(grep -v "^$SA " <<<"$WRITERS" | grep -vx 'admin 201 1') # the test created the CR
[ -z "$OTHERS" ] && grep -q "^$SA 200 " <<<"$WRITERS" &&
    pass "CR writes: $(awk -v sa="$SA" '$1 == sa && $2 == 200 {print $3}' <<<"$WRITERS") by $SA, none refused, none by anyone else" ||
    fail "CR writes by the controller's service account only" "$WRITERS"

echo "  claim Ready -> entry present: ${LAT:-?} s (audit log: the agent's Ready status write completed -> the controller's CR patch completed); ${WLAT:-?} s between the two watch events"
mkdir -p "$ROOT/build/results" && echo "ready-to-entry ${LAT:-?} s (audit log), ${WLAT:-?} s (watch events)" >"$ROOT/build/results/e2e-controller.txt"
kill -TERM "$CTL_PID"
wait "$CTL_PID" && pass "the controller exits 0 on SIGTERM (no leaks)" || fail "controller exit" "$(tail -20 "$TEST_DIR/controller.log")"
finish
