#!/usr/bin/env bash
# test/integration/test_crds.sh - the six CRDs on a real kube-apiserver, checked with the real
# kubectl: discovery (category, short names), printer columns, explain, selectable fields,
# valid samples accepted, malformed objects rejected with a message that names the problem,
# the API formats agreeing with the C rules (test/fixtures/formats.txt), SRIOVNetworkDevices as
# harvester's controller writes them and each of their CEL rules, VGPUDevices' CEL rules, the objects an earlier version
# wrote (test/fixtures/upgrade/, recorded by test/long/test_upgrade.sh) taken as they are, and
# the garbage collector of kube-controller-manager removing a deleted Node's devices.
SUITE=crds
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

create_yaml() { kubectl create -f - <<<"$1"; }
create_dry() { kubectl create --dry-run=server -f - <<<"$yaml"; }
apply_yaml() { kubectl apply -f - <<<"$1"; }
status_patch() { # kind name json
    kubectl patch "$1" "$2" --subresource status --type merge -p "$3"
}
status_dry() { # kind name json
    kubectl patch "$1" "$2" --subresource status --type merge --dry-run=server -p "$3"
}

claim_yaml() { # name address node [extra spec lines]
    printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: PCIDeviceClaim\nmetadata:\n  name: "%s"\nspec:\n  address: "%s"\n  nodeName: "%s"\n%s' \
        "$1" "$2" "$3" "${4:-}"
}

device_yaml() { # kind name
    printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: %s\nmetadata:\n  name: "%s"\n  labels: {nodename: titan}\n' \
        "$1" "$2"
}

# A PCIDevice status that is valid for titan-0000001e0, with one field replaced.
pci_status() { # field value(json)
    local base='{"address":"0000:00:1e.0","vendorId":"8086","deviceId":"1533","classId":"0200","nodeName":"titan"}'
    python3 -c 'import json,sys; s=json.loads(sys.argv[1]); k=sys.argv[2]
if k: s[k]=json.loads(sys.argv[3])
print(json.dumps({"status": s}))' "$base" "${1:-}" "${2:-null}"
}

compact() { local a=${1//:/}; echo "${a//./}"; }

cluster_start

echo "--- install"
expect_ok "CRDs apply and become Established" hack/apply-examples.sh

echo "--- discovery and printing"
OUT=$(kubectl api-resources --categories=hostdevices 2>&1)
expect_contains "api-resources --categories=hostdevices lists the six kinds with short names" "$OUT" \
    "pcideviceclaims" "pcidevclaim" "PCIDeviceClaim" "pcidevices" "pcidev " "PCIDevice" \
    "usbdeviceclaims" "usbdevclaim" "USBDeviceClaim" "usbdevices" "usbdev " "USBDevice" \
    "sriovnetworkdevices" "sriovnd" "SRIOVNetworkDevice" "vgpudevices" "vgpu " "VGPUDevice"
[ "$(grep -c devices.harvesterhci.io <<<"$OUT")" -eq 6 ] && pass "exactly six kinds in the category" ||
    fail "exactly six kinds in the category" "$OUT"

expect_ok "kubectl get hostdevices" kubectl get hostdevices
expect_contains "get hostdevices lists objects of all five kinds" "$OUT" \
    "pcidevice.devices.harvesterhci.io/titan-0000001f6" \
    "sriovnetworkdevice.devices.harvesterhci.io/titan-enp59s0f0" \
    "pcideviceclaim.devices.harvesterhci.io/titan-000001000" \
    "usbdevice.devices.harvesterhci.io/titan-0951-1666-2-1-4" \
    "usbdeviceclaim.devices.harvesterhci.io/titan-0951-1666-2-1-4"

OUT=$(kubectl get pcidev 2>&1)
expect_contains "pcidevices printer columns" "$OUT" \
    "ADDRESS" "VENDOR ID" "DEVICE ID" "NODE NAME" "DESCRIPTION" "KERNEL DRIVER IN USE" "AGE" \
    "0000:00:1f.6" "8086" "0d4c" "Ethernet controller: Intel Corporation Ethernet Connection (11) I219-LM" \
    "e1000e"
OUT=$(kubectl get pcidev -o wide 2>&1)
expect_contains "pcidevices wide columns" "$OUT" "IOMMU GROUP" "NUMA NODE" "RESOURCE NAME" \
    "intel.com/ETHERNET_CONNECTION_11_I219LM" "nvidia.com/GA102GL_A10"
OUT=$(kubectl get pcidevclaim 2>&1)
expect_contains "pcideviceclaims printer columns (boolean and condition)" "$OUT" \
    "ADDRESS" "NODE NAME" "USER NAME" "KERNEL DRIVER TO UNBIND" "PASSTHROUGH ENABLED" "READY" \
    "0000:01:00.0" "nvidia" "true" "True"
OUT=$(kubectl get usbdev -o wide 2>&1)
expect_contains "usbdevices printer columns" "$OUT" "VENDOR ID" "PRODUCT ID" "PCI ADDRESS" \
    "ENABLED" "PORT" "2-1.4" "0000:00:14.0" "false" "kubevirt.io/titan-0951-1666-2-1-4"
OUT=$(kubectl get usbdevclaim 2>&1)
expect_contains "usbdeviceclaims printer columns" "$OUT" "NODE NAME" "PCI ADDRESS" "USER NAME"
# harvester's four columns with hostdevd's Total beside NumVFs, then Ready and Reason; the
# interface only with -o wide.
OUT=$(kubectl get sriovnetworkdevices 2>&1)
expect_contains "sriovnetworkdevices printer columns (harvester's, Total, Ready, Reason, the generations)" \
    "$(head -1 <<<"$OUT" | tr -s ' ')" "NAME ADDRESS NODE NAME NUMVFS TOTAL VF ADDRESSES READY REASON GENERATION OBSERVED AGE"
expect_contains "... with their values" "$(grep titan-enp59s0f0 <<<"$OUT" | tr -s ' ')" \
    'titan-enp59s0f0 0000:3b:00.0 titan 2 64 ["0000:3b:02.0","0000:3b:02.1"] True Configured 1 1'
# A new spec no agent has acted on: Ready still speaks of generation 1, and the row shows it.
expect_ok "spec.numVFs changed (no agent here to act on it)" \
    kubectl patch sriovnetworkdevice titan-enp59s0f0 --type merge -p '{"spec":{"numVFs":3}}'
expect_contains "... the row shows Configured for generation 1 while the spec is at 2" \
    "$(kubectl get sriovnetworkdevices | grep titan-enp59s0f0 | tr -s ' ')" 'True Configured 2 1'
kubectl patch sriovnetworkdevice titan-enp59s0f0 --type merge -p '{"spec":{"numVFs":2}}' >/dev/null
OUT=$(kubectl get sriovnd -o wide 2>&1)
expect_contains "sriovnetworkdevices wide column: the interface" "$(tr -s ' ' <<<"$OUT")" \
    "NODE NAME INTERFACE NUMVFS" "titan enp59s0f0 2"

OUT=$(kubectl explain pcidevice.status 2>&1)
expect_contains "explain pcidevice.status describes the fields" "$OUT" \
    "PCI address with domain" "IOMMU group number" "NUMA node" "Extended resource name" \
    "passthroughBlockers"
OUT=$(kubectl explain pcideviceclaim.spec.address 2>&1)
expect_contains "explain pcideviceclaim.spec.address" "$OUT" "PCI address of the device"
OUT=$(kubectl explain sriovnetworkdevice.spec 2>&1)
expect_contains "explain sriovnetworkdevice.spec describes the fields" "$OUT" \
    "How many virtual functions the PF should have" "changes only through 0" "Per-VF settings"
OUT=$(kubectl explain sriovnetworkdevice.spec.vfs 2>&1)
expect_contains "explain sriovnetworkdevice.spec.vfs describes each setting" "$OUT" \
    "MAC address the VF gets" "802.1Q VLAN id" "802.1p priority" "trusted" "spoof"
OUT=$(kubectl explain sriovnetworkdevice.status 2>&1)
expect_contains "explain sriovnetworkdevice.status describes the fields" "$OUT" \
    "PCI addresses of the PF's VFs" "sriovNetworkDeviceEnabled" "sriov_totalvfs" "sriov_numvfs" \
    "HostNeedsDevice" "VFsInUse"

echo "--- selectable fields"
OUT=$(kubectl get pcideviceclaims --field-selector spec.nodeName=titan -o name 2>&1)
expect_contains "claims selected by spec.nodeName" "$OUT" "titan-000001000" "titan-000001001"
OUT=$(kubectl get pcideviceclaims --field-selector spec.nodeName=other -o name 2>&1)
[ -z "$OUT" ] && pass "no claims for another node" || fail "no claims for another node" "$OUT"
OUT=$(kubectl get pcidevices --field-selector status.nodeName=titan -o name 2>&1)
expect_contains "devices selected by status.nodeName" "$OUT" "titan-0000001f6"
OUT=$(kubectl get sriovnetworkdevices --field-selector spec.address=0000:3b:00.0 -o name 2>&1)
expect_contains "SR-IOV PFs selected by spec.address" "$OUT" "sriovnetworkdevice.devices.harvesterhci.io/titan-enp59s0f0"

echo "--- malformed objects are rejected with a message that says what is wrong"
expect_reject "claim: function 8 in the address" \
    'must be a PCI address with its domain, DDDD:BB:SS.F in lower-case hex (e.g. "0000:3b:00.1"' \
    create_yaml "$(claim_yaml titan-0000001f8 0000:00:1f.8 titan)"
expect_reject "... saying which value is not one" '"0000:00:1f.8" is not one' \
    create_yaml "$(claim_yaml titan-0000001f8 0000:00:1f.8 titan)"
# lspci's short form, which users copy: the full address to write instead, and no name
# suggested from the short one
expect_reject "claim: lspci's short form gets the full address to write" \
    'must be a PCI address with its domain, as the PCIDevice'"'"'s status.address shows it: "0000:00:1f.6" for lspci'"'"'s "00:1f.6"' \
    create_yaml "$(claim_yaml titan-001f6 00:1f.6 titan)"
OUT=$(create_yaml "$(claim_yaml titan-001f6 00:1f.6 titan)" 2>&1)
[[ $OUT != *"metadata.name must be"* && $OUT != *'^[0-9a-f]'* ]] &&
    pass "... with neither a name built from it nor the raw pattern" || fail "no name suggested from a short address, no pattern dump" "$OUT"
expect_reject "claim: missing nodeName" "spec.nodeName: Required value" \
    create_yaml "$(printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: titan-0000001f6}\nspec: {address: "0000:00:1f.6"}\n')"
expect_reject "claim: missing spec" "spec: Required value" \
    create_yaml "$(printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: titan-0000001f6}\n')"
expect_reject "claim: name is not the device's name" \
    'metadata.name must be the name of the claimed PCIDevice, "titan-0000001f6"' \
    create_yaml "$(claim_yaml my-nic 0000:00:1f.6 titan)"
expect_reject "claim: node name with upper case and underscore" 'spec.nodeName: Invalid value: "Node_A"' \
    create_yaml "$(claim_yaml Node_A-0000001f6 0000:00:1f.6 Node_A)"
expect_reject "claim: misspelt field" 'unknown field "spec.adress"' \
    create_yaml "$(claim_yaml titan-0000001f6 0000:00:1f.6 titan '  adress: "0000:00:1f.6"')"
expect_reject "claim: spec changed after creation" "spec is immutable" \
    kubectl patch pcideviceclaim titan-000001000 --type merge -p '{"spec":{"address":"0000:02:00.0"}}'
expect_reject "claim: userName changed after creation" "spec is immutable" \
    kubectl patch pcideviceclaim titan-000001000 --type merge -p '{"spec":{"userName":"mallory"}}'
expect_reject "claim status: passthroughEnabled not a boolean" "status.passthroughEnabled: Invalid value" \
    status_patch pcideviceclaim titan-000001000 '{"status":{"passthroughEnabled":"yes"}}'
expect_reject "claim status: condition status outside True/False/Unknown" 'Unsupported value: "Maybe"' \
    status_patch pcideviceclaim titan-000001000 \
    '{"status":{"conditions":[{"type":"Ready","status":"Maybe","reason":"X","message":"","lastTransitionTime":"2026-11-21T14:00:00Z"}]}}'
expect_reject "claim status: condition without reason" "status.conditions[0].reason: Required value" \
    status_patch pcideviceclaim titan-000001000 \
    '{"status":{"conditions":[{"type":"Ready","status":"True","message":"","lastTransitionTime":"2026-11-21T14:00:00Z"}]}}'

expect_ok "device titan-0000001e0 created (status comes next)" \
    create_yaml "$(device_yaml PCIDevice titan-0000001e0)"
expect_ok "device: valid status accepted" status_patch pcidevice titan-0000001e0 "$(pci_status)"
expect_reject "device: vendorId of five digits" 'status.vendorId: Invalid value: "80861"' \
    status_patch pcidevice titan-0000001e0 "$(pci_status vendorId '"80861"')"
expect_reject "device: deviceId not hex" 'status.deviceId: Invalid value: "zzzz"' \
    status_patch pcidevice titan-0000001e0 "$(pci_status deviceId '"zzzz"')"
expect_reject "device: classId missing" "status.classId: Required value" \
    kubectl patch pcidevice titan-0000001e0 --subresource status --type json \
    -p '[{"op":"remove","path":"/status/classId"}]'
expect_reject "device: name does not match node and address" \
    'metadata.name must be "<status.nodeName>-<status.address without : and .>", that is "titan-0000001d0"' \
    status_patch pcidevice titan-0000001e0 "$(pci_status address '"0000:00:1d.0"')"
expect_reject "device: resource name with a trailing underscore (harvester#10108)" \
    'status.resourceName: Invalid value: "nvidia.com/GA104_RTX_A4500_EMBEDDED_GPU_"' \
    status_patch pcidevice titan-0000001e0 "$(pci_status resourceName '"nvidia.com/GA104_RTX_A4500_EMBEDDED_GPU_"')"
expect_reject "device: resource name in the kubernetes.io domain" "reserved for native resources" \
    status_patch pcidevice titan-0000001e0 "$(pci_status resourceName '"kubernetes.io/gpu"')"
expect_reject "device: negative NUMA node" "status.numaNode: Invalid value: -1" \
    status_patch pcidevice titan-0000001e0 "$(pci_status numaNode -1)"
expect_reject "device: IOMMU group not a number" 'status.iommuGroup: Invalid value: "abc"' \
    status_patch pcidevice titan-0000001e0 "$(pci_status iommuGroup '"abc"')"
expect_reject "device: unknown passthrough blocker" 'Unsupported value: "Cosmic"' \
    status_patch pcidevice titan-0000001e0 "$(pci_status passthroughBlockers '[{"reason":"Cosmic","message":"rays"}]')"
expect_reject "device: more VFs enabled than supported" "numVFs cannot exceed totalVFs" \
    status_patch pcidevice titan-0000001e0 "$(pci_status sriov '{"totalVFs":4,"numVFs":8}')"
expect_reject "device: two conditions of the same type" "Duplicate value" \
    status_patch pcidevice titan-0000001e0 "$(pci_status conditions \
    '[{"type":"Ready","status":"True","reason":"A","message":"","lastTransitionTime":"2026-11-21T14:00:00Z"},{"type":"Ready","status":"False","reason":"B","message":"","lastTransitionTime":"2026-11-21T14:00:00Z"}]')"

expect_reject "usb device: product id of three digits" 'status.productID: Invalid value: "166"' \
    status_patch usbdevice titan-0951-1666-2-1-4 '{"status":{"productID":"166"}}'
expect_reject "usb device: devicePath outside /dev/bus/usb" 'status.devicePath: Invalid value: "/dev/sda"' \
    status_patch usbdevice titan-0951-1666-2-1-4 '{"status":{"devicePath":"/dev/sda"}}'
expect_reject "usb device: status other than orphaned" 'Unsupported value: "lost"' \
    status_patch usbdevice titan-0951-1666-2-1-4 '{"status":{"status":"lost"}}'
expect_reject "usb device: name does not match the port path" 'that is "titan-0951-1666-2-1-5"' \
    status_patch usbdevice titan-0951-1666-2-1-4 '{"status":{"portPath":"2-1.5"}}'
expect_reject "usb claim: spec changed after creation" "spec is immutable" \
    kubectl patch usbdeviceclaim titan-0951-1666-2-1-4 --type merge -p '{"spec":{"userName":"mallory"}}'
expect_reject "usb claim: missing spec" "spec: Required value" \
    create_yaml "$(printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: USBDeviceClaim\nmetadata: {name: titan-0951-1666-2-1-4x}\n')"

echo "--- SRIOVNetworkDevice: harvester's objects are valid; hostdevd's rules say what to write"
# As harvester's sriovdevice controller writes one (pkg/util/nichelper): name
# lower(<node>-<interface>), label nodename, annotation ...harvesterhi.io/interface-name (sic),
# spec {address, nodeName, numVFs}, then status {vfAddresses, vfPCIDevices, status}.
expect_ok "a SRIOVNetworkDevice as harvester's controller creates it" create_yaml 'apiVersion: devices.harvesterhci.io/v1beta1
kind: SRIOVNetworkDevice
metadata:
  name: titan-enp3s0f1
  labels: {nodename: titan}
  annotations: {sriov.devices.harvesterhi.io/interface-name: enP3s0f1}
spec: {address: "0000:03:00.1", nodeName: titan, numVFs: 4}'
expect_ok "... and its status as harvester's controller writes it" status_patch sriovnetworkdevice titan-enp3s0f1 \
    '{"status":{"vfAddresses":["0000:03:10.1","0000:03:10.3","0000:03:10.5","0000:03:10.7"],
      "vfPCIDevices":["titan-000003101","titan-000003103","titan-000003105","titan-000003107"],
      "status":"sriovNetworkDeviceEnabled"}}'
expect_contains "... kept as written" \
    "$(kubectl get sriovnd titan-enp3s0f1 -o jsonpath='{.spec.numVFs} {.status.status} {.status.vfPCIDevices[3]}')" \
    "4 sriovNetworkDeviceEnabled titan-000003107"
expect_ok "harvester's disabled object (numVFs 0, status Disabled, no VF lists)" create_yaml 'apiVersion: devices.harvesterhci.io/v1beta1
kind: SRIOVNetworkDevice
metadata:
  name: titan-enp3s0f0
  labels: {nodename: titan}
  annotations: {sriov.devices.harvesterhi.io/interface-name: enP3s0f0}
spec: {address: "0000:03:00.0", nodeName: titan, numVFs: 0}'
expect_ok "... and its status" status_patch sriovnetworkdevice titan-enp3s0f0 '{"status":{"status":"sriovNetworkDeviceDisabled"}}'
# The agent reports a PF that supports fewer VFs than spec.numVFs asks (harvester wrote the count,
# or the card was replaced): status is written (Ready says TooManyVFs), only raising is refused.
expect_ok "the agent writes totalVFs 2 under a numVFs of 4 it did not set" \
    status_patch sriovnetworkdevice titan-enp3s0f1 '{"status":{"totalVFs":2,"numVFs":0}}'
expect_reject "raising numVFs past totalVFs is refused, saying what to write" \
    "spec.numVFs 5 is more than the 2 virtual functions this PF supports (status.totalVFs): write 2 or less" \
    kubectl patch sriovnd titan-enp3s0f1 --type merge -p '{"spec":{"numVFs":5}}'

P=titan-enp59s0f0 # the example: numVFs 2, totalVFs 64
vfs() { kubectl patch sriovnd $P --type merge -p "{\"spec\":{\"vfs\":$1}}"; }
expect_ok "per-VF settings: MAC (upper case), VLAN with priority, trust, spoof checking" \
    vfs '[{"index":1,"mac":"0A:BC:00:3B:02:01","vlan":4095,"qos":7,"trust":true,"spoofCheck":false}]'
expect_ok "numVFs up to totalVFs" kubectl patch sriovnd $P --type merge --dry-run=server -p '{"spec":{"numVFs":64}}'
expect_reject "numVFs over totalVFs" \
    "spec.numVFs: Invalid value: spec.numVFs 65 is more than the 64 virtual functions this PF supports (status.totalVFs): write 64 or less" \
    kubectl patch sriovnd $P --type merge -p '{"spec":{"numVFs":65}}'
expect_reject "negative numVFs" \
    "spec.numVFs: Invalid value: -1: the number of virtual functions goes from 0 (none) to status.totalVFs" \
    kubectl patch sriovnd $P --type merge -p '{"spec":{"numVFs":-1}}'
expect_reject "a MAC address of five pairs" \
    'spec.vfs[0].mac: Invalid value: "02:00:00:3b:02": not a MAC address: write six hex pairs separated by ":"' \
    vfs '[{"index":0,"mac":"02:00:00:3b:02"}]'
expect_reject "a multicast MAC address, with the unicast one to write" \
    'spec.vfs[0].mac: Invalid value: "03:00:00:3b:02:00": a multicast address (the first octet is odd): a VF needs a unicast one, e.g. "02:00:00:3b:02:00"' \
    vfs '[{"index":0,"mac":"03:00:00:3b:02:00"}]'
expect_reject "the all-zero MAC address" "the all-zero address is none: leave mac out" \
    vfs '[{"index":0,"mac":"00:00:00:00:00:00"}]'
expect_reject "VLAN 4096" "spec.vfs[0].vlan: Invalid value: 4096: VLAN ids go from 1 to 4095 (0 means no VLAN)" \
    vfs '[{"index":0,"vlan":4096}]'
expect_reject "a VLAN priority of 8" "spec.vfs[0].qos: Invalid value: 8: the VLAN priority goes from 0 to 7" \
    vfs '[{"index":0,"vlan":100,"qos":8}]'
expect_reject "a VLAN priority without a VLAN" \
    "spec.vfs[0].qos: Invalid value: spec.vfs[].qos 3 of VF 0 is a VLAN priority: set vlan too (1 to 4095), or remove qos" \
    vfs '[{"index":0,"qos":3}]'
expect_reject "a VF index past numVFs, with the range to write" \
    "spec.vfs: Invalid value: spec.vfs[1].index 2: the PF will have only 2 VFs (spec.numVFs); indexes go from 0 to 1" \
    vfs '[{"index":0},{"index":2}]'
expect_reject "... also when numVFs is lowered under an entry" \
    "spec.vfs[0].index 1: the PF will have only 1 VFs (spec.numVFs); indexes go from 0 to 0" \
    kubectl patch sriovnd $P --type merge -p '{"spec":{"numVFs":1}}'
expect_reject "VF settings with numVFs 0" "with spec.numVFs 0 the PF has no VFs to set: remove spec.vfs, or raise spec.numVFs" \
    kubectl patch sriovnd $P --type merge -p '{"spec":{"numVFs":0}}'
expect_ok "... numVFs 0 once spec.vfs is gone" \
    kubectl patch sriovnd $P --type merge --dry-run=server -p '{"spec":{"numVFs":0,"vfs":null}}'
expect_reject "a negative VF index" "spec.vfs[0].index: Invalid value: -1: VF indexes go from 0 to spec.numVFs - 1" \
    vfs '[{"index":-1}]'
expect_reject "two entries for one VF" "Duplicate value" vfs '[{"index":0},{"index":0,"vlan":5}]'
expect_reject "changing spec.address" \
    "spec.address: Forbidden: spec.address cannot change: this object is PF 0000:3b:00.0; the agent publishes one object per PF (for 0000:3b:00.1: kubectl get sriovnetworkdevices --field-selector spec.address=0000:3b:00.1)" \
    kubectl patch sriovnd $P --type merge -p '{"spec":{"address":"0000:3b:00.1"}}'
expect_reject "changing spec.nodeName" "spec.nodeName cannot change: this object is a PF of node titan" \
    kubectl patch sriovnd $P --type merge -p '{"spec":{"nodeName":"other"}}'
expect_reject "an address without its domain" \
    'spec.address: Invalid value: "3b:00.0": must be a PCI address with its domain' \
    create_yaml 'apiVersion: devices.harvesterhci.io/v1beta1
kind: SRIOVNetworkDevice
metadata: {name: titan-eth9}
spec: {address: "3b:00.0", nodeName: titan}'
expect_reject "status other than harvester's two" 'Unsupported value: "on"' \
    status_patch sriovnetworkdevice $P '{"status":{"status":"on"}}'

echo "--- the API server and the C rules agree on every value of test/fixtures/formats.txt"
agree=0 disagree=()
while IFS= read -r line; do
    case "$line" in '' | '#'*) continue ;; esac
    format=${line%% *}
    rest=${line#* }
    validity=${rest%% *}
    value=${rest#* }
    [ "$value" = "<empty>" ] && value=""
    case "$format" in
    pci)
        field=spec.address
        yaml=$(claim_yaml "titan-$(compact "$value")" "$value" titan)
        cmd=(create_dry)
        ;;
    node)
        field=spec.nodeName
        yaml=$(claim_yaml "$value-0000001f6" 0000:00:1f.6 "$value")
        cmd=(create_dry)
        ;;
    resource)
        field=status.resourceName
        cmd=(status_dry pcidevice titan-0000001e0 "$(pci_status resourceName "\"$value\"")")
        ;;
    hex4)
        field=status.vendorId
        cmd=(status_dry pcidevice titan-0000001e0 "$(pci_status vendorId "\"$value\"")")
        ;;
    usbport)
        field=status.portPath
        name="titan-0951-1666-${value//./-}"
        if [ "$validity" = valid ]; then
            kubectl create -f - >/dev/null 2>&1 <<<"$(device_yaml USBDevice "$name")"
        else
            name=titan-0951-1666-2-1-4
        fi
        cmd=(status_dry usbdevice "$name" "{\"status\":{\"vendorID\":\"0951\",\"productID\":\"1666\",\"nodeName\":\"titan\",\"portPath\":\"$value\"}}")
        ;;
    esac
    out=$("${cmd[@]}" 2>&1)
    rc=$?
    if [ "$validity" = valid ] && [ $rc -eq 0 ]; then
        agree=$((agree + 1))
    elif [ "$validity" = invalid ] && [ $rc -ne 0 ] && [[ "$out" == *"$field"* ]]; then
        agree=$((agree + 1))
    else
        disagree+=("$format $validity \"$value\": $(head -c 300 <<<"$out")")
    fi
done <test/fixtures/formats.txt
if [ ${#disagree[@]} -eq 0 ] && [ $agree -ge 50 ]; then
    pass "all $agree values judged as the C rules judge them"
else
    fail "API server and C rules disagree on ${#disagree[@]} values" "$(printf '%s\n' "${disagree[@]}")"
fi

echo "--- VGPUDevice: harvester's fields are valid; hostdevd's rules say what to write"
vgpu_yaml() { # name parent [extra spec lines]
    printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: VGPUDevice\nmetadata:\n  name: "%s"\n  labels: {nodename: titan}\nspec:\n  address: "%s"\n  parentGPUDeviceAddress: "%s"\n  nodeName: titan\n%s' \
        "$1" "$2" "$2" "${3:-}"
}
V=titan-mtty-0
expect_ok "a free slot as the agent publishes it" create_yaml "$(vgpu_yaml $V mtty)"
expect_ok "... and its status (harvester's fields and hostdevd's)" status_patch vgpudevice $V \
    '{"status":{"availableTypes":{"Single port serial":"mtty-1","Dual port serial":"mtty-2"},
      "mdevTypes":[{"id":"mtty-1","name":"Single port serial","deviceAPI":"vfio-pci","available":24},
                   {"id":"mtty-2","name":"Dual port serial","deviceAPI":"vfio-pci","available":12}],
      "vGPUStatus":""}}'
expect_contains "enabled defaults to false" "$(kubectl get vgpu $V -o jsonpath='{.spec.enabled}')" "false"
OUT=$(kubectl get vgpudevices 2>&1)
expect_contains "vgpudevices printer columns (harvester's, Ready, Reason)" \
    "$(head -1 <<<"$OUT" | tr -s ' ')" "NAME ADDRESS NODE NAME ENABLED UUID VGPUTYPE PARENTGPUDEVICE READY REASON AGE"
OUT=$(kubectl get vgpudevices --field-selector spec.parentGPUDeviceAddress=mtty -o name 2>&1)
expect_contains "slots selected by spec.parentGPUDeviceAddress" "$OUT" "vgpudevice.devices.harvesterhci.io/$V"
OUT=$(kubectl explain vgpudevice.spec 2>&1)
expect_contains "explain vgpudevice.spec describes the fields" "$OUT" \
    "Whether the instance should exist" "The type of the instance" "The UUID the instance gets"
expect_reject "enabled without a type" "spec.enabled is true but spec.vGPUTypeName is empty" \
    kubectl patch vgpu $V --type merge -p '{"spec":{"enabled":true}}'
expect_reject "spec.uuid in upper case" 'not a UUID as the kernel names mdevs' \
    kubectl patch vgpu $V --type merge -p '{"spec":{"uuid":"83B8F4F2-509F-382F-3C1E-E6BFE0FA1001"}}'
expect_reject "spec.parentGPUDeviceAddress changed" "spec.parentGPUDeviceAddress cannot change" \
    kubectl patch vgpu $V --type merge -p '{"spec":{"parentGPUDeviceAddress":"0000:00:02.0"}}'
expect_reject "spec.nodeName changed" "spec.nodeName cannot change" \
    kubectl patch vgpu $V --type merge -p '{"spec":{"nodeName":"other"}}'
expect_ok "enabled with a type and a UUID" kubectl patch vgpu $V --type merge \
    -p '{"spec":{"enabled":true,"vGPUTypeName":"mtty-2","uuid":"83b8f4f2-509f-382f-3c1e-e6bfe0fa1001"}}'
expect_ok "the type can change before the instance exists" kubectl patch vgpu $V --type merge \
    -p '{"spec":{"vGPUTypeName":"mtty-1"}}'
expect_ok "... the status as the agent writes it once the instance exists" status_patch vgpudevice $V \
    '{"status":{"uuid":"83b8f4f2-509f-382f-3c1e-e6bfe0fa1001","vGPUStatus":"vGPUConfigured",
      "configureVGPUTypeName":"mtty-1","resourceName":"devices.harvesterhci.io/mtty-1","iommuGroup":"14"}}'
expect_reject "the type cannot change while the instance exists" "set spec.enabled=false first" \
    kubectl patch vgpu $V --type merge -p '{"spec":{"vGPUTypeName":"mtty-2"}}'
expect_reject "nor the UUID" "set spec.enabled=false first" \
    kubectl patch vgpu $V --type merge -p '{"spec":{"uuid":"83b8f4f2-509f-382f-3c1e-e6bfe0fa1002"}}'
expect_ok "disabling and changing the type in one write is allowed" kubectl patch vgpu $V --type merge \
    -p '{"spec":{"enabled":false,"vGPUTypeName":"mtty-2"}}'
expect_reject "status.vGPUStatus is vGPUConfigured or empty" 'Unsupported value: "configured"' \
    status_patch vgpudevice $V '{"status":{"vGPUStatus":"configured"}}'
OUT=$(kubectl get vgpudevices $V 2>&1)
expect_contains "... the row: enabled, UUID, type, parent" "$(tr -s ' ' <<<"$OUT")" \
    "$V mtty titan false 83b8f4f2-509f-382f-3c1e-e6bfe0fa1001 mtty-1 mtty"
# As harvester's vGPU controller writes one: address a VF, parent the PF, no uuid in spec.
expect_ok "a VGPUDevice as harvester's controller creates it" create_yaml 'apiVersion: devices.harvesterhci.io/v1beta1
kind: VGPUDevice
metadata:
  name: titan-000004001
  labels: {nodename: titan, harvesterhci.io/parentSRIOVGPUDevice: titan-000004000}
spec: {address: "0000:04:00.1", nodeName: titan, parentGPUDeviceAddress: "0000:04:00.0", enabled: true, vGPUTypeName: NVIDIA A2-4Q}'
expect_ok "... and its status" status_patch vgpudevice titan-000004001 \
    '{"status":{"uuid":"","vGPUStatus":"","configureVGPUTypeName":"","availableTypes":{"NVIDIA A2-4Q":"nvidia-745"}}}'

echo "--- objects as the previous version wrote them (test/fixtures/upgrade/objects.json)"
# test/long/test_upgrade.sh records what version N (its UPGRADE_FROM) wrote on a real node; each
# object and its status must be taken by this tree's CRDs as they are: nothing refused, nothing
# pruned (a field N writes that these CRDs no longer know would be dropped without a word).
FIXTURE=test/fixtures/upgrade/objects.json
taken=0
lost=()
while read -r obj; do
    kind=$(jq -r .kind <<<"$obj")
    name=$(jq -r .metadata.name <<<"$obj")
    if ! out=$(kubectl create -f - 2>&1 <<<"$(jq -c 'del(.status)' <<<"$obj")"); then
        lost+=("$kind $name refused: $out")
        continue
    fi
    if [ "$(jq 'has("status")' <<<"$obj")" = true ] &&
        ! out=$(kubectl patch "$kind" "$name" --subresource status --type merge -p "$(jq -c '{status}' <<<"$obj")" 2>&1); then
        lost+=("$kind $name: status refused: $out")
        continue
    fi
    keep='{spec, status, labels: .metadata.labels, annotations: .metadata.annotations}'
    if [ "$(kubectl get "$kind" "$name" -o json | jq -S "$keep")" = "$(jq -S "$keep" <<<"$obj")" ]; then
        taken=$((taken + 1))
    else
        lost+=("$kind $name changed: $(diff <(jq -S "$keep" <<<"$obj") <(kubectl get "$kind" "$name" -o json | jq -S "$keep") | head -8)")
    fi
done < <(jq -c '.items[]' "$FIXTURE")
if [ ${#lost[@]} -eq 0 ] && [ "$taken" -gt 3 ]; then
    pass "all $taken objects written by $(jq -r .writtenBy "$FIXTURE") taken as they are (spec, status, labels)"
else
    fail "objects written by $(jq -r .writtenBy "$FIXTURE") refused or changed by this tree's CRDs" "$(printf '%s\n' "${lost[@]}")"
fi

echo "--- garbage collection (kube-controller-manager)"
expect_ok "Node gc-node created" apply_yaml 'apiVersion: v1
kind: Node
metadata: {name: gc-node}'
uid=$(kubectl get node gc-node -o jsonpath='{.metadata.uid}')
expect_ok "PCIDevice owned by the Node created" create_yaml "apiVersion: devices.harvesterhci.io/v1beta1
kind: PCIDevice
metadata:
  name: gc-node-0000001f6
  labels: {nodename: gc-node}
  ownerReferences:
  - {apiVersion: v1, kind: Node, name: gc-node, uid: $uid}"
expect_ok "Node deleted" kubectl delete node gc-node --wait=false
device_gone() { ! kubectl get pcidevice gc-node-0000001f6 >/dev/null 2>&1; }
if eventually 90 device_gone; then
    pass "the garbage collector removed the deleted Node's PCIDevice"
else
    fail "the garbage collector removed the deleted Node's PCIDevice" "$(tail -5 "$TEST_DIR/cluster/controller-manager.log")"
fi

finish
