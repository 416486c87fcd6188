#!/usr/bin/env bash
# make demo: brings up the local control plane in .demo/cluster (kept running until
# `make demo-down`), installs the CRDs, RBAC and admission policies (manifests/) and the sample
# objects of examples/, starts the hostdevd agent against this machine's real /sys (node named
# after the host) and the controller, boots a qemu node "demo-node" (Debian's kernel, virtual
# IOMMU, e1000/e1000e/xhci) whose agent runs with a token bound to that node, lets alice claim
# one of its e1000e (alice and bob, group developers, hold hostdevd-device-user; alice also the
# `use` verb on that one device, bob on none) and shows it bound to vfio-pci, and prints what to
# try next. DEMO_QEMU=0 skips the qemu node.
#
#   hack/demo.sh [up]             make demo
#   hack/demo.sh down [--purge]   make demo-down [PURGE=1]: stops the controller, the agent, the
#                                 qemu node and the control plane, saying what it stopped;
#                                 --purge also removes .demo/ (about 200 MB)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
DEMO=$PWD/.demo
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
        echo "demo: removing .demo ($(du -sh "$DEMO" | cut -f1): the control plane's data, logs, the qemu node's image)"
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

# The control plane's own banner says how to stop it alone; the demo has more to stop.
mkdir -p "$DEMO"
hack/cluster.sh up "$D" >"$DEMO/cluster.txt"
head -1 "$DEMO/cluster.txt"
set -a
# shellcheck disable=SC1091
. "$D/env"
set +a
export PATH="$K8S_BIN:$PATH"
hack/apply-examples.sh
# Access control for real: namespaces, RBAC, admission policies (workloads need a kubelet).
kubectl apply -f manifests/namespace.yaml -f manifests/agent-rbac.yaml \
    -f manifests/controller-rbac.yaml -f manifests/user-rbac.yaml \
    -f manifests/policies-agent.yaml -f manifests/policies-devices.yaml \
    -f manifests/policies-claims.yaml >/dev/null
# alice and bob (group developers) may look at devices and claims, and create claims (each still
# needs the verb "use" on its device): manifests/user-rbac.yaml's role, bound as
# docs/access-control.md says.
kubectl apply -f - >/dev/null <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: demo-developers}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: hostdevd-device-user}
subjects:
- {apiGroup: rbac.authorization.k8s.io, kind: Group, name: developers}
YAML

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
# Starts bin/hostdevd ROLE ARGS... on a free port (restarting the demo's previous one), waits
# until it is ready; prints the port.
start_role() { # role args...
    local role=$1 port
    shift
    stop_role "$DEMO/$role.pid" "$role" >/dev/null
    port=$(free_port)
    bin/hostdevd "$role" --kubeconfig "$D/admin.kubeconfig" --listen "127.0.0.1:$port" "$@" \
        >"$DEMO/$role.log" 2>&1 &
    echo $! >"$DEMO/$role.pid"
    for _ in $(seq 1 150); do
        curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
        sleep 0.2
    done
    echo "$port"
}

# The agent of this machine: a Node object for it, then the agent on the real /sys.
NODE=$(hostname | tr 'A-Z_' 'a-z-')
kubectl get node "$NODE" >/dev/null 2>&1 ||
    printf 'apiVersion: v1\nkind: Node\nmetadata: {name: %s}\n' "$NODE" | kubectl create -f - >/dev/null
PORT=$(start_role agent --node-name "$NODE" --sysfs-root /sys)
# The controller (one replica): claims no agent serves, and KubeVirt's permittedHostDevices
# once there is a KubeVirt CR (there is none here).
CPORT=$(start_role controller --id demo)

run() {
    printf '\n$ %s\n' "$*"
    "$@"
}
echo
echo "=== hostdevd demo: the agent published this machine's PCI devices (node \"$NODE\")"
run kubectl get pcidevices -o wide -l "nodename=$NODE"
run curl -s "http://127.0.0.1:$PORT/readyz"
echo
echo "=== the five kinds, with sample objects of a node \"titan\" (examples/: no Node, no agent)"
# examples/status/ says titan's agent bound the GPU; the controller sees there is no Node titan.
reason() { # kind name
    kubectl get "$1" "$2" -o jsonpath='{.status.conditions[?(@.type=="Ready")].reason}'
}
for _ in $(seq 1 50); do
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
fi

cat <<EOF

=== try it yourself
  export KUBECONFIG=$D/kubeconfig PATH=$K8S_BIN:\$PATH
  kubectl explain pcidevice.status
  kubectl get pcideviceclaims --field-selector spec.nodeName=titan
  kubectl --context bob get pcidevices          # alice and bob (group developers) may look
  bin/hostdevd name pci titan 0000:00:1f.6      # the name a claim on that device must have
  curl -s http://127.0.0.1:$PORT/metrics        # the agent's metrics; its log: .demo/agent.log
  kill -HUP \$(cat .demo/agent.pid)             # rescan now (otherwise every 5 minutes)
  kubectl get events --field-selector reason=NodeNotFound   # the controller on titan's claims
  curl -s http://127.0.0.1:$CPORT/metrics       # the controller's; its log: .demo/controller.log (its
                                                # KubeVirt watch retries: no KubeVirt here)
  kubectl --context alice delete pcideviceclaim $(bin/hostdevd name pci demo-node 0000:00:04.0)   # e1000e comes back
  hack/qemu-node.sh exec .demo/demo-node 'agentctl log 20'   # the qemu node's agent
  hack/qemu-node.sh hmp .demo/demo-node 'device_add usb-kbd,id=k2,bus=xhci.0,port=4'
  kubectl get usbdevices -l nodename=demo-node  # the new keyboard, demo-node-0627-0001-1-4
  hack/qemu-node.sh hmp .demo/demo-node 'device_del k2'   # gone again
  kubectl delete usbdeviceclaim $(bin/hostdevd name usb demo-node 0627 0001 1-2)
Not in the demo: kubelet and KubeVirt (the device plugins and permittedHostDevices are tested by
make test); see the status table in README.md.
Stop it all (the controller, both agents, the qemu node, the control plane): make demo-down
(make demo-down PURGE=1 also removes .demo/, about 200 MB)
EOF
