#!/usr/bin/env bash
# test/integration/test_claims.sh - the agent's PCIDeviceClaim safety checks on a fake sysfs
# tree (test/fixtures/sysfs/small-server.txt) against the real control plane: claims that must
# be refused get Ready=False with a reason and a message that says what to do, and an Event; the
# agent's finalizer is on every claim of its node; deleting a claim that was never bound
# completes at once. Binding itself needs a kernel: test/e2e/test_claims.sh does it in qemu.
SUITE=claims
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

AGENT=$TEST_BIN/hostdevd
DESC=test/fixtures/sysfs/small-server.txt
NODE=fix-node
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

cluster_start
ADMIN=$TEST_DIR/cluster/admin.kubeconfig
install_crds
create_node "$NODE"
SYS=$TEST_DIR/sys
hack/mk-sysfs-fixture.sh "$DESC" "$SYS" >/dev/null
# A /proc with nothing mounted from the fake devices (the host-critical check reads it).
mkdir -p "$TEST_DIR/proc/1" "$TEST_DIR/proc/net"
fake_proc "$TEST_DIR/proc"
PORT=$(free_port)
agent_run --kubeconfig "$ADMIN" --proc-root "$TEST_DIR/proc" --dev-root "$TEST_DIR/dev" \
    --uevent-source none -v 2
ready() { curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null; }
if eventually 60 ready; then pass "agent ready"; else fail "agent ready" "$(tail -20 "$TEST_DIR/agent.log")"; fi

name_of() { local a=${1//:/}; echo "$NODE-${a//./}"; }
claim() { # address
    printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: %s}\nspec: {address: "%s", nodeName: %s, userName: alice}\n' \
        "$(name_of "$1")" "$1" "$NODE" | kubectl create -f - >/dev/null
}
reason() { kubectl get pcideviceclaim "$(name_of "$1")" -o jsonpath='{.status.conditions[?(@.type=="Ready")].reason}'; }
message() { kubectl get pcideviceclaim "$(name_of "$1")" -o jsonpath='{.status.conditions[?(@.type=="Ready")].message}'; }
has_reason() { [ "$(reason "$1")" = "$2" ]; }
expect_refusal() { # description address reason message-patterns...
    local what=$1 a=$2 r=$3
    shift 3
    if ! eventually 30 has_reason "$a" "$r"; then
        fail "$what" "reason \"$(reason "$a")\", message \"$(message "$a")\""
        return
    fi
    expect_contains "$what" "$(message "$a")" "$@"
}

echo "--- refusals"
GPU=0000:af:00.0
claim "$GPU"
expect_refusal "a GPU whose IOMMU group has unclaimed functions is refused, naming them" "$GPU" \
    IOMMUGroupIncomplete "IOMMU group 61 also holds" "0000:af:00.1 (snd_hda_intel; claim $(name_of 0000:af:00.1))" \
    "0000:af:00.2 (xhci_hcd" "0000:af:00.3 (nvidia-gpu" "claim those devices too"
OUT=$(kubectl get pcideviceclaim "$(name_of "$GPU")" -o jsonpath='{.status.passthroughEnabled} {.metadata.finalizers}')
expect_contains "the refused claim is not passthroughEnabled and carries the finalizer" "$OUT" \
    "false" "devices.harvesterhci.io/restore-driver"
NVME=10000:01:00.0
claim "$NVME"
expect_refusal "a device without an IOMMU group is refused, saying how to turn the IOMMU on" "$NVME" \
    NoIOMMUGroup "has no IOMMU group" "intel_iommu=on"
GONE=0000:99:00.0
claim "$GONE"
expect_refusal "a claim for a device the node does not have is refused" "$GONE" DeviceNotFound \
    "there is no PCI device 0000:99:00.0 on node $NODE"
events() { kubectl get events -n default --field-selector "reason=$1" -o jsonpath='{.items[*].message}'; }
has_event() { [ -n "$(events "$1")" ]; }
if eventually 20 has_event IOMMUGroupIncomplete; then pass "a Warning Event explains the refusal"; else fail "a Warning Event explains the refusal"; fi
OUT=$(curl -fsS "http://127.0.0.1:$PORT/metrics")
expect_contains "metrics count refusals" "$OUT" 'hostdevd_claim_results_total{result="refused"}'

echo "--- another node's claim is not touched"
printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: other-000018000}\nspec: {address: "0000:18:00.0", nodeName: other, userName: bob}\n' |
    kubectl create -f - >/dev/null
sleep 2
OUT=$(kubectl get pcideviceclaim other-000018000 -o jsonpath='{.metadata.finalizers}{.status}')
[ -z "$OUT" ] && pass "no finalizer, no status on a claim of another node" || fail "no finalizer, no status on a claim of another node" "$OUT"

echo "--- deleting claims that were never bound"
gone_claim() { ! kubectl get pcideviceclaim "$(name_of "$1")" >/dev/null 2>&1; }
expect_ok "claims deleted" kubectl delete pcideviceclaim "$(name_of "$GPU")" "$(name_of "$NVME")" "$(name_of "$GONE")" --wait=false
if eventually 20 gone_claim "$GPU" && eventually 5 gone_claim "$NVME" && eventually 5 gone_claim "$GONE"; then
    pass "their finalizers were released at once (nothing to restore)"
else
    fail "their finalizers were released at once" "$(kubectl get pcideviceclaims 2>&1)"
fi
# A claim that never bound the device says nothing was changed, never "restored to driver \"\""
EV=$(kubectl get events -A --field-selector involvedObject.name="$(name_of "$GPU")" \
    -o jsonpath='{range .items[*]}{.reason}: {.message}{"\n"}{end}' 2>&1)
if grep -q '^Released: nothing was changed' <<<"$EV" && ! grep -q 'Restored' <<<"$EV"; then
    pass "a never-bound claim's deletion says nothing was changed (Event Released)"
else
    fail "a never-bound claim's deletion says nothing was changed" "$EV"
fi
kill -TERM "$AGENT_PID"
wait "$AGENT_PID"
rc=$?
[ $rc -eq 0 ] && pass "agent stopped cleanly (no leaks under ASan)" || fail "agent stopped cleanly" "exit $rc; $(tail -20 "$TEST_DIR/agent.log")"
finish
