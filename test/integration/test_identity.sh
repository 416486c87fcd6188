#!/usr/bin/env bash
# test/integration/test_identity.sh - a device's identity survives renumbering (docs/api.md,
# docs/dra.md): `hostdevd agent` (sanitizer build, admin kubeconfig) on the fake tree
# test/fixtures/sysfs/identity-node.txt against the real control plane with kube-scheduler.
# Checks: PCIDevice status serialNumber/serialNumberSource/physicalSlot on the devices that have
# them (a DSN on both functions of a card, an NVMe serial, a permanent MAC address) and absent on
# those that do not (a MAC address set by hand, a GPU); the ResourceSlice's serialNumber and
# physicalSlot attributes, "" on those without; a pod whose ResourceClaimTemplate selects the
# card's first function by serialNumber and the drive by its serial is allocated them by the
# scheduler. Then the node is renumbered (identity-node-renumbered.txt: a card put in front,
# every address behind it moved) and the agent restarted: the same identities at the new
# addresses, and a second pod with the same template is allocated the moved devices.
SUITE=identity
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

AGENT=$TEST_BIN/hostdevd
NODE=id-node
DRIVER=vfio-pci.hostdevd.io
SLICE=$NODE-vfio-pci-0
DSN=3c-fd-fe-ff-ff-0a-1b-2c
NVME=S4EWNX0R123456
MAC=52:54:00:12:34:56
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

cluster_start --with-scheduler
ADMIN=$TEST_DIR/cluster/admin.kubeconfig
install_crds
expect_ok "the DeviceClasses are applied" kubectl apply -f manifests/deviceclasses.yaml
create_node "$NODE"
# the scheduler binds a pod to a node only when it has room for one
kubectl patch node "$NODE" --subresource=status --type=merge -p \
    '{"status":{"capacity":{"pods":"10","cpu":"4","memory":"8Gi"},"allocatable":{"pods":"10","cpu":"4","memory":"8Gi"}}}' >/dev/null
SYS=$TEST_DIR/sys
mkdir -p "$TEST_DIR/proc/1" "$TEST_DIR/proc/net" "$TEST_DIR/dev"
fake_proc "$TEST_DIR/proc"
PORT=$(free_port)
start_agent() {
    agent_run --kubeconfig "$ADMIN" --proc-root "$TEST_DIR/proc" --dev-root "$TEST_DIR/dev" \
        --kubelet-dir "$TEST_DIR/nokubelet" --resync 3600 --uevent-source none
}
ready() { curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null; }
dev_name() { local a=${1//:/-}; echo "pci-${a//./-}"; }
# address -> "serialNumber/serialNumberSource/physicalSlot" of its PCIDevice (- for absent)
ident() {
    kubectl get pcidevices -o json | jq -r --arg a "$1" '.items[] | select(.status.address == $a) |
        "\(.status.serialNumber // "-")/\(.status.serialNumberSource // "-")/\(.status.physicalSlot // "-")"'
}
# address -> "serialNumber/physicalSlot" of its device in the slice ("<none>" when an attribute is missing)
attrs() {
    kubectl get resourceslice "$SLICE" -o json | jq -r --arg d "$(dev_name "$1")" '.spec.devices[] |
        select(.name == $d) | "\(.attributes.serialNumber.string // "<none>")/\(.attributes.physicalSlot.string // "<none>")"'
}
template() {
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
          - cel:
              expression: |-
                device.attributes['$DRIVER'].serialNumber == '$DSN' &&
                device.attributes['resource.kubernetes.io'].pciBusID.endsWith('.0')
      - name: disk
        exactly:
          deviceClassName: $DRIVER
          selectors:
          - cel: {expression: "device.attributes['$DRIVER'].serialNumber == '$NVME'"}
EOF
}
pod() { # name
    kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default}
spec:
  automountServiceAccountToken: false
  tolerations: [{operator: Exists}]
  resourceClaims: [{name: devs, resourceClaimTemplateName: by-serial}]
  containers:
  - name: c
    image: busybox
    resources: {claims: [{name: devs}]}
EOF
}
claim_of() { kubectl get pod "$1" -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}' 2>/dev/null; }
allocated() { # pod -> "request=device ..." of its claim
    kubectl get resourceclaim "$(claim_of "$1")" -o json 2>/dev/null |
        jq -r '[.status.allocation.devices.results[]? | "\(.request)=\(.device)"] | sort | join(" ")'
}
is_allocated() { [ -n "$(allocated "$1")" ]; }
bound() { [ -n "$(kubectl get pod "$1" -o jsonpath='{.spec.nodeName}' 2>/dev/null)" ]; }

# check_node A0 A1 NVME_ADDR MAC_ADDR SETMAC_ADDR GPU_ADDR: the identities at those addresses
check_node() {
    local what=$7
    expect_contains "$what: the card's functions carry its DSN and slot 3" "$(ident "$1") $(ident "$2")" \
        "$DSN/DSN/3 $DSN/DSN/3"
    expect_contains "$what: the NVMe drive its serial (padding cut) and slot 5" "$(ident "$3")" "$NVME/NVMeSerial/5"
    expect_contains "$what: the e1000e its permanent MAC address, no slot" "$(ident "$4")" "$MAC/PermanentMAC/-"
    expect_contains "$what: an address set by hand is no identity; a GPU tells none" \
        "$(ident "$5") $(ident "$6")" "-/-/- -/-/-"
    expect_contains "$what: the slice's attributes, \"\" when unknown" \
        "$(attrs "$1") $(attrs "$4") $(attrs "$6")" "$DSN/3 $MAC/ /"
}

echo "--- the node as first seen"
expect_ok "fake sysfs tree built" hack/mk-sysfs-fixture.sh test/fixtures/sysfs/identity-node.txt "$SYS"
start_agent
if eventually 60 ready; then pass "agent ready"; else fail "agent ready" "$(tail -20 "$TEST_DIR/agent.log")"; finish; fi
in_slice() { [ -n "$(attrs 0000:62:00.0)" ]; }
eventually 30 in_slice || fail "the slice" "$(kubectl get resourceslices -o yaml | head -30)"
check_node 0000:3b:00.0 0000:3b:00.1 0000:5e:00.0 0000:60:00.0 0000:61:00.0 0000:62:00.0 "before"
template
pod vm1
if eventually 60 is_allocated vm1; then pass "the scheduler allocated vm1's claim"; else
    fail "vm1 allocated" "$(kubectl describe pod vm1 | tail -8)"; fi
expect_contains "the card's first function and the drive, selected by serialNumber" "$(allocated vm1)" \
    "disk=$(dev_name 0000:5e:00.0) nic=$(dev_name 0000:3b:00.0)"
bound vm1 && pass "vm1 bound to $NODE" || fail "vm1 bound" "$(kubectl get pod vm1 -o yaml | tail -20)"

echo "--- a card put in front: every address behind it moved"
stop_agent "agent stopped"
kubectl delete pod vm1 --grace-period=0 --force >/dev/null 2>&1
no_claims() { [ -z "$(kubectl get resourceclaims -o name 2>/dev/null)" ]; }
if eventually 60 no_claims; then pass "vm1's claim is gone with it"; else fail "claim gone" "$(kubectl get resourceclaims)"; fi
expect_ok "renumbered tree built" hack/mk-sysfs-fixture.sh test/fixtures/sysfs/identity-node-renumbered.txt "$SYS"
start_agent
moved() { [ "$(attrs 0000:3c:00.0)" = "$DSN/3" ] && [ -z "$(attrs 0000:5e:00.0)" ]; }
if eventually 60 moved; then pass "the slice has the devices at their new addresses"; else
    fail "slice moved" "$(kubectl get resourceslice "$SLICE" -o json | jq -c '[.spec.devices[].name]')"; fi
check_node 0000:3c:00.0 0000:3c:00.1 0000:5f:00.0 0000:61:00.0 0000:62:00.0 0000:63:00.0 "after"
expect_contains "the card in front has its own DSN and slot" "$(ident 0000:3b:00.0)" "3c-fd-fe-ff-ff-0a-99-99/DSN/2"
pod vm2
if eventually 60 is_allocated vm2; then pass "the scheduler allocated vm2's claim"; else
    fail "vm2 allocated" "$(kubectl describe pod vm2 | tail -8)"; fi
expect_contains "the same card and drive at their new addresses, not what took the old ones" "$(allocated vm2)" \
    "disk=$(dev_name 0000:5f:00.0) nic=$(dev_name 0000:3c:00.0)"
kubectl delete pod vm2 --grace-period=0 --force >/dev/null 2>&1
stop_agent "agent stopped cleanly (no leaks under ASan)"
finish
