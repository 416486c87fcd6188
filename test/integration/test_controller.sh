#!/usr/bin/env bash
# test/integration/test_controller.sh - `hostdevd controller` (two replicas, sanitizer build)
# against the real control plane and KubeVirt v1.9.0's own CRD (hack/kubevirt-crds.sh). Claims
# and their devices are written as the agents would write them. Checks: an entry appears only
# once its claim is Ready; claims over three nodes made concurrently while a second writer
# appends to the CR end with exactly the needed entries, no duplicates, the foreign entries
# untouched and in order; killing the leader once 5 of the first 15 claims are Ready, the other
# 15 coming while no replica leads, hands over to the other replica and the end state is the same;
# configured mdev instances (VGPUDevices) get one owned mediatedDevices entry per type, a foreign one
# kept, and lose it when no instance is left;
# with a second KubeVirt CR (no --kubevirt) neither CR is written while a claim becomes Ready, and
# the one left gets its entry once the other is deleted; deleting the claims removes only our
# entries; an idle controller writes nothing.
# Prints the time from claim Ready to entry present (median of 10) and the number of CR writes.
SUITE=controller
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

CTL=$TEST_BIN/hostdevd
G=devices.harvesterhci.io
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

cluster_start
ADMIN=$TEST_DIR/cluster/admin.kubeconfig
install_crds
FA='{"pciVendorSelector":"15b3:1017","resourceName":"mellanox.com/CX5"}'
FB='{"pciVendorSelector":"8086:1572","resourceName":"intel.com/X710","externalResourceProvider":true}'
FU='{"resourceName":"example.com/dongle","selectors":[{"vendor":"1234","product":"5678"}]}'
install_kubevirt "{pciHostDevices: [$FA, $FB], usb: [$FU]}" || fail "KubeVirt's CRD and CR"
pass "KubeVirt CR with foreign entries, on KubeVirt's own CRD"

# The nodes of the claims, and their agents' heartbeats, as the agents would keep them.
for n in lat node-a node-b node-c; do
    create_node "$n"
    agent_heartbeat "$n" 3600
done

PORTS=()
PIDS=()
start_ctl() { # index
    local port
    port=$(free_port)
    PORTS[$1]=$port
    "$CTL" controller --kubeconfig "$ADMIN" --listen "127.0.0.1:$port" --id "replica-$1" \
        --lease-duration 6 -v 1 >>"$TEST_DIR/controller-$1.log" 2>&1 &
    PIDS[$1]=$!
    track "${PIDS[$1]}"
}
# Leadership is the metric hostdevd_leader (and the Lease); /readyz says a replica can serve,
# which a standby able to take over does too.
leading() { curl -fsS "http://127.0.0.1:${PORTS[$1]}/metrics" 2>/dev/null | grep -qx 'hostdevd_leader 1'; }
ready() { curl -fsS "http://127.0.0.1:${PORTS[$1]}/readyz" >/dev/null 2>&1; }
leader() { for i in 0 1; do leading "$i" && { echo "$i"; return 0; }; done; return 1; }
# The replicas stop with the test, whatever way it ends (then the control plane).
# (the replicas are tracked: they stop with the test, whatever way it ends)
start_ctl 0
start_ctl 1
if eventually 30 leader; then pass "one replica leads (hostdevd_leader 1), the other stands by"; else fail "a leader" "$(tail -5 "$TEST_DIR"/controller-*.log)"; finish; fi
both_ready() { ready 0 && ready 1; }
one_leader() { [ "$( (leading 0 && echo x; leading 1 && echo x) | wc -l)" -eq 1 ]; }
if eventually 30 both_ready; then pass "both replicas are Ready (/readyz 200: the standby can take over), so a Deployment of them is Available"; else
    fail "both replicas Ready" "$(for i in 0 1; do curl -sS "http://127.0.0.1:${PORTS[$i]}/readyz"; done)"; fi
expect_ok "... and exactly one leads" one_leader

cr_json() { kubectl get kubevirt -n kubevirt kubevirt -o json; }
cr_writes() { hack/audit-requests.py "$TEST_DIR/cluster/audit.log" --resource kubevirts | cut -d" " -f2; }
# "name count" per resource name of our kind in the CR (pci and usb lists).
counts() {
    cr_json | python3 -c '
import json, sys, collections
c = json.load(sys.stdin)["spec"]["configuration"].get("permittedHostDevices") or {}
n = collections.Counter(e["resourceName"] for k in ("pciHostDevices", "usb") for e in (c.get(k) or []))
for k, v in sorted(n.items()): print(k, v)'
}
has_entry() { grep -q "^$1 1$" <<<"$(counts)"; }
no_entry() { ! grep -q "^$1 " <<<"$(counts)"; }

# Devices and claims as the agents would leave them: agent_device, agent_claim, agent_ready (lib.sh).
now() { date +%s.%N; }

echo "--- an entry only once its claim is Ready (timed, 10 claims)"
LAT=()
for i in $(seq 1 9) 0; do
    d=$(agent_device pci lat "$i" 10de "1e0$i" "nvidia.com/LAT$i")
    agent_claim pci "$d" lat
    sleep 0.3
    no_entry "nvidia.com/LAT$i" || fail "entry before Ready" "nvidia.com/LAT$i present"
    T=$(now)
    agent_ready pci "$d"
    if eventually 20 has_entry "nvidia.com/LAT$i"; then
        LAT+=("$(awk -v a="$(now)" -v b="$T" 'BEGIN {printf "%.3f", a - b}')")
    fi
done
if [ "${#LAT[@]}" -eq 10 ]; then
    STATS=$(printf '%s\n' "${LAT[@]}" | sort -n | awk '{v[NR]=$1} END {printf "median %.3f s, worst %.3f s", (v[5]+v[6])/2, v[NR]}')
    pass "absent before Ready, present after: claim Ready -> entry $STATS (as seen by kubectl polling)"
else
    fail "entries after Ready" "${#LAT[@]} of 10"
fi
for i in $(seq 0 9); do kubectl delete pcideviceclaim "lat-0000000${i}0" --wait=false >/dev/null; done
if eventually 30 bash -c "! kubectl get kubevirt -n kubevirt kubevirt -o json | grep -q nvidia.com/LAT"; then
    pass "claims deleted: their entries removed"; else fail "LAT entries removed" "$(counts)"; fi

echo "--- 30 claims over 3 nodes, concurrently, with a second writer and a leader change"
W0=$(cr_writes)
NAMES=()
for n in node-a node-b node-c; do
    for i in 1 2 3 4 5 6 7; do
        res="intel.com/NIC$(((i % 3) + 1))" # three pooled names shared by many claims
        NAMES+=("pci $(agent_device pci "$n" "$i" 8086 "10d$((i % 3))" "$res") $n $([ "$i" = 7 ] && echo true || echo false)")
    done
    for i in 1 2 3; do
        NAMES+=("usb $(agent_device usb "$n" "$i" 0951 1666) $n")
    done
done
# burst NAME...: the claims made and made Ready at once, as their agents would.
burst() { for x in "$@"; do read -r k nm nd pool <<<"$x"; (agent_claim "$k" "$nm" "$nd" "$pool" && agent_ready "$k" "$nm") & done; wait; }
made_ready() { # "<made> <Ready>" claims
    kubectl get pcideviceclaims,usbdeviceclaims -o json | jq -r \
        '"\(.items | length) \([.items[] | select(any(.status.conditions[]?; .type == "Ready" and .status == "True"))] | length)"'
}
some_ready() { local r; read -r _ r <<<"$(made_ready)"; [ "${r:-0}" -ge 5 ]; }
# The first 15 claims come; once 5 are Ready the leader is killed (its work on them under way);
# the other 15 come while no replica leads (the lease, 6 s, has not expired), and the second
# writer appends foreign entries meanwhile (a JSON patch add is atomic).
burst "${NAMES[@]:0:15}" &
FIRST_PID=$!
eventually 30 some_ready || fail "5 of the first 15 claims Ready" "$(made_ready)"
L=$(leader)
kill -KILL "${PIDS[$L]}"
T_KILL=$(date +%s.%N)
read -r MADE READY <<<"$(made_ready)"
ENTRIES=$(counts | grep -cvE '^(mellanox.com/CX5|intel.com/X710|example.com/)')
burst "${NAMES[@]:15}" &
SECOND_PID=$!
for i in 1 2 3; do
    kubectl patch kubevirt -n kubevirt kubevirt --type json -p \
        "[{\"op\":\"add\",\"path\":\"/spec/configuration/permittedHostDevices/pciHostDevices/-\",\"value\":{\"pciVendorSelector\":\"1af4:104$i\",\"resourceName\":\"example.com/F$i\"}}]" >/dev/null
    sleep 0.5
done
wait "$FIRST_PID" "$SECOND_PID"
T_BURST=$(date +%s.%N)
wait "${PIDS[$L]}" 2>/dev/null
OTHER=$((1 - L))
if eventually 30 leading "$OTHER"; then
    T_LEAD=$(date +%s.%N)
    HANDOVER="claims $MADE made and $READY Ready, $ENTRIES of their entries in the CR, when the leader was killed; all 30 made $(awk -v a="$T_BURST" -v b="$T_KILL" 'BEGIN {printf "%.1f", a - b}') s and replica-$OTHER leading $(awk -v a="$T_LEAD" -v b="$T_KILL" 'BEGIN {printf "%.1f", a - b}') s after the kill"
    pass "leader killed mid-burst (replica-$L): replica-$OTHER leads ($HANDOVER)"
else
    fail "takeover" "$(tail -5 "$TEST_DIR/controller-$OTHER.log")"
fi
expected() { # the resource names the claims need, sorted, each once
    for x in "${NAMES[@]}"; do
        read -r k nm _ pool <<<"$x"
        if [ "$k" = usb ]; then echo "kubevirt.io/$nm"; elif [ "$pool" = true ]; then echo "intel.com/$nm"; else
            kubectl get pcidevice "$nm" -o jsonpath='{.status.resourceName}'; echo; fi
    done | sort -u
}
WANT=$(expected)
exact() {
    local got
    got=$(counts | grep -vE '^(mellanox.com/CX5|intel.com/X710|example.com/)' )
    [ "$got" = "$(sed 's/$/ 1/' <<<"$WANT")" ]
}
if eventually 60 exact; then pass "$(wc -l <<<"$WANT") entries, each once, exactly what the 30 claims need"; else
    fail "exact entries" "want: $(tr '\n' ' ' <<<"$WANT"); got: $(counts | tr '\n' ' ')"; fi
ORDER=$(cr_json | python3 -c '
import json, sys
c = json.load(sys.stdin)["spec"]["configuration"]["permittedHostDevices"]
print(" ".join(e["resourceName"] for e in c["pciHostDevices"] if not e["resourceName"].startswith(("intel.com/NIC", "intel.com/node"))))
print(" ".join(e["resourceName"] for e in c["usb"] if not e["resourceName"].startswith("kubevirt.io/")))')
[ "$ORDER" = "mellanox.com/CX5 intel.com/X710 example.com/F1 example.com/F2 example.com/F3
example.com/dongle" ] && pass "foreign entries untouched and in their order (the second writer's too)" ||
    fail "foreign entries" "$ORDER"
W1=$(cr_writes)
WRITES=$((W1 - W0))
echo "  CR writes by the controllers during the concurrent run: $WRITES (${HANDOVER:-?})"

echo "--- idle"
A1=$(hack/audit-requests.py "$TEST_DIR/cluster/audit.log" | cut -d" " -f2)
sleep 10
W2=$(cr_writes)
A2=$(hack/audit-requests.py "$TEST_DIR/cluster/audit.log" | cut -d" " -f2)
[ "$W2" -eq "$W1" ] && [ "$A2" -eq "$A1" ] && pass "an idle controller writes nothing (audit log, 10 s; only its election Lease renews)" ||
    fail "idle writes" "CR $((W2 - W1)), all $((A2 - A1))"

echo "--- mediated devices: mediatedDevices kept exact (VGPUDevices as their agents publish them)"
FM='{"mdevNameSelector":"GRID_T4-1Q","resourceName":"nvidia.com/GRID_T4-1Q"}'
kubectl patch kubevirt -n kubevirt kubevirt --type merge \
    -p "{\"spec\":{\"configuration\":{\"permittedHostDevices\":{\"mediatedDevices\":[$FM]}}}}" >/dev/null
MTTY='{"mdevNameSelector":"Dual_port_serial","resourceName":"devices.harvesterhci.io/mtty-2","externalResourceProvider":true}'
GVT='{"mdevNameSelector":"i915-GVTg_V5_4","resourceName":"devices.harvesterhci.io/i915-gvtg-v5-4","externalResourceProvider":true}'
mdevs() { cr_json | jq -c '.spec.configuration.permittedHostDevices.mediatedDevices // []'; }
mdevs_are() { # the foreign entry first (kept in place), then ours in any order
    [ "$(mdevs | jq -cS '.[0:1] + (.[1:] | sort_by(.resourceName))')" = "$(jq -cS . <<<"$1")" ]
}
owned() { cr_json | jq -r '.metadata.annotations["hostdevd.io/owned-host-devices"] // ""'; }
T=$(now)
agent_vgpu node-a node-a-mtty-0 0c7ac1d4-6e2a-4f3b-9b1e-1d2c3e4f5a01 mtty-2 "Dual port serial"
agent_vgpu node-b node-b-mtty-0 0c7ac1d4-6e2a-4f3b-9b1e-1d2c3e4f5a02 mtty-2 "Dual port serial"
agent_vgpu node-c node-c-0000000200-0 0c7ac1d4-6e2a-4f3b-9b1e-1d2c3e4f5a03 i915-GVTg_V5_4
if eventually 20 mdevs_are "[$FM,$GVT,$MTTY]"; then
    pass "one entry per type in use (two nodes' mtty-2 once; a type without a name by its id), after the foreign one ($(awk -v a="$(now)" -v b="$T" 'BEGIN {printf "%.2f", a - b}') s)"
else
    fail "mediatedDevices entries" "$(mdevs)"
fi
[[ ",$(owned)," == *,devices.harvesterhci.io/i915-gvtg-v5-4,devices.harvesterhci.io/mtty-2,* ]] &&
    pass "... recorded as owned in the annotation" || fail "mdev names owned" "$(owned)"
agent_vgpu_removed node-a-mtty-0
kubectl delete vgpudevice node-c-0000000200-0 >/dev/null
if eventually 20 mdevs_are "[$FM,$MTTY]"; then
    pass "an instance removed on one node leaves the type's entry to the other; a deleted one's type goes"
else
    fail "mdev entries after removal" "$(mdevs)"
fi
kubectl delete vgpudevice node-a-mtty-0 node-b-mtty-0 >/dev/null
if eventually 20 mdevs_are "[$FM]" && [[ ",$(owned)," != *mtty* ]]; then
    pass "no instance left: only the foreign mediatedDevices entry stays, the names leave the record"
else
    fail "mdev entries removed" "$(mdevs) $(owned)"
fi

echo "--- the HostDevices feature gate off: the Ready claims are told"
ONE=$(kubectl get pcideviceclaims -o name | head -1)
ONE=${ONE#*/}
kubectl patch kubevirt -n kubevirt kubevirt --type merge \
    -p '{"spec":{"configuration":{"developerConfiguration":{"featureGates":[]}}}}' >/dev/null
event() { # claim reason
    [ -n "$(kubectl get events -n default --field-selector "involvedObject.name=$1,reason=$2" -o name)" ]
}
if eventually 20 event "$ONE" HostDevicesFeatureGateDisabled; then
    pass "Warning HostDevicesFeatureGateDisabled on a Ready claim ($ONE)"; else
    fail "gate Event" "$(kubectl get events -n default --field-selector "involvedObject.name=$ONE" 2>&1 | tail -3)"; fi
[ "$(cr_json | jq -c '.spec.configuration.developerConfiguration.featureGates')" = "[]" ] &&
    pass "the feature gates are left as they are" || fail "feature gates edited" "$(cr_json | jq -c .spec.configuration.developerConfiguration)"
kubectl patch kubevirt -n kubevirt kubevirt --type merge \
    -p '{"spec":{"configuration":{"developerConfiguration":{"featureGates":["HostDevices"]}}}}' >/dev/null

echo "--- claims no agent serves"
reason() { # kind name
    kubectl get "$1" "$2" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}/{.status.conditions[?(@.type=="Ready")].reason}' 2>/dev/null
}
is() { [ "$(reason "$1" "$2")" = "$3" ]; }
d=$(agent_device pci ghost 1 8086 10d3 intel.com/GHOST)
agent_claim pci "$d" ghost
if eventually 20 is pcideviceclaim "$d" False/NodeNotFound && eventually 10 event "$d" NodeNotFound; then
    pass "a claim for a node that does not exist: Ready=False NodeNotFound, and an Event"; else
    fail "NodeNotFound" "$(reason pcideviceclaim "$d")"; fi
create_node quiet
d=$(agent_device pci quiet 1 8086 10d3 intel.com/QUIET)
agent_claim pci "$d" quiet
if eventually 20 is pcideviceclaim "$d" False/AgentNotRunning && eventually 10 event "$d" AgentNotRunning; then
    pass "a claim on a node whose agent never reported: Ready=False AgentNotRunning, and an Event"; else
    fail "AgentNotRunning (never)" "$(reason pcideviceclaim "$d")"; fi
expect_contains "... the message says so" \
    "$(kubectl get pcideviceclaim "$d" -o jsonpath='{.status.conditions[0].message}')" \
    "has never reported (no heartbeat Lease hostdevd-node-lease/quiet)"
create_node fading
agent_heartbeat fading 10 # (long enough for the four kubectl calls below on a loaded machine)
F1=$(agent_device pci fading 1 8086 10d3 intel.com/FADING)
F2=$(agent_device usb fading 1 0951 1666)
agent_claim pci "$F1" fading
agent_claim usb "$F2" fading
agent_ready usb "$F2"
sleep 1
is pcideviceclaim "$F1" / && pass "a fresh heartbeat: the claim is left to its agent" ||
    fail "fresh heartbeat" "$(reason pcideviceclaim "$F1")"
if eventually 30 is pcideviceclaim "$F1" False/AgentNotRunning; then
    pass "the heartbeat expired: the waiting claim says AgentNotRunning (silent since ...)"; else
    fail "AgentNotRunning (silent)" "$(reason pcideviceclaim "$F1")"; fi
is usbdeviceclaim "$F2" True/R && pass "... the claim its agent made Ready stays Ready" ||
    fail "Ready claim kept" "$(reason usbdeviceclaim "$F2")"
has_entry "kubevirt.io/$F2" && pass "... and its permittedHostDevices entry stays" || fail "entry kept" "$(counts)"
agent_heartbeat fading 3600
agent_ready pci "$F1"
sleep 2
is pcideviceclaim "$F1" True/R && pass "the agent back: its Ready condition stands" ||
    fail "revived agent's status" "$(reason pcideviceclaim "$F1")"

echo "--- a Node deleted with claims on it"
create_node doomed
agent_heartbeat doomed 3600
NUID=$(kubectl get node doomed -o jsonpath='{.metadata.uid}')
D1=$(agent_device pci doomed 1 8086 10d3 intel.com/DOOMED)
kubectl patch pcidevice "$D1" --type merge -p \
    "{\"metadata\":{\"ownerReferences\":[{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"name\":\"doomed\",\"uid\":\"$NUID\"}]}}" >/dev/null
DUID=$(kubectl get pcidevice "$D1" -o jsonpath='{.metadata.uid}')
# Owned by its device (as Harvester's UI makes claims): the garbage collector deletes it.
printf 'apiVersion: %s/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: %s, finalizers: [%s/restore-driver], ownerReferences: [{apiVersion: %s/v1beta1, kind: PCIDevice, name: %s, uid: %s}]}\nspec: {address: "0000:00:01.0", nodeName: doomed}\n' \
    "$G" "$D1" "$G" "$G" "$D1" "$DUID" | kubectl create -f - >/dev/null
agent_ready pci "$D1"
D2=$(agent_device usb doomed 1 0951 1666)
agent_claim usb "$D2" doomed # not owned: its user deletes it
agent_ready usb "$D2"
if eventually 20 has_entry "intel.com/DOOMED"; then pass "claims Ready on node doomed"; else fail "doomed entries" "$(counts)"; fi
kubectl delete node doomed >/dev/null
gone() { ! kubectl get "$1" "$2" >/dev/null 2>&1; }
if eventually 60 gone pcideviceclaim "$D1"; then
    pass "the owned claim went with its node (garbage collector, then the controller removed the finalizer)"; else
    fail "owned claim gone" "$(kubectl get pcideviceclaim "$D1" -o jsonpath='{.metadata}')"; fi
if eventually 20 is usbdeviceclaim "$D2" False/NodeNotFound; then
    pass "the claim not owned says NodeNotFound"; else fail "NodeNotFound after delete" "$(reason usbdeviceclaim "$D2")"; fi
kubectl delete usbdeviceclaim "$D2" --wait=false >/dev/null
if eventually 20 gone usbdeviceclaim "$D2"; then pass "... and is gone at once when deleted: deletion does not hang"; else
    fail "USB claim deletion" "$(kubectl get usbdeviceclaim "$D2" -o jsonpath='{.metadata}')"; fi
event "$D2" FinalizerRemoved && pass "Event FinalizerRemoved on it" ||
    fail "FinalizerRemoved Event" "$(kubectl get events -n default --field-selector "involvedObject.name=$D2" 2>&1 | tail -3)"
if eventually 20 no_entry "intel.com/DOOMED" && no_entry "kubevirt.io/$D2"; then
    pass "their permittedHostDevices entries removed"; else fail "doomed entries removed" "$(counts)"; fi

echo "--- two KubeVirt CRs: neither is written; the one left is, once the other goes"
T_TWO=$(date +%s.%N)
CTL_LOG=$TEST_DIR/controller-$OTHER.log
# metric SERIES: the sum of the leader's /metrics series SERIES (a prefix, with any labels).
metric() { curl -fsS "http://127.0.0.1:${PORTS[$OTHER]}/metrics" | awk -v k="$1" 'index($1, k) == 1 {s += $2} END {print s + 0}'; }
kv_reconciles() { metric 'controller_runtime_reconcile_total{controller="kubevirt",'; }
kv_idle() { [ "$(metric 'workqueue_depth{controller="kubevirt",')" = 0 ] && [ "$(metric 'controller_runtime_active_workers{controller="kubevirt"}')" = 0 ]; }
# What a write would change: each CR's permittedHostDevices and annotations.
kv_state() { kubectl get kubevirt -A -o json | jq -c '[.items[] | {n: .metadata.namespace, a: .metadata.annotations, p: .spec.configuration.permittedHostDevices}] | sort_by(.n)'; }
WARNING='"Not exactly one KubeVirt CR in the cluster'
WARN0=$(grep -c "$WARNING" "$CTL_LOG")
kubectl create namespace kubevirt-two >/dev/null
printf 'apiVersion: kubevirt.io/v1\nkind: KubeVirt\nmetadata: {name: kubevirt, namespace: kubevirt-two}\nspec:\n  configuration:\n    developerConfiguration: {featureGates: [HostDevices]}\n    permittedHostDevices: {pciHostDevices: [%s]}\n' \
    "$FA" | kubectl create -f - >/dev/null
warned() { [ "$(grep -c "$WARNING" "$CTL_LOG")" -gt "$WARN0" ]; }
if eventually 20 warned; then
    expect_contains "a second KubeVirt CR: the leader's log says both are left alone, and how to choose" \
        "$(grep "$WARNING" "$CTL_LOG" | tail -1)" \
        'permittedHostDevices left alone" found=2 hint="name one with --kubevirt NAMESPACE/NAME"'
else
    fail "a warning for two KubeVirt CRs" "$(tail -5 "$CTL_LOG")"
fi
eventually 20 kv_idle || fail "the KubeVirt reconciler idle" "$(curl -fsS "http://127.0.0.1:${PORTS[$OTHER]}/metrics" | grep kubevirt)"
BEFORE=$(kv_state)
R0=$(kv_reconciles)
d=$(agent_device pci node-a 8 8086 10d8 intel.com/TWO)
agent_claim pci "$d" node-a
agent_ready pci "$d"
# Both CRs reconciled since the claim became Ready: a write of either would have completed.
reconciled() { [ "$(kv_reconciles)" -ge $((R0 + 2)) ]; }
changed() { jq -rn --argjson a "$BEFORE" --argjson b "$(kv_state)" '[range($b | length) | select($a[.] != $b[.]) | $b[.].n] | join(" ")'; }
second() { kubectl get kubevirt -n kubevirt-two kubevirt -o json | jq -c '{a: .metadata.annotations, p: .spec.configuration.permittedHostDevices}'; }
if ! eventually 20 reconciled; then
    fail "both KubeVirt CRs reconciled after the claim became Ready" "reconciles $R0 -> $(kv_reconciles)"
elif [ -z "$(changed)" ] && [ "$(second)" = "{\"a\":null,\"p\":{\"pciHostDevices\":[$FA]}}" ]; then
    pass "a claim made Ready: both CRs reconciled, neither written (the second as it was made)"
else
    fail "neither CR written" "changed since the claim: '$(changed)'; the second CR: $(second | cut -c1-300)"
fi
kubectl delete kubevirt -n kubevirt-two kubevirt >/dev/null
if eventually 20 has_entry intel.com/TWO; then pass "the second CR deleted: the one left gets the claim's entry"; else
    fail "entry after the second CR went" "$(counts)"; fi
expect_contains "... and the log says it manages that one again" \
    "$(grep '"Exactly one KubeVirt CR again' "$CTL_LOG" | tail -1)" 'kubevirt="kubevirt/kubevirt"'
echo "  two KubeVirt CRs: $(awk -v a="$(date +%s.%N)" -v b="$T_TWO" 'BEGIN {printf "%.1f", a - b}') s"

echo "--- all claims deleted"
kubectl delete pcideviceclaims --all --wait=false >/dev/null
kubectl delete usbdeviceclaims --all --wait=false >/dev/null
kubectl get usbdeviceclaims -o name | xargs -r -I{} kubectl patch {} --type merge -p '{"metadata":{"finalizers":null}}' >/dev/null
only_foreign() { [ "$(counts | grep -cvE '^(mellanox.com/CX5|intel.com/X710|example.com/)')" -eq 0 ]; }
if eventually 60 only_foreign; then pass "our entries removed, the foreign ones kept"; else fail "cleanup" "$(counts)"; fi
[ -z "$(kubectl get kubevirt -n kubevirt kubevirt -o jsonpath='{.metadata.annotations.hostdevd\.io/owned-host-devices}')" ] &&
    pass "ownership record emptied" || fail "ownership annotation" "$(kubectl get kubevirt -n kubevirt kubevirt -o jsonpath='{.metadata.annotations}')"
echo "  claim Ready -> entry ${STATS:-?}; CR writes in the concurrent run: ${WRITES:-?}"
mkdir -p "$ROOT/build/results" && echo "ready-to-entry ${STATS:-?}; concurrent writes ${WRITES:-?}" >"$ROOT/build/results/controller.txt"
echo "--- a Lease that cannot be written: the replica says why, once, and is not Ready"
# lease_rounds NS: the Lease requests of the API server's audit log in namespace NS.
lease_rounds() { grep -c "\"namespace\":\"$1\".*\"resource\":\"leases\"\|\"resource\":\"leases\",\"namespace\":\"$1\"" "$TEST_DIR/cluster/audit.log"; }
lost_replica() { # index namespace kubeconfig
    local port
    port=$(free_port)
    PORTS[$1]=$port
    "$CTL" controller --kubeconfig "$3" --listen "127.0.0.1:$port" --id "replica-$1" --namespace "$2" \
        --lease-duration 3 -v 1 >>"$TEST_DIR/controller-$1.log" 2>&1 &
    PIDS[$1]=$!
    track "${PIDS[$1]}"
}
readyz() { curl -sS "http://127.0.0.1:${PORTS[$1]}/readyz" 2>/dev/null; }
# with_rounds NS N: at least N Lease requests in NS (the retries the log must not repeat).
with_rounds() { [ "$(lease_rounds "$1")" -ge "$2" ]; }
lost_checks() { # index namespace want-in-readyz
    local i=$1 ns=$2 want=$3
    says() { readyz "$i" | grep -qF "$want"; }
    if eventually 30 says; then pass "/readyz says: $(readyz "$i" | head -1)"; else fail "/readyz of a replica whose Lease cannot be written" "$(readyz "$i")"; fi
    expect_ok "... with 503 (not Ready: no replica could lead)" bash -c "! curl -fsS http://127.0.0.1:${PORTS[$i]}/readyz"
    expect_ok "... and not leading" bash -c "! curl -fsS http://127.0.0.1:${PORTS[$i]}/metrics | grep -qx 'hostdevd_leader 1'"
    eventually 30 with_rounds "$ns" 5 || fail "5 Lease requests in $ns" "$(lease_rounds "$ns")"
    expect_ok "the log says it once over $(lease_rounds "$ns") tries" test "$(grep -c '"Cannot hold the leader Lease"' "$TEST_DIR/controller-$i.log")" -eq 1
    expect_contains "... naming what is wrong" "$(grep '"Cannot hold the leader Lease' "$TEST_DIR/controller-$i.log")" "problem=\"cannot write Lease $ns/hostdevd-controller: "
}
lost_replica 2 absent-ns "$ADMIN"
lost_checks 2 absent-ns 'lease: cannot write Lease absent-ns/hostdevd-controller: namespaces "absent-ns" not found'
kill -TERM "${PIDS[2]}"
wait "${PIDS[2]}" && pass "it exits 0 on SIGTERM" || fail "controller exit" "$(tail -5 "$TEST_DIR/controller-2.log")"
# RBAC without the right to write Leases: it reads everything it watches, and may read Leases.
kubectl create namespace nolease >/dev/null
kubectl create serviceaccount ctl-nolease -n nolease >/dev/null
kubectl create clusterrole ctl-nolease --verb=get,list,watch --resource=pcidevices,pcideviceclaims,usbdevices,usbdeviceclaims,vgpudevices,nodes,leases,kubevirts >/dev/null
kubectl create clusterrolebinding ctl-nolease --clusterrole ctl-nolease --serviceaccount nolease:ctl-nolease >/dev/null
sa_kubeconfig nolease ctl-nolease "$TEST_DIR/nolease.kubeconfig"
lost_replica 3 nolease "$TEST_DIR/nolease.kubeconfig"
lost_checks 3 nolease 'lease: cannot write Lease nolease/hostdevd-controller: leases.coordination.k8s.io is forbidden'
expect_contains "... (HTTP 403 Forbidden)" "$(readyz 3)" "(HTTP 403 Forbidden)"
kubectl create role lease-writer -n nolease --verb=get,create,update --resource=leases >/dev/null
kubectl create rolebinding lease-writer -n nolease --role lease-writer --serviceaccount nolease:ctl-nolease >/dev/null
# Granted, it can write its Lease (in a namespace of its own: it would lead there; stopped at once).
again() { grep -q '"The leader Lease can be read and written again' "$TEST_DIR/controller-3.log"; }
if eventually 30 again; then pass "granted the right, it logs that the Lease can be written again"; else fail "recovery logged" "$(tail -5 "$TEST_DIR/controller-3.log")"; fi
kill -TERM "${PIDS[3]}"
wait "${PIDS[3]}" && pass "it exits 0 on SIGTERM" || fail "controller exit" "$(tail -5 "$TEST_DIR/controller-3.log")"

kill -TERM "${PIDS[$OTHER]}"
wait "${PIDS[$OTHER]}" && pass "the leader exits 0 on SIGTERM (no leaks)" || fail "controller exit" "$(tail -20 "$TEST_DIR/controller-$OTHER.log")"
finish
