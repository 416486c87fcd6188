# shellcheck shell=bash
# hack/bench/lib.sh - sourced by the benchmark sections (hack/bench/*.sh). A section prints what
# it does for a reader and records each figure with bench_record; hack/bench.sh runs the
# sections and hack/bench-report.py turns the records into docs/benchmarks.md. Figures are
# printed, never asserted: a section fails only when it cannot measure.
#
# Environment (set by hack/bench.sh; a section run by hand gets defaults):
#   BENCH_OUT    file the records are appended to (JSON lines; default: stdout only)
#   BENCH_QUICK  1 for the quick variant (make bench-quick: smaller N, shorter idle windows)
#   BENCH_TMP    a scratch directory the section may use (default: its own, removed on exit)

BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BENCH_QUICK=${BENCH_QUICK:-0}
export PATH="$BENCH_ROOT/bin:$PATH"

# bench_record key=value ...: one figure. Keys:
#   section  the section's title (e.g. "Discovery")          name   what was measured
#   value    the figure, a number                             unit   its unit (ms, MiB, s, ...)
#   ref      the reference's figure in the same run (number)  ref_name  what the reference is
#   goal     the goal in words (e.g. "< 10 MiB")               met    yes | no (against the goal)
#   how      how it was measured (one sentence)                n      sample count
# Ratio (value / ref) is computed by the report when both are numbers.
bench_record() {
    local line
    line=$(python3 -c '
import json, sys
r = {}
for a in sys.argv[1:]:
    k, _, v = a.partition("=")
    r[k] = v
for k in ("value", "ref", "n"):
    if k in r:
        try:
            r[k] = float(r[k])
        except ValueError:
            pass
print(json.dumps(r, sort_keys=True))' "$@")
    if [ -n "${BENCH_OUT:-}" ]; then echo "$line" >>"$BENCH_OUT"; fi
    local name value unit ref ref_name a
    for a in "$@"; do
        case $a in
            name=*) name=${a#name=} ;; value=*) value=${a#value=} ;; unit=*) unit=${a#unit=} ;;
            ref=*) ref=${a#ref=} ;; ref_name=*) ref_name=${a#ref_name=} ;;
        esac
    done
    printf '  %s: %s %s%s\n' "$name" "$value" "${unit:-}" "${ref:+ (reference: $ref ${unit:-}, ${ref_name:-})}"
}

# Statistics over numbers on stdin, one per line.
bench_median() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) exit 1; if (NR % 2) print a[(NR+1)/2]; else printf "%.6g\n", (a[NR/2]+a[NR/2+1])/2}'; }
bench_max() { sort -g | tail -1; }
bench_min() { sort -g | head -1; }

# bench_rss_kib PID: resident memory of a process, KiB.
bench_rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
# bench_cpu_s PID: user + system CPU seconds the process has used.
bench_cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) / hz}' "/proc/$1/stat"; }

# bench_fake_proc DIR: a /proc for an agent on a fixture tree: nothing mounted from its devices, no
# swap, no routes (the host-critical checks read these), as test/integration/lib.sh's fake_proc.
bench_fake_proc() {
    mkdir -p "$1/1" "$1/net"
    printf '22 1 0:21 / / rw - tmpfs tmpfs rw\n' >"$1/1/mountinfo"
    printf 'Filename\tType\tSize\tUsed\tPriority\n' >"$1/swaps"
    printf 'Iface\tDestination\tGateway\n' >"$1/net/route"
    : >"$1/net/ipv6_route"
}

# bench_free_ports N: N distinct free TCP ports on 127.0.0.1, on one line; bench_free_port: one.
bench_free_ports() {
    python3 -c '
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$1"
}
bench_free_port() { bench_free_ports 1; }

# bench_token_kubeconfig TOKEN FILE: a kubeconfig for the plane of bench_plane with that bearer
# token (a service account's, e.g. from kubectl create token).
bench_token_kubeconfig() {
    cat >"$2" <<EOF
apiVersion: v1
kind: Config
clusters:
- {name: local, cluster: {server: "$K8S_SERVER", certificate-authority: "$K8S_CA"}}
users:
- {name: u, user: {token: "$1"}}
contexts:
- {name: local, context: {cluster: local, user: u}}
current-context: local
EOF
}

# bench_plane DIR [cluster.sh up options]: a private control plane in DIR with our namespace and
# CRDs; exports KUBECONFIG (admin), PATH with kubectl, and ADMIN. Stop it with bench_plane_down.
bench_plane() {
    local dir=$1
    shift
    "$BENCH_ROOT/hack/cluster.sh" up "$dir" "$@" >/dev/null
    set -a
    # shellcheck disable=SC1091
    . "$dir/env"
    set +a
    export PATH="$K8S_BIN:$PATH"
    export ADMIN=$dir/admin.kubeconfig
    kubectl apply -f "$BENCH_ROOT/manifests/namespace.yaml" >/dev/null
    kubectl apply -k "$BENCH_ROOT/crds/" >/dev/null
    # (a CRD just created may have no status yet: kubectl wait then fails at once; try again)
    local i
    for i in $(seq 1 50); do
        kubectl wait --for condition=Established --timeout 10s \
            crd/pcidevices.devices.harvesterhci.io crd/usbdevices.devices.harvesterhci.io >/dev/null 2>&1 && break
        [ "$i" -lt 50 ] || return 1
        sleep 0.2
    done
}
# bench_kubevirt: KubeVirt v1.9.0's own kubevirts CRD (hack/kubevirt-crds.sh) and the CR
# kubevirt/kubevirt with the HostDevices feature gate, in the plane of bench_plane.
bench_kubevirt() {
    local crds
    crds=$("$BENCH_ROOT/hack/kubevirt-crds.sh")
    kubectl create -f "$crds/kubevirts.kubevirt.io.yaml" >/dev/null
    for _ in $(seq 1 50); do
        kubectl wait --for condition=Established --timeout 10s crd/kubevirts.kubevirt.io >/dev/null 2>&1 && break
        sleep 0.2
    done
    kubectl create namespace kubevirt >/dev/null
    kubectl create -f - >/dev/null <<'EOF'
apiVersion: kubevirt.io/v1
kind: KubeVirt
metadata: {name: kubevirt, namespace: kubevirt}
spec:
  configuration:
    developerConfiguration: {featureGates: [HostDevices]}
EOF
}

bench_plane_down() { "$BENCH_ROOT/hack/cluster.sh" down "$1" --purge; }

# bench_machine: one line naming the machine (for the report's header).
bench_machine() {
    printf '%s, %s cores, %s GiB, %s' "$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)" \
        "$(nproc)" "$(awk '/MemTotal/ {printf "%.0f", $2 / 1048576}' /proc/meminfo)" \
        "$(sed -n 's/^PRETTY_NAME="\(.*\)"$/\1/p' /etc/os-release)"
}
