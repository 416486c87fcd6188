#!/usr/bin/env bash
# make demo: brings up the local control plane in .demo/cluster (kept running until
# `make demo-down`), installs the CRDs and the sample objects of examples/, starts the hostdevd
# agent against this machine's real /sys (node named after the host), shows its PCIDevices and
# the samples, and prints what to try next.
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

cat <<EOF

=== try it yourself
  export KUBECONFIG=$D/kubeconfig PATH=$K8S_BIN:\$PATH
  kubectl explain pcidevice.status
  kubectl get pcideviceclaims --field-selector spec.nodeName=titan
  kubectl --context alice get pcidevices        # alice has no RBAC grant yet: Forbidden
  bin/hostdevd name pci titan 0000:00:1f.6      # the name a claim on that device must have
  curl -s http://127.0.0.1:$PORT/metrics        # the agent's metrics; its log: .demo/agent.log
  kill -HUP \$(cat .demo/agent.pid)             # rescan now (otherwise every 5 minutes)
Not yet: claims (vfio-pci binding), USB devices, device plugins and the controller; see the
status table in README.md.
Stop the control plane with: make demo-down
EOF
