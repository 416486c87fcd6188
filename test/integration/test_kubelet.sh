#!/usr/bin/env bash
# test/integration/test_kubelet.sh - the kubelet harness (hack/kubelet.sh): a real kubelet on the
# fake CRI (test/fakecri) registers its Node, which gets Ready; kubelet's device-plugin socket is
# where DEVICE_PLUGIN_DIR says; a pod bound to the node runs, and its CreateContainer (with the
# pod's env var) is in the CRI record; a kubelet restart keeps the pod without creating its
# container again and the Node is Ready again; `down` leaves no process, mount or changed sysctl.
# Needs root (mount namespace, bind mounts, kubelet's sysctls): skipped otherwise.
# shellcheck disable=SC2317 # the small functions run through expect_ok and eventually
# test-lock: kubelet (the kubelet harness: its sysctls are global; see hack/run-tests.sh)
SUITE=kubelet
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1

if [ "$(id -u)" -ne 0 ]; then
    echo "  SKIP kubelet harness: needs root (mount namespace, bind mounts, kubelet's sysctls)"
    finish
fi

SYSCTLS=(vm.overcommit_memory kernel.panic kernel.panic_on_oops)
sysctls() { sysctl -n "${SYSCTLS[@]}" | paste -sd' '; }
STATE=${HOSTDEVD_KUBELET_STATE:-/run/hostdevd-kubelet}
ms() { date +%s%N; }
elapsed() { echo $((($(date +%s%N) - $1) / 1000000)); }

cluster_start
t0=$(ms)
kubelet_start
echo "  kubelet up in $(elapsed "$t0") ms (Node Ready, fake CRI at $FAKECRI_SOCKET)"

ready() {
    [ "$(kubectl get node "$KUBELET_NODE" \
        -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
}
expect_ok "Node $KUBELET_NODE registered and Ready" ready
expect_ok "Node reports kubelet v1.37.1 on the fake runtime" bash -c \
    "kubectl get node $KUBELET_NODE -o jsonpath='{.status.nodeInfo.kubeletVersion} {.status.nodeInfo.containerRuntimeVersion}' |
     grep -qx 'v1.37.1 fakeRuntime://0.1.0'"
expect_ok "kubelet's device-plugin socket is at \$DEVICE_PLUGIN_DIR/kubelet.sock" \
    test -S "$DEVICE_PLUGIN_DIR/kubelet.sock"
expect_ok "nothing of kubelet's on the host's /var/lib" test ! -e /var/lib/kubelet/device-plugins/kubelet.sock

kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: probe, namespace: default}
spec:
  nodeName: $KUBELET_NODE
  hostNetwork: true
  automountServiceAccountToken: false
  containers:
  - name: main
    image: hostdevd.invalid/none:1
    env: [{name: HOSTDEVD_PROBE, value: from-the-pod-spec}]
EOF
t0=$(ms)
running() { [ "$(kubectl get pod probe -o jsonpath='{.status.phase}')" = Running ]; }
if eventually 30 running; then
    pass "pod bound to the node is Running ($(elapsed "$t0") ms)"
else
    fail "pod bound to the node is Running" "$(kubectl get pod probe -o yaml | tail -30)"
fi
recorded() {
    jq -se 'any(.[]; .pod == "probe" and .namespace == "default" and .container == "main"
        and .envs.HOSTDEVD_PROBE == "from-the-pod-spec")' "$CRI_RECORD"
}
expect_ok "its CreateContainer, with the env var, is in the CRI record" recorded
creates=$(wc -l <"$CRI_RECORD")

heartbeat() {
    kubectl get node "$KUBELET_NODE" \
        -o jsonpath='{.status.conditions[?(@.type=="Ready")].lastHeartbeatTime}'
}
hb_before=$(heartbeat)
old_pid=$KUBELET_PID
t0=$(ms)
if "$ROOT/hack/kubelet.sh" restart "$TEST_DIR/kubelet" >"$TEST_DIR/restart.log" 2>&1; then
    pass "kubelet restarts (SIGTERM, start, Ready heartbeat newer than before) in $(elapsed "$t0") ms"
else
    fail "kubelet restarts" "$(cat "$TEST_DIR/restart.log")"
fi
set -a
# shellcheck disable=SC1091
. "$TEST_DIR/kubelet/env"
set +a
expect_ok "a new kubelet process" test "$KUBELET_PID" != "$old_pid"
expect_ok "Node Ready again" ready
newer() { [[ "$(heartbeat)" > "$hb_before" ]]; }
expect_ok "Ready heartbeat newer than before the restart" newer
expect_ok "the pod still Running" running
sleep 1
expect_ok "no new CreateContainer after the restart (the fake keeps its containers)" \
    test "$(wc -l <"$CRI_RECORD")" -eq "$creates"

FAKECRI=$FAKECRI_PID
# The sysctls from before the first running harness; restored when the last one goes down.
harnesses=$(find "$STATE/users" -type f | wc -l)
saved=$(sed -n 's/^[^=]*=//p' "$STATE/sysctl.saved" | paste -sd' ')
t0=$(ms)
expect_ok "hack/kubelet.sh down" "$ROOT/hack/kubelet.sh" down "$TEST_DIR/kubelet"
echo "  down in $(elapsed "$t0") ms"
# Dead processes may linger as zombies until PID 1 reaps them: they count as gone.
gone() { # pid
    local s
    s=$(awk '/^State:/{print $2}' "/proc/$1/status" 2>/dev/null) || return 0
    [ -z "$s" ] || [ "$s" = Z ] || [ "$s" = X ]
}
expect_ok "no kubelet process left" gone "$KUBELET_PID"
expect_ok "no fakecri process left" gone "$FAKECRI"
leftovers() { # live processes whose command line names the test directory
    local p
    for p in $(pgrep -f "$TEST_DIR/kubelet/"); do gone "$p" || echo "$p $(tr '\0' ' ' <"/proc/$p/cmdline")"; done
}
expect_ok "no process of the test directory left" test -z "$(leftovers)"
expect_ok "no mount left under the test directory" bash -c "! grep -qF ' $TEST_DIR/' /proc/self/mountinfo"
if [ "$harnesses" -eq 1 ]; then
    expect_ok "sysctls restored ($saved)" test "$(sysctls)" = "$saved"
else
    echo "  (sysctls not checked: $((harnesses - 1)) other kubelet harness(es) running)"
fi
expect_ok "down again is a no-op" "$ROOT/hack/kubelet.sh" down "$TEST_DIR/kubelet"

finish
