#!/usr/bin/env bash
# test/long/test_upgrade.sh - upgrade a running install without touching a VM, and roll it back
# (`make test-long`; issue 42). Two Kubernetes nodes of one control plane: the containerd node of
# chart-node-lib.sh (kubelet, containerd 2, runc on this machine: the controller's replicas run
# there) and a qemu node running kubelet, containerd and runc itself (hack/qemu-node.sh boot
# --kubelet, /sbin/kubelet-node), whose agent pod sees Debian's kernel with a real IOMMU and
# vfio-pci. Version N is the commit in UPGRADE_FROM (default below), built by hack/image-at.sh from
# this clone's history: its image, its chart and its CRDs. Version N+1 is this tree.
#
# Install N (helm install --wait, KubeVirt's CR managed), claim the node's e1000e, give it to a
# pod through the agent's device plugin (the pod's process holds /dev/vfio/<group> open, as
# virt-launcher's qemu would), then apply this tree's CRDs and `helm upgrade --wait` to this tree.
# Required and checked: the upgrade completes; no device is unbound or rebound (the guest's
# uevents, the driver link), the holder's process keeps its fd and its container never restarts;
# no claim changes (resourceVersion); no PCIDevice, USBDevice, ResourceSlice, claim or KubeVirt CR
# is written (audit log); one controller leads at every moment (the Lease's holder watched: from
# holder to holder only through a release); the new version leads and the agents run it. Then
# `helm rollback` to N with the same checks (N reads what N+1 wrote: the CRDs stay N+1's). At
# the end, N (rolled back) still does its job: the pod goes, the claim is deleted, the device is
# back on e1000e. Between the upgrade and the rollback, `helm uninstall` is refused by this
# tree's pre-delete hook (the claim named) and changes nothing. Prints the times (upgrade start -> new version leading, -> agents rolled).
#
# Why that N: ca43410 is the first version that can run this test at all: the first whose
# controller can be upgraded (issue 41: before it only the leader was Ready, so `helm upgrade
# --wait` never returned) and whose device plugin can hand a PCI device to a container on a
# kernel without the iommufd cdev (before it, Allocate named /dev/vfio/devices/vfio0 on Debian
# 12's 6.1 and containerd failed the container). Move it forward to the last release once there
# are releases.
# Needs root; skipped otherwise.
# shellcheck disable=SC2317 # the small functions run through expect_ok and eventually
# test-lock: kubelet (the kubelet harness: its sysctls are global; see hack/run-tests.sh)
# test-lock: qemu
# shellcheck disable=SC2034 # lib.sh reads SUITE; e2e/lib.sh's claim helpers read NODE
SUITE=upgrade
UPGRADE_FROM=${UPGRADE_FROM:-ca43410}
# shellcheck source=test/e2e/lib.sh disable=SC1091
. "$(dirname "$0")/../e2e/lib.sh"
# shellcheck source=test/integration/chart-node-lib.sh disable=SC1091
. "$ROOT/test/integration/chart-node-lib.sh"
cd "$ROOT" || exit 1
# An upper bound, not a pace: containerd and runc under TCG start a pod in seconds on a quiet
# machine and in minutes under load (the agents Ready 298 s after `helm upgrade` at load 12).
WAIT=${UPGRADE_WAIT:-900}

if [ "$(id -u)" -ne 0 ]; then
    echo "  SKIP upgrade on a node with vfio devices: needs root (namespaces, mounts, containerd)"
    finish
fi
MODULES_EXISTED=yes
[ -e /lib/modules ] || MODULES_EXISTED=

echo "--- version N: $UPGRADE_FROM, built from this clone's history"
t0=$(ms)
read -r PREV_ARCHIVE PREV_IMAGE PREV_TAG PREV_TREE <<<"$("$ROOT/hack/image-at.sh" "$UPGRADE_FROM")"
if [ -f "${PREV_ARCHIVE:-}" ]; then
    pass "hack/image-at.sh $UPGRADE_FROM: $PREV_IMAGE ($(elapsed "$t0") ms)"
else
    fail "hack/image-at.sh $UPGRADE_FROM builds version N"
    finish
fi
chart_node_up # this tree's image (ARCHIVE, TAG), the control plane, the containerd node
expect_ok "ctr imports version N's image into the containerd node" "${CTR_CMD[@]}" images import "$PREV_ARCHIVE"

echo "--- the qemu node as a Kubernetes node: kubelet, containerd and runc in the guest"
QN=upnode
QKUBECONFIG=$TEST_DIR/upnode-kubelet.kubeconfig
"$QEMU_NODE" kubelet-kubeconfig "$QN" "$QKUBECONFIG" || fail "a kubelet kubeconfig for $QN"
t0=$(ms)
# (no agent of the image's own: the agent is the DaemonSet's pod; K8S_SERVER unset for node_boot,
# which would otherwise make the agent a token for a Node that does not exist yet)
if K8S_SERVER='' node_boot "$QN" --no-agent --kubelet --kubelet-kubeconfig "$QKUBECONFIG" \
    --image-archive "$PREV_ARCHIVE" --image-archive "$ARCHIVE" --memory 2048 --smp 2 --timeout 300; then
    pass "the qemu node booted with kubelet, containerd and both images in ${BOOT_SECONDS}s"
else
    fail "the qemu node boots"
    finish
fi
read -r SVC_IP SVC_PORT <<<"$(kubectl get service kubernetes -n default -o jsonpath='{.spec.clusterIP} {.spec.ports[0].port}')"
GUEST_TIMEOUT=300 expect_ok "kubelet-node start: containerd imports the images, kubelet starts" \
    guest "kubelet-node start $SVC_IP $SVC_PORT 10.0.2.2:${K8S_SERVER##*:}"
qnode_ready() { [ "$(kubectl get node "$QN" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; }
if eventually "$WAIT" qnode_ready; then
    pass "Node $QN Ready on $(kubectl get node "$QN" -o jsonpath='{.status.nodeInfo.containerRuntimeVersion}, kernel {.status.nodeInfo.kernelVersion}') ($(elapsed "$t0") ms after boot)"
else
    fail "Node $QN Ready" "$(guest 'tail -20 /var/log/kubelet.log')"
    finish
fi

echo "--- install version N ($PREV_TAG) with its own chart and CRDs"
VALUES=(--set image.pullPolicy=Never --set kubevirt.name=kubevirt
    --set "controller.nodeSelector.kubernetes\.io/hostname=$KUBELET_NODE")
t0=$(ms)
expect_ok "helm install --wait of N's chart (image $PREV_IMAGE)" \
    helm install hostdevd "$PREV_TREE/charts/hostdevd" -n "$NS" --set image.tag="$PREV_TAG" "${VALUES[@]}" \
    --wait --timeout "${WAIT}s"
echo "  helm install --wait: $(elapsed "$t0") ms"
agent_on() { # node -> the Ready agent pod on it (not being deleted)
    kubectl -n "$NS" get pods -l app.kubernetes.io/name=hostdevd-agent --field-selector "spec.nodeName=$1" -o json |
        jq -r '.items[] | select(.metadata.deletionTimestamp == null) | select(any(.status.conditions[]?; .type == "Ready" and .status == "True")) | .metadata.name' | head -1
}
pod_image() { kubectl -n "$NS" get pod "$1" -o jsonpath='{.spec.containers[0].image}' 2>/dev/null; }
agent_runs() { # node tag: the node's Ready agent runs that version
    local p
    p=$(agent_on "$1")
    [ -n "$p" ] && [ "$(pod_image "$p")" = "localhost/hostdevd:$2" ]
}
if eventually "$WAIT" agent_runs "$QN" "$PREV_TAG"; then pass "N's agent pod Ready on $QN"; else
    fail "N's agent pod Ready on $QN" "$(pod_state; guest 'tail -5 /var/log/kubelet.log')"
    finish
fi

echo "--- a claim bound, its device held by a pod's process"
# shellcheck disable=SC2034 # e2e/lib.sh's claim and name_of read it
NODE=$QN
ADDR=0000:00:04.0
GROUP=$(guest "basename \$(readlink /sys/bus/pci/devices/$ADDR/iommu_group)")
device_of() { kubectl get pcidevices -o json | jq -r --arg n "$QN" --arg a "$ADDR" '.items[] | select(.status.nodeName == $n and .status.address == $a) | .metadata.name'; }
published() { [ -n "$(device_of)" ]; }
expect_ok "N's agent publishes $QN's $ADDR" eventually "$WAIT" published
PCIDEV=$(device_of)
claim "$ADDR"
bound() { enabled "$ADDR" && on_driver "$ADDR" vfio-pci; }
if eventually "$WAIT" bound; then pass "N binds $ADDR (group $GROUP) to vfio-pci: the claim is Ready"; else
    fail "N binds $ADDR to vfio-pci" "$(field "$ADDR" '{.status}')"
fi
RESOURCE=$(kubectl get pcidevice "$PCIDEV" -o jsonpath='{.status.resourceName}')
allocatable() { [ "$(kubectl get node "$QN" -o json | jq -r --arg r "$RESOURCE" '.status.allocatable[$r] // "0"')" = 1 ]; }
expect_ok "kubelet on $QN offers $RESOURCE (N's device plugin)" eventually "$WAIT" allocatable
expect_ok "N's controller permits $RESOURCE in KubeVirt's CR" eventually "$WAIT" bash -c \
    "kubectl get kubevirt kubevirt -n kubevirt -o jsonpath='{.spec.configuration.permittedHostDevices.pciHostDevices[*].resourceName}' | grep -qF '$RESOURCE'"
# Only KubeVirt may create a pod asking for a host device (the admission policy
# hostdevd-pod-use): the pod is created as virt-controller would, by its service account.
KV_SA=system:serviceaccount:kubevirt:kubevirt-controller
kubectl create clusterrolebinding upgrade-test-virt-controller --clusterrole cluster-admin \
    --serviceaccount kubevirt:kubevirt-controller >/dev/null
kubectl --as "$KV_SA" --as-group system:serviceaccounts create -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: vm, namespace: default}
spec:
  nodeSelector: {kubernetes.io/hostname: $QN}
  hostNetwork: true
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers:
  - name: vm
    image: $SANDBOX_IMAGE
    imagePullPolicy: Never
    command: [sh, -c, 'exec 3<>/dev/vfio/$GROUP && echo holding /dev/vfio/$GROUP && exec sleep 1000000']
    resources: {limits: {"$RESOURCE": 1}}
EOF
vm_running() { [ "$(kubectl get pod vm -o jsonpath='{.status.phase}')" = Running ]; }
if eventually "$WAIT" vm_running; then pass "the pod with $RESOURCE runs on $QN"; else
    fail "the pod with $RESOURCE runs" "$(kubectl describe pod vm | tail -8)"
fi
holders() { # pids holding /dev/vfio/GROUP in the guest
    guest "for p in /proc/[0-9]*; do ls -l \$p/fd 2>/dev/null | grep -q ' /dev/vfio/$GROUP\$' && echo \${p#/proc/}; done"
}
HOLDER=$(holders)
expect_ok "its process holds /dev/vfio/$GROUP open (pid ${HOLDER:-none} in the guest)" test -n "$HOLDER"
restarts() { kubectl get pod vm -o jsonpath='{.status.containerStatuses[0].restartCount}'; }

# The objects as N wrote them: test/fixtures/upgrade/ keeps a copy that test_crds.sh (make test)
# creates under this tree's CRDs, to see nothing N writes is refused or pruned by them.
# UPGRADE_FIXTURE_OUT=test/fixtures/upgrade refreshes it when N moves.
n_objects() {
    local ns='.items[] | del(.metadata.uid, .metadata.resourceVersion, .metadata.managedFields,
        .metadata.creationTimestamp, .metadata.generation, .metadata.ownerReferences, .metadata.finalizers)'
    {
        kubectl get pcidevices -o json | jq -c --arg n "$QN" "[$ns | select(.status.nodeName == \$n)]"
        kubectl get usbdevices -o json | jq -c --arg n "$QN" "[$ns | select(.status.nodeName == \$n)]"
        kubectl get pcideviceclaims -o json | jq -c "[$ns]"
    } | jq -s 'add | sort_by(.kind, .metadata.name) | {apiVersion: "v1", kind: "List", writtenBy: $v, items: .}' \
        --arg v "$PREV_TAG"
}
n_objects >"$TEST_DIR/objects-$PREV_TAG.json"
expect_ok "N's objects recorded: $(jq -r '[.items[].kind] | group_by(.) | map("\(length) \(.[0])") | join(", ")' "$TEST_DIR/objects-$PREV_TAG.json")" \
    test "$(jq '.items | length' "$TEST_DIR/objects-$PREV_TAG.json")" -gt 3
if [ -n "${UPGRADE_FIXTURE_OUT:-}" ]; then
    mkdir -p "$UPGRADE_FIXTURE_OUT"
    jq . "$TEST_DIR/objects-$PREV_TAG.json" >"$UPGRADE_FIXTURE_OUT/objects.json"
    echo "  written: $UPGRADE_FIXTURE_OUT/objects.json"
fi

# What must not change across the upgrade and the rollback.
claim_rv() { field "$ADDR" '{.metadata.resourceVersion}'; }
snapshot() {
    SNAP_CLAIM=$(claim_rv)
    SNAP_STATUS=$(field "$ADDR" '{.status}')
    SNAP_DRIVER=$(guest_driver "$ADDR")
    SNAP_LINE=$(($(wc -l <"$AUDIT") + 1))
    SNAP_SLICES=$(slices)
    SNAP_PCI=$(pci_statuses)
    guest ': >/tmp/uevents'
}
# Every PCIDevice's status without what issue 46 added (the Healthy condition, aerErrors): an
# upgrade from a version without them writes each device's status once to add them, nothing else.
pci_statuses() {
    kubectl get pcidevices -o json | jq -S -c '[.items[] | {name: .metadata.name, status: (.status // {}
        | del(.aerErrors) | if .conditions then .conditions |= map(select(.type != "Healthy")) else . end
        | if (.conditions // []) == [] then del(.conditions) else . end)}] | sort_by(.name)'
}
# from line N: hostdevd's PCIDevice writes are only status patches, each device's at most once,
# and they added only the new fields
pci_new_fields_only() {
    local w
    w=$(writes "$1" pcidevices)
    ! grep -v ' patch [^ ]*/status 200 by ' <<<"$w" || { echo "(writes other than a status patch)"; return 1; }
    ! awk '{print $3}' <<<"$w" | sort | uniq -d | grep . || { echo "(written twice)"; return 1; }
    [ "$(pci_statuses)" = "$SNAP_PCI" ] || { diff <(jq . <<<"$SNAP_PCI") <(pci_statuses | jq .); return 1; }
}
AUDIT=$TEST_DIR/cluster/audit.log
same_slices() { [ "$(slices)" = "$SNAP_SLICES" ]; }
slices() { kubectl get resourceslices -o json | jq -S -c '[.items[] | {name: .metadata.name, node: .spec.nodeName, pool: .spec.pool.name, devices: .spec.devices}] | sort_by(.name)'; }
wipes() { # from line N: kubelet deleting a node's ResourceSlices (its DRA plugin gone for 30 s)
    tail -n +"$1" "$AUDIT" | jq -r 'select(.stage == "ResponseComplete" and .objectRef.resource == "resourceslices"
        and .verb == "deletecollection" and (.user.username | startswith("system:node:")))
        | "\(.requestReceivedTimestamp) \(.user.username)"'
}
guest "uevent sh -c 'echo \"\$ACTION \$DEVPATH \$DRIVER\" >>/tmp/uevents' >/dev/null 2>&1 &"
writes() { # from line N of the audit log: writes to RESOURCE by hostdevd (its service accounts)
    tail -n +"$1" "$AUDIT" | jq -r --arg r "$2" 'select(.stage == "ResponseComplete" and .objectRef.resource == $r
        and (.verb | IN("create", "update", "patch", "delete"))
        and (.user.username | startswith("system:serviceaccount:hostdevd-system:")))
        | "\(.requestReceivedTimestamp) \(.verb) \(.objectRef.name // "-")\(.objectRef.subresource // "" | if . != "" then "/" + . else "" end) \(.responseStatus.code) by \(.user.extra."authentication.kubernetes.io/pod-name"[0] // .user.username)"'
}
new_leads() { # tag: the Lease's holder is a pod of that version
    local h
    h=$(kubectl -n "$NS" get lease hostdevd-controller -o jsonpath='{.spec.holderIdentity}')
    [ -n "$h" ] && [ "$(pod_image "$h")" = "localhost/hostdevd:$1" ]
}
rolled() { # tag: both nodes' agents run it, and no other agent pod is left
    agent_runs "$QN" "$1" && agent_runs "$KUBELET_NODE" "$1" &&
        [ "$(kubectl -n "$NS" get pods -l app.kubernetes.io/name=hostdevd-agent -o name | wc -l)" -eq 2 ]
}
# One leader at every moment: the holder changes only through an empty Lease.
handovers() {
    awk 'NR > 1 && $0 != prev && prev != "" && $0 != "" {bad++} {prev = $0} END {print bad + 0}' "$1"
}
nothing_touched() { # what: the required checks after an upgrade or a rollback
    local what=$1 w r
    expect_ok "$what: the claim did not change (resourceVersion $SNAP_CLAIM)" test "$(claim_rv)" = "$SNAP_CLAIM"
    expect_ok "$what: its status is as it was" test "$(field "$ADDR" '{.status}')" = "$SNAP_STATUS"
    expect_ok "$what: $ADDR still on $SNAP_DRIVER" test "$(guest_driver "$ADDR")" = "$SNAP_DRIVER"
    w=$(guest "grep -c '^\(bind\|unbind\) .*/$ADDR\$\|^\(bind\|unbind\) .*/$ADDR ' /tmp/uevents")
    expect_ok "$what: no bind or unbind uevent for $ADDR (guest's uevents: ${w:-?})" test "${w:-1}" -eq 0
    expect_ok "$what: the pod's process still holds /dev/vfio/$GROUP (pid $HOLDER)" test "$(holders)" = "$HOLDER"
    expect_ok "$what: its container never restarted" test "$(restarts)" = 0
    # kubelet wipes a DRA driver's ResourceSlices when its plugin has been gone for 30 s (its
    # wipingDelay): a new agent pod that starts slower than that (containerd and runc under TCG
    # can) publishes them again, the same. That re-creation is the only write allowed.
    local wiped
    wiped=$(wipes "$SNAP_LINE")
    if [ -n "$wiped" ]; then
        echo "  kubelet wiped ResourceSlices (the agent was gone for more than 30 s): $(tr '\n' ' ' <<<"$wiped")"
        w=$(writes "$SNAP_LINE" resourceslices | grep -v ' create ')
        expect_ok "$what: after kubelet's wipe, hostdevd only creates its slices again (no patch or delete)" test -z "$w"
        expect_ok "$what: ... the same slices as before" eventually 60 same_slices
    fi
    for r in pcidevices usbdevices resourceslices pcideviceclaims usbdeviceclaims kubevirts; do
        [ "$r" != resourceslices ] || [ -z "$wiped" ] || continue
        if [ "$r" = pcidevices ] && [ "$what" = upgrade ] && [ -n "$(writes "$SNAP_LINE" "$r")" ]; then
            # (the version N this test starts from has no Healthy condition and no aerErrors)
            expect_ok "upgrade: PCIDevices written only to add this version's status fields (Healthy, aerErrors), each once ($(writes "$SNAP_LINE" "$r" | wc -l) patches)" \
                pci_new_fields_only "$SNAP_LINE"
            continue
        fi
        w=$(writes "$SNAP_LINE" "$r")
        if [ -z "$w" ]; then pass "$what: no $r written by hostdevd (audit log)"; else
            fail "$what: no $r written by hostdevd (audit log)" "$w"
        fi
    done
    expect_ok "$what: kubelet on $QN still offers $RESOURCE" allocatable
}
move() { # what tag command...: run the upgrade or rollback, wait for the version to lead and roll
    local what=$1 tag=$2 t0 watch
    shift 2
    kubectl -n "$NS" get lease hostdevd-controller -w -o jsonpath='{.spec.holderIdentity}{"\n"}' \
        >"$TEST_DIR/holders-$tag.txt" 2>/dev/null &
    watch=$!
    track "$watch"
    t0=$(ms)
    expect_ok "$what returns" "$@"
    echo "  $what: $(elapsed "$t0") ms"
    if eventually "$WAIT" new_leads "$tag"; then
        pass "$what: version $tag leads ($(elapsed "$t0") ms after the start)"
    else
        fail "$what: version $tag leads" "holder $(kubectl -n "$NS" get lease hostdevd-controller -o jsonpath='{.spec.holderIdentity}')"
    fi
    if eventually "$WAIT" rolled "$tag"; then
        pass "$what: both nodes' agents run $tag and are Ready ($(elapsed "$t0") ms after the start)"
    else
        fail "$what: both nodes' agents run $tag" "$(pod_state)"
    fi
    kill "$watch" 2>/dev/null
    echo "  the Lease's holders: $(uniq "$TEST_DIR/holders-$tag.txt" | sed 's/^$/(released)/' | tr '\n' ' ')"
    expect_ok "$what: the Lease went from holder to holder only through a release" \
        test "$(handovers "$TEST_DIR/holders-$tag.txt")" -eq 0
}

echo "--- helm upgrade to this tree ($TAG)"
snapshot
expect_ok "this tree's CRDs applied over N's (kubectl apply -k crds/, as docs/install.md says)" \
    kubectl apply -k crds/
move "helm upgrade --wait" "$TAG" helm upgrade hostdevd charts/hostdevd -n "$NS" --set image.tag="$TAG" \
    "${VALUES[@]}" --wait --timeout "${WAIT}s"
nothing_touched "upgrade"

echo "--- helm uninstall with the claim Ready and its device held: refused, nothing touched"
snapshot
expect_reject "helm uninstall fails in its pre-delete hook's Job" "Job/$NS/hostdevd-uninstall-check" \
    helm uninstall hostdevd -n "$NS" --wait --timeout 120s
hook_log() { cat "$KUBELET_ROOT"/../../varlog/pods/"${NS}"_hostdevd-uninstall-check-*/check/0.log 2>/dev/null; }
expect_contains "... whose log names the claim" "$(hook_log)" "PCIDeviceClaim $(name_of "$ADDR") (node $QN, $ADDR): Ready"
expect_ok "nothing was removed: the DaemonSet, the Deployment, the CRDs" \
    kubectl get -n "$NS" ds/hostdevd-agent deploy/hostdevd-controller crd/pcideviceclaims.devices.harvesterhci.io
expect_ok "refused uninstall: the claim did not change" test "$(claim_rv)" = "$SNAP_CLAIM"
expect_ok "refused uninstall: $ADDR still on vfio-pci, held by the pod's process" \
    test "$(guest_driver "$ADDR") $(holders)" = "vfio-pci $HOLDER"
expect_ok "refused uninstall: both nodes' agents still run $TAG" rolled "$TAG"

echo "--- helm rollback to N ($PREV_TAG)"
snapshot
move "helm rollback --wait" "$PREV_TAG" helm rollback hostdevd 1 -n "$NS" --wait --timeout "${WAIT}s"
nothing_touched "rollback"

echo "--- N, rolled back, still gives the device back"
kubectl --as "$KV_SA" --as-group system:serviceaccounts delete pod vm --wait=false >/dev/null
no_holder() { [ -z "$(holders)" ]; }
expect_ok "the pod's process is gone" eventually "$WAIT" no_holder
kubectl delete pcideviceclaim "$(name_of "$ADDR")" --wait=false >/dev/null
back() { claim_gone "$ADDR" && on_driver "$ADDR" e1000e; }
if eventually "$WAIT" back; then pass "the claim is deleted and $ADDR is back on e1000e"; else
    fail "the claim is deleted and $ADDR back on e1000e" "driver $(guest_driver "$ADDR"); $(field "$ADDR" '{.status}')"
fi

guest 'kubelet-node stop' >/dev/null 2>&1
echo "  the whole test: $(elapsed "$T_ALL") ms"
"$ROOT/hack/kubelet.sh" down "$TEST_DIR/kubelet" >/dev/null 2>&1
# shellcheck disable=SC2034 # lib.sh's cleanup reads it
KUBELET_UP=
if [ -z "$MODULES_EXISTED" ] && [ -d /lib/modules ]; then rmdir /lib/modules 2>/dev/null || true; fi
finish
