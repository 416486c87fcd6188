#!/usr/bin/env bash
# make demo: brings up the local control plane in .demo/cluster (kept running until
# `make demo-down`), installs the CRDs, RBAC and admission policies (manifests/) and the sample
# objects of examples/, starts the hostdevd agent against this machine's real /sys (node named
# after the host), boots a qemu node "demo-node" (Debian's kernel, virtual IOMMU, e1000/e1000e/
# xhci) whose agent runs with a token bound to that node, lets alice claim one of its e1000e
# (she holds the `use` verb on that device only) and shows it bound to vfio-pci, and prints what
# to try next. DEMO_QEMU=0 skips the qemu node.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
D=$PWD/.demo/cluster
hack/cluster.sh up "$D"
set -a
# shellcheck disable=SC1091
. "$D/env"
set +a
export PATH="$K8S_BIN:$PATH"
hack/apply-examples.sh
# Access control for real: namespace, RBAC, admission policies (workloads need a kubelet).
kubectl apply -f manifests/namespace.yaml -f manifests/agent-rbac.yaml -f manifests/user-rbac.yaml \
    -f manifests/policies-agent.yaml -f manifests/policies-devices.yaml \
    -f manifests/policies-claims.yaml >/dev/null

# The agent of this machine: a Node object for it, then the agent on the real /sys.
NODE=$(hostname | tr 'A-Z_' 'a-z-')
kubectl get node "$NODE" >/dev/null 2>&1 ||
    printf 'apiVersion: v1\nkind: Node\nmetadata: {name: %s}\n' "$NODE" | kubectl create -f - >/dev/null
AGENT_PID=$PWD/.demo/agent.pid
if [ -f "$AGENT_PID" ] && kill -0 "$(cat "$AGENT_PID")" 2>/dev/null; then
    kill -TERM "$(cat "$AGENT_PID")"
    while kill -0 "$(cat "$AGENT_PID")" 2>/dev/null; do sleep 0.2; done
fi
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
bin/hostdevd agent --node-name "$NODE" --kubeconfig "$D/admin.kubeconfig" --sysfs-root /sys \
    --listen "127.0.0.1:$PORT" >"$PWD/.demo/agent.log" 2>&1 &
echo $! >"$AGENT_PID"
for _ in $(seq 1 150); do
    curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && break
    sleep 0.2
done

run() {
    printf '\n$ %s\n' "$*"
    "$@"
}
echo
echo "=== hostdevd demo: the agent published this machine's PCI devices (node \"$NODE\")"
run kubectl get pcidevices -o wide -l "nodename=$NODE"
run curl -s "http://127.0.0.1:$PORT/readyz"
echo
echo "=== the four kinds, with sample objects of a node \"titan\""
run kubectl api-resources --categories=hostdevices
run kubectl get hostdevices
run kubectl get pcidevices -o wide
run kubectl get pcideviceclaims
run kubectl get usbdevices
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

QNODE=demo-node
QDIR=$PWD/.demo/$QNODE
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
    for _ in $(seq 1 120); do
        [ "$(kubectl get pcidevices -l "nodename=$QNODE" -o name | wc -l)" -gt 3 ] && break
        sleep 1
    done
    run kubectl get pcidevices -o wide -l "nodename=$QNODE"
    CLAIM=$(bin/hostdevd name pci "$QNODE" 0000:00:04.0)
    # alice may use this one device: a ClusterRole with the verb "use" on it (docs/access-control.md).
    kubectl apply -f - >/dev/null <<YAML
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: demo-alice-nic}
rules:
- {apiGroups: [devices.harvesterhci.io], resources: [pcidevices], resourceNames: [$CLAIM], verbs: [use]}
- {apiGroups: [devices.harvesterhci.io], resources: [pcideviceclaims], verbs: [create, get, list, watch]}
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
    printf '\n$ kubectl --context alice create -f - <<< "<a claim on %s>"   # not granted\n' "$OTHER"
    printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: %s}\nspec: {address: "0000:00:05.0", nodeName: %s}\n' \
        "$OTHER" "$QNODE" | kubectl --context alice create -f - || true
    printf '\n$ kubectl --context alice create -f - <<< "<a claim on %s>"\n' "$CLAIM"
    kubectl get pcideviceclaim "$CLAIM" >/dev/null 2>&1 ||
        printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: %s}\nspec: {address: "0000:00:04.0", nodeName: %s}\n' \
            "$CLAIM" "$QNODE" | kubectl --context alice create -f -
    for _ in $(seq 1 60); do
        [ "$(kubectl get pcideviceclaim "$CLAIM" -o jsonpath='{.status.passthroughEnabled}')" = true ] && break
        sleep 1
    done
    run kubectl get pcideviceclaims -o wide
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
  kubectl --context alice get pcidevices        # alice has no RBAC grant yet: Forbidden
  bin/hostdevd name pci titan 0000:00:1f.6      # the name a claim on that device must have
  curl -s http://127.0.0.1:$PORT/metrics        # the agent's metrics; its log: .demo/agent.log
  kill -HUP \$(cat .demo/agent.pid)             # rescan now (otherwise every 5 minutes)
  kubectl delete pcideviceclaim $(bin/hostdevd name pci demo-node 0000:00:04.0)   # e1000e comes back
  hack/qemu-node.sh exec .demo/demo-node 'agentctl log 20'   # the qemu node's agent
  hack/qemu-node.sh hmp .demo/demo-node 'device_add usb-kbd,id=k2,bus=xhci.0,port=4'
  kubectl get usbdevices -l nodename=demo-node  # the new keyboard, demo-node-0627-0001-1-4
  hack/qemu-node.sh hmp .demo/demo-node 'device_del k2'   # gone again
  kubectl delete usbdeviceclaim $(bin/hostdevd name usb demo-node 0627 0001 1-2)
Not yet: kubelet device plugins and the controller; see the status table in README.md.
Stop the control plane with: make demo-down
EOF
