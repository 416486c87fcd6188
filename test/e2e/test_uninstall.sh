#!/usr/bin/env bash
# test/e2e/test_uninstall.sh - `kubectl delete -k manifests/` with claims left, on a real kernel
# (docs/install.md, Uninstall; issue 42). kubectl runs no hook: the CRDs are part of the
# kustomization, so deleting them deletes the claims while the agent's ServiceAccount and RBAC
# are deleted too. A qemu node (hack/qemu-node.sh) whose agent runs as a process with its
# node-bound token, everything of manifests/ applied (no kubelet: the DaemonSet has no pod).
# Two e1000e claimed and bound; one held by a process (/dev/vfio/<group> open, as a VM holds
# it). Checks: the unheld device is back on e1000e; the held one stays on vfio-pci with its
# claim (being deleted, passthroughEnabled, finalizer kept; not DeviceInUse: the agent's token
# went with its ServiceAccount, 401); every device on vfio-pci has a claim saying so, before and
# after the holder lets go (then the still-running agent restores it); the CRD stays
# Terminating. Prints the times of each phase.
# shellcheck disable=SC2016,SC2317 # guest commands expand in the guest; functions run through eventually
SUITE=e2e-uninstall
# shellcheck source=test/e2e/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1
NODE=quninst
NIC=0000:00:04.0  # e1000e, not held
NIC2=0000:00:05.0 # e1000e, held by a process

cluster_start
install_kubevirt "{}" || fail "KubeVirt's CRD and CR"
expect_ok "kubectl apply -k manifests/" kubectl apply -k manifests/
eventually 60 kubectl wait --for condition=Established --timeout 10s crd --all >/dev/null || fail "the CRDs are Established"
create_node "$NODE"

group_of() { guest "basename \$(readlink /sys/bus/pci/devices/$1/iommu_group)"; }
# Every device on vfio-pci in the guest whose claim does not exist or does not say so.
unrecorded() {
    local a
    for a in $(guest 'for d in /sys/bus/pci/drivers/vfio-pci/0000:*; do [ -e "$d" ] && basename "$d"; done; true'); do
        [ "$(field "$a" '{.status.passthroughEnabled}')" = true ] || echo "$a"
    done
}

echo "--- boot, two claims, one device held"
T0=$SECONDS
if node_boot "$NODE"; then pass "node $NODE boots (${BOOT_SECONDS}s)"; else fail "node boots"; finish; fi
if eventually 120 guest_agent_ready; then pass "agent ready with its node-bound token"; else fail "agent ready" "$(node_logs)"; finish; fi
T_BOOT=$((SECONDS - T0))
T0=$SECONDS
claim "$NIC"
claim "$NIC2"
if eventually 60 enabled "$NIC" && eventually 60 enabled "$NIC2"; then pass "both claims bound"; else
    fail "both claims bound" "$(reason "$NIC") $(reason "$NIC2")"; finish; fi
GROUP2=$(group_of "$NIC2")
guest "sleep 900 </dev/vfio/$GROUP2 >/dev/null 2>&1 & echo \$! >/tmp/holder"
expect_ok "a process holds /dev/vfio/$GROUP2 ($NIC2)" guest "kill -0 \$(cat /tmp/holder)"
T_CLAIMS=$((SECONDS - T0))

echo "--- kubectl delete -k manifests/ with both claims Ready"
T0=$SECONDS
# --wait=false: with a claim held the CRD stays Terminating and kubectl would wait for ever
expect_ok "kubectl delete -k manifests/ --wait=false" kubectl delete -k manifests/ --wait=false
# The agent still runs (a process here; in a pod it gets SIGTERM a moment later and finishes
# the restore in flight, controllers/runtime/process.c), and its open watch still delivers the
# deletions; its token died with its ServiceAccount, so it can restore devices but no longer
# write a claim (401): no DeviceInUse, no finalizer removed.
if eventually 60 on_driver "$NIC" e1000e; then pass "the unheld $NIC is back on e1000e ($((SECONDS - T0))s)"; else
    fail "the unheld $NIC is back on e1000e" "$(guest_driver "$NIC") $(reason "$NIC")"; fi
T_SETTLED=$((SECONDS - T0))
expect_ok "the held $NIC2 stays on vfio-pci" on_driver "$NIC2" vfio-pci
OUT=$(field "$NIC2" '{.metadata.deletionTimestamp} {.status.passthroughEnabled} {.metadata.finalizers}')
expect_contains "... its claim is there, being deleted, saying passthroughEnabled, finalizer kept" \
    "$OUT" "Z true " "devices.harvesterhci.io/restore-driver"
OUT=$(unrecorded)
expect_contains "every device on vfio-pci has a claim saying so" "[$OUT]" "[]"
OUT=$(kubectl get crd pcideviceclaims.devices.harvesterhci.io -o jsonpath='{.metadata.deletionTimestamp}')
expect_ok "the CRD pcideviceclaims stays Terminating (claims held by finalizers)" test -n "$OUT"
# (401 once the ServiceAccount is gone, 403 while only its bindings are: which comes first is
# the API server's order of deletion; the agent's next try of the write may come after a backoff)
refused_write() { guest 'grep -qE "Unauthorized|Forbidden|\"code\":40[13]|status=40[13]" /var/log/hostdevd.log'; }
expect_ok "the agent could not write the claims: its ServiceAccount or its RBAC is gone (401 or 403 in its log)" \
    eventually 60 refused_write

echo "--- the holder lets go"
T0=$SECONDS
guest 'kill $(cat /tmp/holder)'
if eventually 60 on_driver "$NIC2" e1000e; then pass "$NIC2 restored by the agent once the holder lets go ($((SECONDS - T0))s)"; else
    fail "$NIC2 restored once the holder lets go" "$(guest_driver "$NIC2") $(reason "$NIC2")"; fi
OUT=$(unrecorded)
expect_contains "still: every device on vfio-pci has a claim saying so" "[$OUT]" "[]"
OUT=$(kubectl get pcideviceclaims -o name | sort | paste -sd' ')
echo "  left: claims $OUT (held by finalizers no agent can remove now: docs/install.md, Uninstall)"
echo "  times: boot ${T_BOOT}s, claims bound ${T_CLAIMS}s, delete -k -> settled ${T_SETTLED}s, holder gone -> $((SECONDS - T0))s"
finish
