#!/usr/bin/env bash
# hack/bench/ctlmem.sh - the controller's memory against the cluster's size, before and after
# issue 47 (the controller caches only the claimed devices), in one run against one real
# kube-apiserver: one cluster grown from 100 to 500 to 1,000 nodes of 64 PCIDevices, 100 bound
# PCIDeviceClaims throughout, both controllers watching it at once (each leads in its own Lease
# namespace; both keep the same KubeVirt CR, which stays exact). At each size, once both have
# taken everything in (their CPU time still for 3 s), their VmRSS and VmHWM. Then, at the
# largest size, the claims grown to BENCH_CTLMEM_MORE_CLAIMS (what one more claim costs), and
# both controllers restarted (a first LIST of every device: the peak of a start on a big cluster).
#   after:  bin/hostdevd (this tree)
#   before: bin/hostdevd built from BENCH_CTLMEM_BEFORE (default ecc7772, main before issue 47,
#           whose controller caches every PCIDevice whole), in $T
# No agents: hack/bench/ctlmem-objects.py writes what the agents would have written (a Node, its
# heartbeat Lease, 64 PCIDevices from `hostdevd inventory -o json` of
# test/fixtures/sysfs/node-64.txt renamed to the node, each created then given its status), as
# admin, no admission policy installed; the claims' status is the agent's for a bound device
# (passthroughEnabled, Ready=True), also written as admin.
#   BENCH_CTLMEM_NODES   sizes (default "100 500 1000"; quick "10 50 100")
#   BENCH_CTLMEM_CLAIMS  claims (default 100, one per node of the first size; quick 10)
#   BENCH_CTLMEM_AFTER_BIN  the after binary (default bin/hostdevd; a check's mutant, say)
#   BENCH_CTLMEM_MORE_CLAIMS  claims at the end (default 1000, one per node of the largest size;
#                        quick 100)
# Needs: make k8s (the control plane) and what `make` needs to build the before binary.
set -euo pipefail
# shellcheck source=hack/bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$BENCH_ROOT"
T=$(mktemp -d "${BENCH_TMP:-${TMPDIR:-/tmp}}/bench-ctlmem.XXXXXX")
PIDS=()
cleanup() {
    [ ${#PIDS[@]} -eq 0 ] || kill -TERM "${PIDS[@]}" 2>/dev/null || true
    bench_plane_down "$T/cluster" >/dev/null 2>&1 || true
    [ -n "${BENCH_CTLMEM_KEEP:-}" ] || rm -rf "$T"
}
trap cleanup EXIT
S="Controller memory"
SIZES=${BENCH_CTLMEM_NODES:-100 500 1000}
CLAIMS=${BENCH_CTLMEM_CLAIMS:-100}
MORE=${BENCH_CTLMEM_MORE_CLAIMS:-1000}
if [ "$BENCH_QUICK" = 1 ]; then
    SIZES=${BENCH_CTLMEM_NODES:-10 50 100}
    CLAIMS=${BENCH_CTLMEM_CLAIMS:-10}
    MORE=${BENCH_CTLMEM_MORE_CLAIMS:-100}
fi
BEFORE=${BENCH_CTLMEM_BEFORE:-ecc7772}
read -r FIRST _ <<<"$SIZES"
[ "$CLAIMS" -le "$FIRST" ] || {
    echo "ctlmem: $CLAIMS claims need at least as many nodes in the first size ($FIRST)" >&2
    exit 1
}
OBJ=hack/bench/ctlmem-objects.py

echo "=== $S: building the controller of $BEFORE (before)"
mkdir -p "$T/before"
git archive "$BEFORE" | tar -x -C "$T/before"
make -C "$T/before" -j"$(nproc)" bin/hostdevd >"$T/before-build.log" 2>&1 || {
    tail -20 "$T/before-build.log" >&2
    exit 1
}

echo "=== $S: control plane, KubeVirt's CRD and CR, the 64-device template"
bench_plane "$T/cluster"
bench_kubevirt
for ns in ctl-before ctl-after; do kubectl create namespace "$ns" >/dev/null; done
hack/mk-sysfs-fixture.sh test/fixtures/sysfs/node-64.txt "$T/sys" >/dev/null
bench_fake_proc "$T/proc"
bin/hostdevd inventory --sysfs-root "$T/sys" --proc-root "$T/proc" --node-name node-0000 -o json >"$T/inv.json"

declare -A PID
start_controller() { # NAME BINARY
    local port
    port=$(bench_free_port)
    "$2" controller --kubeconfig "$ADMIN" --listen "127.0.0.1:$port" --namespace "ctl-$1" --id "$1" \
        >"$T/controller-$1.log" 2>&1 &
    PID[$1]=$!
    PIDS+=("$!")
    for _ in $(seq 1 300); do
        curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    echo "ctlmem: the $1 controller is not ready; its log:" >&2
    tail -20 "$T/controller-$1.log" >&2
    return 1
}
start_controller before "$T/before/bin/hostdevd"
start_controller after "${BENCH_CTLMEM_AFTER_BIN:-bin/hostdevd}"

# Both controllers have taken in what was written: their CPU time unchanged over 3 s in a row.
settled() {
    local last="" now still=0
    for _ in $(seq 1 900); do
        now="$(bench_cpu_s "${PID[before]}") $(bench_cpu_s "${PID[after]}")"
        if [ "$now" = "$last" ]; then
            still=$((still + 1))
            [ "$still" -lt 3 ] || return 0
        else
            still=0
        fi
        last=$now
        sleep 1
    done
    echo "ctlmem: the controllers did not settle in 900 s" >&2
    return 1
}

# The claims: one per node of the first size, on devices a VM would take (NICs, GPUs, VFs).
CLAIMABLE=(0000:04:00.0 0000:18:00.0 0000:3b:00.4 0000:af:00.0 0000:04:00.1 0000:3b:00.5)
declare -A DRIVER # address -> the driver the agent found on it (the claim's kernelDriverToUnbind)
while read -r a d; do DRIVER[$a]=$d; done < <(python3 -c '
import json, sys
for i in json.load(open(sys.argv[1]))["items"]:
    print(i["status"]["address"], i["status"].get("kernelDriverInUse", "-"))' "$T/inv.json")
claim_specs() { # FIRST LAST: the claims on nodes FIRST..LAST
    local k a node name
    for k in $(seq "$1" "$2"); do
        a=${CLAIMABLE[$((k % ${#CLAIMABLE[@]}))]}
        node=$(printf 'node-%04d' "$k")
        name=${a//:/}
        name=$node-${name//./}
        printf '%s,%s,%s,%s\n' "$node" "$name" "$a" "${DRIVER[$a]}"
    done
}
# The resource names the claims need, and those the KubeVirt CR lists.
want_entries() {
    python3 -c '
import json, sys
addrs = set(sys.argv[2:])
print("\n".join(sorted({i["status"]["resourceName"] for i in json.load(open(sys.argv[1]))["items"] if i["status"]["address"] in addrs})))' \
        "$T/inv.json" "${CLAIMABLE[@]}"
}
cr_entries() {
    kubectl get kubevirt -n kubevirt kubevirt -o json |
        python3 -c 'import json,sys; print("\n".join(sorted(e["resourceName"] for e in json.load(sys.stdin)["spec"]["configuration"].get("permittedHostDevices", {}).get("pciHostDevices", []))))'
}

want=$(want_entries)
cr_right() {
    for _ in $(seq 1 60); do
        [ "$(cr_entries)" = "$want" ] && return 0
        sleep 1
    done
    echo "ctlmem: the KubeVirt CR lists $(cr_entries | tr '\n' ' '), the claims need $(echo "$want" | tr '\n' ' ')" >&2
    return 1
}

mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }
hwm_kib() { awk '/^VmHWM/ {print $2}' "/proc/$1/status"; }

prev=0
declare -A RSS RSS_BEFORE
for n in $SIZES; do
    echo "=== $S: nodes $((prev + 1))-$n (64 PCIDevices each), written as their agents would"
    t0=$SECONDS
    python3 "$OBJ" nodes "$T/inv.json" $((prev + 1)) "$n"
    echo "  written in $((SECONDS - t0)) s"
    if [ "$prev" = 0 ]; then
        echo "=== $S: $CLAIMS bound PCIDeviceClaims"
        mapfile -t specs < <(claim_specs 1 "$CLAIMS")
        python3 "$OBJ" claims "${specs[@]}"
    fi
    prev=$n
    settled
    cr_right
    devices=$(kubectl get --raw "/apis/devices.harvesterhci.io/v1beta1/pcidevices?limit=1" |
        python3 -c 'import json,sys; m=json.load(sys.stdin)["metadata"]; print(1 + m.get("remainingItemCount", 0))')
    ra=$(bench_rss_kib "${PID[after]}")
    rb=$(bench_rss_kib "${PID[before]}")
    RSS[$n]=$ra
    RSS_BEFORE[$n]=$rb
    L="$n nodes ($devices PCIDevices, $CLAIMS claims)"
    bench_record section="$S" name="$L: controller RSS" value="$(mib "$ra")" unit=MiB \
        ref="$(mib "$rb")" ref_name="before: every PCIDevice cached whole" \
        how="VmRSS once both controllers' CPU time stood still for 3 s and the KubeVirt CR listed the claims' $(echo "$want" | wc -l) resource names; Nodes and heartbeat Leases: one each per node"
    bench_record section="$S" name="$L: controller peak RSS" value="$(mib "$(hwm_kib "${PID[after]}")")" unit=MiB \
        ref="$(mib "$(hwm_kib "${PID[before]}")")" ref_name="before" how="VmHWM since the controller started"
done
read -r -a sizes <<<"$SIZES"
small=${sizes[0]}
large=${sizes[${#sizes[@]} - 1]}
growth=$(awk -v a="${RSS[$small]}" -v b="${RSS[$large]}" 'BEGIN {printf "%.1f", (b / a - 1) * 100}')
bench_record section="$S" name="controller RSS, $large nodes against $small" value="$growth" unit=% \
    goal="within 20%" met="$(awk -v g="$growth" 'BEGIN {print (g <= 20 && g >= -20) ? "yes" : "no"}')" \
    how="the RSS figures above, same run"
bench_record section="$S" name="controller RSS at $large nodes" value="$(mib "${RSS[$large]}")" unit=MiB \
    goal="< 64 MiB at 1,000 nodes" met="$(awk -v k="${RSS[$large]}" 'BEGIN {print (k < 65536) ? "yes" : "no"}')" \
    how="VmRSS, as above"
[ "$MORE" -gt "$CLAIMS" ] && [ "$MORE" -le "$large" ] || exit 0
echo "=== $S: $((MORE - CLAIMS)) more bound PCIDeviceClaims, $MORE in all, at $large nodes"
mapfile -t specs < <(claim_specs $((CLAIMS + 1)) "$MORE")
python3 "$OBJ" claims "${specs[@]}"
settled
cr_right
ra=$(bench_rss_kib "${PID[after]}")
rb=$(bench_rss_kib "${PID[before]}")
bench_record section="$S" name="$large nodes, $MORE claims: controller RSS" value="$(mib "$ra")" unit=MiB \
    ref="$(mib "$rb")" ref_name="before" how="as above, after $((MORE - CLAIMS)) more claims"
bench_record section="$S" name="one more claim: controller RSS" \
    value="$(awk -v a="${RSS[$large]}" -v b="$ra" -v n=$((MORE - CLAIMS)) 'BEGIN {printf "%.1f", (b - a) / n}')" unit=KiB \
    ref="$(awk -v a="${RSS_BEFORE[$large]}" -v b="$rb" -v n=$((MORE - CLAIMS)) 'BEGIN {printf "%.1f", (b - a) / n}')" ref_name="before" \
    how="(RSS with $MORE claims - RSS with $CLAIMS) / $((MORE - CLAIMS)), at $large nodes"

# A controller started on the cluster as it is now: its first LIST reads every device.
echo "=== $S: both controllers restarted on $large nodes and $MORE claims"
for c in before after; do
    kill -TERM "${PID[$c]}"
    wait "${PID[$c]}" || true
done
start_controller before "$T/before/bin/hostdevd"
start_controller after "${BENCH_CTLMEM_AFTER_BIN:-bin/hostdevd}"
settled
cr_right
bench_record section="$S" name="$large nodes, $MORE claims, restarted: controller RSS" \
    value="$(mib "$(bench_rss_kib "${PID[after]}")")" unit=MiB ref="$(mib "$(bench_rss_kib "${PID[before]}")")" \
    ref_name="before" how="VmRSS of a controller started on the cluster as it is (its first LIST reads all $devices PCIDevices), once settled"
bench_record section="$S" name="$large nodes, $MORE claims, restarted: controller peak RSS" \
    value="$(mib "$(hwm_kib "${PID[after]}")")" unit=MiB ref="$(mib "$(hwm_kib "${PID[before]}")")" \
    ref_name="before" how="VmHWM of the restarted controller: the LIST's pages of whole devices included"
