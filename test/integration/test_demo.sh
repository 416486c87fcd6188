#!/usr/bin/env bash
# test/integration/test_demo.sh - make demo's parts that run without root and without a node
# (hack/demo.sh with DEMO_NODE=0 DEMO_QEMU=0, in a directory of the test's): started under
# `flock F`, it returns with F unlocked and no process it left running holds F (its daemons
# inherit none of the caller's descriptors); it installs the chart with every manifest (the
# admission policies, DeviceClasses, FlowSchemas) and KubeVirt's CRDs and CR; a second run says
# it stops the first and starts clean (a fresh control plane); `down` says what it stopped and
# leaves nothing running. And the build's lines: `  CC      src/x.c` by default, the command with
# V=1. The containerd node, the image and the qemu node of the real `make demo` are the
# chart-node and e2e suites' (test_chart_node.sh runs docs/real-node.md's install; test/e2e); a
# whole `make demo` is a manual run (docs/testing.md). Written by a helper against its own
# rewrite of the demo, adapted to this one.
SUITE=demo
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1

TEST_DIR=$(mktemp -d "${TMPDIR:-/tmp}/hostdevd-$SUITE.XXXXXX")
export HOSTDEVD_DEMO_DIR=$TEST_DIR/demo DEMO_NODE=0 DEMO_QEMU=0
LOCK=$TEST_DIR/caller.lock
: >"$LOCK"
# shellcheck disable=SC2317 # (the EXIT trap's)
down() { hack/demo.sh down --purge >/dev/null 2>&1 || true; rm -rf "$TEST_DIR"; }
trap down EXIT
# Every process whose open files include FILE.
holders() {
    local p f
    for p in /proc/[0-9]*; do
        for f in "$p"/fd/*; do
            [ "$(readlink "$f" 2>/dev/null)" = "$1" ] || continue
            echo "${p#/proc/} $(tr '\0' ' ' <"$p/cmdline" 2>/dev/null | cut -c1-100)"
            break
        done
    done
}
demo_pids() { # the demo's daemons: the control plane's and the workload controllers'
    mapfile -t PIDS < <(cat "$HOSTDEVD_DEMO_DIR"/cluster/*.pid "$HOSTDEVD_DEMO_DIR"/*.pid 2>/dev/null)
}
alive() { local p; for p in "$@"; do kill -0 "$p" 2>/dev/null && echo "$p"; done; true; }

echo "--- build output a person can read (the Makefile's quiet lines; V=1: the commands)"
OUT=$(make -W src/base/err.c build/release/src/base/err.o 2>&1)
expect_contains "make: one line per file" "$OUT" "  CC      src/base/err.c"
LONG=$(awk 'length > 200' <<<"$OUT")
expect_ok "no line longer than 200 characters" test -z "$LONG"
OUT=$(make V=1 -W src/base/err.c build/release/src/base/err.o 2>&1)
expect_contains "make V=1: the full command" "$OUT" " -c -o build/release/src/base/err.o src/base/err.c"

echo "--- flock F hack/demo.sh up (DEMO_NODE=0 DEMO_QEMU=0)"
T0=$(date +%s%N)
UP=$(flock "$LOCK" hack/demo.sh up 2>&1)
RC=$?
echo "  took $((($(date +%s%N) - T0) / 1000000)) ms"
expect_ok "hack/demo.sh up returns 0" test "$RC" -eq 0 || echo "$UP" | tail -20
grep "^=== " <<<"$UP" | sed "s/^/  /"
demo_pids
expect_ok "its daemons run: $(alive "${PIDS[@]}" | wc -l) of them" test -n "$(alive "${PIDS[@]}")"
expect_ok "F is free once it returned (flock -n F)" flock -n "$LOCK" true
HELD=$(holders "$LOCK")
if [ -z "$HELD" ]; then pass "no process holds F open"; else fail "no process holds F open" "$HELD"; fi
expect_contains "helm installed the chart; KubeVirt's CRDs and CR" "$UP" \
    "helm install hostdevd charts/hostdevd" "KubeVirt v1.9.0's CRDs and a KubeVirt CR"
expect_contains "every manifest: admission policies, DeviceClasses, FlowSchemas listed" "$UP" \
    "validatingadmissionpolicy.admissionregistration.k8s.io/hostdevd-vm-use" \
    "deviceclass.resource.k8s.io/vfio-pci.hostdevd.io" "flowschema.flowcontrol.apiserver.k8s.io/hostdevd"
set -a
# shellcheck disable=SC1091
. "$HOSTDEVD_DEMO_DIR/cluster/env"
set +a
export PATH="$K8S_BIN:$PATH"
expect_ok "KubeVirt's CR kubevirt/kubevirt" kubectl -n kubevirt get kubevirt kubevirt
expect_ok "the teams' RoleBinding and quota" kubectl -n team-a get rolebinding/nic-pool resourcequota/devices

echo "--- a second run starts clean"
FIRST=$(kubectl get namespace default -o jsonpath='{.metadata.uid}')
OUT=$(hack/demo.sh up 2>&1)
expect_contains "it says it stops the running one to start clean" "$OUT" \
    "stopping it first (make demo starts clean)" "stopped the control plane"
expect_ok "the first run's daemons are gone" test -z "$(alive "${PIDS[@]}")"
set -a
# shellcheck disable=SC1091
. "$HOSTDEVD_DEMO_DIR/cluster/env"
set +a
SECOND=$(kubectl get namespace default -o jsonpath='{.metadata.uid}')
expect_ok "a fresh control plane (namespace default: uid $FIRST, then $SECOND)" \
    test -n "$SECOND" -a "$FIRST" != "$SECOND"

echo "--- hack/demo.sh down"
demo_pids
OUT=$(hack/demo.sh down 2>&1)
expect_contains "down says what it stopped" "$OUT" \
    "demo: stopped the workload controllers" "demo: stopped the control plane"
expect_ok "nothing of it runs" test -z "$(alive "${PIDS[@]}")"
OUT=$(hack/demo.sh down 2>&1)
expect_contains "down again: nothing was running" "$OUT" "demo: nothing was running"
finish
