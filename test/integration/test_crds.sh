#!/usr/bin/env bash
# test/integration/test_crds.sh - the four CRDs on a real kube-apiserver, checked with the real
# kubectl: discovery (category, short names), printer columns, explain, selectable fields,
# valid samples accepted, malformed objects rejected with a message that names the problem,
# the API formats agreeing with the C rules (test/fixtures/formats.txt), and the garbage
# collector of kube-controller-manager removing a deleted Node's devices.
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
expect_contains "api-resources --categories=hostdevices lists the four kinds with short names" "$OUT" \
    "pcideviceclaims" "pcidevclaim" "PCIDeviceClaim" "pcidevices" "pcidev " "PCIDevice" \
    "usbdeviceclaims" "usbdevclaim" "USBDeviceClaim" "usbdevices" "usbdev " "USBDevice"
[ "$(grep -c devices.harvesterhci.io <<<"$OUT")" -eq 4 ] && pass "exactly four kinds in the category" ||
    fail "exactly four kinds in the category" "$OUT"

expect_ok "kubectl get hostdevices" kubectl get hostdevices
expect_contains "get hostdevices lists objects of all four kinds" "$OUT" \
    "pcidevice.devices.harvesterhci.io/titan-0000001f6" \
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

OUT=$(kubectl explain pcidevice.status 2>&1)
expect_contains "explain pcidevice.status describes the fields" "$OUT" \
    "PCI address with domain" "IOMMU group number" "NUMA node" "Extended resource name" \
    "passthroughBlockers"
OUT=$(kubectl explain pcideviceclaim.spec.address 2>&1)
expect_contains "explain pcideviceclaim.spec.address" "$OUT" "PCI address of the device"

echo "--- selectable fields"
OUT=$(kubectl get pcideviceclaims --field-selector spec.nodeName=titan -o name 2>&1)
expect_contains "claims selected by spec.nodeName" "$OUT" "titan-000001000" "titan-000001001"
OUT=$(kubectl get pcideviceclaims --field-selector spec.nodeName=other -o name 2>&1)
[ -z "$OUT" ] && pass "no claims for another node" || fail "no claims for another node" "$OUT"
OUT=$(kubectl get pcidevices --field-selector status.nodeName=titan -o name 2>&1)
expect_contains "devices selected by status.nodeName" "$OUT" "titan-0000001f6"

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
