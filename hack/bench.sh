#!/usr/bin/env bash
# make bench: figures, printed, never asserted. Starts a private control plane (like the
# integration tests), runs the benchmarks built with release flags, and stops it.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
D=$(mktemp -d "${TMPDIR:-/tmp}/hostdevd-bench.XXXXXX")
trap 'hack/cluster.sh down "$D/cluster" --purge; rm -rf "$D"' EXIT
hack/cluster.sh up "$D/cluster" >/dev/null
set -a
# shellcheck disable=SC1091
. "$D/cluster/env"
set +a
export PATH="$K8S_BIN:$PATH"
kubectl apply -k crds/ >/dev/null
kubectl wait --for condition=Established --timeout 60s crd/pcidevices.devices.harvesterhci.io >/dev/null
ADMIN=$D/cluster/admin.kubeconfig
echo "=== bench: src/kube against kube-apiserver $(kube-apiserver --version | awk '{print $2}') on 127.0.0.1"
build/release/kubebench latency "$ADMIN" "${BENCH_LATENCY_N:-200}"
build/release/kubebench memory "$ADMIN" "${BENCH_MEMORY_N:-10000}"
