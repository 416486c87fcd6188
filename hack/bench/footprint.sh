#!/usr/bin/env bash
# hack/bench/footprint.sh - what the agent costs a node: resident memory with 40, 256 and 1024
# PCIDevices (fixture trees cut from test/fixtures/sysfs/large-1024.txt, each agent on its own
# Node against one private control plane, measured once every object is written and the agent
# has been quiet for a few seconds), split into what the shared libraries map (file-backed
# pages) and the process's own (anonymous) memory; the heap itself with valgrind massif (256
# devices); the binary and the image. The controller's memory and CPU at idle are in idle.sh.
# BENCH_HOSTDEVD: another binary to measure (an older build, to compare; default bin/hostdevd).
# Needs: bin/hostdevd, hack/k8s-build.sh output (make k8s), valgrind; the image size is read
# from build/image/ when `make image` has been run (it is not built here).
set -euo pipefail
# shellcheck source=hack/bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$BENCH_ROOT"
T=$(mktemp -d "${BENCH_TMP:-${TMPDIR:-/tmp}}/bench-footprint.XXXXXX")
AGENT=
cleanup() {
    [ -z "$AGENT" ] || kill -TERM "$AGENT" 2>/dev/null || true
    bench_plane_down "$T/cluster" >/dev/null 2>&1 || true
    rm -rf "$T"
}
trap cleanup EXIT
S="Footprint"
SIZES=${BENCH_FOOTPRINT_SIZES:-40 256 1024}
SETTLE=${BENCH_FOOTPRINT_SETTLE:-10}
[ "$BENCH_QUICK" != 1 ] || SIZES=${BENCH_FOOTPRINT_SIZES:-256}
[ "$BENCH_QUICK" != 1 ] || SETTLE=${BENCH_FOOTPRINT_SETTLE:-3}

# tree N: a fixture tree with N PCIDevices (bridges besides) in $T/sys-N: the first lines of the
# 1024-function server (bridges come before what is behind them, so every cut is a valid tree;
# the whole server has 1003 PCIDevices and 21 bridges, so 1024 gives 1003). Sets WANT.
tree() {
    awk -v n="$1" '/^#/ {next} {print; if ($2 != "0604" && ++k >= n) exit}' \
        test/fixtures/sysfs/large-1024.txt >"$T/desc-$1.txt"
    WANT=$(awk '!/^#/ && $2 != "0604"' "$T/desc-$1.txt" | wc -l)
    rm -rf "$T/sys-$1"
    hack/mk-sysfs-fixture.sh "$T/desc-$1.txt" "$T/sys-$1" >/dev/null
    mkdir -p "$T/sys-$1/module/vfio_iommu_type1"
}

# start_agent N [wrapper...]: the agent of node fp-N on tree N, in the background ($AGENT).
start_agent() {
    local n=$1
    shift
    PORT=$(bench_free_port)
    mkdir -p "$T/dev-$n" "$T/kubelet-$n"
    printf 'apiVersion: v1\nkind: Node\nmetadata: {name: fp-%s}\n' "$n" | kubectl apply -f - >/dev/null
    "$@" "${BENCH_HOSTDEVD:-bin/hostdevd}" agent --node-name "fp-$n" --kubeconfig "$ADMIN" --sysfs-root "$T/sys-$n" \
        --proc-root "$T/proc" --dev-root "$T/dev-$n" --kubelet-dir "$T/kubelet-$n" \
        --listen "127.0.0.1:$PORT" --uevent-source none >"$T/agent-$n.log" 2>&1 &
    AGENT=$!
}

# settled N: waits until the agent is ready and node fp-N has its WANT objects; then SETTLE s.
settled() {
    local want=$WANT i have=0
    for i in $(seq 1 600); do
        if curl -fsS "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1; then
            have=$(kubectl get pcidevices -l "nodename=fp-$1" -o name | wc -l)
            [ "$have" -lt "$want" ] || break
        fi
        kill -0 "$AGENT" 2>/dev/null || break
        sleep 0.5
    done
    if [ "$have" -lt "$want" ]; then
        echo "node fp-$1: $have of $want PCIDevices after $((i / 2)) s" >&2
        tail -5 "$T/agent-$1.log" >&2
        return 1
    fi
    sleep "$SETTLE"
}

stop_agent() {
    kill -TERM "$AGENT"
    wait "$AGENT" || true
    AGENT=
}

bench_plane "$T/cluster"
bench_fake_proc "$T/proc"
echo "=== $S: the agent's resident memory by node size (own Node, TLS to the API server)"
for n in $SIZES; do
    tree "$n"
    start_agent "$n"
    settled "$n"
    # kB: VmRSS VmHWM RssAnon RssFile Pss Private
    read -r rss hwm anon file pss priv < <(python3 - "$AGENT" <<'EOF'
import sys
pid = sys.argv[1]
st = {l.split(":")[0]: int(l.split()[1]) for l in open(f"/proc/{pid}/status") if l.split(":")[0] in
      ("VmRSS", "VmHWM", "RssAnon", "RssFile")}
sm = {}
for l in open(f"/proc/{pid}/smaps_rollup"):
    f = l.split()
    if f[0].endswith(":") and len(f) >= 2 and f[1].isdigit():
        sm[f[0][:-1]] = int(f[1])
print(st["VmRSS"], st["VmHWM"], st["RssAnon"], st["RssFile"], sm["Pss"],
      sm["Private_Clean"] + sm["Private_Dirty"])
EOF
    )
    mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }
    m=$WANT
    goal=()
    if [ "$n" = 256 ]; then goal=(goal="< 10 MiB" met="$([ "$rss" -lt 10240 ] && echo yes || echo no)"); fi
    bench_record section="$S" name="agent RSS, $m PCIDevices" value="$(mib "$rss")" unit=MiB "${goal[@]}" \
        how="VmRSS once every object is written and ${SETTLE} s passed; peak (VmHWM) $(mib "$hwm") MiB"
    bench_record section="$S" name="  of which shared libraries' pages (file-backed), $m PCIDevices" \
        value="$(mib "$file")" unit=MiB how="RssFile: code and data of libcurl, OpenSSL, GnuTLS, libc and the rest, shared with every process mapping them"
    bench_record section="$S" name="  of which the agent's own memory (anonymous), $m PCIDevices" \
        value="$(mib "$anon")" unit=MiB how="RssAnon: heap, stacks, informer caches, TLS state"
    bench_record section="$S" name="agent proportional set size (PSS), $m PCIDevices" value="$(mib "$pss")" unit=MiB \
        how="smaps_rollup Pss: shared pages divided among the processes that map the same files, so it depends on what else runs (alone, the library pages are private: $(mib "$priv") MiB private)"
    stop_agent
done

echo "=== $S: the agent's heap (valgrind massif), 256 PCIDevices"
n=256
tree "$n"
kubectl delete node "fp-$n" --ignore-not-found >/dev/null
kubectl delete pcidevices -l "nodename=fp-$n" --ignore-not-found >/dev/null
start_agent "$n" valgrind --tool=massif --vgdb=yes --massif-out-file="$T/massif.out"
settled "$n"
vgdb --pid="$AGENT" snapshot "$T/settled.massif" >/dev/null
stop_agent
# heap_kib FILE: KiB on the heap (malloc'd bytes and their overhead) at a massif file's last
# snapshot, and at its largest
heap_kib() {
    python3 - "$1" <<'EOF'
import sys
snaps, cur = [], {}
for line in open(sys.argv[1]):
    k, _, v = line.strip().partition("=")
    if k == "snapshot" and cur:
        snaps.append(cur)
        cur = {}
    if k in ("mem_heap_B", "mem_heap_extra_B"):
        cur[k] = int(v)
if cur:
    snaps.append(cur)
total = [s.get("mem_heap_B", 0) + s.get("mem_heap_extra_B", 0) for s in snaps]
print("%.0f %.0f" % (total[-1] / 1024, max(total) / 1024))
EOF
}
read -r settled_heap _ < <(heap_kib "$T/settled.massif")
read -r _ peak < <(heap_kib "$T/massif.out")
kib() { awk -v b="$1" 'BEGIN {printf "%.0f", b / 1024}'; }
bench_record section="$S" name="agent heap, 256 PCIDevices, settled" value="$settled_heap" unit=KiB \
    how="valgrind massif (malloc'd bytes and their overhead), a snapshot taken through vgdb once settled; peak $peak KiB"

echo "=== $S: sizes"
size=$(stat -c %s bin/hostdevd)
stripped=$(strip -o "$T/hostdevd.stripped" bin/hostdevd && stat -c %s "$T/hostdevd.stripped")
bench_record section="$S" name="bin/hostdevd" value="$(kib "$size")" unit=KiB \
    how="release build with debug information; stripped $(kib "$stripped") KiB (the image's is stripped)"
img=$( (find build/image -name "hostdevd-*.tar" -printf "%T@ %p\n" 2>/dev/null || true) | sort -n | tail -1 | cut -d" " -f2)
if [ -n "$img" ]; then
    # the layer: the largest blob of the OCI layout; unpacked, the size of its tar stream
    mkdir -p "$T/img"
    tar -xf "$img" -C "$T/img"
    layer=$(find "$T/img/blobs" -type f -printf '%s %p\n' | sort -n | tail -1 | cut -d' ' -f2)
    unpacked=$(gzip -dc "$layer" | wc -c)
    bench_record section="$S" name="OCI image archive ($(basename "$img"))" value="$(kib "$(stat -c %s "$img")")" unit=KiB \
        how="make image's archive, one gzip layer (what a node pulls); unpacked $(kib "$unpacked") KiB, of which the shared libraries are most (docs/image.md)"
else
    echo "  (no image in build/image: run make image to have its size here)"
fi
