#!/usr/bin/env bash
# test/integration/test_dra.sh - the agent's DRA ResourceSlices (docs/dra.md): `hostdevd agent`
# (sanitizer build) on a fake sysfs tree (test/fixtures/sysfs/small-server.txt, one device's
# NUMA node unknown) against the real control plane, with the token of its ServiceAccount bound
# to its Node, the manifests' RBAC and admission policies: the pool's one slice holds every
# device without a passthrough blocker, with the standard and our attributes; a PCIDeviceClaim
# takes its device out of the pool (one more generation) and deleting it brings the device back
# (one more); a restart with nothing changed writes nothing (audit log); the DeviceClasses are
# accepted (their CEL compiles) and a ResourceClaim naming one is created (no scheduler runs
# here, so nothing allocates it); deleting the Node makes the garbage collector remove the slice.
SUITE=dra
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

AGENT=$TEST_BIN/hostdevd
NODE=fix-node
NS=hostdevd-system
DRIVER=vfio-pci.hostdevd.io
SLICE=$NODE-vfio-pci-0
NUMA_UNKNOWN=0000:d8:00.1 # its numa_node says -1 in this test's tree
CLAIMED=0000:d9:00.0      # unbound: its claim is released at once without vfio-pci (no kernel here)
GPU=0000:18:00.0
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

cluster_start
install_crds
create_node "$NODE"
create_node other-node
NODE_UID=$(kubectl get node "$NODE" -o jsonpath='{.metadata.uid}')
expect_ok "the agent's RBAC, its admission policies and the DeviceClasses are applied" \
    kubectl apply -f manifests/agent-rbac.yaml -f manifests/policies-agent.yaml -f manifests/deviceclasses.yaml

# The agent as in its Pod: the ServiceAccount's token, bound (here to the Node), naming the node.
TOKEN=$(kubectl create token hostdevd-agent -n $NS --bound-object-kind Node --bound-object-name "$NODE" --duration 2h)
KCFG=$TEST_DIR/agent.kubeconfig
(
    umask 077
    printf 'apiVersion: v1\nkind: Config\nclusters:\n- {name: c, cluster: {server: "%s", certificate-authority: "%s"}}\nusers:\n- {name: a, user: {token: "%s"}}\ncontexts:\n- {name: c, context: {cluster: c, user: a}}\ncurrent-context: c\n' \
        "$K8S_SERVER" "$K8S_CA" "$TOKEN" >"$KCFG"
)
slice_json() { # name node pool driver
    jq -cn --arg n "$1" --arg node "$2" --arg p "$3" --arg d "$4" \
        '{apiVersion: "resource.k8s.io/v1", kind: "ResourceSlice", metadata: {name: $n},
          spec: {driver: $d, nodeName: $node, pool: {name: $p, generation: 1, resourceSliceCount: 1}}}'
}
as_agent() { kubectl --kubeconfig "$KCFG" "$@"; }
foreign_refused() {
    ! OUT=$(as_agent create --dry-run=server -f - <<<"$(slice_json other-node-vfio-pci-0 other-node other-node $DRIVER)" 2>&1) &&
        [[ "$OUT" == *hostdevd-agent-resourceslices* ]]
}
if eventually 60 foreign_refused; then pass "the policy hostdevd-agent-resourceslices is in effect"; else fail "the policy is in effect" "$OUT"; fi

SYS=$TEST_DIR/sys
sed "/^$NUMA_UNKNOWN[[:space:]]/s/numa=[0-9]*/numa=-1/" test/fixtures/sysfs/small-server.txt >"$TEST_DIR/desc.txt"
expect_ok "fake sysfs tree built" hack/mk-sysfs-fixture.sh "$TEST_DIR/desc.txt" "$SYS"
mkdir -p "$TEST_DIR/proc/1" "$TEST_DIR/proc/net" "$TEST_DIR/dev"
fake_proc "$TEST_DIR/proc"
PORT=$(free_port)
start_agent() {
    agent_run --kubeconfig "$KCFG" --proc-root "$TEST_DIR/proc" --dev-root "$TEST_DIR/dev" \
        --resync 3600 --uevent-source none -v 2
}
ready() { curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null; }
writes() { hack/audit-requests.py "$TEST_DIR/cluster/audit.log" ${1:+--resource "$1"} | cut -d" " -f2; }
slice() { kubectl get resourceslice "$SLICE" -o json 2>/dev/null; }
generation() { slice | jq -r '.spec.pool.generation'; }
devices() { slice | jq -r '[.spec.devices[]?.name] | sort | join(" ")'; }
dev_name() { local a=${1//:/-}; echo "pci-${a//./-}"; }
attrs() { slice | jq -c --arg d "$(dev_name "$1")" '.spec.devices[] | select(.name == $d) | .attributes | with_entries(.value |= (.string // .int))'; }

echo "--- the pool"
start_agent
if eventually 60 ready; then pass "agent ready"; else fail "agent ready" "$(tail -20 "$TEST_DIR/agent.log")"; fi
if eventually 20 slice >/dev/null; then pass "ResourceSlice $SLICE published"; else fail "ResourceSlice $SLICE published"; fi
[ "$(kubectl get resourceslices -o name | wc -l)" -eq 1 ] && pass "one slice for the pool" ||
    fail "one slice for the pool" "$(kubectl get resourceslices 2>&1)"
OUT=$(slice | jq -c '{d: .spec.driver, n: .spec.nodeName, p: .spec.pool, o: .metadata.ownerReferences}')
expect_contains "driver, node, pool (generation 1, one slice) and owner Node" "$OUT" \
    "\"d\":\"$DRIVER\"" "\"n\":\"$NODE\"" '"p":{"generation":1,"name":"'"$NODE"'","resourceSliceCount":1}' \
    "\"kind\":\"Node\",\"name\":\"$NODE\",\"uid\":\"$NODE_UID\""
# The devices: every PCIDevice of the node without a passthrough blocker, but the platform's
# bridges and SMBus controller (classes 0600, 0601, 0604, 0c05: never offered to DRA).
WANT=$(kubectl get pcidevices -l "nodename=$NODE" -o json |
    jq -r '[.items[] | select((.status.passthroughBlockers // []) | length == 0)
            | select(.status.classId[0:4] | IN("0600", "0601", "0604", "0c05") | not) | .status.address
            | "pci-" + gsub("[:.]"; "-")] | sort | join(" ")')
HAVE=$(devices)
N=$(wc -w <<<"$HAVE")
[ "$HAVE" = "$WANT" ] && [ "$N" -gt 20 ] && pass "the $N devices without a passthrough blocker (the host bridge left out), by DNS-label name" ||
    fail "the devices without a passthrough blocker" "want: $WANT"$'\n'"have: $HAVE"
[[ " $HAVE " != *" $(dev_name 0000:00:1f.4) "* ]] && pass "a blocked device (SMBus, IOMMU group shared) is left out" ||
    fail "a blocked device is left out" "$HAVE"
OUT=$(attrs $GPU)
DESC=$(kubectl get pcidevice "$NODE-${GPU//[:.]/}" -o jsonpath='{.status.description}')
expect_contains "the GPU's attributes: standard pciBusID, pcieRoot, numaNode; ids, class, group, driver" "$OUT" \
    "\"resource.kubernetes.io/pciBusID\":\"$GPU\"" '"resource.kubernetes.io/pcieRoot":"pci0000:18"' \
    '"resource.kubernetes.io/numaNode":0' '"vendorID":"10de"' '"deviceID":"2204"' '"classID":"0300"' \
    '"iommuGroup":21' '"driver":"vfio-pci"' "\"description\":\"${DESC:0:64}\""
[ "${#DESC}" -gt 64 ] && pass "(its description is cut to the API's 64 bytes)" || fail "a description longer than 64 bytes" "$DESC"
OUT=$(attrs $NUMA_UNKNOWN)
[[ "$OUT" == *pciBusID* && "$OUT" != *numaNode* ]] && pass "a device whose NUMA node is -1 has no numaNode attribute" ||
    fail "no numaNode when sysfs says -1" "$OUT"

echo "--- a claimed device leaves the pool, and comes back when the claim goes"
G0=$(generation)
printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: %s}\nspec: {address: "%s", nodeName: %s, userName: alice}\n' \
    "$NODE-${CLAIMED//[:.]/}" "$CLAIMED" "$NODE" | kubectl create -f - >/dev/null
left() { [[ " $(devices) " != *" $(dev_name $CLAIMED) "* ]]; }
if eventually 20 left; then pass "claimed $CLAIMED left the pool"; else fail "claimed $CLAIMED left the pool" "$(devices)"; fi
[ "$(generation)" -eq $((G0 + 1)) ] && [ "$(wc -w <<<"$(devices)")" -eq $((N - 1)) ] &&
    pass "generation $G0 -> $((G0 + 1)), $((N - 1)) devices" || fail "generation grew by one" "$(generation), $(devices)"
kubectl delete pcideviceclaim "$NODE-${CLAIMED//[:.]/}" --wait=false >/dev/null
back() { [[ " $(devices) " == *" $(dev_name $CLAIMED) "* ]]; }
if eventually 30 back; then pass "claim deleted: $CLAIMED is back"; else fail "claim deleted: $CLAIMED is back" "$(kubectl get pcideviceclaims 2>&1)"; fi
[ "$(generation)" -eq $((G0 + 2)) ] && [ "$(devices)" = "$HAVE" ] && pass "generation $((G0 + 2)), the same $N devices" ||
    fail "generation grew by one again" "$(generation), $(devices)"

echo "--- restart with nothing changed"
sleep 2
stop_agent "agent stopped cleanly (SIGTERM; no leaks under ASan)"
before=$(writes)
start_agent
if eventually 60 ready; then pass "agent ready again"; else fail "agent ready again" "$(tail -20 "$TEST_DIR/agent.log")"; fi
sleep 3
after=$(writes)
[ "$after" -eq "$before" ] && [ "$(generation)" -eq $((G0 + 2)) ] &&
    pass "zero write requests after a restart (audit log), generation unchanged" ||
    fail "zero writes after a restart" "$((after - before)) writes; $(grep -E 'ResourceSlice' "$TEST_DIR/agent.log" | tail -3)"
[ "$(writes resourceslices)" -eq 3 ] && pass "three ResourceSlice writes in all (create, claim, release)" ||
    fail "three ResourceSlice writes in all" "$(writes resourceslices)"

echo "--- the admission policy (dry runs, as the agent)"
reject() { expect_reject "$@"; }
reject "the agent cannot write another node's slice" "may only write ResourceSlices named \"$NODE-vfio-pci-<index>\"" \
    as_agent create --dry-run=server -f - <<<"$(slice_json other-node-vfio-pci-0 other-node other-node $DRIVER)"
reject "... nor one named for itself with another node" "may only write ResourceSlices with spec.nodeName $NODE" \
    as_agent create --dry-run=server -f - <<<"$(slice_json $NODE-vfio-pci-7 other-node $NODE $DRIVER)"
reject "... nor another driver's" "spec.driver $DRIVER" \
    as_agent create --dry-run=server -f - <<<"$(slice_json $NODE-vfio-pci-7 $NODE $NODE gpu.example.com)"
reject "... nor another pool" "spec.pool.name $NODE" \
    as_agent create --dry-run=server -f - <<<"$(slice_json $NODE-vfio-pci-7 $NODE other-node $DRIVER)"
expect_ok "it may create a slice of its own" \
    as_agent create --dry-run=server -f - <<<"$(slice_json $NODE-vfio-pci-7 $NODE $NODE $DRIVER)"
expect_ok "the admin's slice of another node exists" kubectl create -f - <<<"$(slice_json other-node-vfio-pci-0 other-node other-node $DRIVER)"
reject "the agent cannot delete another node's slice" "may only write ResourceSlices named" \
    as_agent delete resourceslice other-node-vfio-pci-0 --dry-run=server

echo "--- DeviceClasses and a ResourceClaim"
OUT=$(kubectl get deviceclasses -o name 2>&1)
expect_contains "four DeviceClasses (their CEL compiled)" "$OUT" "deviceclass.resource.k8s.io/$DRIVER" \
    "deviceclass.resource.k8s.io/nic.$DRIVER" "deviceclass.resource.k8s.io/gpu.$DRIVER" \
    "deviceclass.resource.k8s.io/mdev.$DRIVER"
expect_reject "a selector that does not compile is refused (the API server checks CEL)" "compilation failed" \
    kubectl create --dry-run=server -f - <<<'{"apiVersion":"resource.k8s.io/v1","kind":"DeviceClass","metadata":{"name":"bad"},"spec":{"selectors":[{"cel":{"expression":"device.attributes[\"vfio-pci.hostdevd.io\"].classID.startsWith(2)"}}]}}'
CLAIM='{"apiVersion":"resource.k8s.io/v1","kind":"ResourceClaim","metadata":{"name":"one-nvidia-gpu","namespace":"default"},
"spec":{"devices":{"requests":[{"name":"gpu","exactly":{"deviceClassName":"gpu.vfio-pci.hostdevd.io",
"selectors":[{"cel":{"expression":"device.attributes[\"vfio-pci.hostdevd.io\"].vendorID == \"10de\""}}]}}]}}}'
expect_ok "a ResourceClaim for one NVIDIA GPU of class gpu.$DRIVER is created" kubectl create -f - <<<"$CLAIM"
OUT=$(kubectl get resourceclaim one-nvidia-gpu -o jsonpath='{.status.allocation}')
[ -z "$OUT" ] && pass "(not allocated: no scheduler runs here)" || fail "unallocated" "$OUT"

echo "--- the Node is deleted: the garbage collector removes its slice"
stop_agent "agent stopped"
expect_ok "Node deleted" kubectl delete node "$NODE" --wait=false
gone() { ! slice >/dev/null; }
if eventually 90 gone; then pass "the deleted Node's ResourceSlice is gone"; else fail "the deleted Node's ResourceSlice is gone"; fi

finish
