#!/usr/bin/env bash
# test/long/test_kvchain.sh - the whole chain from a VMI object to a guest that lists the claimed
# device (`make test-long`; issue 44 item 3), with its time printed:
#
#   VMI created on the real API server (hack/cluster.sh --with-scheduler)
#   -> KubeVirt v1.9.0's real virt-controller (test/integration/kubevirt-lib.sh: on the host, as
#      kubevirt/kubevirt-controller) renders the virt-launcher Pod asking for our resource
#   -> kube-scheduler binds it to the qemu node by the capacity our agent's device plugin gave
#      the REAL kubelet there (hack/qemu-node.sh boot --kubelet: kubelet, containerd 2 and runc
#      inside the node, Debian's kernel with a virtual IOMMU)
#   -> kubelet calls our plugin's Allocate; containerd starts the launcher's container (the image
#      of hack/launcher-image.sh: KubeVirt's virt-launcher, libvirt 11.3, qemu 10.0) with
#      PCI_RESOURCE_<NAME>=0000:00:04.0, the node's e1000e that a PCIDeviceClaim gave to our agent
#      (bound to vfio-pci), and /dev/vfio/<group> in the container
#   -> a stand-in for virt-handler (test/kvhandler: KubeVirt's own cmd-client, isolation and
#      AdjustResources code) hands the VMI, as the API server has it, to the launcher over its
#      command socket in the Pod's emptyDir
#   -> virt-launcher defines the domain through libvirt, libvirt starts qemu with
#      vfio-pci,host=0000:00:04.0, qemu holds /dev/vfio/<group>, and the VM's PCI bus (info pci
#      through libvirt, in the container) lists 8086:10d3.
#
# Stands in: virt-handler (test/kvhandler, above: no VMI status writes, no device plugins of its
# own; the KubeVirt CR asks for none of its kvm/tun/vhost-net devices: useEmulation, no pod
# network) and its node labeller (the Node's kubevirt.io/schedulable and machine-type labels,
# written here); virt-api (not run: the VMI is created fully defaulted, as its webhook would
# leave it) and virt-operator (the CRDs, virt-controller's RBAC and the KubeVirt CR are made
# here, the CR's permittedHostDevices as hostdevd's controller writes it). No registry: the image
# is imported by the node's containerd from an archive. The Root feature gate: the launcher runs
# as root, as the launcher's libvirt setup was checked (shared facts file).
#
# Also checked, each able to fail: the Pod waits (FailedScheduling naming the resource) while no
# device is claimed; a second VMI's Pod waits while the one device is taken.
# Prints the times: VMI created -> Pod rendered -> bound -> container running -> VMI handed over
# -> domain running -> guest lists the device.
# Known limit: virt-launcher gives libvirtd 15 s to answer (virtcli.ConnectionTimeout); under
# heavy load (13 on 2 cores) libvirtd in the node did not, and the launcher panicked ("failed to
# connect to virtqemud"): the Pod fails and so does the hand-over. libvirt's capabilities cache
# of the root filesystem is not valid in the container (new ctimes), so libvirtd probes qemu.
# Needs root; skipped otherwise.
# shellcheck disable=SC2317 # the small functions run through expect_ok and eventually
# test-lock: qemu
# shellcheck disable=SC2034 # lib.sh reads SUITE
SUITE=kvchain
# shellcheck source=test/e2e/lib.sh disable=SC1091
. "$(dirname "$0")/../e2e/lib.sh"
# shellcheck source=test/e2e/launcher-lib.sh disable=SC1091
. "$ROOT/test/e2e/launcher-lib.sh"
# shellcheck source=test/integration/kubevirt-lib.sh disable=SC1091
. "$ROOT/test/integration/kubevirt-lib.sh"
cd "$ROOT" || exit 1
# An upper bound, not a pace: everything in the node runs under TCG on a shared 2-core machine
# (the image's import took 400 s at load 5, 886 s at load 13).
WAIT=${KVCHAIN_WAIT:-1500}
# From the hand-over to the domain running (31 s measured: libvirt defines and starts it under
# TCG); a failing hand-over ends there.
DOMAIN_WAIT=${KVCHAIN_DOMAIN_WAIT:-300}
QN=kvnode
ADDR=0000:00:04.0
VMI=vm-chain
DOMAIN=default_$VMI
ms() { date +%s%3N; }

if [ "$(id -u)" -ne 0 ]; then
    echo "  SKIP the chain from a VMI: needs root (qemu node, containerd)"
    finish
fi

echo "--- inputs: KubeVirt's binaries, the launcher image, the virt-handler stand-in"
t0=$(ms)
KUBEVIRT_BIN=$(hack/kubevirt-build.sh virt-launcher virt-launcher-monitor virt-controller) || { fail "hack/kubevirt-build.sh"; finish; }
KVH=$(hack/kvhandler-build.sh) || { fail "hack/kvhandler-build.sh"; finish; }
STANDIN=$KVH/kvhandler-standin
read -r LAUNCHER_ARCHIVE LAUNCHER_IMAGE <<<"$(hack/launcher-image.sh "$KUBEVIRT_BIN" "$KVH")"
if [ -f "${LAUNCHER_ARCHIVE:-}" ] && [ -x "$STANDIN" ]; then
    pass "virt-controller, the launcher image $LAUNCHER_IMAGE ($(($(stat -c %s "$LAUNCHER_ARCHIVE") / 1048576)) MB), kvhandler-standin ($(($(ms) - t0)) ms)"
else
    fail "the launcher image and kvhandler-standin"
    finish
fi

cluster_start --with-scheduler
trap 'kv_controller_stop; cluster_stop' EXIT
install_crds || fail "hostdevd's CRDs"
agent_rbac || fail "the agent's RBAC and policies"
expect_ok "the admission policies for KubeVirt (manifests/policies-kubevirt.yaml)" \
    kubectl apply -f manifests/policies-kubevirt.yaml
expect_ok "KubeVirt v1.9.0's CRDs, virt-controller's RBAC as virt-operator makes them" kv_install

echo "--- the qemu node as a Kubernetes node: kubelet, containerd and runc in the guest"
# The Node is made first, labelled as virt-handler's node labeller would (what the launcher Pod's
# nodeSelector asks): the agent's token is bound to it; kubelet registers into it.
expect_ok "Node $QN (kubevirt.io/schedulable, machine-type.node.kubevirt.io/q35: virt-handler's labels)" \
    kubectl create -f - <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $QN
  labels: {kubernetes.io/hostname: $QN, kubevirt.io/schedulable: "true", machine-type.node.kubevirt.io/q35: "true"}
EOF
QKUBECONFIG=$TEST_DIR/kvnode-kubelet.kubeconfig
"$QEMU_NODE" kubelet-kubeconfig "$QN" "$QKUBECONFIG" || fail "a kubelet kubeconfig for $QN"
t0=$(ms)
if node_boot "$QN" --no-agent --kubelet --kubelet-kubeconfig "$QKUBECONFIG" \
    --image-archive "$LAUNCHER_ARCHIVE" --extra "$STANDIN:/usr/bin/kvhandler-standin" \
    --extra test/fixtures/kvchain/podip:/usr/lib/cni/podip \
    --extra test/fixtures/kvchain/05-kvchain.conflist:/etc/cni/net.d/05-kvchain.conflist \
    --memory "${KVCHAIN_MEMORY:-4096}" --smp 2 --timeout 300; then
    pass "the qemu node booted with kubelet, containerd and the launcher image in ${BOOT_SECONDS}s"
else
    fail "the qemu node boots"
    finish
fi
# The launcher Pod's container-disks mount is HostToContainer: the guest's root (an initramfs,
# private) made shared, as a systemd host's is.
expect_ok "the guest's mounts shared (mount --make-rshared /)" guest 'mount --make-rshared /'
read -r SVC_IP SVC_PORT <<<"$(kubectl get service kubernetes -n default -o jsonpath='{.spec.clusterIP} {.spec.ports[0].port}')"
t0=$(ms)
GUEST_TIMEOUT=$WAIT expect_ok "kubelet-node start: containerd imports the launcher image, kubelet starts" \
    guest "kubelet-node start $SVC_IP $SVC_PORT 10.0.2.2:${K8S_SERVER##*:}"
echo "  image import and kubelet start: $(($(ms) - t0)) ms"
qnode_ready() { [ "$(kubectl get node "$QN" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]; }
if eventually "$WAIT" qnode_ready; then
    pass "Node $QN Ready ($(kubectl get node "$QN" -o jsonpath='{.status.nodeInfo.containerRuntimeVersion}, kubelet {.status.nodeInfo.kubeletVersion}'))"
else
    fail "Node $QN Ready" "$(guest 'tail -20 /var/log/kubelet.log')"
    finish
fi
# The API server taints a new Node not-ready; the node lifecycle controller (hack/cluster.sh does
# not run it) lifts the taint once kubelet reports Ready: lifted here as it would.
expect_ok "... its not-ready taint lifted (the node lifecycle controller's part)" \
    kubectl taint node "$QN" node.kubernetes.io/not-ready:NoSchedule-
GUEST_TIMEOUT=120 expect_ok "the agent starts in the node (after kubelet: its device plugins register with it)" \
    guest 'agentctl start'

echo "--- KubeVirt: the CR, virt-controller"
expect_ok "virt-controller starts (as kubevirt/kubevirt-controller)" kv_controller_start "$LAUNCHER_IMAGE"
if eventually 120 kv_controller_leads; then pass "virt-controller leads"; else
    fail "virt-controller leads" "$(tail -20 "$TEST_DIR/virt-controller.log")"
    finish
fi

echo "--- before the claim: the VMI's Pod waits"
# shellcheck disable=SC2034 # e2e/lib.sh's claim helpers read NODE
NODE=$QN
device_of() { kubectl get pcidevices -o json | jq -r --arg n "$QN" --arg a "$ADDR" '.items[] | select(.status.nodeName == $n and .status.address == $a) | .metadata.name'; }
published() { [ -n "$(device_of)" ]; }
expect_ok "the agent publishes $QN's $ADDR" eventually "$WAIT" published
RES=$(kubectl get pcidevice "$(device_of)" -o jsonpath='{.status.resourceName}')
GROUP=$(guest "basename \$(readlink /sys/bus/pci/devices/$ADDR/iommu_group)")
echo "  $ADDR: resource $RES, IOMMU group $GROUP"
# As hostdevd's controller leaves the CR for a claim of this pool (test_kvrender.sh's CR); Root:
# the launcher runs as root; useEmulation: no devices.kubevirt.io/kvm (nor tun, vhost-net: no pod
# network), which only virt-handler's device plugins offer.
CONFIG=$(jq -cn --arg r "$RES" '{developerConfiguration: {featureGates: ["HostDevices", "Root"], useEmulation: true},
    permittedHostDevices: {pciHostDevices: [{pciVendorSelector: "8086:10d3", resourceName: $r, externalResourceProvider: true}]}}')
expect_ok "the KubeVirt CR: HostDevices, Root, useEmulation, permittedHostDevices $RES" \
    kv_cr "$CONFIG" "$(jq -cn --arg r "$RES" '{"hostdevd.io/owned-host-devices": $r}')"
# Fully defaulted (no virt-api): firmware UUID, ACPI, no graphics, balloon or serial console log
# (the guest-console-log container would run virt-tail, not in the image).
VMI_UUID=$(cat /proc/sys/kernel/random/uuid)
EXTRA=$(jq -cn --arg u "$VMI_UUID" '{domain: {firmware: {uuid: $u}, features: {acpi: {enabled: true}},
    devices: {autoattachGraphicsDevice: false, autoattachMemBalloon: false, autoattachSerialConsole: true,
              logSerialConsole: false}}}')
NIC="[{\"name\": \"nic\", \"deviceName\": \"$RES\"}]"
pod_name() { kv_launcher_pod "$1" | jq -r '.metadata.name // empty'; }
failed_scheduling() { # pod: its FailedScheduling event names the resource
    kubectl get events -n default --field-selector "involvedObject.name=$1,reason=FailedScheduling" \
        -o jsonpath='{.items[*].message}' | grep -F "Insufficient $RES"
}
node_of() { kubectl get pod -n default "$1" -o jsonpath='{.spec.nodeName}'; }
T0=$(ms)
expect_ok "VMI $VMI asking for $RES created" kubectl create -f - <<<"$(kv_vmi_json "$VMI" "$NIC" "$EXTRA")"
if eventually 120 kv_launcher_pod "$VMI"; then
    T_RENDER=$(ms)
    pass "virt-controller rendered $VMI's launcher Pod ($((T_RENDER - T0)) ms)"
else
    fail "virt-controller rendered $VMI's launcher Pod" "$(grep -i 'error\|fail' "$TEST_DIR/virt-controller.log" | tail -10)"
    finish
fi
POD_JSON=$(kv_launcher_pod "$VMI")
POD=$(jq -r .metadata.name <<<"$POD_JSON")
echo "$POD_JSON" >"$TEST_DIR/launcher-pod.json"
expect_contains "its compute container asks for one $RES, runs virt-launcher-monitor as root, image $LAUNCHER_IMAGE" \
    "$(jq -c --arg r "$RES" '.spec.containers[] | select(.name == "compute") | {image, cmd: .command[0],
        user: .securityContext.runAsUser, limit: .resources.limits[$r]}' <<<"$POD_JSON")" \
    "{\"image\":\"$LAUNCHER_IMAGE\",\"cmd\":\"/usr/bin/virt-launcher-monitor\",\"user\":0,\"limit\":\"1\"}"
expect_contains "... and asks for none of virt-handler's devices (kvm, tun, vhost-net)" \
    "[$(jq -r '[.spec.containers[].resources.limits // {} | keys[] | select(startswith("devices.kubevirt.io/"))] | join(",")' <<<"$POD_JSON")]" "[]"
if eventually 120 failed_scheduling "$POD"; then
    pass "no device claimed yet: $POD Pending, FailedScheduling: $(failed_scheduling "$POD" | head -c 150)"
else
    fail "no device claimed yet: FailedScheduling naming $RES" "$(kubectl describe pod -n default "$POD" | tail -5)"
fi
if [ -z "$(node_of "$POD")" ]; then pass "... and not bound"; else fail "... and not bound" "$(node_of "$POD")"; fi

echo "--- the claim: our agent binds $ADDR to vfio-pci, its device plugin offers it to kubelet"
T_CLAIM=$(ms)
claim "$ADDR"
bound() { enabled "$ADDR" && on_driver "$ADDR" vfio-pci; }
if eventually "$WAIT" bound; then pass "claim Ready: $ADDR (group $GROUP) on vfio-pci"; else
    fail "claim Ready, $ADDR on vfio-pci" "$(field "$ADDR" '{.status}')"
fi
allocatable() { [ "$(kubectl get node "$QN" -o json | jq -r --arg r "$RES" '.status.allocatable[$r] // "0"')" = 1 ]; }
if eventually "$WAIT" allocatable; then pass "kubelet on $QN lists $RES: 1 (our device plugin's ListAndWatch)"; else
    fail "kubelet lists $RES" "$(guest 'grep -i plugin /var/log/kubelet.log | tail -5')"
fi
on_node() { [ "$(node_of "$POD")" = "$QN" ]; }
if eventually "$WAIT" on_node; then
    T_BIND=$(ms)
    pass "kube-scheduler binds $POD to $QN ($((T_BIND - T_CLAIM)) ms after the claim)"
else
    fail "kube-scheduler binds $POD to $QN" "$(kubectl get events -n default --field-selector involvedObject.name="$POD" | tail -3)"
    finish
fi

echo "--- kubelet and containerd start the launcher with our Allocate's answer"
compute_running() {
    kubectl get pod -n default "$POD" -o json |
        jq -e '.status.containerStatuses[]? | select(.name == "compute") | .state.running' >/dev/null
}
if eventually "$WAIT" compute_running; then
    T_RUN=$(ms)
    pass "$POD's compute container runs ($((T_RUN - T_BIND)) ms after the binding)"
else
    fail "$POD's compute container runs" "$(kubectl describe pod -n default "$POD" | tail -8; guest 'tail -5 /var/log/kubelet.log')"
    finish
fi
CID=$(kubectl get pod -n default "$POD" -o json | jq -r '.status.containerStatuses[] | select(.name == "compute") | .containerID | sub("^containerd://"; "")')
# The container's init (virt-launcher-monitor) in the node's PID namespace.
MPID=$(guest "ctr -n k8s.io tasks ls | awk '\$1 == \"$CID\" {print \$2}'")
ENVVAR=$(launcher_env_var PCI_RESOURCE "$RES")
expect_contains "its virt-launcher-monitor (pid $MPID in the node) has $ENVVAR=$ADDR (our Allocate)" \
    "$(guest "tr '\\0' '\\n' </proc/$MPID/environ")" "$ENVVAR=$ADDR"
expect_contains "... and /dev/vfio/$GROUP in its container" "$(guest "ls /proc/$MPID/root/dev/vfio/")" "$GROUP"
in_container() { guest "ctr -n k8s.io tasks exec --exec-id kvc\$\$ $CID $*"; }

echo "--- virt-handler's hand-over (kvhandler-standin) and the domain"
# The VMI as the API server has it (virt-controller wrote status.activePods: the Pod's UID and node).
has_active_pod() { kubectl get vmi -n default "$VMI" -o json | jq -e '.status.activePods // {} | length == 1'; }
eventually 60 has_active_pod || fail "virt-controller lists the Pod in the VMI's status.activePods"
kubectl get vmi -n default "$VMI" -o json >"$TEST_DIR/vmi.json"
launcher_put "$TEST_DIR/vmi.json" /tmp/vmi.json || fail "the VMI into the node"
# kubelet's pods directory at /pods, as virt-handler's DaemonSet mounts it: the launcher's socket
# under /var/lib/kubelet/pods/<uid>/volumes/kubernetes.io~empty-dir/sockets/ is longer than a
# unix socket's path may be (108 bytes; the dial times out).
expect_ok "kubelet's pods directory at /pods, as virt-handler has it" \
    guest 'mkdir -p /pods && mount --bind /var/lib/kubelet/pods /pods'
T_HAND=$(ms)
expect_ok "kvhandler-standin started in the node" \
    guest "kvhandler-standin --vmi /tmp/vmi.json --node $QN --pods-dir /pods --timeout ${DOMAIN_WAIT}s >/tmp/kvhandler.log 2>&1 & echo \$! >/tmp/kvhandler.pid"
# shellcheck disable=SC2016 # expanded in the guest
standin_done() { ! guest 'kill -0 $(cat /tmp/kvhandler.pid) 2>/dev/null'; }
if eventually "$((DOMAIN_WAIT + 30))" standin_done && guest 'grep -q "domain .* Running" /tmp/kvhandler.log'; then
    T_DOM=$(ms)
    pass "the launcher took the VMI and reports its domain Running ($((T_DOM - T_HAND)) ms after the hand-over started)"
else
    fail "the launcher runs the domain" "$(guest 'cat /tmp/kvhandler.log' | tail -15)"
fi
guest 'cat /tmp/kvhandler.log' | grep '^kvhandler-standin:' | sed 's/^/  | /'
lists_device() { in_container "virsh -c qemu:///system qemu-monitor-command $DOMAIN --hmp 'info pci'" | grep -qi 'PCI device 8086:10d3'; }
if eventually 120 lists_device; then # (qemu has the device from its start)
    T_LIST=$(ms)
    pass "the VM's PCI bus lists 8086:10d3 (info pci through libvirt, in the launcher's container)"
else
    fail "the VM lists 8086:10d3" "$(in_container "virsh -c qemu:///system qemu-monitor-command $DOMAIN --hmp 'info pci'" 2>&1 | tail -20)"
fi
expect_contains "KubeVirt's domain XML: <hostdev> of $ADDR, managed='no'" \
    "$(in_container "virsh -c qemu:///system dumpxml $DOMAIN" | tr -d '\n' | grep -o '<hostdev[^>]*>.*</hostdev>' | tr -s ' ')" \
    "type='pci' managed='no'" "domain='0x0000' bus='0x00' slot='0x04' function='0x0'"
QPID=$(guest "for p in /proc/[0-9]*; do case \$(cat \$p/comm 2>/dev/null) in qemu-system-*) echo \${p#/proc/};; esac; done" | head -1)
expect_contains "libvirt started qemu (pid ${QPID:-none} in the node) with vfio-pci host=$ADDR" \
    "$(guest "tr '\\0' '\\n' </proc/${QPID:-0}/cmdline")" "\"driver\":\"vfio-pci\",\"host\":\"$ADDR\""
expect_ok "... and it holds /dev/vfio/$GROUP open" guest "ls -l /proc/${QPID:-0}/fd | grep -q ' /dev/vfio/$GROUP\$'"

echo "--- a second VMI waits while the one device is taken"
expect_ok "VMI vm-second asking for $RES created" kubectl create -f - <<<"$(kv_vmi_json vm-second "$NIC" "$EXTRA")"
POD2=""
second_waits() { POD2=$(pod_name vm-second) && [ -n "$POD2" ] && failed_scheduling "$POD2"; }
if eventually 120 second_waits; then pass "vm-second's Pod $POD2 Pending: FailedScheduling naming $RES"; else
    fail "vm-second's Pod waits for the device" "$(kubectl get pods -n default -o wide)"
fi
kubectl delete vmi -n default vm-second --wait=false >/dev/null

echo "  times: VMI created -> Pod rendered $((T_RENDER - T0)) ms; claim -> Pod bound $((T_BIND - T_CLAIM)) ms;" \
    "bound -> container running $((${T_RUN:-0} - ${T_BIND:-0})) ms; hand-over -> domain running" \
    "$((${T_DOM:-0} - ${T_HAND:-0})) ms; VMI created -> guest lists the device $((${T_LIST:-0} - T0)) ms" \
    "(of it, waiting for the claim: $((T_CLAIM - T0)) ms); suite ${SECONDS}s"
mkdir -p "$ROOT/build/results"
echo "kvchain: VMI created -> guest lists 8086:10d3 $((${T_LIST:-0} - T0)) ms (claim made $((T_CLAIM - T0)) ms after the VMI)" \
    >"$ROOT/build/results/long-kvchain.txt"
guest 'kubelet-node stop' >/dev/null 2>&1
finish
