#!/usr/bin/env bash
# test/long/test_soak.sh - a soak on a real kernel (`make test-long`, not part of make test): a
# qemu node (hack/qemu-node.sh, TCG) whose agent is the plain release build (bin/hostdevd, not
# the sanitizer build), and SOAK_CYCLES (default 1000) claim/unclaim cycles: each cycle claims
# the e1000e at 0000:00:04.0 (bound to vfio-pci) and the USB stick at port 2-3 (enabled), waits
# until both are Ready, deletes both and waits until they are gone (the e1000e restored). Every
# SOAK_SAMPLE (50) cycles the agent's VmRSS, open fds and threads are sampled in the guest, and
# the drivers checked. Asserted after the run: every cycle ended (no claim stuck, each wait
# bounded by SOAK_WAIT seconds), the agent never restarted, RSS grew by less than SOAK_RSS_KIB
# (1024) KiB from the warm-up's end to the last sample, the fd and thread
# counts after the first cycle equal to those at the end (the first claim of a resource opens its
# device plugin's socket, which stays: docs/deviceplugins.md), every device on its original
# driver, no Warning Event. The samples go to build/results/soak.txt.
# The warm-up ends at the first sample after SOAK_WARMUP (100) cycles and SOAK_WARMUP_SECONDS
# (660) seconds: the agent's Event recorder keeps each Event's entry for its series window (600 s,
# flushed every 30 s; at most 4096 entries), so the cycles of the first ten minutes add entries
# (4 Events a cycle) that only later ones replace.
SUITE=long-soak
# shellcheck source=test/e2e/lib.sh
. "$(dirname "$0")/../e2e/lib.sh"
cd "$ROOT" || exit 1
T_START=$SECONDS
CYCLES=${SOAK_CYCLES:-1000}
EVERY=${SOAK_SAMPLE:-50}
WARMUP=${SOAK_WARMUP:-100}
WARMUP_SECONDS=${SOAK_WARMUP_SECONDS:-660}
RSS_KIB=${SOAK_RSS_KIB:-1024}
WAIT=${SOAK_WAIT:-60}
NODE=qsoak
NIC=0000:00:04.0
PCI_CLAIM=$NODE-000000040
STICK=$NODE-46f4-0001-2-3
G=devices.harvesterhci.io
[ "$WARMUP" -le "$CYCLES" ] || WARMUP=$CYCLES
# The plain build: the agent a node runs, without the sanitizers' own memory behaviour.
E2E_AGENT=$ROOT/bin/hostdevd
make -C "$ROOT" bin/hostdevd >/dev/null || { fail "bin/hostdevd builds"; finish; }

cluster_start
install_crds
create_node "$NODE"

echo "--- boot (agent: bin/hostdevd)"
if node_boot "$NODE"; then pass "node $NODE boots (${BOOT_SECONDS}s)"; else fail "node boots"; finish; fi
if eventually 120 guest_agent_ready; then pass "agent ready"; else fail "agent ready" "$(node_logs)"; finish; fi
usb_driver() { guest 'basename $(readlink /sys/bus/usb/devices/2-3:1.0/driver) 2>/dev/null'; }
pci_driver() { guest "basename \$(readlink /sys/bus/pci/devices/$NIC/driver) 2>/dev/null"; }
drivers() { echo "$(pci_driver) $(usb_driver)"; }
eventually 60 kubectl get usbdevice "$STICK" || fail "the stick's USBDevice" "$(kubectl get usbdevices)"
eventually 60 kubectl get pcidevice "$PCI_CLAIM" || fail "the e1000e's PCIDevice" "$(kubectl get pcidevices)"
DRIVERS=$(drivers)
[ "$DRIVERS" = "e1000e usb-storage" ] || fail "original drivers" "$DRIVERS"

# sample: "<pid> <VmRSS kB> <fds> <threads> <restarts>" of the supervised agent.
sample() {
    guest 'p=$(cat /run/agent/pid); echo $p $(awk "/^VmRSS/{print \$2}" /proc/$p/status) $(ls /proc/$p/fd 2>/dev/null | wc -l) $(ls /proc/$p/task 2>/dev/null | wc -l) $(cat /run/agent/restarts 2>/dev/null || echo 0)'
}
CLAIMS=$(printf 'apiVersion: %s/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: %s}\nspec: {address: "%s", nodeName: %s}\n---\napiVersion: %s/v1beta1\nkind: USBDeviceClaim\nmetadata: {name: %s}\nspec: {}\n' \
    "$G" "$PCI_CLAIM" "$NIC" "$NODE" "$G" "$STICK")
ready() { # both waits run at once, each a watch
    kubectl wait --for=jsonpath='{.status.passthroughEnabled}'=true "pcideviceclaim/$PCI_CLAIM" --timeout="${WAIT}s" >/dev/null &
    local p=$!
    kubectl wait --for=jsonpath='{.status.conditions[?(@.type=="Ready")].reason}'=Enabled \
        "usbdeviceclaim/$STICK" --timeout="${WAIT}s" >/dev/null || { wait $p; return 1; }
    wait $p
}
cycle() {
    kubectl create -f - <<<"$CLAIMS" >/dev/null || return 1
    ready || { echo "not Ready within ${WAIT}s"; return 1; }
    kubectl delete "pcideviceclaim/$PCI_CLAIM" "usbdeviceclaim/$STICK" --wait=false >/dev/null || return 1
    kubectl wait --for=delete "pcideviceclaim/$PCI_CLAIM" "usbdeviceclaim/$STICK" --timeout="${WAIT}s" >/dev/null ||
        { echo "not gone within ${WAIT}s"; return 1; }
}
claims_state() { kubectl get pcideviceclaims,usbdeviceclaims -o wide 2>&1; kubectl get usbdevice "$STICK" -o jsonpath='{.status}'; }

echo "--- $CYCLES cycles: claim the e1000e and the stick, Ready, delete, gone"
RESULTS=$ROOT/build/results
mkdir -p "$RESULTS"
OUT=$RESULTS/soak.txt
FIRST=$(sample)
read -r PID0 RSS0 FD0 TH0 RESTARTS0 <<<"$FIRST"
printf '# cycle seconds pid rss_kib fds threads restarts drivers\n0 0 %s %s\n' "$FIRST" "$DRIVERS" >"$OUT"
FD_BOOT=$FD0
echo "  before: pid $PID0, VmRSS $RSS0 kB, $FD0 fds, $TH0 threads"
T0=$SECONDS
DONE=0
BASE=""
BASE_CYCLE=""
MAX=$RSS0
BAD_DRIVERS=""
for i in $(seq 1 "$CYCLES"); do
    if ! WHY=$(cycle); then
        fail "cycle $i ends" "$WHY; $(claims_state)"
        break
    fi
    DONE=$i
    if [ "$i" -eq 1 ] || [ $((i % EVERY)) -eq 0 ] || [ "$i" -eq "$CYCLES" ]; then
        S=$(sample)
        D=$(drivers)
        [ "$D" = "$DRIVERS" ] || BAD_DRIVERS+="cycle $i: $D; "
        read -r _ RSS _ <<<"$S"
        [ "${RSS:-0}" -le "$MAX" ] || MAX=$RSS
        if [ -z "$BASE" ] && [ "$i" -ge "$WARMUP" ] && [ $((SECONDS - T0)) -ge "$WARMUP_SECONDS" ]; then
            BASE=$RSS
            BASE_CYCLE=$i
        fi
        [ "$i" -ne 1 ] || read -r _ _ FD0 TH0 _ <<<"$S"
        echo "$i $((SECONDS - T0)) $S $D" >>"$OUT"
        echo "  cycle $i ($((SECONDS - T0)) s): $S  $D"
    fi
done
ELAPSED=$((SECONDS - T0))
[ "$DONE" -eq "$CYCLES" ] && pass "$CYCLES cycles, none stuck ($ELAPSED s, $(awk -v s="$ELAPSED" -v n="$CYCLES" 'BEGIN {printf "%.2f", s / n}') s a cycle)"

echo "--- after"
# The agent's open connections and watches settle; fds are counted once more after a pause.
sleep 5
LAST=$(sample)
read -r PID1 RSS1 FD1 TH1 RESTARTS1 <<<"$LAST"
echo "end $((SECONDS - T0)) $LAST $(drivers)" >>"$OUT"
[ "$PID1" = "$PID0" ] && [ "$RESTARTS1" = "$RESTARTS0" ] && pass "the agent never restarted (pid $PID0)" ||
    fail "agent restarted" "pid $PID0 -> $PID1, restarts $RESTARTS0 -> $RESTARTS1"
if [ -z "$BASE" ]; then
    fail "VmRSS growth after the warm-up" "the run ended before the warm-up did ($WARMUP cycles and $WARMUP_SECONDS s)"
elif [ $((RSS1 - BASE)) -lt "$RSS_KIB" ]; then
    pass "VmRSS after the warm-up (cycle $BASE_CYCLE) $BASE kB -> $RSS1 kB at the end: grew $((RSS1 - BASE)) kB (< $RSS_KIB)"
else
    fail "VmRSS growth" "$BASE kB at cycle $BASE_CYCLE -> $RSS1 kB (bound $RSS_KIB kB); samples in $OUT"
fi
[ "$FD1" = "$FD0" ] && pass "open fds after the first cycle and at the end: $FD0 = $FD1 ($FD_BOOT before any claim)" || fail "fd count" "$FD0 -> $FD1: $(guest "ls -l /proc/$PID1/fd")"
[ "$TH1" = "$TH0" ] && pass "threads after the first cycle and at the end: $TH0 = $TH1" || fail "thread count" "$TH0 -> $TH1"
D=$(drivers)
[ "$D" = "$DRIVERS" ] && [ -z "$BAD_DRIVERS" ] && pass "the e1000e and the stick on their original drivers at every sample ($D)" ||
    fail "drivers" "now $D; $BAD_DRIVERS"
LEFT=$(kubectl get pcideviceclaims,usbdeviceclaims -o name 2>&1)
[ -z "$LEFT" ] && pass "no claim left" || fail "claims left" "$LEFT"
[ -z "$(kubectl get usbdevice "$STICK" -o jsonpath='{.status.status}')" ] &&
    [ "$(kubectl get usbdevice "$STICK" -o jsonpath='{.status.enabled}')" = false ] &&
    pass "the stick's USBDevice: not orphaned, not enabled" || fail "the stick's USBDevice" "$(claims_state)"
WARN=$(kubectl get events -A --field-selector type=Warning -o custom-columns=REASON:.reason,COUNT:.count,MESSAGE:.message --no-headers 2>&1)
[ -z "$WARN" ] && pass "no Warning Event" || fail "Warning Events" "$WARN"
NORMAL=$(kubectl get events -A -o jsonpath='{range .items[*]}{.reason}{"\n"}{end}' | sort | uniq -c | awk '{printf "%s %s, ", $2, $1}')
echo "  Event objects by reason: ${NORMAL%, }"
echo "  soak: $DONE cycles in $ELAPSED s; VmRSS first $RSS0 kB, after the warm-up (cycle ${BASE_CYCLE:-?}) ${BASE:-?} kB, last $RSS1 kB, max $MAX kB;" \
    "fds $FD_BOOT at boot, $FD0 after cycle 1 -> $FD1; threads $TH0 -> $TH1; test $((SECONDS - T_START)) s"
echo "# $DONE cycles in $ELAPSED s; rss first $RSS0 warm-up ${BASE:-?} last $RSS1 max $MAX kB; fds $FD_BOOT, $FD0 -> $FD1" >>"$OUT"
finish
