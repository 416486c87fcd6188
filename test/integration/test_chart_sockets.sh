#!/usr/bin/env bash
# test/long/test_chart_sockets.sh - the agent's kubelet sockets from inside its container
# (`make test-long`; issue 30): the chart on the node of test_chart_node.sh (kubelet + containerd
# 2.4.2 + runc, test/long/chart-node-lib.sh), with the agent's pod on a fake sysfs tree
# (test/fixtures/sysfs/plugins-node.txt: two e1000e NICs already on vfio-pci, IOMMU groups 3 and
# 4). The overlay is the test's, not the chart's: a Helm 4 post-renderer plugin (in the test's
# directory) changes the hostPath of the agent's `sys` volume and nothing else, so the DaemonSet
# is the chart's in every other field, and the chart grows no value only tests need. The node's
# /dev (in its own mount namespace only) is the machine's with an overlay adding /dev/vfio/vfio,
# /dev/vfio/3 and /dev/vfio/4, made with mknod under the test's directory as copies of
# /dev/null's 1:3 (no device of this machine is touched or bound): what kubelet, containerd and
# runc see at /dev, and what the agent's /dev volume shows it. kubelet's --root-dir is
# /var/lib/hostdevd-kubelet (hack/kubelet.sh's KUBELET_ROOT_DIR), given to the chart as
# agent.kubeletDir.
# Checks: a PCIDeviceClaim on NIC 0000:00:04.0 binds; the agent registers its device plugin with
# the real kubelet from inside its container (the Node's allocatable has the resource); a pod
# asking for it, scheduled by kube-scheduler, starts under runc, and from inside the container
# /dev/vfio/vfio and /dev/vfio/3 are there (not 4), writable (the devices cgroup lets it), with
# PCI_RESOURCE_<NAME>; the DRA plugin registers (a ResourceSlice for the node) and a pod with a
# ResourceClaim (the chart's DeviceClass nic.vfio-pci.hostdevd.io) on NIC 0000:00:05.0 is
# allocated, prepared (the CDI spec in the node's /var/run/cdi, where containerd reads) and gets
# the CDI devices: /dev/vfio/vfio, /dev/vfio/4 and the metadata file KubeVirt reads; pods gone,
# the claim is unprepared (the CDI spec removed); the agent logged no warning or error all
# along; helm uninstall leaves no agent socket.
# Needs root; skipped otherwise.
# shellcheck disable=SC2317 # the small functions run through expect_ok and eventually
# test-lock: kubelet (the kubelet harness: its sysctls are global; see hack/run-tests.sh)
SUITE=chart-sockets
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
# shellcheck source=test/integration/chart-node-lib.sh
. "$(dirname "$0")/chart-node-lib.sh"
cd "$ROOT" || exit 1

if [ "$(id -u)" -ne 0 ]; then
    echo "  SKIP the agent's kubelet sockets in a container: needs root (namespaces, mounts, containerd)"
    finish
fi
MODULES_EXISTED=yes
[ -e /lib/modules ] || MODULES_EXISTED=
DRIVER=vfio-pci.hostdevd.io
NIC_DP=0000:00:04.0  # IOMMU group 3: the device plugin's
NIC_DRA=0000:00:05.0 # IOMMU group 4: DRA's

# kubelet's --root-dir is not the default here (agent.kubeletDir says where it is): its plugin
# registry and DRA plugins are under it, its device-plugin directory is not (kubelet's is the
# constant /var/lib/kubelet/device-plugins), and the chart mounts each from where kubelet has it.
KUBELET_DIR=/var/lib/hostdevd-kubelet
export KUBELET_ROOT_DIR=$KUBELET_DIR
chart_node_up
NODE=$KUBELET_NODE

echo "--- the fake sysfs tree and the node's /dev/vfio"
SYS=$TEST_DIR/sys
hack/mk-sysfs-fixture.sh test/fixtures/sysfs/plugins-node.txt "$SYS" >/dev/null
mkdir -p "$SYS/module/vfio_iommu_type1"
UP=$TEST_DIR/node-dev/upper
mkdir -p "$UP/vfio" "$TEST_DIR/node-dev/work"
read -r NULL_MAJ NULL_MIN < <(stat -c '%t %T' /dev/null)
for n in vfio 3 4; do mknod -m 0666 "$UP/vfio/$n" c "$((16#$NULL_MAJ))" "$((16#$NULL_MIN))"; done
expect_ok "the node's /dev: the machine's with vfio nodes (copies of /dev/null) over it" \
    nsenter -t "$NODE_NS_PID" -m -- mount -t overlay hostdevd-node-dev \
    -o "lowerdir=/dev,upperdir=$UP,workdir=$TEST_DIR/node-dev/work" /dev
expect_ok "... in the node's mount namespace only (the machine has no /dev/vfio/3)" test ! -e /dev/vfio/3

# The post-renderer: the agent's sys volume on the fake tree.
PLUGINS=$TEST_DIR/helm-plugins
mkdir -p "$PLUGINS/hostdevd-test-sysfs"
cat >"$PLUGINS/hostdevd-test-sysfs/plugin.yaml" <<'EOF'
apiVersion: v1
type: postrenderer/v1
name: hostdevd-test-sysfs
version: 0.1.0
runtime: subprocess
runtimeConfig:
  platformCommand:
  - command: ${HELM_PLUGIN_DIR}/render.sh
EOF
printf '#!/bin/sh\n# The hostPath of the volume mounted at /sys (the only "path: /sys"), on the fake tree.\nexec sed "s|^\\( *\\)path: /sys\\$|\\1path: %s|"\n' \
    "$SYS" >"$PLUGINS/hostdevd-test-sysfs/render.sh"
chmod +x "$PLUGINS/hostdevd-test-sysfs/render.sh"
export HELM_PLUGINS=$PLUGINS

echo "--- helm install, the agent on the fake tree"
T_INSTALL=$(ms)
expect_ok "helm install --set agent.kubeletDir=$KUBELET_DIR --post-renderer hostdevd-test-sysfs (image localhost/hostdevd:$TAG, pullPolicy Never)" \
    helm install hostdevd charts/hostdevd -n "$NS" --set image.tag="$TAG" --set image.pullPolicy=Never \
    --set agent.kubeletDir="$KUBELET_DIR" --post-renderer hostdevd-test-sysfs
volume_path() { kubectl -n "$NS" get daemonset hostdevd-agent -o jsonpath="{.spec.template.spec.volumes[?(@.name==\"$1\")].hostPath.path}"; }
expect_ok "the DaemonSet's sys volume is the fake tree, its dev volume the node's /dev" \
    test "$(volume_path sys) $(volume_path dev)" = "$SYS /dev"
if eventually "$WAIT" agent_ready; then
    pass "the agent's pod is Running and Ready ($(elapsed "$T_INSTALL") ms after helm install)"
else
    fail "the agent's pod is Running and Ready" "$(pod_state)"
    finish
fi
pci_name() { local a=${1//:/}; echo "$NODE-${a//./}"; }
published() { kubectl get pcidevice "$(pci_name "$1")" -o jsonpath='{.status.address}' 2>/dev/null | grep -qx "$1"; }
if eventually 60 published "$NIC_DP" && eventually 30 published "$NIC_DRA"; then
    pass "the fake tree's NICs on vfio-pci are published"
else
    fail "the fake tree's NICs published" "$(kubectl get pcidevices)"
fi
metric() { nsenter -t "$NODE_NS_PID" -n curl -fsS "http://$NODE_IP:9808/metrics" | awk -v m="$1" '$1 == m {print $2}'; }
agent_log() { cat "$KUBELET_ROOT"/../../varlog/pods/${NS}_"$(agent_pod)"_*/agent/0.log 2>/dev/null; }

echo "--- the device plugin: a PCIDeviceClaim, the Node's allocatable, a pod under runc"
printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: %s}\nspec: {address: "%s", nodeName: %s}\n' \
    "$(pci_name $NIC_DP)" "$NIC_DP" "$NODE" | kubectl create -f - >/dev/null
bound() { [ "$(kubectl get pcideviceclaim "$(pci_name "$1")" -o jsonpath='{.status.passthroughEnabled}')" = true ]; }
if eventually 60 bound $NIC_DP; then pass "the PCIDeviceClaim on $NIC_DP is bound"; else
    fail "the PCIDeviceClaim is bound" "$(kubectl get pcideviceclaim "$(pci_name $NIC_DP)" -o yaml | tail -15; agent_log | tail -10)"; fi
RES=$(kubectl get pcidevice "$(pci_name $NIC_DP)" -o jsonpath='{.status.resourceName}')
allocatable() { [ "$(kubectl get node "$NODE" -o jsonpath="{.status.allocatable['${RES//./\\.}']}" 2>/dev/null)" = 1 ]; }
if eventually 60 allocatable; then
    pass "the device plugin registered from inside the container: the Node's allocatable has $RES: 1"
else
    fail "the Node's allocatable has $RES" "$(kubectl get node "$NODE" -o jsonpath='{.status.allocatable}'); $(grep -i 'device plugin\|hostdevd' "$KUBELET_LOG" | tail -5)"
fi
expect_ok "... its socket is in kubelet's device-plugin directory" \
    bash -c "find '$DEVICE_PLUGIN_DIR' -type s -name 'hostdevd-*.sock' | grep -q ."

# A pod's container printing what it sees, then sleeping; its log is kubelet's container log.
# shellcheck disable=SC2016 # $GROUP is the container's
SHOW='ls -l /dev/vfio/; env | grep ^PCI_RESOURCE; echo written > /dev/vfio/$GROUP && echo "wrote /dev/vfio/$GROUP"; echo --; exec sleep 2147483647'
ENV_NAME=PCI_RESOURCE_$(tr 'a-z/.' 'A-Z__' <<<"$RES")
# Only KubeVirt's virt-controller may make a Pod asking for a host device (the admission policy
# hostdevd-pod-use): the test makes it as that service account, as a VMI's launcher pod is made.
KUBEVIRT_CONTROLLER=(--as=system:serviceaccount:kubevirt:kubevirt-controller --as-group=system:masters)
kubectl "${KUBEVIRT_CONTROLLER[@]}" apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: vfio-dp, namespace: default}
spec:
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: $SANDBOX_IMAGE
    imagePullPolicy: Never
    command: [/bin/sh, -c, '$SHOW']
    env: [{name: GROUP, value: "3"}]
    resources: {limits: {$RES: "1"}}
EOF
running() { [ "$(kubectl get pod "$1" -o jsonpath='{.status.phase}' 2>/dev/null)" = Running ]; }
ctr_log() { cat "$KUBELET_ROOT"/../../varlog/pods/default_"$1"_*/c/0.log 2>/dev/null; }
logged() { ctr_log "$1" | grep -q -- ' --$'; }
# The names in the container's `ls -l /dev/vfio/` that are character devices, sorted.
vfio_nodes() { ctr_log "$1" | grep -E ' (stdout|stderr) F c' | awk '{print $NF}' | sort | paste -sd' '; }
T0=$(ms)
if eventually "$WAIT" running vfio-dp && eventually 30 logged vfio-dp; then
    pass "a pod asking for $RES is scheduled and runs under runc ($(elapsed "$T0") ms)"
else
    fail "the pod asking for $RES runs" "$(kubectl describe pod vfio-dp | tail -15)"
fi
CLOG=$(ctr_log vfio-dp)
if [ "$(vfio_nodes vfio-dp)" = "3 vfio" ]; then
    pass "from inside the container: /dev/vfio/vfio and /dev/vfio/3, character devices, not the other group's 4"
else
    fail "/dev/vfio/vfio and /dev/vfio/3 in the container" "$CLOG"
fi
expect_contains "... /dev/vfio/3 opened for writing (runc's devices cgroup allows it)" "$CLOG" "wrote /dev/vfio/3"
expect_contains "... and $ENV_NAME=$NIC_DP" "$CLOG" "$ENV_NAME=$NIC_DP"

echo "--- DRA: the plugin's ResourceSlice, a pod with a ResourceClaim, the CDI devices"
registered() { [ "$(metric 'hostdevd_dra_registrations_total{result="ok"}')" -ge 1 ] 2>/dev/null; }
if eventually 60 registered; then pass "kubelet registered the DRA plugin (from inside the container)"; else
    fail "the DRA plugin registered" "$(grep -i dra "$KUBELET_LOG" | tail -5)"; fi
in_slice() {
    kubectl get resourceslices -o json | jq -e --arg n "$NODE" --arg d "pci-${NIC_DRA//[:.]/-}" \
        '[.items[] | select(.spec.nodeName == $n) | .spec.devices[]?.name] | index($d) != null' >/dev/null
}
if eventually 60 in_slice; then pass "the node's ResourceSlice has $NIC_DRA"; else
    fail "the ResourceSlice has $NIC_DRA" "$(kubectl get resourceslices -o yaml | head -30)"; fi
kubectl apply -f - >/dev/null <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: nic, namespace: default}
spec:
  devices:
    requests:
    - name: nic
      exactly:
        deviceClassName: nic.$DRIVER
        selectors:
        - cel: {expression: 'device.attributes["resource.kubernetes.io"].pciBusID == "$NIC_DRA"'}
---
apiVersion: v1
kind: Pod
metadata: {name: vfio-dra, namespace: default}
spec:
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 1
  resourceClaims: [{name: nic, resourceClaimName: nic}]
  containers:
  - name: c
    image: $SANDBOX_IMAGE
    imagePullPolicy: Never
    command: [/bin/sh, -c, 'cat /var/run/kubernetes.io/dra-device-attributes/resourceclaims/nic/nic/$DRIVER-metadata.json; echo; $SHOW']
    env: [{name: GROUP, value: "4"}]
    resources: {claims: [{name: nic}]}
EOF
T0=$(ms)
if eventually "$WAIT" running vfio-dra && eventually 30 logged vfio-dra; then
    pass "the pod with a ResourceClaim is allocated, prepared and runs under runc ($(elapsed "$T0") ms)"
else
    fail "the pod with a ResourceClaim runs" "$(kubectl describe pod vfio-dra | tail -15; agent_log | tail -5)"
fi
UID_=$(kubectl get resourceclaim nic -o jsonpath='{.metadata.uid}')
expect_contains "the scheduler allocated $NIC_DRA from the node's pool" \
    "$(kubectl get resourceclaim nic -o jsonpath='{.status.allocation.devices.results[0].driver}/{.status.allocation.devices.results[0].pool}/{.status.allocation.devices.results[0].device}')" \
    "$DRIVER/$NODE/pci-${NIC_DRA//[:.]/-}"
CDI_SPEC=$KUBELET_ROOT/../../noderun/cdi/$DRIVER-$UID_.json
expect_ok "the agent wrote the CDI spec into the node's /var/run/cdi, where containerd reads" jq -e . "$CDI_SPEC"
CLOG=$(ctr_log vfio-dra)
if [ "$(vfio_nodes vfio-dra)" = "4 vfio" ]; then
    pass "from inside the container: the CDI devices /dev/vfio/vfio and /dev/vfio/4, not the device plugin's 3"
else
    fail "/dev/vfio/vfio and /dev/vfio/4 in the container" "$CLOG"
fi
expect_contains "... /dev/vfio/4 opened for writing" "$CLOG" "wrote /dev/vfio/4"
expect_contains "... and the CDI mount: the metadata file KubeVirt reads, with the pciBusID" "$CLOG" \
    '"apiVersion":"metadata.resource.k8s.io/v1alpha1"' "\"$NIC_DRA\""

echo "--- what the agent said in its container"
# Its warnings and errors (klog W and E lines) in kubelet's container log: a mount the chart
# lacks shows here first (a directory it cannot write, a socket it cannot serve).
agent_log | grep -E ' (stdout|stderr) F [WE][0-9]{4} ' | cut -d' ' -f4- >"$TEST_DIR/agent-warnings.log"
if [ -s "$TEST_DIR/agent-warnings.log" ]; then
    fail "the agent logged no warning or error in its container" "$(cat "$TEST_DIR/agent-warnings.log")"
else
    pass "the agent logged no warning or error in its container ($(agent_log | wc -l) lines)"
fi

echo "--- pods deleted, helm uninstall"
expect_ok "both pods deleted" kubectl delete pod vfio-dp vfio-dra --wait=true --timeout=120s
unprepared() { [ ! -e "$CDI_SPEC" ]; }
expect_ok "the claim is unprepared: its CDI spec removed" eventually 60 unprepared
kubectl delete resourceclaim nic --wait=false >/dev/null
# Claims first, waited for (docs/install.md): the chart's pre-delete hook refuses while one is left.
expect_ok "the PCIDeviceClaim deleted: its agent gives the device back and lets it go" \
    kubectl delete pcideviceclaim "$(pci_name $NIC_DP)" --wait=true --timeout=120s
expect_ok "helm uninstall (its pre-delete hook finds no claim)" helm uninstall hostdevd -n "$NS" --wait --timeout 120s
expect_ok "no agent socket left in kubelet's directories" eventually 60 no_sockets
[ -z "$(sockets)" ] || echo "  left: $(sockets | tr '\n' ' ')"

echo "  the whole test $(elapsed "$T_ALL") ms"
"$ROOT/hack/kubelet.sh" down "$TEST_DIR/kubelet" >/dev/null 2>&1
KUBELET_UP=
if [ -z "$MODULES_EXISTED" ] && [ -d /lib/modules ]; then
    rmdir /lib/modules 2>/dev/null && echo "  (removed the empty /lib/modules kubelet made for the agent's volume)"
fi
finish
