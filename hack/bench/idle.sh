#!/usr/bin/env bash
# hack/bench/idle.sh - API traffic at idle, from the API server's audit log: one agent on the
# 64-device node tree (test/fixtures/sysfs/node-64.txt) with two of its devices claimed and
# bound, and the controller (its own service account) with KubeVirt v1.9.0's CRD and a CR
# holding their entries. Once everything has settled, requests are counted for the window
# (full 600 s, quick 30 s) by identity and verb, and extrapolated to an hour.
# Needs: bin/hostdevd, hack/k8s-build.sh and hack/kubevirt-crds.sh output (make k8s).
set -euo pipefail
# shellcheck source=hack/bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$BENCH_ROOT"
T=$(mktemp -d "${BENCH_TMP:-${TMPDIR:-/tmp}}/bench-idle.XXXXXX")
PIDS=()
cleanup() {
    [ ${#PIDS[@]} -eq 0 ] || kill -TERM "${PIDS[@]}" 2>/dev/null || true
    bench_plane_down "$T/cluster" || true
    rm -rf "$T"
}
trap cleanup EXIT
S="API traffic at idle"
WINDOW=${BENCH_IDLE_SECONDS:-600}
[ "$BENCH_QUICK" != 1 ] || WINDOW=${BENCH_IDLE_SECONDS:-30}
NODE=idle-64
AUDIT=$T/cluster/audit.log

bench_plane "$T/cluster"
kubectl apply -f manifests/controller-rbac.yaml >/dev/null
bench_kubevirt
printf 'apiVersion: v1\nkind: Node\nmetadata: {name: %s}\n' "$NODE" | kubectl create -f - >/dev/null
token=$(kubectl create token hostdevd-controller -n hostdevd-system --duration 2h)
bench_token_kubeconfig "$token" "$T/controller.kubeconfig"

hack/mk-sysfs-fixture.sh test/fixtures/sysfs/node-64.txt "$T/sys" >/dev/null
mkdir -p "$T/sys/module/vfio_iommu_type1" "$T/dev" "$T/kubelet"
bench_fake_proc "$T/proc"
APORT=$(bench_free_port)
CPORT=$(bench_free_port)
bin/hostdevd agent --node-name "$NODE" --kubeconfig "$ADMIN" --sysfs-root "$T/sys" --proc-root "$T/proc" \
    --dev-root "$T/dev" --kubelet-dir "$T/kubelet" --listen "127.0.0.1:$APORT" --uevent-source none \
    >"$T/agent.log" 2>&1 &
AGENT=$!
PIDS+=("$AGENT")
bin/hostdevd controller --kubeconfig "$T/controller.kubeconfig" --listen "127.0.0.1:$CPORT" \
    >"$T/controller.log" 2>&1 &
CONTROLLER=$!
PIDS+=("$CONTROLLER")
up() { curl -fsS "http://127.0.0.1:$1/readyz" >/dev/null 2>&1; }
for _ in $(seq 1 300); do up "$APORT" && up "$CPORT" && break; sleep 0.1; done
if ! { up "$APORT" && up "$CPORT"; }; then tail -5 "$T/agent.log" "$T/controller.log" >&2; exit 1; fi

echo "=== $S: an agent with 64 devices (two claimed) and the controller, settled, then ${WINDOW} s"
for a in 0000:3b:00.4 0000:d8:02.4; do
    n=${a//:/}
    printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: %s}\nspec: {address: "%s", nodeName: %s}\n' \
        "$NODE-${n//./}" "$a" "$NODE" | kubectl create -f - >/dev/null
done
entries() {
    kubectl get kubevirt -n kubevirt kubevirt -o jsonpath='{range .spec.configuration.permittedHostDevices.pciHostDevices[*]}{.resourceName}{"\n"}{end}' | grep -c .
}
for _ in $(seq 1 300); do [ "$(entries 2>/dev/null || echo 0)" -ge 2 ] && break; sleep 0.2; done
[ "$(entries)" -ge 2 ] || { echo "the claims' entries never reached the KubeVirt CR" >&2; tail -5 "$T/agent.log" >&2; exit 1; }
n=$(kubectl get pcidevices -o name | wc -l)
sleep 5 # the last writes' watch events
MARK=$(wc -l <"$AUDIT")
c0=$(bench_cpu_s "$AGENT")
k0=$(bench_cpu_s "$CONTROLLER")
sleep "$WINDOW"
c1=$(bench_cpu_s "$AGENT")
k1=$(bench_cpu_s "$CONTROLLER")
# Requests completed in the window: "who verb resource count", who agent (admin's certificate) or
# controller (its service account), one per audit ID.
python3 - "$AUDIT" "$MARK" >"$T/summary" <<'EOF'
import collections, itertools, json, sys
n = collections.Counter()
seen = set()
for line in itertools.islice(open(sys.argv[1]), int(sys.argv[2]), None):
    e = json.loads(line)
    if e.get("stage") != "ResponseComplete" or not e.get("userAgent", "").startswith("hostdevd/"):
        continue
    if e["auditID"] in seen:
        continue
    seen.add(e["auditID"])
    who = "controller" if e["user"]["username"].endswith(":hostdevd-controller") else "agent"
    n[(who, e["verb"], e.get("objectRef", {}).get("resource", "?"))] += 1
for k, v in sorted(n.items()):
    print(*k, v)
EOF
sed 's/^/  | /' "$T/summary"
per_hour() { awk -v w="$WINDOW" '{printf "%.0f", $1 * 3600 / w}'; }
count() { # who verb-regex resource-regex
    awk -v w="$1" -v v="$2" -v r="$3" '$1 == w && $2 ~ v && $3 ~ r {s += $4} END {print s + 0}' "$T/summary"
}
WR='^(create|update|patch|delete|deletecollection)$'
for who in agent controller; do
    writes=$(count "$who" "$WR" '.' | awk -v l="$(count "$who" "$WR" '^leases$')" '{print $1 - l}' | per_hour)
    leases=$(count "$who" "$WR" '^leases$' | per_hour)
    reads=$(count "$who" '^(get|list|watch)$' '.' | per_hour)
    label="$who"
    [ "$who" = agent ] && label="agent ($n PCIDevices, 2 claims bound)"
    [ "$who" = controller ] && label="controller (leader, KubeVirt CR with 2 entries)"
    bench_record section="$S" name="$label: writes per idle hour, Leases aside" value="$writes" unit="/h" \
        goal="0" met="$([ "$writes" = 0 ] && echo yes || echo no)" \
        how="audit log, one per audit ID, ${WINDOW} s window extrapolated to an hour"
    bench_record section="$S" name="$label: reads (get, list, watch) per idle hour" value="$reads" unit="/h" \
        how="audit log; a watch counts once when it ends and is renewed"
    bench_record section="$S" name="$label: Lease writes per idle hour" value="$leases" unit="/h" \
        how="audit log; the agent's heartbeat Lease, the controller's leader election"
done
bench_record section="$S" name="agent: CPU per idle hour" \
    value="$(awk -v a="$c0" -v b="$c1" -v w="$WINDOW" 'BEGIN {printf "%.2f", (b - a) * 3600 / w}')" unit=s \
    how="/proc/PID/stat utime+stime over the window, extrapolated"
bench_record section="$S" name="controller: CPU per idle hour" \
    value="$(awk -v a="$k0" -v b="$k1" -v w="$WINDOW" 'BEGIN {printf "%.2f", (b - a) * 3600 / w}')" unit=s \
    how="/proc/PID/stat utime+stime over the window, extrapolated"
for who in agent controller; do
    pid=$AGENT
    [ "$who" = agent ] || pid=$CONTROLLER
    bench_record section="$S" name="$who: RSS after the idle window" \
        value="$(awk '{printf "%.1f", $1 / 1024}' <<<"$(bench_rss_kib "$pid")")" unit=MiB \
        how="VmRSS at the end of the window (the agent with $n PCIDevices; the controller leading, four cluster-wide claim and device caches)"
done
