#!/usr/bin/env bash
# hack/bench/kubeclient.sh - src/kube against the real kube-apiserver (build/release/kubebench):
# an informer's latency (create sent -> its add handler) and round trip, and what an informer
# costs per cached PCIDevice (LIST + sync, resident memory per object).
# Needs: build/release/kubebench, hack/k8s-build.sh output (make k8s).
set -euo pipefail
# shellcheck source=hack/bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$BENCH_ROOT"
T=$(mktemp -d "${BENCH_TMP:-${TMPDIR:-/tmp}}/bench-kube.XXXXXX")
trap 'bench_plane_down "$T/cluster" || true; rm -rf "$T"' EXIT
S="Kubernetes client"
N_LAT=${BENCH_LATENCY_N:-200}
N_MEM=${BENCH_MEMORY_N:-10000}
[ "$BENCH_QUICK" != 1 ] || { N_LAT=${BENCH_LATENCY_N:-50}; N_MEM=${BENCH_MEMORY_N:-2000}; }
bench_plane "$T/cluster"
v=$(kube-apiserver --version | awk '{print $2}')
echo "=== $S: src/kube against kube-apiserver $v"
build/release/kubebench latency "$ADMIN" "$N_LAT" | tee "$T/lat.txt" | sed 's/^/  /'
build/release/kubebench memory "$ADMIN" "$N_MEM" | tee "$T/mem.txt" | sed 's/^/  /'
field() { grep -F "$1" "$2" | grep -oE "$3 [0-9.]+" | awk '{print $2}'; }
bench_record section="$S" name="informer: create sent -> add handler, median" unit=ms n="$N_LAT" \
    value="$(field 'informer latency' "$T/lat.txt" median)" how="kubebench latency: $N_LAT creates one after another"
bench_record section="$S" name="informer: create sent -> add handler, worst" unit=ms n="$N_LAT" \
    value="$(field 'informer latency' "$T/lat.txt" max)" how="kubebench latency"
bench_record section="$S" name="create round trip, median" unit=ms n="$N_LAT" \
    value="$(field 'create round trip' "$T/lat.txt" median)" how="kubebench latency"
bench_record section="$S" name="informer LIST + sync of $N_MEM PCIDevices" unit=s n="$N_MEM" \
    value="$(grep -oE 'sync of [0-9]+ objects: [0-9.]+' "$T/mem.txt" | awk '{print $NF}')" how="kubebench memory"
bench_record section="$S" name="informer memory per cached PCIDevice" unit=B n="$N_MEM" \
    value="$(grep -oE '[0-9]+ bytes per object' "$T/mem.txt" | awk '{print $1}')" \
    how="kubebench memory: resident memory before and after the sync, over the objects"
