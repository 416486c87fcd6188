#!/usr/bin/env bash
# make demo: the real install on this machine. A local control plane in .demo/cluster (with
# kube-scheduler, and a second kube-controller-manager for the workload controllers), kubelet
# with containerd 2 and runc in a node of its own (hack/kubelet.sh's containerd mode: its own
# mount and network namespaces, "demo-host"), KubeVirt v1.9.0's CRDs and a KubeVirt CR, the
# image of `make image` imported with ctr, and `helm install` of charts/hostdevd with every
# object of it (CRDs, RBAC, admission policies, DeviceClasses, FlowSchemas, the metrics
# Services, the agent DaemonSet and the controller Deployment, running as pods); then a qemu
# node "demo-node" (Debian's kernel, virtual IOMMU, e1000/e1000e/xhci) whose agent runs in the
# guest with a token bound to that node, where alice claims an e1000e (bound to vfio-pci on a
# real kernel; alice and bob, group developers, hold hostdevd-device-user; alice also `use` on
# that one device), the sample objects of examples/ (a node "titan" that does not exist), and two
# team namespaces with a device grant and a quota (docs/access-control.md "Devices for teams").
# Prints each step and what to try. A second `make demo` starts clean: it stops the previous
# one first (the qemu image and the Go and Kubernetes caches stay). Daemons do not inherit the
# caller's open files. DEMO_QEMU=0 skips the qemu node; DEMO_NODE=0 also the containerd node and
# the image (the chart's workloads are then objects without pods: test_demo.sh runs it so,
# without root); HOSTDEVD_DEMO_DIR moves .demo.
#
#   hack/demo.sh [up]             make demo
#   hack/demo.sh down [--purge]   make demo-down [PURGE=1]: stops the pods and kubelet, containerd,
#                                 the qemu node and the control plane, saying what it stopped;
#                                 --purge also removes .demo/ (about 300 MB)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# The daemons started below (etcd, the API server, containerd, kubelet, qemu) must not keep the
# caller's files open: `flock LOCK make demo` would hold LOCK until make demo-down.
for fd in "/proc/$$/fd/"*; do
    fd=${fd##*/}
    if [ "$fd" -gt 2 ] 2>/dev/null; then eval "exec $fd>&-" 2>/dev/null || true; fi
done
DEMO=${HOSTDEVD_DEMO_DIR:-$PWD/.demo}
D=$DEMO/cluster
QNODE=demo-node
QDIR=$DEMO/$QNODE

# The pid in FILE when that process is still bin/hostdevd ROLE.
demo_pid() { # file role
    local pid
    [ -f "$1" ] || return 0
    pid=$(cat "$1")
    [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 0
    if tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "hostdevd $2 "; then echo "$pid"; fi
}

# Stops bin/hostdevd ROLE started with its pid in FILE (SIGTERM: the agent gives its heartbeat
# up); prints the pid when it ran.
stop_role() { # file role
    local pid
    pid=$(demo_pid "$1" "$2")
    rm -f "$1"
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    echo "$pid"
}

cmd_down() { # [--purge]
    local stopped=() pid c
    pid=$(stop_role "$DEMO/controller.pid" controller)
    [ -z "$pid" ] || stopped+=("the controller (pid $pid)")
    pid=$(stop_role "$DEMO/agent.pid" agent)
    [ -z "$pid" ] || stopped+=("the agent of node $(hostname | tr 'A-Z_' 'a-z-') (pid $pid)")
    if [ -f "$DEMO/kubelet/env" ] && hack/kubelet.sh status "$DEMO/kubelet" >/dev/null 2>&1; then
        stopped+=("kubelet, containerd and the pods of node demo-host (the agent, the controller)")
    fi
    [ ! -d "$DEMO/kubelet" ] || hack/kubelet.sh down "$DEMO/kubelet" >/dev/null 2>&1 || true
    pid=$(cat "$DEMO/workload-controllers.pid" 2>/dev/null || true)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill "$pid" 2>/dev/null || true
        stopped+=("the workload controllers (pid $pid)")
    fi
    rm -f "$DEMO/workload-controllers.pid"
    if hack/qemu-node.sh status "$QDIR" >/dev/null 2>&1; then
        hack/qemu-node.sh stop "$QDIR"
        stopped+=("the qemu node $QNODE and its agent")
    fi
    for c in etcd apiserver controller-manager; do
        pid=$(cat "$D/$c.pid" 2>/dev/null) || continue
        if kill -0 "$pid" 2>/dev/null; then
            stopped+=("the control plane (etcd, kube-apiserver, kube-controller-manager)")
            break
        fi
    done
    hack/cluster.sh down "$D"
    if [ ${#stopped[@]} -eq 0 ]; then
        echo "demo: nothing was running"
    else
        printf 'demo: stopped %s\n' "${stopped[@]}"
    fi
    [ -d "$DEMO" ] || return 0
    if [ "${1:-}" = --purge ]; then
        echo "demo: removing .demo ($(du -sh "$DEMO" | cut -f1): the control plane's data, containerd's images, logs, the qemu node's image)"
        rm -rf "$DEMO"
    else
        echo "demo: .demo keeps $(du -sh "$DEMO" | cut -f1) (the control plane's data, logs, the qemu node's image); make demo-down PURGE=1 removes it"
    fi
}

case "${1:-up}" in
up) ;;
down) shift; cmd_down "$@"; exit 0 ;;
*) echo "usage: hack/demo.sh [up] | down [--purge]" >&2; exit 2 ;;
esac

T0=$SECONDS
step() { printf '\n=== %s (%ds)\n' "$1" $((SECONDS - T0)); }
# A second make demo starts clean: whatever the last one left running is stopped, its cluster's
# data removed (the qemu image and the caches stay).
if [ -d "$D" ] || [ -d "$DEMO/kubelet" ]; then
    echo "demo: a previous demo's state is in $DEMO: stopping it first (make demo starts clean)"
    cmd_down | grep -v '^demo: .demo keeps' || true
    rm -rf "$D" "$DEMO/kubelet" "$QDIR"
fi
mkdir -p "$DEMO"
step "the control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler"
hack/cluster.sh up "$D" --with-scheduler >"$DEMO/cluster.txt"
head -1 "$DEMO/cluster.txt"
set -a
# shellcheck disable=SC1091
. "$D/env"
set +a
export PATH="$K8S_BIN:$PATH"
# The workload controllers the shared kube-controller-manager does not run (as chart-node-lib.sh).
setsid kube-controller-manager --kubeconfig "$D/controller-manager.kubeconfig" \
    --controllers daemonset-controller,deployment-controller,replicaset-controller,job-controller,endpointslice-controller,node-lifecycle-controller,root-ca-certificate-publisher-controller \
    --secure-port 0 --leader-elect=false --v=1 >"$DEMO/workload-controllers.log" 2>&1 </dev/null &
echo $! >"$DEMO/workload-controllers.pid"

TAG=$(cat VERSION)
if [ "${DEMO_NODE:-1}" != 0 ]; then
    step "a node: kubelet with containerd 2 and runc (hack/kubelet.sh), node demo-host"
    KUBELET_RUNTIME=containerd hack/kubelet.sh up "$DEMO/kubelet" "$D" demo-host >"$DEMO/kubelet-up.log" 2>&1 ||
        { tail -20 "$DEMO/kubelet-up.log"; echo "demo: kubelet did not start (.demo/kubelet-up.log)" >&2; exit 1; }
    set -a
    # shellcheck disable=SC1091
    . "$DEMO/kubelet/env"
    set +a
    read -r -a CTR_CMD <<<"$CTR"
    kubectl get nodes -o wide

    step "the image: make image, imported into containerd (no registry)"
    make -s image ARCH=amd64 >"$DEMO/image.txt" 2>&1 || { tail -5 "$DEMO/image.txt"; exit 1; }
    ARCHIVE=$(sed -n 's/^image: \(build\/image\/hostdevd-.*\.tar\) (.*/\1/p' "$DEMO/image.txt")
    TAG=${ARCHIVE#build/image/hostdevd-}
    TAG=${TAG%.tar}
    "${CTR_CMD[@]}" images import "$ARCHIVE" >/dev/null 2>>"$DEMO/image.txt"
    echo "localhost/hostdevd:$TAG ($(du -h "$ARCHIVE" | cut -f1))"
fi

step "KubeVirt v1.9.0's CRDs and a KubeVirt CR (its own CRDs; no KubeVirt controllers run)"
KV=$(hack/kubevirt-crds.sh)
kubectl create -f "$KV" >/dev/null # (create: apply's annotation would be too long for them)
kubectl wait --for condition=Established --timeout 60s --recursive=false -f "$KV" >/dev/null # (not virt-controller/: test_kvrender's)
kubectl create namespace kubevirt >/dev/null
kubectl create -f - >/dev/null <<YAML
apiVersion: kubevirt.io/v1
kind: KubeVirt
metadata: {name: kubevirt, namespace: kubevirt}
spec:
  configuration:
    developerConfiguration: {featureGates: [HostDevices]}
    permittedHostDevices: {}
YAML
kubectl get crd -o name | grep kubevirt.io | tr '\n' ' '
echo

step "helm install hostdevd charts/hostdevd (every object of the chart; the agent and controller as pods)"
HELM=$(hack/helm-build.sh)
kubectl create namespace hostdevd-system >/dev/null
kubectl label namespace hostdevd-system pod-security.kubernetes.io/enforce=privileged >/dev/null
WAIT=(--wait --timeout 300s)
[ "${DEMO_NODE:-1}" != 0 ] || WAIT=() # (no node: the workloads cannot be ready)
"$HELM" install hostdevd charts/hostdevd -n hostdevd-system --set image.tag="$TAG" \
    --set image.pullPolicy=Never --set kubevirt.name=kubevirt ${WAIT[@]+"${WAIT[@]}"} 2> >(grep -v 'found symbolic link' >&2)
kubectl -n hostdevd-system get ds,deploy,pods -o wide
kubectl get validatingadmissionpolicies,mutatingadmissionpolicies,deviceclasses,flowschemas -o name | grep hostdevd | tr '\n' ' '
echo
NODE=demo-host
# (the chart made the CRDs; kubectl apply's note that it adopts them is left out)
hack/apply-examples.sh 2> >(grep -v 'last-applied-configuration' >&2)
# alice and bob (group developers) may look at devices and claims, and create claims (each still
# needs the verb "use" on its device): the chart's hostdevd-device-user, bound as
# docs/access-control.md says.
kubectl apply -f - >/dev/null <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: demo-developers}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: hostdevd-device-user}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: developers}
YAML

step "devices for teams (docs/access-control.md): team-a may use the e1000e pool, team-b not; a quota"
# (the resource name of the qemu node's e1000e: intel.com/82574L_GIGABIT_NETWORK_CONNECTION)
RES=intel.com/82574L_GIGABIT_NETWORK_CONNECTION
kubectl create namespace team-a >/dev/null
kubectl create namespace team-b >/dev/null
kubectl apply -f - >/dev/null <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: nic-pool-user}
rules:
- {apiGroups: [devices.harvesterhci.io], resources: [pcidevicepools], resourceNames: [$RES], verbs: [use]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: nic-pool, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: nic-pool-user}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: bob}
---
# bob may write VMs in both namespaces (what a team's users have); not the devices.
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: demo-vm-editor}
rules:
- {apiGroups: [kubevirt.io], resources: [virtualmachineinstances, virtualmachines], verbs: [get, list, create, delete]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: demo-vm-editor, namespace: team-a}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: demo-vm-editor}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: bob}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: demo-vm-editor, namespace: team-b}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: demo-vm-editor}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: bob}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: devices, namespace: team-a}
spec:
  hard:
    requests.$RES: "1"
YAML

cat >"$DEMO/vmi.yaml" <<YAML
apiVersion: kubevirt.io/v1
kind: VirtualMachineInstance
metadata: {name: vm1}
spec:
  domain:
    devices:
      hostDevices: [{name: nic1, deviceName: $RES}]
YAML

run() {
    printf '\n$ %s\n' "$*"
    "$@"
}
echo
if [ "${DEMO_NODE:-1}" != 0 ]; then
    echo "=== hostdevd demo: the agent's pod published the PCI devices of node $NODE (this machine's)"
    for _ in $(seq 1 60); do
        [ "$(kubectl get pcidevices -l "nodename=$NODE" -o name | wc -l)" -gt 0 ] && break
        sleep 1
    done
    run kubectl get pcidevices -o wide -l "nodename=$NODE"
fi
echo
echo "=== the six kinds, with sample objects of a node \"titan\" (examples/: no Node, no agent)"
# examples/status/ says titan's agent bound the GPU; the controller sees there is no Node titan.
reason() { # kind name
    kubectl get "$1" "$2" -o jsonpath='{.status.conditions[?(@.type=="Ready")].reason}'
}
# (Without the containerd node no controller runs: nothing to wait for.)
for _ in $(seq 1 50); do
    [ "${DEMO_NODE:-1}" != 0 ] || break
    [ "$(reason pcideviceclaim titan-000001000)" = NodeNotFound ] &&
        [ "$(reason usbdeviceclaim titan-0951-1666-2-1-4)" = NodeNotFound ] && break
    sleep 0.2
done
run kubectl api-resources --categories=hostdevices
run kubectl get hostdevices
echo
echo "=== the controller: no agent will act on titan's claims (there is no Node titan), and they say so"
run kubectl get pcideviceclaims -o wide --field-selector spec.nodeName=titan
run kubectl get usbdeviceclaim titan-0951-1666-2-1-4 -o jsonpath='{.status.conditions[0].message}{"\n"}'
echo
echo "=== the API rejects malformed claims, saying what is wrong"
printf '\n$ kubectl create -f - <<< "<a claim for 0000:00:1f.8 named my-nic>"\n'
kubectl create -f - <<'YAML' || true
apiVersion: devices.harvesterhci.io/v1beta1
kind: PCIDeviceClaim
metadata: {name: my-nic}
spec: {address: "0000:00:1f.8", nodeName: titan, userName: alice}
YAML
printf '\n$ kubectl patch pcideviceclaim titan-000001000 --type merge -p %s\n' \
    "'{\"spec\":{\"address\":\"0000:02:00.0\"}}'"
kubectl patch pcideviceclaim titan-000001000 --type merge \
    -p '{"spec":{"address":"0000:02:00.0"}}' || true

if [ "${DEMO_QEMU:-1}" != 0 ]; then
    echo
    echo "=== a qemu node \"$QNODE\": Debian's kernel, virtual IOMMU, an e1000, two e1000e, xhci + USB"
    kubectl get node "$QNODE" >/dev/null 2>&1 ||
        printf 'apiVersion: v1\nkind: Node\nmetadata: {name: %s}\n' "$QNODE" | kubectl create -f - >/dev/null
    hack/qemu-node.sh stop "$QDIR" >/dev/null 2>&1 || true
    mkdir -p "$QDIR"
    hack/qemu-node.sh kubeconfig "$QNODE" "$QDIR/kubeconfig"
    hack/qemu-node.sh build "$PWD/.demo/qemu-image" bin/hostdevd >"$PWD/.demo/qemu-build.log" 2>&1
    hack/qemu-node.sh boot "$QDIR" --image "$PWD/.demo/qemu-image" --node-name "$QNODE" \
        --kubeconfig "$QDIR/kubeconfig" >/dev/null
    # Its nine PCI functions (hack/qemu-node.sh devices), each with its status written.
    for _ in $(seq 1 120); do
        [ "$(kubectl get pcidevices -l "nodename=$QNODE" \
            -o jsonpath='{range .items[*]}{.status.address}{"\n"}{end}' | grep -c .)" -ge 9 ] && break
        sleep 1
    done
    run kubectl get pcidevices -o wide -l "nodename=$QNODE"
    CLAIM=$(bin/hostdevd name pci "$QNODE" 0000:00:04.0)
    # alice may use this one device, and release it: a ClusterRole with the verb "use" on the
    # device and "delete" on the claim of that name (docs/access-control.md). bob gets none.
    kubectl apply -f - >/dev/null <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: demo-alice-nic}
rules:
- {apiGroups: [devices.harvesterhci.io], resources: [pcidevices], resourceNames: [$CLAIM], verbs: [use]}
- {apiGroups: [devices.harvesterhci.io], resources: [pcideviceclaims], resourceNames: [$CLAIM], verbs: [delete]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: demo-alice-nic}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: demo-alice-nic}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: User, name: alice}
YAML
    OTHER=$(bin/hostdevd name pci "$QNODE" 0000:00:05.0)
    printf '\n$ kubectl --context alice create -f - <<< "<a claim on %s>"\n' "$CLAIM"
    kubectl get pcideviceclaim "$CLAIM" >/dev/null 2>&1 ||
        printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: %s}\nspec: {address: "0000:00:04.0", nodeName: %s}\n' \
            "$CLAIM" "$QNODE" | kubectl --context alice create -f -
    # Bound in the guest (a claim kept from an earlier make demo says so before the agent of this
    # boot has bound it again), then the claim's status.
    for _ in $(seq 1 60); do
        hack/qemu-node.sh exec "$QDIR" 'readlink /sys/bus/pci/devices/0000:00:04.0/driver' 2>/dev/null |
            grep -q /vfio-pci && break
        sleep 1
    done
    for _ in $(seq 1 30); do
        [ "$(kubectl get pcideviceclaim "$CLAIM" -o jsonpath='{.status.passthroughEnabled}')" = true ] && break
        sleep 1
    done
    run kubectl --context alice get pcideviceclaims -o wide
    echo
    echo "=== bob (group developers too) sees devices and claims, but was given no device"
    run kubectl --context bob get pcidevice "$OTHER"
    printf '\n$ kubectl --context bob create -f - <<< "<a claim on %s>"\n' "$OTHER"
    printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: %s}\nspec: {address: "0000:00:05.0", nodeName: %s}\n' \
        "$OTHER" "$QNODE" | kubectl --context bob create -f - || true
    run kubectl --context bob delete pcideviceclaim "$CLAIM" || true
    printf '\n$ hack/qemu-node.sh exec .demo/%s "readlink /sys/bus/pci/devices/0000:00:04.0/driver; ls /dev/vfio"\n' "$QNODE"
    hack/qemu-node.sh exec "$QDIR" 'readlink /sys/bus/pci/devices/0000:00:04.0/driver; ls /dev/vfio'
    echo
    echo "=== the qemu node's USB devices, named by port (the keyboard and the tablet share 0627:0001)"
    for _ in $(seq 1 60); do
        [ "$(kubectl get usbdevices -l "nodename=$QNODE" -o name | wc -l)" -ge 3 ] && break
        sleep 1
    done
    run kubectl get usbdevices -o wide -l "nodename=$QNODE"
    TABLET=$(bin/hostdevd name usb "$QNODE" 0627 0001 1-2)
    printf '\n$ kubectl create -f - <<< "<a USBDeviceClaim %s, harvester-shaped: no node in it>"\n' "$TABLET"
    kubectl get usbdeviceclaim "$TABLET" >/dev/null 2>&1 ||
        printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: USBDeviceClaim\nmetadata: {name: %s}\nspec: {}\n' \
            "$TABLET" | kubectl create -f -
    for _ in $(seq 1 30); do
        [ "$(kubectl get usbdevice "$TABLET" -o jsonpath='{.status.enabled}')" = true ] && break
        sleep 1
    done
    run kubectl get usbdeviceclaims -o wide
    echo
    echo "=== devices for teams: bob's VM in team-a and in team-b, now that $RES is hostdevd's"
    # The controller lists the resource name in KubeVirt's CR once alice's claim is Ready; from
    # then on the policy hostdevd-vm-use asks for "use" on it.
    for _ in $(seq 1 60); do
        kubectl get kubevirt kubevirt -n kubevirt -o jsonpath='{.spec.configuration.permittedHostDevices.pciHostDevices[*].resourceName}' |
            grep -qF "$RES" && break
        sleep 1
    done
    run kubectl get kubevirt kubevirt -n kubevirt -o jsonpath='{.spec.configuration.permittedHostDevices}{"\n"}'
    run kubectl --context bob -n team-a create --dry-run=server -f "$DEMO/vmi.yaml"
    run kubectl --context bob -n team-b create --dry-run=server -f "$DEMO/vmi.yaml" || true
    run kubectl -n team-a describe resourcequota devices
fi

cat <<EOF

=== try it yourself (in $((SECONDS - T0)) s the demo is up)
  export KUBECONFIG=$D/kubeconfig PATH=$K8S_BIN:\$PATH
  kubectl -n hostdevd-system get pods,svc -o wide   # the chart's pods under containerd
  kubectl get pcidevices -o wide                    # both nodes' devices (demo-host's from its pod)
  kubectl explain pcidevice.status
  kubectl get pcideviceclaims --field-selector spec.nodeName=titan   # samples of a node that does not exist
  kubectl get events --field-selector reason=NodeNotFound            # the controller on titan's claims
  kubectl --context bob get pcidevices             # alice and bob (group developers) may look
  kubectl --context bob -n team-b create -f $DEMO/vmi.yaml   # refused: no "use" in team-b
  kubectl --context bob -n team-a create -f $DEMO/vmi.yaml   # admitted (nothing runs VMs here)
  kubectl -n team-a describe resourcequota devices           # the team's device quota
  kubectl -n hostdevd-system logs ds/hostdevd-agent          # the agent's log (demo-host)
  kubectl -n hostdevd-system get lease hostdevd-controller   # which controller replica leads
  helm upgrade hostdevd charts/hostdevd -n hostdevd-system --reuse-values --set agent.logLevel=2 --wait
  kubectl --context alice delete pcideviceclaim $(bin/hostdevd name pci demo-node 0000:00:04.0)   # e1000e comes back
  hack/qemu-node.sh exec .demo/demo-node 'agentctl log 20'   # the qemu node's agent
  hack/qemu-node.sh hmp .demo/demo-node 'device_add usb-kbd,id=k2,bus=xhci.0,port=4'
  kubectl get usbdevices -l nodename=demo-node     # the new keyboard, demo-node-0627-0001-1-4
  helm uninstall hostdevd -n hostdevd-system       # refused while claims remain (it names them)
(helm is $HELM.) Not in the demo: KubeVirt's own controllers and a VM (make test's qemu tests
start a VMM with the claimed device; README's status table says what is tested where).
Stop it all (the pods, kubelet, containerd, the qemu node, the control plane): make demo-down
(make demo-down PURGE=1 also removes .demo/)
EOF
