#!/usr/bin/env bash
# test/e2e/test_claims.sh - PCIDeviceClaims on a real kernel: a qemu node (hack/qemu-node.sh)
# whose agent runs with a token bound to its Node under the project's RBAC and admission
# policies (manifests/). Checks: a claim binds an e1000e to vfio-pci (/dev/vfio/<group>, Ready,
# passthroughEnabled) and deleting it resets it (DeviceReset naming the guest kernel's
# reset_method) and brings e1000e back; a device the admin put on vfio-pci
# (vfio-pci ids= in modprobe.d, or a driverctl-style driver_override) records vfio-pci and stays
# on vfio-pci, its override kept, after its claim is deleted; the management NIC is refused as
# host-critical and keeps working; a VM holding the group (an open /dev/vfio/<group>) holds the
# deletion until it lets go; after a reboot the claimed device is on vfio-pci again with no API
# change; the agent aborted right after each step of bind and restore (HOSTDEVD_FAULT) and
# restarted ends with the device where the claim wants it (make test: after the unbind of a bind
# and of a restore; make test-long, E2E_CLAIMS_ALL=1: after every step). make test-long also
# prints the time from claim creation to passthroughEnabled (median of 10) next to the raw sysfs
# bind sequence in the same guest.
SUITE=e2e-claims
# shellcheck source=test/e2e/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT"
NODE=qclaim
NIC=0000:00:04.0  # e1000e
NIC2=0000:00:05.0 # e1000e
MGMT=0000:00:02.0 # virtio-net with 10.0.2.15 and the default route

cluster_start
install_crds
create_node "$NODE"

group_of() { guest "basename \$(readlink /sys/bus/pci/devices/$1/iommu_group)"; }

echo "--- boot"
if node_boot "$NODE"; then pass "node $NODE boots (${BOOT_SECONDS}s)"; else fail "node boots"; finish; fi
if eventually 120 guest_agent_ready; then pass "agent ready with its node-bound token"; else fail "agent ready" "$(node_logs)"; finish; fi
GROUP=$(group_of "$NIC")

echo "--- claim and release an e1000e"
claim "$NIC"
if eventually 60 enabled "$NIC"; then pass "claim on $NIC is passthroughEnabled"; else fail "claim on $NIC is passthroughEnabled" "$(reason "$NIC"): $(field "$NIC" '{.status.conditions[0].message}')"; fi
expect_ok "$NIC is on vfio-pci in the guest" on_driver "$NIC" vfio-pci
expect_ok "/dev/vfio/$GROUP exists" guest "test -c /dev/vfio/$GROUP"
OUT=$(field "$NIC" '{.status.kernelDriverToUnbind} {.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].reason} {.metadata.finalizers}')
expect_contains "status records e1000e, Ready=True Bound, finalizer set" "$OUT" "e1000e True Bound" "devices.harvesterhci.io/restore-driver"
bound_event() { [ -n "$(kubectl get events -n default --field-selector reason=Bound -o name)" ]; }
if eventually 20 bound_event; then pass "an Event says Bound"; else fail "an Event says Bound"; fi
# The PCIDevice deleted while claimed: the agent makes it again, and its driver at first sight
# is the one the claim recorded, not the vfio-pci it sees now.
pcidev() { kubectl get pcidevice "$(name_of "$NIC")" -o jsonpath="$1" 2>/dev/null; }
UID0=$(pcidev '{.metadata.uid}')
kubectl delete pcidevice "$(name_of "$NIC")" >/dev/null
remade() { [ -n "$(pcidev '{.metadata.uid}')" ] && [ "$(pcidev '{.metadata.uid}')" != "$UID0" ] && [ "$(pcidev '{.status.kernelDriverInUse}')" = vfio-pci ]; }
if eventually 60 remade; then
    OUT=$(pcidev '{.metadata.annotations.harvesterhci\.io/pcideviceDriver}')
    [ "$OUT" = e1000e ] && pass "its PCIDevice deleted while claimed comes back with driver at first sight e1000e (the claim's record)" ||
        fail "the PCIDevice made again keeps the original driver at first sight" "annotation: $OUT"
else
    fail "the PCIDevice deleted while claimed is made again" "$(pcidev '{.metadata}')"
fi
expect_ok "claim deleted" kubectl delete pcideviceclaim "$(name_of "$NIC")" --wait=false
if eventually 60 claim_gone "$NIC"; then pass "the claim goes away once restored"; else fail "the claim goes away once restored" "$(reason "$NIC")"; fi
expect_ok "$NIC is back on e1000e" on_driver "$NIC" e1000e
# The release reset it through the kernel first (node/pcireset.h), by the methods the guest's
# kernel lists for it (pm for an e1000e on the root bus: no FLR, no bus reset there).
METHODS=$(guest "cat /sys/bus/pci/devices/$NIC/reset_method 2>/dev/null")
release_said() { # reason text
    kubectl get events -n default --field-selector "reason=$1,involvedObject.name=$(name_of "$NIC")" \
        -o jsonpath='{.items[*].message}' | grep -qF "$2"
}
if [ -n "$METHODS" ]; then
    if eventually 10 release_said DeviceReset "reset by the kernel (reset_method: $METHODS); back on driver \"e1000e\"; it answers as 8086:10d3"; then
        pass "the Event DeviceReset names the guest kernel's methods ($METHODS) and e1000e"
        US=$(guest "grep -o 'resetMicroseconds=[0-9]*' /var/log/hostdevd.log | tail -1")
        echo "  the reset (${METHODS%% *}) took ${US#resetMicroseconds=} us in the guest (TCG)"
    else
        fail "the Event DeviceReset names the methods ($METHODS)" "$(kubectl get events -n default --field-selector involvedObject.name="$(name_of "$NIC")" -o jsonpath='{range .items[*]}{.reason}: {.message}{"\n"}{end}')"
    fi
else
    if eventually 10 release_said Restored "not reset"; then pass "no reset method in the guest: Restored says not reset"; else fail "no reset method: Restored says not reset"; fi
fi

echo "--- a device the admin put on vfio-pci stays there after a claim"
# Two ways an admin keeps a device on vfio-pci: (a) vfio-pci's ids= option in modprobe.d, which
# takes effect when the module loads (reloaded here once e1000e let go of the device; at boot,
# vfio-pci.ids= on the kernel command line or in the initramfs does the same); (b) a
# driver_override of vfio-pci as driverctl writes it (override, unbind, drivers_probe). The
# PCIDevice is deleted and the agent makes it again, so its driver at first sight is vfio-pci. A
# claim then records vfio-pci (kernelDriverToUnbind, as harvester records the driver it finds)
# and its release leaves the device on vfio-pci, the admin's override in place. After each way
# the device goes back to e1000e and its PCIDevice is made again (first sight e1000e).
DEV=$(name_of "$NIC")
IDS_CONF=/etc/modprobe.d/hostdevd-e2e-vfio.conf
KMOD=/usr/lib/kmod/modprobe # kmod's modprobe (it reads modprobe.d), as on a host
SYS=/sys/bus/pci/devices/$NIC
override_of() { guest "cat $SYS/driver_override"; }
dev_field() { kubectl get pcidevice "$DEV" -o jsonpath="$1" 2>/dev/null; }
dev_driver_is() { [ "$(dev_field '{.status.kernelDriverInUse}')" = "$1" ]; }
first_sight_is() {
    [ "$(dev_field '{.metadata.annotations.harvesterhci\.io/pcideviceDriver} {.status.kernelDriverInUse}')" = "$1 $1" ]
}
republish() { # driver: the PCIDevice made again by the agent, with that driver at first sight
    eventually 60 dev_driver_is "$1" && kubectl delete pcidevice "$DEV" >/dev/null &&
        eventually 60 first_sight_is "$1"
}
restored_event() {
    kubectl get events -n default --field-selector reason=Restored -o jsonpath='{.items[*].message}' |
        grep -qF "device $NIC restored to driver \"$1\""
}
admin_vfio() { # way: ids | override
    if [ "$1" = ids ]; then
        guest "echo $NIC >/sys/bus/pci/drivers/e1000e/unbind && rmmod vfio_pci && mkdir -p /etc/modprobe.d &&
            echo 'options vfio-pci ids=8086:10d3' >$IDS_CONF && $KMOD vfio-pci"
    else
        guest "echo vfio-pci >$SYS/driver_override && echo $NIC >/sys/bus/pci/drivers/e1000e/unbind &&
            echo $NIC >/sys/bus/pci/drivers_probe"
    fi
}
admin_undo() { # way: back to e1000e, vfio-pci loaded without ids= (the agent loaded it once)
    local reload=""
    [ "$1" = ids ] && reload="rmmod vfio_pci; $KMOD vfio-pci;"
    guest "echo >$SYS/driver_override; rm -f $IDS_CONF; [ ! -e $SYS/driver ] || echo $NIC >$SYS/driver/unbind;
        $reload echo $NIC >/sys/bus/pci/drivers_probe"
}
vfio_original_case() { # way
    local way=$1 want_override=vfio-pci
    [ "$way" = ids ] && want_override="(null)"
    admin_vfio "$way"
    OUT="$(guest_driver "$NIC") $(override_of "$NIC")"
    [ "$OUT" = "vfio-pci $want_override" ] && pass "$way: the admin put $NIC on vfio-pci (override $want_override)" ||
        fail "$way: the admin put $NIC on vfio-pci" "$OUT"
    if republish vfio-pci; then pass "$way: its PCIDevice made again says vfio-pci"; else fail "$way: its PCIDevice made again says vfio-pci" "$(dev_field '{.metadata.annotations} {.status.kernelDriverInUse}')"; fi
    claim "$NIC"
    if eventually 60 enabled "$NIC"; then pass "$way: claim passthroughEnabled"; else fail "$way: claim passthroughEnabled" "$(reason "$NIC")"; fi
    OUT=$(field "$NIC" '{.status.kernelDriverToUnbind}/{.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].reason}')
    [ "$OUT" = "vfio-pci/True Bound" ] && pass "$way: kernelDriverToUnbind vfio-pci, Ready=True Bound" ||
        fail "$way: kernelDriverToUnbind vfio-pci, Ready=True Bound" "kernelDriverToUnbind/Ready: $OUT"
    kubectl delete pcideviceclaim "$(name_of "$NIC")" --wait=false >/dev/null
    if eventually 60 claim_gone "$NIC"; then pass "$way: the claim goes away"; else fail "$way: the claim goes away" "$(reason "$NIC")"; fi
    OUT="$(guest_driver "$NIC") $(override_of "$NIC")"
    if [ "$way" = ids ]; then
        [ "${OUT%% *}" = vfio-pci ] && pass "$way: $NIC still on vfio-pci" || fail "$way: $NIC still on vfio-pci" "driver, override: $OUT"
    else
        [ "$OUT" = "vfio-pci vfio-pci" ] && pass "$way: $NIC still on vfio-pci, driver_override still vfio-pci" ||
            fail "$way: $NIC still on vfio-pci, driver_override still vfio-pci" "driver, override: $OUT"
    fi
    if eventually 10 restored_event vfio-pci; then pass "$way: the Event says restored to driver \"vfio-pci\""; else fail "$way: the Event says restored to driver \"vfio-pci\"" "$(kubectl get events -n default --field-selector reason=Restored -o jsonpath='{.items[*].message}')"; fi
    admin_undo "$way"
    if on_driver "$NIC" e1000e && republish e1000e; then pass "$way: $NIC back on e1000e, PCIDevice made again"; else fail "$way: $NIC back on e1000e, PCIDevice made again" "$(guest_driver "$NIC")"; fi
}
T0=$SECONDS
vfio_original_case ids
vfio_original_case override
echo "  both ways in $((SECONDS - T0))s"

echo "--- the management NIC is refused"
claim "$MGMT"
if eventually 60 has_reason "$MGMT" HostCritical; then pass "claim on the management NIC refused: HostCritical"; else fail "claim on the management NIC refused" "$(reason "$MGMT")"; fi
OUT=$(field "$MGMT" '{.status.conditions[?(@.type=="Ready")].message}')
expect_contains "the message names the interface and its address" "$OUT" "eth0" "10.0.2.15"
expect_ok "the management NIC stays on virtio-pci" on_driver "$MGMT" virtio-pci
PORT=${K8S_SERVER##*:}
OUT=$(guest "printf 'GET / HTTP/1.0\r\n\r\n' | nc -w 5 10.0.2.2 $PORT" 2>&1)
expect_contains "the node still reaches the API server through it" "$OUT" "HTTP"
expect_ok "refused claim deleted" kubectl delete pcideviceclaim "$(name_of "$MGMT")" --wait=false
if eventually 30 claim_gone "$MGMT"; then pass "a refused claim deletes at once"; else fail "a refused claim deletes at once"; fi

echo "--- a VM holding the group holds the deletion"
claim "$NIC"
eventually 60 enabled "$NIC" || fail "claim on $NIC passthroughEnabled before the group is held" "$(reason "$NIC")"
guest "sleep 600 </dev/vfio/$GROUP >/dev/null 2>&1 & echo \$! >/tmp/holder"
expect_ok "claim deleted while /dev/vfio/$GROUP is open" kubectl delete pcideviceclaim "$(name_of "$NIC")" --wait=false
if eventually 30 has_reason "$NIC" DeviceInUse; then pass "deletion waits: Ready=False DeviceInUse"; else fail "deletion waits: DeviceInUse" "$(reason "$NIC")"; fi
expect_ok "the device stays on vfio-pci while held" on_driver "$NIC" vfio-pci
guest 'kill $(cat /tmp/holder)'
if eventually 30 claim_gone "$NIC"; then pass "released when the holder lets go"; else fail "released when the holder lets go" "$(reason "$NIC")"; fi
expect_ok "$NIC back on e1000e" on_driver "$NIC" e1000e

echo "--- reboot with a claim in place"
claim "$NIC2"
eventually 60 enabled "$NIC2" || fail "claim on $NIC2 passthroughEnabled before the reboot" "$(reason "$NIC2")"
RV=$(field "$NIC2" '{.metadata.resourceVersion}')
if node_reboot; then pass "node rebooted (${REBOOT_SECONDS}s)"; else fail "node rebooted"; fi
if eventually 120 on_driver "$NIC2" vfio-pci; then pass "after the reboot $NIC2 is on vfio-pci again"; else fail "after the reboot $NIC2 is on vfio-pci again" "$(node_logs)"; fi
[ "$(field "$NIC2" '{.metadata.resourceVersion}')" = "$RV" ] && pass "without any change to the claim" ||
    fail "without any change to the claim" "resourceVersion $RV -> $(field "$NIC2" '{.metadata.resourceVersion}')"
kubectl delete pcideviceclaim "$(name_of "$NIC2")" --wait=false >/dev/null
eventually 60 claim_gone "$NIC2" || fail "claim on $NIC2 gone after the reboot case" "$(reason "$NIC2")"
eventually 30 guest_agent_ready || fail "agent ready before the abort cases" "$(node_logs)"

echo "--- the agent aborted after each step, then restarted"
crash_case() { # point: the claim's goal decides the end state
    local point=$1 want
    guest 'agentctl stop' >/dev/null
    case $point in
    bind:* | claim:*) claim "$NIC"; want=vfio-pci ;;
    restore:*) kubectl delete pcideviceclaim "$(name_of "$NIC")" --wait=false >/dev/null; want=e1000e ;;
    esac
    # the fault point is logged by the worker thread; the loop's thread may log a line or two
    # between it and the abort, so it is looked for in the whole log, not in its last lines
    OUT=$(GUEST_TIMEOUT=120 guest "agentctl run-once --timeout 90 HOSTDEVD_FAULT=$point -- -v 0 >/tmp/once.log 2>&1; echo exit=\$?; grep 'Fault point reached' /tmp/once.log; tail -2 /tmp/once.log")
    if [[ "$OUT" == *"exit=134"* && "$OUT" == *"Fault point reached"* ]]; then
        pass "$point: the agent aborts right after the step"
    else
        fail "$point: the agent aborts right after the step" "$OUT"
    fi
    guest 'agentctl start' >/dev/null
    if [ "$want" = vfio-pci ]; then
        if eventually 60 enabled "$NIC" && on_driver "$NIC" vfio-pci; then
            pass "$point: abort, restart -> bound and passthroughEnabled"
        else
            fail "$point: abort, restart -> bound" "$(guest_driver "$NIC") $(reason "$NIC")"
        fi
    elif eventually 60 claim_gone "$NIC" && on_driver "$NIC" e1000e; then
        pass "$point: abort, restart -> restored to e1000e, claim gone"
    else
        fail "$point: abort, restart -> restored" "$(guest_driver "$NIC") $(reason "$NIC")"
    fi
}
# make test: the step that leaves the device on no driver, in each direction; make test-long
# (E2E_CLAIMS_ALL=1, test/long/test_claims_all.sh): every step (each case is an agent start and
# abort in the TCG guest, about 10 s of make test's 2 cores).
BIND_POINTS=(bind:unbind)
RESTORE_POINTS=(restore:unbind)
if [ -n "${E2E_CLAIMS_ALL:-}" ]; then
    BIND_POINTS=(claim:finalizer claim:record-driver bind:set-override bind:unbind bind:probe)
    RESTORE_POINTS=(restore:clear-override restore:unbind restore:probe)
fi
for p in "${BIND_POINTS[@]}"; do
    crash_case "$p"
    [ "$p" = "${BIND_POINTS[-1]}" ] && break # the last leaves the claim bound for the restores
    kubectl delete pcideviceclaim "$(name_of "$NIC")" --wait=false >/dev/null
    eventually 60 claim_gone "$NIC" || fail "claim on $NIC gone before the next case" "$(reason "$NIC")"
done
for p in "${RESTORE_POINTS[@]}"; do
    crash_case "$p"
    [ "$p" = "${RESTORE_POINTS[-1]}" ] && break
    claim "$NIC"
    eventually 60 enabled "$NIC" || fail "claim on $NIC bound again before the next case"
done

# The latency is make bench's (docs/benchmarks.md, Latency in the qemu node); here in make
# test-long only, as ten more binds and restores on a real kernel.
if [ -n "${E2E_CLAIMS_ALL:-}" ]; then
    echo "--- timing: claim creation to passthroughEnabled, 10 claims"
    # poll_enabled SECONDS ADDRESS: like eventually, but polls every 50 ms (the time is the measure).
    poll_enabled() {
        local deadline=$((SECONDS + $1))
        until enabled "$2"; do
            [ $SECONDS -lt $deadline ] || return 1
            sleep 0.05
        done
    }
    times=()
    timeouts=""
    for i in $(seq 1 10); do
        t0=$(date +%s%N)
        claim "$NIC"
        if poll_enabled 60 "$NIC"; then
            times+=($((($(date +%s%N) - t0) / 1000000)))
        else
            timeouts+="claim $i: not passthroughEnabled within 60s ($(reason "$NIC"))"$'\n'
        fi
        kubectl delete pcideviceclaim "$(name_of "$NIC")" >/dev/null
    done
    median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
    METRICS=$(guest 'wget -qO- http://127.0.0.1:9808/metrics')
    AGENT_SUM=$(awk '/^hostdevd_claim_bind_seconds_sum/ {print $2}' <<<"$METRICS")
    AGENT_N=$(awk '/^hostdevd_claim_bind_seconds_count/ {print $2}' <<<"$METRICS")
    # The raw sequence by shell (busybox has no sub-second clock: /proc/uptime, 10 ms ticks, summed
    # over 10 binds) and by `hostdevd vfio bind` (the agent's own steps, timed with clock_gettime).
    RAW=$(guest "total=0; for i in 1 2 3 4 5 6 7 8 9 10; do
      t0=\$(cut -d' ' -f1 /proc/uptime | tr -d .)
      echo vfio-pci >/sys/bus/pci/devices/$NIC/driver_override
      echo $NIC >/sys/bus/pci/devices/$NIC/driver/unbind
      echo $NIC >/sys/bus/pci/drivers_probe
      t1=\$(cut -d' ' -f1 /proc/uptime | tr -d .)
      total=\$((total + t1 - t0))
      echo >/sys/bus/pci/devices/$NIC/driver_override
      echo $NIC >/sys/bus/pci/devices/$NIC/driver/unbind
      echo $NIC >/sys/bus/pci/drivers_probe
    done; echo \$total")  # centiseconds over 10 binds = mean milliseconds per bind
    TOOL=$(GUEST_TIMEOUT=300 guest "for i in 1 2 3 4 5 6 7 8 9 10; do hostdevd vfio bind $NIC | grep -o '[0-9.]* ms'; hostdevd vfio restore $NIC --driver e1000e >/dev/null; done" | awk '{print $1}')
    echo "  claim created -> passthroughEnabled (host, kubectl polling): median $(median "${times[@]}") ms of ${times[*]}"
    [ -n "$AGENT_N" ] && echo "  agent's own measure (first sight -> status written): mean $(echo "$AGENT_SUM / $AGENT_N * 1000" | bc -l | awk '{printf "%.0f", $1}') ms over $AGENT_N binds"
    echo "  raw sysfs bind sequence in the guest, shell (override, unbind, drivers_probe): mean ${RAW:-?} ms (10 binds, 10 ms clock)"
    echo "  the same by \`hostdevd vfio bind\` (agent's steps and verification): median $(median $TOOL) ms of $(echo $TOOL)"
    [ "${#times[@]}" -eq 10 ] && pass "10 claims timed" || fail "10 claims timed" "${timeouts%$'\n'}"
    [ "$(echo "$TOOL" | grep -c .)" -eq 10 ] && pass "hostdevd vfio bind/restore by hand, 10 times" ||
        fail "hostdevd vfio bind/restore by hand, 10 times" "$TOOL"
    expect_ok "$NIC back on e1000e after the timing runs" on_driver "$NIC" e1000e
fi

echo "--- hostdevd vfio bind refuses what a claim refuses (q35's SMBus controller)"
SMB=0000:00:1f.3
SMB_DRV=$(guest_driver "$SMB")
claim "$SMB"
refused() { [ -n "$(reason "$SMB")" ] && ! has_reason "$SMB" Binding; }
eventually 30 refused || fail "a claim of the SMBus controller is answered" "$(reason "$SMB")"
CLAIM_MSG=$(message "$SMB")
echo "  the claim: $(reason "$SMB"): $CLAIM_MSG"
OUT=$(guest "hostdevd vfio bind $SMB 2>&1; echo rc=\$?")
expect_contains "hostdevd vfio bind $SMB is refused (exit 1)" "$OUT" "rc=1"
expect_contains "... with the claim's reason and message" "$OUT" "refused: $(reason "$SMB"): $CLAIM_MSG"
expect_ok "... and the device stays on ${SMB_DRV:-no driver}" on_driver "$SMB" "$SMB_DRV"
kubectl delete pcideviceclaim "$(name_of "$SMB")" >/dev/null
OUT=$(guest "hostdevd vfio bind $SMB --force 2>&1; echo rc=\$?")
expect_contains "with --force it binds (exit 0)" "$OUT" "rc=0"
expect_contains "... warning what it overrides" "$OUT" '"Binding with --force what a claim refuses"'
expect_ok "... on vfio-pci" on_driver "$SMB" vfio-pci
expect_ok "hostdevd vfio restore gives it back (${SMB_DRV:-no driver})" guest "hostdevd vfio restore $SMB ${SMB_DRV:+--driver $SMB_DRV} >/dev/null"
expect_ok "... on ${SMB_DRV:-no driver}" on_driver "$SMB" "$SMB_DRV"
finish
