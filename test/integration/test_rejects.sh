#!/usr/bin/env bash
# test/integration/test_rejects.sh - malformed and forbidden objects the real API server refuses
# with a message that says what is wrong, beyond those of test_crds.sh and test_access.sh:
# further schema and CEL violations of each of the four kinds, and controller-shaped writes to
# the KubeVirt CR that KubeVirt v1.9.0's own CRD refuses. Each case asserts the message; the
# rows go into build/results/rejects-table.txt (kind | case | message).
SUITE=rejects
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

TABLE=$ROOT/build/results/rejects-table.txt
mkdir -p "$ROOT/build/results"
: >"$TABLE"

# reject KIND CASE PATTERN COMMAND...: expect_reject, and the row (with the message's line that
# holds PATTERN) in the table.
reject() {
    local kind=$1 what=$2 pattern=$3
    shift 3
    expect_reject "$kind: $what" "$pattern" "$@"
    printf '%s | %s | %s\n' "$kind" "$what" "$(grep -F -- "$pattern" <<<"$OUT" | head -1 | cut -c1-300)" >>"$TABLE"
}
dry_status() { kubectl patch "$1" "$2" --subresource status --type merge --dry-run=server -p "$3"; }
dry_create() { kubectl create --dry-run=server -f - <<<"$1"; }
pci_claim() { # name address node [extra spec json]
    jq -cn --arg n "$1" --arg a "$2" --arg node "$3" --argjson x "${4:-{\}}" \
        '{apiVersion: "devices.harvesterhci.io/v1beta1", kind: "PCIDeviceClaim", metadata: {name: $n},
          spec: ({address: $a, nodeName: $node} + $x)}'
}

cluster_start
expect_ok "CRDs and the sample objects of examples/" hack/apply-examples.sh
expect_ok "KubeVirt v1.9.0's kubevirts CRD and a CR" install_kubevirt '{pciHostDevices: []}'

echo "--- PCIDevice"
D=titan-0000001f6
reject PCIDevice "subsystemVendorId not hex" 'status.subsystemVendorId: Invalid value: "xyz1"' \
    dry_status pcidevice $D '{"status":{"subsystemVendorId":"xyz1"}}'
reject PCIDevice "revision of three digits" 'status.revision: Invalid value: "abc"' \
    dry_status pcidevice $D '{"status":{"revision":"abc"}}'
reject PCIDevice "kernelDriverInUse a path" 'status.kernelDriverInUse: Invalid value: "../vfio-pci"' \
    dry_status pcidevice $D '{"status":{"kernelDriverInUse":"../vfio-pci"}}'
reject PCIDevice "address in upper case" 'status.address: Invalid value: "0000:00:1F.6"' \
    dry_status pcidevice $D '{"status":{"address":"0000:00:1F.6"}}'
reject PCIDevice "nodeName not the node of its name" 'status.nodeName' \
    dry_status pcidevice $D '{"status":{"nodeName":"atlas"}}'
reject PCIDevice "resourceName without a domain" 'status.resourceName: Invalid value: "I350"' \
    dry_status pcidevice $D '{"status":{"resourceName":"I350"}}'
reject PCIDevice "a blocker without a message" 'status.passthroughBlockers[0].message: Required value' \
    dry_status pcidevice $D '{"status":{"passthroughBlockers":[{"reason":"NoIOMMUGroup"}]}}'
reject PCIDevice "numaNode a string" 'status.numaNode: Invalid value: "string"' \
    dry_status pcidevice $D '{"status":{"numaNode":"zero"}}'

echo "--- USBDevice"
U=titan-0951-1666-2-1-4
reject USBDevice "vendorID not hex" 'status.vendorID: Invalid value: "zzzz"' \
    dry_status usbdevice $U '{"status":{"vendorID":"zzzz"}}'
reject USBDevice "busNum negative" 'status.busNum: Invalid value: -1' \
    dry_status usbdevice $U '{"status":{"busNum":-1}}'
reject USBDevice "devNum of four digits" 'status.devNum: Invalid value: 1000' \
    dry_status usbdevice $U '{"status":{"devNum":1000}}'
reject USBDevice "pciAddress malformed" 'status.pciAddress: Invalid value: "00:14"' \
    dry_status usbdevice $U '{"status":{"pciAddress":"00:14"}}'
reject USBDevice "enabled not a boolean" 'status.enabled: Invalid value: "string"' \
    dry_status usbdevice $U '{"status":{"enabled":"yes"}}'
reject USBDevice "resourceName in the kubernetes.io domain" 'reserved for native resources' \
    dry_status usbdevice $U '{"status":{"resourceName":"kubernetes.io/usb"}}'

echo "--- PCIDeviceClaim"
reject PCIDeviceClaim "address in upper case" 'must be in lower case, as the PCIDevice'"'"'s status.address shows it: "0000:00:1f.6"' \
    dry_create "$(pci_claim titan-0000001f6 0000:00:1F.6 titan)"
reject PCIDeviceClaim "disableResourcePooling not a boolean" 'spec.disableResourcePooling: Invalid value: "string"' \
    dry_create "$(pci_claim titan-0000001f6 0000:00:1f.6 titan '{"disableResourcePooling":"yes"}')"
reject PCIDeviceClaim "a device on another node (name of titan's, nodeName atlas)" \
    'metadata.name must be the name of the claimed PCIDevice, "atlas-0000001f6"' \
    dry_create "$(pci_claim titan-0000001f6 0000:00:1f.6 atlas)"
reject PCIDeviceClaim "kernelDriverToUnbind a path" 'status.kernelDriverToUnbind: Invalid value: "../igb"' \
    dry_status pcideviceclaim titan-000001000 '{"status":{"kernelDriverToUnbind":"../igb"}}'
reject PCIDeviceClaim "nodeName of 254 characters" 'spec.nodeName' \
    dry_create "$(pci_claim "$(printf 'a%.0s' {1..240})-0000001f6" 0000:00:1f.6 "$(printf 'a%.0s' {1..254})")"
reject PCIDeviceClaim "a claim's address changed to another device's" "spec is immutable" \
    kubectl patch pcideviceclaim titan-000001000 --type merge --dry-run=server -p '{"spec":{"address":"0000:00:1f.6"}}'

echo "--- USBDeviceClaim"
UC=titan-0951-1666-2-1-4
reject USBDeviceClaim "status.nodeName with upper case" 'status.nodeName: Invalid value: "Atlas"' \
    dry_status usbdeviceclaim $UC '{"status":{"nodeName":"Atlas"}}'
reject USBDeviceClaim "status.pciAddress malformed" 'status.pciAddress: Invalid value: "0000:00:14"' \
    dry_status usbdeviceclaim $UC '{"status":{"pciAddress":"0000:00:14"}}'
reject USBDeviceClaim "condition status Maybe" 'Unsupported value: "Maybe"' \
    dry_status usbdeviceclaim $UC '{"status":{"conditions":[{"type":"Ready","status":"Maybe","reason":"R","message":"","lastTransitionTime":"2026-11-21T14:00:00Z"}]}}'
reject USBDeviceClaim "a name with upper case" 'a lowercase RFC 1123 subdomain' \
    dry_create '{"apiVersion":"devices.harvesterhci.io/v1beta1","kind":"USBDeviceClaim","metadata":{"name":"Titan-0951-1666-2-1-4"},"spec":{}}'

echo "--- the KubeVirt CR as the controller writes it (KubeVirt v1.9.0's CRD)"
KVP=spec.configuration.permittedHostDevices
kv_patch() { kubectl patch kubevirt kubevirt -n kubevirt --type merge --dry-run=server -p "{\"spec\":{\"configuration\":{\"permittedHostDevices\":$1}}}"; }
reject KubeVirt "pciVendorSelector a number" "$KVP.pciHostDevices[0].pciVendorSelector: Invalid value: \"integer\"" \
    kv_patch '{"pciHostDevices":[{"pciVendorSelector":8086,"resourceName":"intel.com/x"}]}'
reject KubeVirt "a mediated device without resourceName" "$KVP.mediatedDevices[0].resourceName: Required value" \
    kv_patch '{"mediatedDevices":[{"mdevNameSelector":"GRID T4-1Q"}]}'
reject KubeVirt "usb selectors not a list" "$KVP.usb[0].selectors: Invalid value: \"object\"" \
    kv_patch '{"usb":[{"resourceName":"kingston.com/x","selectors":{"vendor":"0951","product":"1666"}}]}'
reject KubeVirt "pciHostDevices an object" "$KVP.pciHostDevices: Invalid value: \"object\"" \
    kv_patch '{"pciHostDevices":{"pciVendorSelector":"8086:1521"}}'
reject KubeVirt "permittedHostDevices a string" "$KVP: Invalid value: \"string\"" \
    kv_patch '"all"'

echo "  $(wc -l <"$TABLE") rejections in $TABLE"
finish
