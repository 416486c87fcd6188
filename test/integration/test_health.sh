#!/usr/bin/env bash
# test/integration/test_health.sh - the release's reset and verification (node/pcireset.h,
# controllers/binding/pcibind.c) through the agent's PCIDeviceClaim reconciler on a fake sysfs
# tree (test/fixtures/sysfs/health-node.txt: e1000e NICs already on vfio-pci, so their claims
# bind and release without a kernel) against the real control plane: a release writes 1 to the
# device's reset and says DeviceReset naming the kernel's methods; a device with no reset method
# is not reset and its Restored Event says so; a device whose config reads all ones after the
# release is NotResponding, one that answers with other ids IdChanged (Warning Events that say
# what to do, the agent's log), and every claim goes; their PCIDevices say Healthy=False with
# the reason. The administrator's recheck (annotation hostdevd.io/recheck-health): of a device
# still dead, HealthRecheckFailed and the state stays; of one fixed, Healthy again, Event
# HealthRechecked, and it can be claimed; the annotation is taken away either way. The test
# changes the fake config while the claim is bound (the fake tree does not change on a write by
# itself).
SUITE=health
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

AGENT=$TEST_BIN/hostdevd
DESC=test/fixtures/sysfs/health-node.txt
NODE=fix-node
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

cluster_start
ADMIN=$TEST_DIR/cluster/admin.kubeconfig
install_crds
create_node "$NODE"
SYS=$TEST_DIR/sys
hack/mk-sysfs-fixture.sh "$DESC" "$SYS" >/dev/null
mkdir -p "$SYS/module/vfio_iommu_type1" "$TEST_DIR/dev/vfio"
fake_proc "$TEST_DIR/proc"
PORT=$(free_port)
agent_run --kubeconfig "$ADMIN" --proc-root "$TEST_DIR/proc" --dev-root "$TEST_DIR/dev" \
    --uevent-source none -v 2
ready() { curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null; }
if eventually 60 ready; then pass "agent ready"; else fail "agent ready" "$(tail -20 "$TEST_DIR/agent.log")"; fi

RESET=0000:00:04.0   # reset_method: flr pm
DEAD=0000:00:05.0    # reset_method: pm; config all ones after the release
NOMETHOD=0000:00:06.0 # no reset_method, no reset
OTHER=0000:00:07.0   # reset_method: flr; answers as 8086:10d4 after the release
ALL="$RESET $DEAD $NOMETHOD $OTHER"

name_of() { local a=${1//:/}; echo "$NODE-${a//./}"; }
devdir() { echo "$SYS/bus/pci/devices/$1"; }
claim() { # address
    printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: %s}\nspec: {address: "%s", nodeName: %s, userName: alice}\n' \
        "$(name_of "$1")" "$1" "$NODE" | kubectl create -f - >/dev/null
}
reason() { kubectl get pcideviceclaim "$(name_of "$1")" -o jsonpath='{.status.conditions[?(@.type=="Ready")].reason}' 2>/dev/null; }
all_bound() { local a; for a in $ALL; do [ "$(reason "$a")" = Bound ] || return 1; done; }
all_reason_is() { [ "$(reason "$1")" = "$2" ]; }
not() { ! "$@"; }
all_gone() { ! kubectl get pcideviceclaims -o name 2>/dev/null | grep -q .; }
config_ids() { od -An -tx1 -N4 "$(devdir "$1")/config" | tr -d ' \n'; }
set_config_ids() { # address 4-bytes-as-printf-escapes: what config answers with from now on
    printf '%b' "$2" | dd of="$(devdir "$1")/config" bs=1 count=4 conv=notrunc status=none
}
# events ADDRESS: "REASON: MESSAGE" lines of the Events on its claim
events() {
    kubectl get events -A --field-selector involvedObject.name="$(name_of "$1")" \
        -o jsonpath='{range .items[*]}{.type} {.reason}: {.message}{"\n"}{end}' 2>/dev/null
}
has_event() { events "$1" | grep -q "^$2 $3: "; } # address type reason

echo "--- claims bound"
for a in $ALL; do claim "$a"; done
if eventually 60 all_bound; then pass "the four claims are Bound"; else fail "the four claims are Bound" "$(for a in $ALL; do echo "$a $(reason "$a")"; done)"; fi
for a in $ALL; do [ ! -e "$(devdir "$a")/reset" ] || : >"$(devdir "$a")/reset"; done
[ "$(config_ids "$DEAD")" = 8680d310 ] && pass "config answers 8086:10d3 while bound" || fail "config answers 8086:10d3 while bound" "$(config_ids "$DEAD")"
# What the devices do while a VM has them: one stops answering, one comes back as another.
set_config_ids "$DEAD" '\xff\xff\xff\xff'
set_config_ids "$OTHER" '\x86\x80\xd4\x10'

echo "--- released"
for a in $ALL; do kubectl delete pcideviceclaim "$(name_of "$a")" --wait=false >/dev/null; done
if eventually 60 all_gone; then pass "every claim goes, healthy device or not"; else fail "every claim goes" "$(kubectl get pcideviceclaims 2>&1)"; fi

[ "$(cat "$(devdir "$RESET")/reset")" = 1 ] && pass "the release wrote 1 to reset" || fail "the release wrote 1 to reset" "reset holds '$(cat "$(devdir "$RESET")/reset")'"
if eventually 20 has_event "$RESET" Normal DeviceReset; then
    expect_contains "DeviceReset names the kernel's methods, the driver and the ids" "$(events "$RESET")" \
        "Normal DeviceReset: device $RESET reset by the kernel (reset_method: flr pm); back on driver \"vfio-pci\"; it answers as 8086:10d3" \
        "Normal Restored: device $RESET restored to driver \"vfio-pci\"; reset by the kernel (reset_method: flr pm)"
else
    fail "a Normal DeviceReset Event" "$(events "$RESET")"
fi

[ ! -e "$(devdir "$NOMETHOD")/reset" ] && pass "no method: no reset file written" || fail "no method: no reset file written" "$(ls "$(devdir "$NOMETHOD")")"
if eventually 20 has_event "$NOMETHOD" Normal Restored; then
    expect_contains "no method: the Restored Event says it was not reset, and nothing else is said" "$(events "$NOMETHOD")" \
        "restored to driver \"vfio-pci\"; not reset: the kernel knows no reset method for it (no reset_method); it answers as 8086:10d3"
    ! events "$NOMETHOD" | grep -q "DeviceReset\|Warning" && pass "no method: no DeviceReset, no Warning" || fail "no method: no DeviceReset, no Warning" "$(events "$NOMETHOD")"
else
    fail "no method: a Restored Event" "$(events "$NOMETHOD")"
fi

[ "$(cat "$(devdir "$DEAD")/reset")" = 1 ] && pass "the silent device was reset" || fail "the silent device was reset"
if eventually 20 has_event "$DEAD" Warning NotResponding; then
    expect_contains "NotResponding: what was seen and what to do" "$(events "$DEAD")" \
        "it does not respond: its config space reads all ones (ffff:ffff)" \
        "a host reboot or power cycle" "kubectl annotate --overwrite pcidevice $(name_of "$DEAD") hostdevd.io/recheck-health="
else
    fail "a Warning NotResponding Event" "$(events "$DEAD")"
fi
if eventually 20 has_event "$OTHER" Warning IdChanged; then
    expect_contains "IdChanged: the ids seen and those the kernel found" "$(events "$OTHER")" \
        "it answers as 8086:10d4, not as 8086:10d3"
else
    fail "a Warning IdChanged Event" "$(events "$OTHER")"
fi
OUT=$(grep '"Device unhealthy after its release"' "$TEST_DIR/agent.log")
expect_contains "the agent logs each unhealthy device once, with its reason" "$OUT" \
    "device=\"$DEAD\"" "reason=\"NotResponding\"" "device=\"$OTHER\"" "reason=\"IdChanged\""
OUT=$(grep '"Reset device on release"' "$TEST_DIR/agent.log" | grep "device=\"$RESET\"")
expect_contains "the agent logs the reset, its method and how long it took" "$OUT" 'method="flr"' "resetMicroseconds="
[ "$(grep -c '"Device unhealthy after its release"' "$TEST_DIR/agent.log")" = 2 ] &&
    pass "two unhealthy devices, two log lines" || fail "two unhealthy devices, two log lines" "$OUT"

echo "--- the PCIDevice says so, and the administrator's way back (recheck-health)"
healthy() { kubectl get pcidevice "$(name_of "$1")" -o jsonpath='{.status.conditions[?(@.type=="Healthy")].status} {.status.conditions[?(@.type=="Healthy")].reason}' 2>/dev/null; }
healthy_is() { [ "$(healthy "$1")" = "$2" ]; }
annotated() { [ -n "$(kubectl get pcidevice "$(name_of "$1")" -o jsonpath='{.metadata.annotations.hostdevd\.io/recheck-health}' 2>/dev/null)" ]; }
recheck() { kubectl annotate --overwrite pcidevice "$(name_of "$1")" hostdevd.io/recheck-health="$2" >/dev/null; }
if eventually 20 healthy_is "$DEAD" "False NotResponding" && healthy_is "$OTHER" "False IdChanged" && healthy_is "$RESET" "True Healthy"; then
    pass "the PCIDevices' Healthy condition: NotResponding, IdChanged, the reset one Healthy"
else
    fail "the PCIDevices' Healthy condition" "$(healthy "$DEAD"); $(healthy "$OTHER"); $(healthy "$RESET"); $(kubectl get pcidevices -o name 2>&1 | head); $(tail -30 "$TEST_DIR/agent.log")"
fi
recheck "$DEAD" 1
if eventually 20 has_event "$DEAD" Warning HealthRecheckFailed; then
    expect_contains "a recheck of a device still dead: HealthRecheckFailed, what was seen" "$(events "$DEAD")" \
        "device $DEAD still does not answer: config space reads all ones (NotResponding stays)"
else
    fail "a Warning HealthRecheckFailed Event" "$(events "$DEAD")"
fi
if eventually 20 not annotated "$DEAD" && healthy_is "$DEAD" "False NotResponding"; then
    pass "... the state stays, the annotation is taken away (handled once)"
else
    fail "the state stays, the annotation goes" "$(healthy "$DEAD"); annotated: $(annotated "$DEAD" && echo yes)"
fi
set_config_ids "$DEAD" '\x86\x80\xd3\x10' # the admin fixed it
set_config_ids "$OTHER" '\x86\x80\xd3\x10'
recheck "$DEAD" 2
recheck "$OTHER" 1
if eventually 20 healthy_is "$DEAD" "True Healthy" && eventually 20 healthy_is "$OTHER" "True Healthy"; then
    pass "fixed and rechecked: Healthy again"
else
    fail "fixed and rechecked: Healthy again" "$(healthy "$DEAD"); $(healthy "$OTHER")"
fi
if eventually 20 has_event "$DEAD" Normal HealthRechecked; then
    expect_contains "... a HealthRechecked Event says what it answers as and what was cleared" "$(events "$DEAD")" \
        "device $DEAD answers as 8086:10d3: healthy again (was NotResponding: "
else
    fail "a Normal HealthRechecked Event" "$(events "$DEAD")"
fi
if eventually 20 not annotated "$OTHER"; then pass "... its annotation taken away"; else fail "annotation taken away after a passed recheck"; fi
claim "$DEAD"
if eventually 30 all_reason_is "$DEAD" Bound; then pass "... and it can be claimed again"; else fail "claimed again after the recheck" "$(reason "$DEAD")"; fi

kill -TERM "$AGENT_PID"
wait "$AGENT_PID"
rc=$?
[ $rc -eq 0 ] && pass "agent stopped cleanly (no leaks under ASan)" || fail "agent stopped cleanly" "exit $rc; $(tail -20 "$TEST_DIR/agent.log")"
finish
