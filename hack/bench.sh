#!/usr/bin/env bash
# make bench: figures, printed, never asserted. Starts a private control plane (like the
# integration tests), runs the benchmarks built with release flags, and stops it.
#   BENCH_LATENCY_N (200)  creates timed from send to the informer's handler
#   BENCH_MEMORY_N (10000) objects cached to measure the informer's memory per object
#   BENCH_IDLE_SECONDS (600) how long an idle agent is watched for API requests
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
D=$(mktemp -d "${TMPDIR:-/tmp}/hostdevd-bench.XXXXXX")
AGENT_PID=
cleanup() {
    [ -z "$AGENT_PID" ] || kill -TERM "$AGENT_PID" 2>/dev/null || true
    hack/cluster.sh down "$D/cluster" --purge
    rm -rf "$D"
}
trap cleanup EXIT
hack/cluster.sh up "$D/cluster" >/dev/null
set -a
# shellcheck disable=SC1091
. "$D/cluster/env"
set +a
export PATH="$K8S_BIN:$PATH"
kubectl apply -f manifests/namespace.yaml >/dev/null
kubectl apply -k crds/ >/dev/null
kubectl wait --for condition=Established --timeout 60s crd/pcidevices.devices.harvesterhci.io >/dev/null
ADMIN=$D/cluster/admin.kubeconfig

median_ms() { sort -n | awk '{a[NR]=$1} END {printf "%.1f", a[int((NR+1)/2)]}'; }

echo "=== bench: PCI discovery of the 1024-function tree"
hack/mk-sysfs-fixture.sh test/fixtures/sysfs/large-1024.txt "$D/sys-1024" >/dev/null
# The small server with USB devices (a hub, a receiver behind it, two identical tablets, a stick).
hack/mk-sysfs-fixture.sh test/fixtures/sysfs/usb-server.txt "$D/sys-small" >/dev/null
build/release/pcibench "$D/sys-1024" 21
for _ in $(seq 1 21); do
    t0=$(date +%s%N)
    lspci -D -vmm -A linux-sysfs -O "sysfs.path=$D/sys-1024/bus/pci" >/dev/null
    echo $((($(date +%s%N) - t0) / 1000))
done | awk '{print $1 / 1000}' | median_ms >"$D/lspci.ms"
echo "lspci -D -vmm -A linux-sysfs on the same tree (whole process, 21 runs): median $(cat "$D/lspci.ms") ms"

echo "=== bench: agent resident memory after the first inventory"
agent_rss() { # tree node
    local port
    printf 'apiVersion: v1\nkind: Node\nmetadata: {name: %s}\n' "$2" | kubectl create -f - >/dev/null
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    bin/hostdevd agent --node-name "$2" --kubeconfig "$ADMIN" --sysfs-root "$1" \
        --listen "127.0.0.1:$port" >>"$D/agent-$2.log" 2>&1 &
    AGENT_PID=$!
    for _ in $(seq 1 600); do
        curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
        sleep 0.1
    done
    local n u rss
    n=$(kubectl get pcidevices -l "nodename=$2" -o name | wc -l)
    u=$(kubectl get usbdevices -l "nodename=$2" -o name | wc -l)
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$AGENT_PID/status")
    echo "agent on $(basename "$1"): $n PCIDevices, $u USBDevices, resident memory $rss KiB"
    AGENT_PORT=$port
}
agent_rss "$D/sys-1024" bench-large
kill -TERM "$AGENT_PID"
wait "$AGENT_PID" || true
agent_rss "$D/sys-small" bench-small

echo "=== bench: API requests of an idle agent (small server with USB; PCI and USB informers) over ${BENCH_IDLE_SECONDS:-600} s"
count_requests() { hack/audit-requests.py "$D/cluster/audit.log"; }
read -r r0 w0 l0 <<<"$(count_requests)"
sleep "${BENCH_IDLE_SECONDS:-600}"
read -r r1 w1 l1 <<<"$(count_requests)"
echo "idle agent: $((w1 - w0)) writes, $((r1 - r0)) reads (list/watch) in ${BENCH_IDLE_SECONDS:-600} s;" \
    "$((l1 - l0)) heartbeat Lease renewals (one a minute; reference: kubelet renews its node Lease every 10 s)"
curl -fsS "http://127.0.0.1:$AGENT_PORT/metrics" | grep -E '^hostdevd_(watch_restarts|api_writes)'

echo "=== bench: src/kube against kube-apiserver $(kube-apiserver --version | awk '{print $2}')"
build/release/kubebench latency "$ADMIN" "${BENCH_LATENCY_N:-200}"
build/release/kubebench memory "$ADMIN" "${BENCH_MEMORY_N:-10000}"
