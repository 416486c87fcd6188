#!/usr/bin/env bash
# shellcheck disable=SC2317,SC2015,SC2016 # functions run by eventually; pass || fail; the guest's $
# test/long/test_health_soak.sh - issue 46's "a healthy device is never marked otherwise": in
# the qemu node (Debian's kernel, TCG, real vfio-pci) HEALTH_SOAK_CYCLES (200) releases of the
# e1000e at 0000:00:04.0, each reset through the kernel's reset_method and verified
# (src/node/pcireset.c, src/controllers/binding/pcibind.c), with zero false alarms. A cycle is
# either a PCIDeviceClaim (created, passthroughEnabled on vfio-pci, deleted and gone: the
# release restored e1000e) or, every HEALTH_SOAK_DRA_EVERY-th (4: 50 of 200), the DRA path
# (kubelet's NodePrepareResources then NodeUnprepareResources of one allocated ResourceClaim,
# played by grpctool in the guest as test/e2e/test_dra.sh does). Asserted over the whole run:
# no PCIDevice of the node ever had Healthy other than True (one `kubectl get --watch` of the
# PCIDevices, in the background from before the first cycle to after the last, alive and
# current at the end), no Warning Event, one DeviceReset per release (the Events' occurrences,
# series counted: 200, by path; each says back on "e1000e" answering as 8086:10d3) and as many
# resets in the agent's log, the device on e1000e answering 8086:10d3 in its config space at the
# end, the agent never restarted. Printed: the agent's VmRSS after cycle 10 and at the end, the
# time per cycle (p50/p95/max, by path). Waits are watches (`kubectl wait`, `kubectl delete`)
# and grpctool's synchronous calls; a cycle that does not end within HEALTH_SOAK_WAIT (60) s
# ends the run. 11 minutes on a quiet host, 28 under load (docs/testing.md, Long checks).
# shellcheck disable=SC2034 # lib.sh reads SUITE, e2e/lib.sh E2E_AGENT and NODE
SUITE=long-health-soak
# shellcheck source=test/e2e/lib.sh disable=SC1091
. "$(dirname "$0")/../e2e/lib.sh"

cd "$ROOT" || exit 1
T_START=$SECONDS
CYCLES=${HEALTH_SOAK_CYCLES:-200}
DRA_EVERY=${HEALTH_SOAK_DRA_EVERY:-4} # 0: no DRA cycle
WAIT=${HEALTH_SOAK_WAIT:-60}
NODE=qhsoak
NIC=0000:00:04.0
DEV=pci-0000-00-04-0
DRIVER=vfio-pci.hostdevd.io
KDIR=/var/lib/kubelet
SOCK=$KDIR/plugins/$DRIVER/dra.sock
GRPCTOOL=$ROOT/build/release/grpctool
E2E_AGENT=$ROOT/bin/hostdevd # the plain build, as test_soak.sh
make -C "$ROOT" bin/hostdevd build/release/grpctool >/dev/null || { fail "bin/hostdevd and grpctool build"; finish; }

cluster_start
install_crds
create_node "$NODE"
expect_ok "the DeviceClasses are applied" kubectl apply -f manifests/deviceclasses.yaml
PCIDEV=$(name_of "$NIC")

echo "--- boot (agent: bin/hostdevd, with the DRA plugin)"
if node_boot "$NODE" --no-agent --extra "$GRPCTOOL:/usr/bin/grpctool" \
    --agent-args "--kubelet-dir $KDIR --cdi-dir /var/run/cdi"; then pass "node $NODE boots (${BOOT_SECONDS}s)"; else
    fail "node boots"; finish; fi
OUT=$(guest "mkdir -p $KDIR/plugins_registry && agentctl start" 2>&1)
if eventually 120 guest_agent_ready; then pass "agent ready"; else fail "agent ready" "$OUT"$'\n'"$(node_logs)"; finish; fi
healthy_true() { [ "$(kget pcidevice "$PCIDEV" '.status.conditions[]? | select(.type == "Healthy") | .status')" = True ]; }
if eventually 60 healthy_true; then pass "PCIDevice $PCIDEV says Healthy=True"; else
    fail "PCIDevice $PCIDEV Healthy=True" "$(kubectl get pcidevice "$PCIDEV" -o jsonpath='{.status}')"; finish; fi
expect_ok "$NIC starts on e1000e" on_driver "$NIC" e1000e

# The ResourceClaim of the DRA cycles, allocated to the e1000e as kube-scheduler would write it;
# prepared and unprepared again and again (a claim used by one pod after another).
jq -n --arg c "$DRIVER" '{apiVersion: "resource.k8s.io/v1", kind: "ResourceClaim",
    metadata: {name: "soak", namespace: "default"},
    spec: {devices: {requests: [{name: "nic", exactly: {deviceClassName: $c}}]}}}' | kubectl create -f - >/dev/null
RC_UID=$(kubectl get resourceclaim soak -n default -o jsonpath='{.metadata.uid}')
kubectl patch resourceclaim soak -n default --subresource=status --type=merge -p "$(jq -cn --arg d "$DRIVER" \
    --arg p "$NODE" --arg n "$DEV" '{status: {allocation: {devices: {results: [{request: "nic", driver: $d,
    pool: $p, device: $n}]}, nodeSelector: {nodeSelectorTerms: [{matchFields: [{key: "metadata.name",
    operator: "In", values: [$p]}]}]}}}}')" >/dev/null
[ -n "$RC_UID" ] && pass "ResourceClaim default/soak allocated to $DEV" || { fail "ResourceClaim allocated"; finish; }

# sample: "<pid> <VmRSS kB> <restarts>" of the supervised agent.
sample() { guest 'p=$(cat /run/agent/pid); echo $p $(awk "/^VmRSS/{print \$2}" /proc/$p/status) $(cat /run/agent/restarts 2>/dev/null || echo 0)'; }
# A cycle of each path; WHY says why one did not end. Every wait is a watch (kubectl) or a
# synchronous call (grpctool answers once the agent bound or restored the device).
pci_cycle() {
    claim "$NIC" || { WHY="claim not created"; return 1; }
    # (its stderr: client-go's note of the watch it ended itself, and the timeout WHY says)
    kubectl wait --for=jsonpath='{.status.passthroughEnabled}'=true "pcideviceclaim/$PCIDEV" --timeout="${WAIT}s" >/dev/null 2>&1 ||
        { WHY="claim not passthroughEnabled within ${WAIT}s: $(reason "$NIC"): $(message "$NIC")"; return 1; }
    kubectl delete pcideviceclaim "$PCIDEV" --timeout="${WAIT}s" >/dev/null ||
        { WHY="claim not gone within ${WAIT}s: $(reason "$NIC"): $(message "$NIC")"; return 1; }
}
dra() { OUT=$(guest "grpctool dra $SOCK $1 default/soak/$RC_UID" 2>&1); }
# The agent's watch may see the last PCIDeviceClaim's deletion after kubectl did: until then
# the device is that claim's and prepare refuses it (kubelet retries a failed prepare too).
prepared() {
    dra prepare
    [[ "$OUT" == "uid=$RC_UID error=\"\" device=$NODE/$DEV "* ]] && return 0
    [[ "$OUT" == *"is held by PCIDeviceClaim $PCIDEV"* ]] && REFUSED=$((REFUSED + 1))
    return 1
}
dra_cycle() {
    eventually "$WAIT" prepared || { WHY="prepare: $OUT"; return 1; }
    dra unprepare
    [ "$OUT" = "uid=$RC_UID error=\"\"" ] || { WHY="unprepare: $OUT"; return 1; }
}

echo "--- $CYCLES releases, every ${DRA_EVERY}th through DRA (0: none); the PCIDevices watched throughout"
WATCH=$TEST_DIR/pcidevices.watch.json
kubectl get pcidevices --watch --output-watch-events -o json >"$WATCH" 2>"$WATCH.err" &
WATCH_PID=$!
watching() { jq -e --arg n "$PCIDEV" 'select(.object.metadata.name == $n)' "$WATCH" >/dev/null 2>&1; }
eventually 30 watching || fail "the watch of the PCIDevices lists $PCIDEV" "$(cat "$WATCH.err")"
read -r PID0 RSS0 RESTARTS0 <<<"$(sample)"
RESULTS=$ROOT/build/results
mkdir -p "$RESULTS"
OUT_FILE=$RESULTS/health-soak.txt
echo "# cycle path milliseconds" >"$OUT_FILE"
DONE=0 N_DRA=0 RSS10="" REFUSED=0
T0=$SECONDS
for i in $(seq 1 "$CYCLES"); do
    path=pci
    [ "$DRA_EVERY" -gt 0 ] && [ $((i % DRA_EVERY)) -eq 0 ] && path=dra
    t0=$(date +%s%N)
    if ! "${path}_cycle"; then
        fail "cycle $i ($path) ends" "$WHY"
        break
    fi
    echo "$i $path $((($(date +%s%N) - t0) / 1000000))" >>"$OUT_FILE"
    DONE=$i
    [ "$path" = pci ] || N_DRA=$((N_DRA + 1))
    [ "$i" -ne 10 ] || read -r _ RSS10 _ <<<"$(sample)"
    [ $((i % 50)) -ne 0 ] || echo "  cycle $i ($((SECONDS - T0)) s)"
done
ELAPSED=$((SECONDS - T0))
[ "$DONE" -eq "$CYCLES" ] && pass "$CYCLES releases ($((CYCLES - N_DRA)) PCIDeviceClaims, $N_DRA DRA unprepares) in $ELAPSED s"
echo "  DRA prepares answered 'held by PCIDeviceClaim' (the agent's watch behind kubectl's) and retried: $REFUSED"

echo "--- after"
RESETS=$DONE # one release a cycle that ended
events() { kubectl get events.events.k8s.io -A -o json | jq -r ".items[] | $1"; }
# The recorder writes a series' count (an Event's repeats) within its flush interval (30 s).
reset_events() { # "<occurrences on PCIDeviceClaims> <on PCIDevices>" of DeviceReset
    events 'select(.reason == "DeviceReset") | "\(.regarding.kind) \(.series.count // 1)"' |
        awk '{n[$1] += $2} END {printf "%d %d\n", n["PCIDeviceClaim"], n["PCIDevice"]}'
}
all_counted() { [ "$(reset_events)" = "$((RESETS - N_DRA)) $N_DRA" ]; }
if eventually 60 all_counted; then pass "one DeviceReset per release: $RESETS ($((RESETS - N_DRA)) on the PCIDeviceClaims, $N_DRA on the PCIDevice)"; else
    fail "one DeviceReset per release ($((RESETS - N_DRA)) on claims, $N_DRA on the PCIDevice)" "counted (claims, PCIDevice): $(reset_events)"; fi
NOTES=$(events 'select(.reason == "DeviceReset") | .note' | sort | uniq -c)
[ "$(wc -l <<<"$NOTES")" -eq 1 ] && [[ "$NOTES" == *"back on driver \"e1000e\"; it answers as 8086:10d3" ]] &&
    pass "all $(awk '{print $1}' <<<"$NOTES") of them (Event objects) say: $(awk '{$1 = ""; print substr($0, 2)}' <<<"$NOTES")" ||
    fail "the DeviceReset notes" "$NOTES"
LOGGED=$(guest "grep -c 'Reset device on release' /var/log/hostdevd.log")
[ "$LOGGED" = "$RESETS" ] && pass "the agent's log has $LOGGED resets" || fail "resets in the agent's log" "$LOGGED, want $RESETS"
WARN=$(events 'select(.type == "Warning") | "\(.reportingController) \(.reason) \(.regarding.kind)/\(.regarding.name) x\(.series.count // 1): \(.note)"')
[ -z "$WARN" ] && pass "no Warning Event" || fail "Warning Events" "$WARN"

# The watch: alive to the end and current (it has the PCIDevice's resourceVersion of now), then
# every version of every PCIDevice it saw.
RV=$(kubectl get pcidevice "$PCIDEV" -o jsonpath='{.metadata.resourceVersion}')
watch_current() { jq -e --arg rv "$RV" 'select(.object.metadata.resourceVersion == $rv)' "$WATCH" >/dev/null 2>&1; }
if kill -0 "$WATCH_PID" 2>/dev/null && eventually 10 watch_current; then pass "the watch ran throughout (it has resourceVersion $RV)"; else
    fail "the watch ran throughout" "$(cat "$WATCH.err")"; fi
kill "$WATCH_PID" 2>/dev/null
wait "$WATCH_PID" 2>/dev/null
SEEN=$(jq -s --arg n "$PCIDEV" '[.[] | select(.object.metadata.name == $n)] |
    "\(length) versions of \($n), \(map(select(.object.status.kernelDriverInUse == "vfio-pci")) | length) on vfio-pci"' -r "$WATCH")
BAD=$(jq -r '.object as $o | $o.status.conditions[]? | select(.type == "Healthy" and .status != "True") |
    "\($o.metadata.name) rv \($o.metadata.resourceVersion): \(.status) \(.reason): \(.message)"' "$WATCH" | sort -u)
NO_COND=$(jq -r --arg n "$PCIDEV" 'select(.object.metadata.name == $n and ([.object.status.conditions[]? | select(.type == "Healthy")] | length) == 0) | .object.metadata.resourceVersion' "$WATCH")
[ -z "$BAD$NO_COND" ] && pass "no PCIDevice ever other than Healthy=True ($SEEN, each Healthy=True)" ||
    fail "Healthy never False" "$BAD${NO_COND:+ (versions of $PCIDEV without Healthy: $NO_COND)}"

D=$(guest_driver "$NIC")
IDS=$(guest "od -An -tx1 -N4 /sys/bus/pci/devices/$NIC/config" | xargs)
[ "$D $IDS" = "e1000e 86 80 d3 10" ] && pass "$NIC on e1000e, its config space answers 8086:10d3" || fail "the device at the end" "driver $D, config $IDS"
expect_ok "its PCIDevice still Healthy=True" healthy_true
read -r PID1 RSS1 RESTARTS1 <<<"$(sample)"
[ "$PID1" = "$PID0" ] && [ "$RESTARTS1" = "$RESTARTS0" ] && pass "the agent never restarted (pid $PID0)" ||
    fail "agent restarted" "pid $PID0 -> $PID1, restarts $RESTARTS0 -> $RESTARTS1"
LEFT=$(kubectl get pcideviceclaims -o name 2>&1)
[ -z "$LEFT" ] && pass "no claim left" || fail "claims left" "$LEFT"

pct() { # percentile of the numbers on stdin
    sort -n | awk -v p="$1" '{a[NR] = $1} END {i = int((NR * p + 99) / 100); if (i < 1) i = 1; print a[i]}'
}
times_of() { awk -v p="$1" '$2 ~ p {print $3}' "$OUT_FILE"; }
for p in pci dra 'pci|dra'; do
    [ -n "$(times_of "^($p)\$")" ] || continue
    echo "  ms a cycle ($p): p50 $(times_of "^($p)\$" | pct 50), p95 $(times_of "^($p)\$" | pct 95), max $(times_of "^($p)\$" | pct 100) over $(times_of "^($p)\$" | wc -l)"
done
echo "  agent VmRSS: $RSS0 kB before the first cycle, ${RSS10:-?} kB after cycle 10, $RSS1 kB at the end" \
    "(${RSS10:+$((RSS1 - RSS10)) kB since cycle 10; }the Event recorder keeps an entry per claim's Event for 600 s)"
echo "  health soak: $DONE cycles in $ELAPSED s, test $((SECONDS - T_START)) s"
echo "# $DONE cycles ($N_DRA DRA) in $ELAPSED s; rss $RSS0 / ${RSS10:-?} (cycle 10) / $RSS1 kB" >>"$OUT_FILE"
finish
