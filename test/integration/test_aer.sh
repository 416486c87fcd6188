#!/usr/bin/env bash
# test/integration/test_aer.sh - device health from the PCI scan on a fake sysfs tree
# (test/fixtures/sysfs/aer-node.txt) against the real control plane: the PCIDevice shows the
# AER totals (status.aerErrors, and the hostdevd_pci_aer_errors_total metric) and Healthy=True;
# a fatal total that grows makes it Healthy=False AERFatal with a message that says what to do;
# a claimed device taken out of the tree is Removed (its PCIDevice kept while claimed, also
# across an agent restart), and healthy again when it is put back with the same ids; an unclaimed device that goes is just
# deleted; a Healthy=False condition an administrator writes is taken back, not overwritten; an
# idle agent writes nothing (the API server's audit log). The counters are changed by the test,
# then the agent is told to rescan (SIGHUP).
SUITE=aer
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

AGENT=$TEST_BIN/hostdevd
NODE=aer-node
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

cluster_start
ADMIN=$TEST_DIR/cluster/admin.kubeconfig
AUDIT=$TEST_DIR/cluster/audit.log
install_crds
create_node "$NODE"
SYS=$TEST_DIR/sys
hack/mk-sysfs-fixture.sh test/fixtures/sysfs/aer-node.txt "$SYS" >/dev/null
mkdir -p "$SYS/module/vfio_iommu_type1" "$TEST_DIR/dev" "$TEST_DIR/proc/1" "$TEST_DIR/proc/net" "$TEST_DIR/kubelet/device-plugins"
fake_proc "$TEST_DIR/proc"

HELD=0000:00:04.0 FATAL=0000:00:05.0 PLAIN=0000:00:06.0
dir_of() { echo "$SYS/devices/pci0000:00/$1"; }
# aer ADDRESS FATAL NONFATAL CORRECTABLE: the device's three files, as Linux 6.1 writes them.
aer() {
    local d
    d=$(dir_of "$1")
    printf 'Undefined 0\nDLP %s\nSDES 0\nTLP 0\nTOTAL_ERR_FATAL %s\n' "$2" "$2" >"$d/aer_dev_fatal"
    printf 'Undefined 0\nDLP 0\nTOTAL_ERR_NONFATAL %s\n' "$3" >"$d/aer_dev_nonfatal"
    printf 'RxErr %s\nBadTLP 0\nTOTAL_ERR_COR %s\n' "$4" "$4" >"$d/aer_dev_correctable"
}
aer "$HELD" 0 0 0
aer "$FATAL" 0 1 3

PORT=$(free_port)
start_agent() {
    agent_run --kubeconfig "$ADMIN" --proc-root "$TEST_DIR/proc" --dev-root "$TEST_DIR/dev" \
        --kubelet-dir "$TEST_DIR/kubelet" --resync 3600 --uevent-source none -v 2
}
start_agent
ready() { curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null; }
if eventually 60 ready; then pass "agent ready"; else fail "agent ready" "$(tail -20 "$TEST_DIR/agent.log")"; fi

name_of() { local a=${1//:/}; echo "$NODE-${a//./}"; }
dev() { kubectl get pcidevice "$(name_of "$1")" -o jsonpath="$2" 2>/dev/null; }
healthy() { dev "$1" '{.status.conditions[?(@.type=="Healthy")].status}/{.status.conditions[?(@.type=="Healthy")].reason}'; }
is_health() { [ "$(healthy "$1")" = "$2" ]; }
message() { dev "$1" '{.status.conditions[?(@.type=="Healthy")].message}'; }
scans() { curl -fsS "http://127.0.0.1:$PORT/metrics" | awk '$1 == "hostdevd_pci_scans_total" {print $2}'; }
# rescan: SIGHUP, and wait until the scan ran.
rescan() {
    local before
    before=$(scans)
    kill -HUP "$AGENT_PID"
    scanned() { [ "$(scans)" != "$before" ]; }
    eventually 20 scanned || fail "the agent rescanned after SIGHUP" "$(tail -5 "$TEST_DIR/agent.log")"
}

echo "--- the counters and the Healthy condition"
if eventually 30 is_health "$FATAL" True/Healthy && eventually 10 is_health "$PLAIN" True/Healthy &&
    eventually 10 is_health "$HELD" True/Healthy; then
    pass "every PCIDevice says Healthy=True (reason Healthy)"
else
    fail "every PCIDevice says Healthy=True" "$(healthy "$FATAL"); $(healthy "$PLAIN")"
fi
OUT=$(dev "$FATAL" '{.status.aerErrors}')
[ "$OUT" = '{"correctable":3,"fatal":0,"nonFatal":1}' ] && pass "status.aerErrors has the three totals" ||
    fail "status.aerErrors has the three totals" "$OUT"
OUT=$(dev "$PLAIN" '{.status.aerErrors}')
[ -z "$OUT" ] && pass "a device without AER files has no aerErrors" || fail "a device without AER files has no aerErrors" "$OUT"
OUT=$(curl -fsS "http://127.0.0.1:$PORT/metrics")
expect_contains "the metric has the totals by device and severity" "$OUT" \
    'hostdevd_pci_aer_errors_total{device="0000:00:05.0",severity="correctable"} 3' \
    'hostdevd_pci_aer_errors_total{device="0000:00:05.0",severity="nonfatal"} 1' \
    'hostdevd_pci_aer_errors_total{device="0000:00:04.0",severity="fatal"} 0'

echo "--- an idle agent writes nothing"
# Two rescans of the unchanged node, then one with a correctable error more: once that is
# written, the audit log since the mark must hold that one write and nothing else.
MARK=$(wc -l <"$AUDIT")
rescan
rescan
aer "$FATAL" 0 1 4
rescan
has_cor() { [ "$(dev "$FATAL" '{.status.aerErrors.correctable}')" = "$1" ]; }
eventually 20 has_cor 4 || fail "the correctable total follows the file" "$(dev "$FATAL" '{.status.aerErrors}')"
writes() { audit_summary "$AUDIT" "$MARK" | grep -v leases; }
one_write() { [ "$(writes)" = "agent pcidevices/status patch 200 1" ]; }
if eventually 10 one_write; then
    pass "three rescans, one change: one write (the changed total), the condition not rewritten"
else
    fail "an idle agent writes nothing" "$(writes)"
fi

echo "--- a fatal total that grows"
aer "$FATAL" 1 1 5
rescan
if eventually 20 is_health "$FATAL" False/AERFatal; then
    pass "Healthy=False AERFatal once aer_dev_fatal grew"
    expect_contains "the message says what was seen and what to do" "$(message "$FATAL")" \
        "went from 0 to 1" "dmesg" "kubectl annotate --overwrite pcidevice $(name_of "$FATAL") hostdevd.io/recheck-health="
    aer_event() {
        kubectl get events -n default -o jsonpath='{range .items[*]}{.type} {.reason} {.involvedObject.kind}/{.involvedObject.name}: {.message}{"\n"}{end}' |
            grep -q "^Warning AERFatal PCIDevice/$(name_of "$FATAL"): .*went from 0 to 1.*hostdevd.io/recheck-health="
    }
    if eventually 15 aer_event; then pass "a Warning Event AERFatal on the PCIDevice with the same message"; else
        fail "a Warning Event AERFatal on the PCIDevice" "$(kubectl get events -n default -o jsonpath='{range .items[*]}{.type} {.reason} {.involvedObject.name}{"\n"}{end}')"
    fi
else
    fail "Healthy=False AERFatal once aer_dev_fatal grew" "$(healthy "$FATAL"): $(message "$FATAL")"
fi
OUT=$(dev "$FATAL" '{.status.aerErrors.fatal}/{.status.aerErrors.correctable}')
[ "$OUT" = 1/5 ] && pass "the totals follow the files" || fail "the totals follow the files" "$OUT"
T1=$(dev "$FATAL" '{.status.conditions[?(@.type=="Healthy")].lastTransitionTime}')
aer "$FATAL" 1 1 6
rescan
# a correctable error changes the total, not the condition
eventually 20 has_cor 6 || fail "the correctable total follows" "$(dev "$FATAL" '{.status.aerErrors}')"
OUT=$(healthy "$FATAL")/$(dev "$FATAL" '{.status.conditions[?(@.type=="Healthy")].lastTransitionTime}')
[ "$OUT" = "False/AERFatal/$T1" ] && pass "the condition stays as it was (its lastTransitionTime too)" ||
    fail "the condition stays as it was" "$OUT, was $T1"

echo "--- a claimed device taken out of the tree, and put back"
printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: %s}\nspec: {address: "%s", nodeName: %s, userName: alice}\n' \
    "$(name_of "$HELD")" "$HELD" "$NODE" | kubectl create -f - >/dev/null
claim_ready() { [ "$(kubectl get pcideviceclaim "$(name_of "$HELD")" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]; }
eventually 30 claim_ready && pass "the claim is Ready" || fail "the claim is Ready" "$(kubectl get pcideviceclaim "$(name_of "$HELD")" -o yaml)"
take_out() { mv "$(dir_of "$1")" "$TEST_DIR/out-$1" && mv "$SYS/bus/pci/devices/$1" "$TEST_DIR/out-link-$1"; }
put_back() { mv "$TEST_DIR/out-$1" "$(dir_of "$1")" && mv "$TEST_DIR/out-link-$1" "$SYS/bus/pci/devices/$1"; }
take_out "$HELD"
rescan
if eventually 20 is_health "$HELD" False/Removed; then
    pass "the claimed device gone: its PCIDevice is kept, Healthy=False Removed"
    expect_contains "the message says who held it and the way back" "$(message "$HELD")" \
        "gone from the PCI bus" "PCIDeviceClaim" "ids 8086:10d3"
else
    fail "the claimed device gone: Healthy=False Removed" "$(healthy "$HELD"); $(kubectl get pcidevices 2>&1)"
fi
# A restart while it is gone: the store takes Removed back from the kept object, which stays.
kill -TERM "$AGENT_PID"
wait "$AGENT_PID" || fail "agent stopped cleanly before its restart" "$(tail -5 "$TEST_DIR/agent.log")"
MARK=$(wc -l <"$AUDIT")
start_agent
if eventually 60 ready; then pass "agent ready again"; else fail "agent ready again" "$(tail -20 "$TEST_DIR/agent.log")"; fi
# (ready: the first inventory is written, a delete of the kept object would have been made)
OUT=$(healthy "$HELD")
[ "$OUT" = False/Removed ] && pass "after a restart the gone device's PCIDevice is still kept, Removed" ||
    fail "after a restart the gone device's PCIDevice is still kept" "$OUT; $(audit_summary "$AUDIT" "$MARK")"
put_back "$HELD"
rescan
if eventually 20 is_health "$HELD" True/Healthy; then
    pass "put back with the same ids: Healthy again"
else
    fail "put back with the same ids: Healthy again" "$(healthy "$HELD"): $(message "$HELD")"
fi
grep -q '"Held PCI device is gone; marked unhealthy" device="0000:00:04.0"' "$TEST_DIR/agent.log" &&
    grep -q '"Removed PCI device is back with the same ids; marked healthy" device="0000:00:04.0"' "$TEST_DIR/agent.log" &&
    pass "the agent logs both" || fail "the agent logs both" "$(grep -i 'PCI device' "$TEST_DIR/agent.log" | tail -5)"

echo "--- what an administrator writes is taken back"
kapi_status pcidevices "$(name_of "$PLAIN")" '{"status":{"conditions":[{"type":"Healthy","status":"False","reason":"ResetFailed","message":"reset by hand failed","lastTransitionTime":"2026-11-29T00:00:00Z"}]}}' >/dev/null
# a rescan that changes another device: once that is written, every key was looked at again
aer "$FATAL" 1 1 7
rescan
eventually 20 has_cor 7 || fail "the correctable total follows" "$(dev "$FATAL" '{.status.aerErrors}')"
OUT=$(healthy "$PLAIN")/$(message "$PLAIN")
[ "$OUT" = "False/ResetFailed/reset by hand failed" ] && pass "Healthy=False ResetFailed patched by an admin stays (the store took it)" ||
    fail "an admin's Healthy=False stays" "$OUT"

echo "--- an unclaimed device that goes is deleted"
take_out "$PLAIN"
rescan
gone() { ! kubectl get pcidevice "$(name_of "$PLAIN")" >/dev/null 2>&1; }
eventually 20 gone && pass "its PCIDevice is deleted (nothing held it)" || fail "its PCIDevice is deleted" "$(healthy "$PLAIN")"

kill -TERM "$AGENT_PID"
wait "$AGENT_PID"
rc=$?
[ $rc -eq 0 ] && pass "agent stopped cleanly (no leaks under ASan)" || fail "agent stopped cleanly" "exit $rc; $(tail -20 "$TEST_DIR/agent.log")"
finish
