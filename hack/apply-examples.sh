#!/usr/bin/env bash
# Installs the CRDs (waits until they are served) and the sample objects of examples/, writing
# each sample's status through the status subresource as an agent would. Uses $KUBECONFIG and
# the kubectl on $PATH. Idempotent.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
kubectl apply -k crds/ >/dev/null
kubectl wait --for condition=Established --timeout 60s \
    crd/pcidevices.devices.harvesterhci.io crd/pcideviceclaims.devices.harvesterhci.io \
    crd/usbdevices.devices.harvesterhci.io crd/usbdeviceclaims.devices.harvesterhci.io \
    crd/sriovnetworkdevices.devices.harvesterhci.io crd/vgpudevices.devices.harvesterhci.io >/dev/null
status() { # kind name file
    kubectl patch "$1" "$2" --subresource status --type merge --patch-file "$3" >/dev/null
}
kubectl apply -f examples/pcidevices.yaml -f examples/usbdevices.yaml \
    -f examples/sriovnetworkdevices.yaml >/dev/null
for n in titan-0000001f6 titan-000001000 titan-000001001; do
    status pcidevice "$n" "examples/status/$n.yaml"
done
status usbdevice titan-0951-1666-2-1-4 examples/status/titan-0951-1666-2-1-4.yaml
status sriovnetworkdevice titan-enp59s0f0 examples/status/titan-enp59s0f0.yaml
# Right after the chart made the CRDs and its admission policies, the API server may answer a
# create of a kind the policies match "Resource kind ... not found" (ServiceUnavailable) until
# it resolves the new kind for them (seconds; ~20 s seen): again, for up to 90 s.
for i in $(seq 90); do
    OUT=$({ kubectl apply -f examples/pcideviceclaims.yaml -f examples/usbdeviceclaims.yaml >/dev/null; } 2>&1) && break
    if ! grep -q 'ServiceUnavailable.*not found' <<<"$OUT" || [ "$i" = 90 ]; then
        echo "$OUT" >&2
        exit 1
    fi
    sleep 1
done
status usbdeviceclaim titan-0951-1666-2-1-4 examples/status/claim-titan-0951-1666-2-1-4.yaml
for n in titan-000001000 titan-000001001; do
    status pcideviceclaim "$n" "examples/status/claim-$n.yaml"
done
