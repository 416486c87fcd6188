#!/usr/bin/env bash
# make demo: brings up the local control plane in .demo/cluster (kept running until
# `make demo-down`), installs the CRDs and the sample objects of examples/, shows them, and
# prints what to try next.
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

run() {
    printf '\n$ %s\n' "$*"
    "$@"
}
echo
echo "=== hostdevd demo: the four kinds, with sample objects of a node \"titan\""
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
Not yet: the agent and the controller (discovery, vfio-pci binding, device plugins) are
still to come; see the status table in README.md.
Stop the control plane with: make demo-down
EOF
