#!/usr/bin/env bash
# test/long/test_drapartition.sh - partitionable devices (KEP-4815, feature gate
# DRAPartitionableDevices, beta and on by default in 1.36 and 1.37) as the real kube-apiserver
# and kube-scheduler allocate them: an mdev parent's creatable capacity modelled as hostdevd
# would publish it (docs/dra.md, "Creatable capacity"). No agent: the test publishes the pool as
# admin. The kernel's mtty sample: 24 ports shared by type mtty-1 (1 port per instance) and
# mtty-2 (2 ports); one counter set "mtty" {ports: 24} in a slice of its own, 24 mtty-1 and 12
# mtty-2 devices consuming 1 and 2, and the parent whole consuming all 24 (the one-path rule).
# Checks: the API server keeps sharedCounters and consumesCounters and refuses what 1.37 limits
# (counters and devices in one slice, more than 64 devices consuming counters in a slice, more
# than 2 counter sets per device, more than 32 counters per set or 8 sets per slice); the scheduler allocates the whole
# parent and then no instance, 12 mtty-2 and then neither a 13th nor an mtty-1, frees on delete,
# mixes types to exactly 24 ports, frees the counters of an allocated device the next generation
# leaves out (what an agent must not do), and takes nothing from a pool whose device names a
# counter set that does not exist.
# shellcheck disable=SC2034 # lib.sh reads it
SUITE=long-drapartition
# shellcheck source=test/integration/lib.sh disable=SC1091
. "$(dirname "$0")/../integration/lib.sh"
cd "$ROOT" || exit 1

NODE=mdev-node
DRIVER=vfio-pci.hostdevd.io
CLASS=creatable.test.hostdevd.io
PORTS=24

cluster_start --with-scheduler
create_node "$NODE"
# the scheduler binds a pod to a node only when it has room for one
kubectl patch node "$NODE" --subresource=status --type=merge -p \
    '{"status":{"capacity":{"pods":"50","cpu":"4","memory":"8Gi"},"allocatable":{"pods":"50","cpu":"4","memory":"8Gi"}}}' >/dev/null

# slice NAME POOL COUNT SPEC-JSON: a ResourceSlice of this node's pool POOL (COUNT slices)
slice() {
    jq -cn --arg n "$1" --arg node "$NODE" --arg p "$2" --argjson c "$3" --arg d "$DRIVER" --argjson s "$4" \
        '{apiVersion: "resource.k8s.io/v1", kind: "ResourceSlice", metadata: {name: $n},
          spec: ({driver: $d, nodeName: $node, pool: {name: $p, generation: 1, resourceSliceCount: $c}} + $s)}'
}
# shellcheck disable=SC2016 # jq's variables
# dev(NAME; TYPE; COST; SET): an mdev type's creatable instance drawing COST ports from SET
DEV='def dev($n; $t; $c; $s): {name: $n, attributes: {mdevType: {string: $t}, mdevParent: {string: "mtty"}},
    consumesCounters: [{counterSet: $s, counters: {ports: {value: $c}}}]};'
devices() { # the pool's devices: the parent whole, 24 mtty-1, 12 mtty-2
    jq -cn --arg p "$PORTS" "$DEV"'{devices: (
        [{name: "mtty-whole", attributes: {wholeParent: {bool: true}, mdevParent: {string: "mtty"}},
          consumesCounters: [{counterSet: "mtty", counters: {ports: {value: $p}}}]}]
        + [range(24) as $k | dev("mtty-1-\($k)"; "mtty-1"; "1"; "mtty")]
        + [range(12) as $k | dev("mtty-2-\($k)"; "mtty-2"; "2"; "mtty")])}'
}
COUNTERS=$(slice "$NODE-vfio-pci-0" "$NODE" 2 "{\"sharedCounters\":[{\"name\":\"mtty\",\"counters\":{\"ports\":{\"value\":\"$PORTS\"}}}]}")
DEVICES=$(slice "$NODE-vfio-pci-1" "$NODE" 2 "$(devices)")

echo "--- the API server: counters kept, 1.37's limits"
expect_ok "a counter slice {mtty: {ports: $PORTS}} and a slice of 37 devices consuming it are created" \
    kubectl create -f - <<<"$COUNTERS"$'\n'"$DEVICES"
OUT=$(kubectl get resourceslices -o json | jq -c '[.items[] | {s: .spec.sharedCounters, c: [.spec.devices[]?.consumesCounters[0].counters.ports.value] | group_by(.) | map("\(.[0])x\(length)")}]')
expect_contains "the fields are kept (DRAPartitionableDevices is on), 24 devices of cost 1, 12 of 2, one of 24" "$OUT" \
    "{\"s\":[{\"counters\":{\"ports\":{\"value\":\"$PORTS\"}},\"name\":\"mtty\"}],\"c\":[]}" '"c":["1x24","2x12","24x1"]'
dry() { kubectl create --dry-run=server -f - <<<"$1"; }
many() { # N [CONSUMPTIONS]: a slice of N devices each drawing from CONSUMPTIONS sets (1)
    jq -cn --argjson n "$1" --argjson k "${2:-1}" '{devices: [range($n) as $i | {name: "d\($i)",
        consumesCounters: [range($k) as $j | {counterSet: "s\($j)", counters: {ports: {value: "1"}}}]}]}'
}
expect_reject "counters and devices in one slice are refused" "only one of \`sharedCounters\` or \`devices\` is allowed" \
    dry "$(slice x x 1 '{"sharedCounters":[{"name":"mtty","counters":{"ports":{"value":"24"}}}],"devices":[{"name":"a"}]}')"
expect_reject "65 devices consuming counters in one slice are refused" "must have at most 64 items" dry "$(slice x x 1 "$(many 65)")"
expect_ok "(64 are accepted)" dry "$(slice x x 1 "$(many 64)")"
expect_reject "a device drawing from 3 counter sets is refused" "must have at most 2 items" dry "$(slice x x 1 "$(many 1 3)")"
expect_reject "33 counters in one set are refused" "must have at most 32 items" \
    dry "$(slice x x 1 "$(jq -cn '{sharedCounters: [{name: "s", counters: ([range(33) as $i | {key: "c\($i)", value: {value: "1"}}] | from_entries)}]}')")"
expect_reject "9 counter sets in one slice are refused" "must have at most 8 items" \
    dry "$(slice x x 1 "$(jq -cn '{sharedCounters: [range(9) as $i | {name: "s\($i)", counters: {ports: {value: "1"}}}]}')")"

echo "--- the scheduler allocates to capacity and no further"
expect_ok "DeviceClass $CLASS (every device of the driver) is created" kubectl create -f - <<EOF
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: $CLASS}
spec:
  selectors:
  - cel: {expression: "device.driver == '$DRIVER'"}
EOF
# pod NAME REQUEST...: a Pod with one claim (from its own template) of REQUESTs, each TYPE:COUNT
# (a type's instances) or whole (the parent itself)
pod() {
    local name=$1 r i=0 reqs=()
    shift
    for r in "$@"; do
        i=$((i + 1))
        if [ "$r" = whole ]; then
            reqs+=("$(jq -cn --arg c "$CLASS" --arg n "r$i" '{name: $n, exactly: {deviceClassName: $c,
                selectors: [{cel: {expression: "device.attributes[\"'"$DRIVER"'\"].?wholeParent.orValue(false)"}}]}}')")
        else
            reqs+=("$(jq -cn --arg c "$CLASS" --arg n "r$i" --arg t "${r%:*}" --argjson k "${r#*:}" '{name: $n,
                exactly: {deviceClassName: $c, allocationMode: "ExactCount", count: $k,
                selectors: [{cel: {expression: "device.attributes[\"'"$DRIVER"'\"].?mdevType.orValue(\"\") == \"\($t)\""}}]}}')")
        fi
    done
    jq -cn --arg n "$name" --argjson r "$(printf '%s\n' "${reqs[@]}" | jq -cs .)" '
        {apiVersion: "v1", kind: "List", items: [
         {apiVersion: "resource.k8s.io/v1", kind: "ResourceClaimTemplate", metadata: {name: $n, namespace: "default"},
          spec: {spec: {devices: {requests: $r}}}},
         {apiVersion: "v1", kind: "Pod", metadata: {name: $n, namespace: "default"},
          spec: {automountServiceAccountToken: false, tolerations: [{operator: "Exists"}],
                 resourceClaims: [{name: "m", resourceClaimTemplateName: $n}],
                 containers: [{name: "c", image: "busybox", resources: {claims: [{name: "m"}]}}]}}]}' |
        kubectl create -f - >/dev/null
}
claim_of() { kubectl get pod "$1" -o jsonpath='{.status.resourceClaimStatuses[0].resourceClaimName}' 2>/dev/null; }
allocated() { # pod -> its claim's devices, sorted
    local c
    c=$(claim_of "$1") && [ -n "$c" ] || return 0
    kubectl get resourceclaim "$c" -o json 2>/dev/null | jq -r '[.status.allocation.devices.results[]?.device] | sort_by(split("-") | (.[0:-1] | join("-")), (.[-1] | tonumber? // 0)) | join(" ")'
}
is_allocated() { [ -n "$(allocated "$1")" ] && [ -n "$(kubectl get pod "$1" -o jsonpath='{.spec.nodeName}')" ]; }
# refused POD [WHY]: the scheduler said so: PodScheduled False, Unschedulable, WHY (the claims
# cannot be allocated) in its message; and the pod's claim has no allocation
refused() {
    kubectl get pod "$1" -o json | jq -e --arg why "${2:-cannot allocate all claims}" '.status.conditions[]? |
        select(.type == "PodScheduled" and .status == "False" and .reason == "Unschedulable" and (.message | contains($why)))' >/dev/null &&
        [ -z "$(allocated "$1")" ]
}
ports_used() { # the ports of every allocated device of the pool (the cost each consumes)
    kubectl get resourceclaims -o json | jq -r --argjson d "$DEVICES" '
        ($d.spec.devices | map({(.name): (.consumesCounters[0].counters.ports.value | tonumber)}) | add) as $cost |
        [.items[].status.allocation.devices.results[]? | $cost[.device]] | add // 0'
}
expect_allocated() { # description pod [expected devices]
    if eventually 30 is_allocated "$2"; then
        if [ -z "${3:-}" ] || [ "$(allocated "$2")" = "$3" ]; then pass "$1"; else
            fail "$1" "want: $3"$'\n'"have: $(allocated "$2")"; fi
    else fail "$1" "$(kubectl get pod "$2" -o jsonpath='{.status.conditions}')"; fi
}
expect_refused() { # description pod [why]
    if eventually 30 refused "$2" "${3:-}"; then pass "$1"; else
        fail "$1" "allocated: $(allocated "$2"); $(kubectl get pod "$2" -o jsonpath='{.status.conditions}')"; fi
}
gone() { ! kubectl get pod "$1" >/dev/null 2>&1 && ! kubectl get resourceclaims -o name | grep -q "/$1-"; }
delete_pod() {
    kubectl delete pod "$1" --grace-period=0 --force >/dev/null 2>&1
    if eventually 30 gone "$1"; then pass "pod $1 and its claim deleted"; else fail "pod $1 deleted" "$(kubectl get pods,resourceclaims)"; fi
}
seq_devs() { local k out=(); for k in $(seq "$2" "$3"); do out+=("$1-$k"); done; echo "${out[*]}"; }

pod whole whole
expect_allocated "the parent whole is allocated (all $PORTS ports)" whole mtty-whole
pod p12 mtty-2:12
expect_refused "no instance while the whole parent is allocated (12 x mtty-2: cannot allocate all claims)" p12
delete_pod whole
expect_allocated "the whole parent's pod gone: 12 x mtty-2 allocated" p12 "$(seq_devs mtty-2 0 11)"
pod p13 mtty-2:1
expect_refused "a 13th mtty-2 is refused (the 12 devices of the type are taken; 24 of 24 ports used)" p13
pod p1 mtty-1:1
expect_refused "an mtty-1 too, with all 24 mtty-1 devices unallocated: the ports are shared" p1
pod whole2 whole
expect_refused "and the whole parent" whole2
if [ "$(ports_used)" -eq $PORTS ]; then pass "$PORTS ports allocated in all"; else fail "$PORTS ports allocated" "$(ports_used)"; fi
delete_pod whole2
delete_pod p12
expect_allocated "12 mtty-2 freed: the waiting mtty-2 is allocated" p13 mtty-2-0
expect_allocated "... and the waiting mtty-1" p1 mtty-1-0
pod ptoo mtty-2:11 mtty-1:1
expect_refused "one claim of 11 x mtty-2 + 1 x mtty-1 (23 ports, 3 used) is refused" ptoo
pod pmix mtty-2:10 mtty-1:1
expect_allocated "one of 10 x mtty-2 + 1 x mtty-1 (21 ports, 3 used) is allocated" pmix \
    "mtty-1-1 $(seq_devs mtty-2 1 10)"
if [ "$(ports_used)" -eq $PORTS ]; then pass "types mixed to exactly $PORTS ports"; else fail "$PORTS ports in all" "$(ports_used)"; fi
pod pover mtty-1:1
expect_refused "one more mtty-1 is refused" pover

echo "--- an allocated device left out of the pool's next generation no longer counts"
# what an agent must not do: its counters go back to the pool while its claim still holds it
GONE=$(allocated pmix)
NEXT=$(jq -c --arg gone "$GONE" '.spec.pool.generation = 2 | .spec.devices |= map(select(.name as $n | ($gone | split(" ")) | index($n) | not))' <<<"$DEVICES")
expect_ok "generation 2 without pmix's 11 devices (the counter slice too, unchanged)" \
    kubectl replace -f - <<<"$(jq -c '.spec.pool.generation = 2' <<<"$COUNTERS")"$'\n'"$NEXT"
expect_allocated "the waiting mtty-1 is allocated: the ports of pmix's devices are free again" pover mtty-1-2

echo "--- a device naming a counter set that is not there: the whole pool is taken out"
BAD=$(slice bad-pool-0 bad-pool 1 "$(jq -cn "$DEV"'{devices: [{name: "plain", attributes: {plain: {bool: true}}},
    dev("bad-1"; "mtty-1"; "1"; "nope")]}')")
expect_ok "the API server accepts it (it does not look across slices)" kubectl create -f - <<<"$BAD"
jq -cn --arg c "$CLASS" '{apiVersion: "v1", kind: "List", items: [
    {apiVersion: "resource.k8s.io/v1", kind: "ResourceClaimTemplate", metadata: {name: "plain", namespace: "default"},
     spec: {spec: {devices: {requests: [{name: "r1", exactly: {deviceClassName: $c,
       selectors: [{cel: {expression: "device.attributes[\"vfio-pci.hostdevd.io\"].?plain.orValue(false)"}}]}}]}}}},
    {apiVersion: "v1", kind: "Pod", metadata: {name: "plain", namespace: "default"},
     spec: {automountServiceAccountToken: false, tolerations: [{operator: "Exists"}],
            resourceClaims: [{name: "m", resourceClaimTemplateName: "plain"}],
            containers: [{name: "c", image: "busybox", resources: {claims: [{name: "m"}]}}]}}]}' |
    kubectl create -f - >/dev/null
expect_refused "its device without counters is not allocated either: \"invalid resource pools were encountered\"" plain \
    "invalid resource pools were encountered"
finish
