#!/usr/bin/env bash
# test/long/test_identity_renumber.sh - a device's identity survives renumbering on a real
# kernel (make test-long: two TCG boots of make test's 2 cores; make test has the same on the fake
# tree, test/integration/test_identity.sh): a qemu node (hack/qemu-node.sh) with one more e1000e
# (mac=52:54:00:12:34:56) behind a PCIe root port in slot 9 (QEMU_NODE_QEMU_ARGS; the fixed layout is left as it is), and kube-scheduler on the
# host. QEMU's e1000e has a PCIe Device Serial Number made of its MAC address (hw/net/e1000e.c:
# 52-54-00-ff-ff-12-34-56), which the agent, root in the guest, reads from config space.
# Checks: the PCIDevice of the e1000e (0000:01:00.0 on the first boot) has serialNumber = that
# DSN, serialNumberSource DSN and physicalSlot 9 (pciehp's slot; ACPI hotplug of the root ports
# off), and the guest's sysfs has the
# MAC as its address; the slice's attributes say the same; a pod whose ResourceClaimTemplate
# selects serialNumber is allocated it by the scheduler. Second boot: another e1000e behind a
# root port at a lower address (slot 8) is put in front; the kernel numbers it bus 01 and our
# e1000e moves to 0000:02:00.0 with the same serial and slot, and a second pod with the same
# template is allocated it there, not the card now at 0000:01:00.0. Two boots.
SUITE=long-identity-renumber
# shellcheck source=test/e2e/lib.sh
. "$(dirname "$0")/../e2e/lib.sh"
cd "$ROOT" || exit 1
NODE=qid
DRIVER=vfio-pci.hostdevd.io
SLICE=$NODE-vfio-pci-0
DSN=52-54-00-ff-ff-12-34-56
# QEMU >= 6.1 hot-plugs q35's root ports through ACPI, and acpiphp names the slot behind every
# root port "0"; with that off the kernel's pciehp names it by the port's slot number (PSN).
NATIVE='-global ICH9-LPC.acpi-pci-hotplug-with-bridge-support=off'
OURS='-device pcie-root-port,id=idrp9,bus=pcie.0,addr=09.0,chassis=9,slot=9 -device e1000e,id=idnic,bus=idrp9,addr=00.0,mac=52:54:00:12:34:56,romfile='
FRONT='-device pcie-root-port,id=idrp8,bus=pcie.0,addr=08.0,chassis=8,slot=8 -device e1000e,id=idfront,bus=idrp8,addr=00.0,mac=52:54:00:ab:cd:ef,romfile='

cluster_start --with-scheduler
install_crds
expect_ok "the DeviceClasses are applied" kubectl apply -f manifests/deviceclasses.yaml
create_node "$NODE"
kubectl patch node "$NODE" --subresource=status --type=merge -p \
    '{"status":{"capacity":{"pods":"10"},"allocatable":{"pods":"10"}}}' >/dev/null

dev_name() { local a=${1//:/-}; echo "pci-${a//./-}"; }
ident() { # address -> serialNumber/serialNumberSource/physicalSlot of its PCIDevice
    kubectl get pcidevices -l "nodename=$NODE" -o json | jq -r --arg a "$1" '.items[] |
        select(.status.address == $a) |
        "\(.status.serialNumber // "-")/\(.status.serialNumberSource // "-")/\(.status.physicalSlot // "-")"'
}
attrs() { # address -> serialNumber/physicalSlot in the slice
    kubectl get resourceslice "$SLICE" -o json 2>/dev/null | jq -r --arg d "$(dev_name "$1")" \
        '.spec.devices[] | select(.name == $d) | "\(.attributes.serialNumber.string)/\(.attributes.physicalSlot.string)"'
}
kubectl apply -f - >/dev/null <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: by-serial, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: nic
        exactly:
          deviceClassName: $DRIVER
          selectors:
          - cel: {expression: "device.attributes['$DRIVER'].serialNumber == '$DSN'"}
EOF
pod() {
    kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default}
spec:
  automountServiceAccountToken: false
  tolerations: [{operator: Exists}]
  resourceClaims: [{name: nic, resourceClaimTemplateName: by-serial}]
  containers: [{name: c, image: busybox, resources: {claims: [{name: nic}]}}]
EOF
}
claim_of() { kubectl get pod "$1" -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}' 2>/dev/null; }
allocated() { kubectl get resourceclaim "$(claim_of "$1")" -o jsonpath='{.status.allocation.devices.results[0].device}' 2>/dev/null; }
is_allocated() { [ -n "$(allocated "$1")" ]; }

boot_and_check() { # what address qemu-args
    local what=$1 addr=$2
    if QEMU_NODE_QEMU_ARGS=$3 node_boot "$NODE" --timeout 240; then pass "$what: node boots (${BOOT_SECONDS}s)"; else
        fail "$what: node boots" "$(tail -20 "$NODE_DIR/console.log" 2>/dev/null)"; finish; fi
    seen() { [ "$(ident "$addr")" = "$DSN/DSN/9" ] && [ "$(attrs "$addr")" = "$DSN/9" ]; }
    if eventually 180 seen; then pass "$what: $addr has serialNumber $DSN (DSN) and physicalSlot 9, in its PCIDevice and the slice"; else
        fail "$what: identity of $addr" "PCIDevice: $(ident "$addr"); slice: $(attrs "$addr")"$'\n'"$(node_logs)"; fi
    expect_contains "$what: the guest's view: the e1000e's MAC at $addr, slot 9 at its bus" \
        "$(guest "cat /sys/bus/pci/devices/$addr/net/*/address /sys/bus/pci/slots/9/address")" \
        "52:54:00:12:34:56" "${addr%.*}"
}

echo "--- first boot: our e1000e behind the root port in slot 9"
boot_and_check "first boot" 0000:01:00.0 "$NATIVE $OURS"
OTHERS=$(kubectl get pcidevices -l "nodename=$NODE" -o json | jq -r '.items[] | "\(.status.address) \(.status.serialNumber // "-") \(.status.physicalSlot // "-")"')
echo "  the node's other devices (address serial slot):"
sed 's/^/    /' <<<"$OTHERS"
pod vm1
if eventually 60 is_allocated vm1; then pass "the scheduler allocated vm1's claim"; else
    fail "vm1 allocated" "$(kubectl describe pod vm1 | tail -8)"; fi
expect_contains "vm1 has our e1000e, selected by serialNumber" "$(allocated vm1)" "$(dev_name 0000:01:00.0)"

echo "--- second boot: another e1000e in front (slot 8, bus 01)"
node_stop "$NODE"
kubectl delete pod vm1 --grace-period=0 --force >/dev/null 2>&1
no_claims() { [ -z "$(kubectl get resourceclaims -o name 2>/dev/null)" ]; }
eventually 60 no_claims || fail "vm1's claim gone" "$(kubectl get resourceclaims)"
boot_and_check "second boot" 0000:02:00.0 "$NATIVE $FRONT $OURS"
front() { [ "$(ident 0000:01:00.0)" = "52-54-00-ff-ff-ab-cd-ef/DSN/8" ]; }
if eventually 60 front; then pass "the card in front took 0000:01:00.0, with its own DSN and slot 8"; else
    fail "the card in front" "$(ident 0000:01:00.0)"; fi
pod vm2
if eventually 60 is_allocated vm2; then pass "the scheduler allocated vm2's claim"; else
    fail "vm2 allocated" "$(kubectl describe pod vm2 | tail -8)"; fi
expect_contains "vm2 has our e1000e at its new address, not the card at its old one" "$(allocated vm2)" \
    "$(dev_name 0000:02:00.0)"
kubectl delete pod vm2 --grace-period=0 --force >/dev/null 2>&1
finish
