#!/usr/bin/env bash
# hack/bench/footprint.sh - what the agent costs a node: resident memory with 40, 256 and 1024
# PCIDevices (fixture trees cut from test/fixtures/sysfs/large-1024.txt, each agent on its own
# Node against one private control plane, measured once every object is written and the agent
# has been quiet for a few seconds), split into what the shared libraries map (file-backed
# pages) and the process's own (anonymous) memory; the container's memory as the kubelet sees
# it (the working set of the agent's own memory cgroup); the heap itself with valgrind massif
# (256 devices); the binary and the image. The controller's memory and CPU at idle are in idle.sh.
#
# The working set is cAdvisor's: usage minus inactive page cache (cgroup v2: memory.current -
# memory.stat inactive_file; v1: memory.usage_in_bytes - total_inactive_file). Page cache is
# charged to the cgroup that first reads a page, so a library already cached by another process
# costs this cgroup nothing; to see what a fresh container on a node sees (its image's files
# read by nobody else), each agent runs from private copies of its binary, its libraries and
# the dynamic loader, evicted from the page cache before it starts.
# BENCH_HOSTDEVD: another binary to measure (an older build, to compare; default bin/hostdevd).
# The agent runs with the environment the image gives it (the Containerfile's ENV lines).
# BENCH_FOOTPRINT_BEFORE: a second binary (the build before a change) measured in the same run,
# each size before the first, with BENCH_FOOTPRINT_BEFORE_ENV (words NAME=VALUE; default none:
# the image before this round had no ENV but PATH); its figures are the table's reference column.
# Needs: bin/hostdevd, hack/k8s-build.sh output (make k8s), valgrind, root for the cgroup (the
# cgroup rows are left out without one); the image size is read from build/image/ when `make
# image` has been run (it is not built here).
set -euo pipefail
# shellcheck source=hack/bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$BENCH_ROOT"
T=$(mktemp -d "${BENCH_TMP:-${TMPDIR:-/tmp}}/bench-footprint.XXXXXX")
AGENT=
CGROUPS=()
FRESHDIR=
cleanup() {
    [ -z "$AGENT" ] || kill -TERM "$AGENT" 2>/dev/null || true
    [ -z "$AGENT" ] || wait "$AGENT" 2>/dev/null || true
    local d
    for d in "${CGROUPS[@]}"; do rmdir "$d" 2>/dev/null || true; done
    bench_plane_down "$T/cluster" >/dev/null 2>&1 || true
    rm -rf "$T" "$FRESHDIR"
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

# cgroup_parent: the directory new memory cgroups go under, or nothing; sets CGV (1 or 2): cgroup
# v2 with the memory controller (a child of the root, which may hold processes), else v1's
# memory hierarchy under this shell's own cgroup.
cgroup_parent() {
    local own
    if grep -qw memory /sys/fs/cgroup/cgroup.controllers 2>/dev/null; then
        grep -qw memory /sys/fs/cgroup/cgroup.subtree_control ||
            echo +memory >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || return 0
        CGV=2
        CGPARENT=/sys/fs/cgroup
    elif [ -w /sys/fs/cgroup/memory ]; then
        own=$(sed -n 's/^[0-9]*:memory://p' /proc/self/cgroup)
        CGV=1
        CGPARENT=/sys/fs/cgroup/memory${own%/}
    fi
}
CGV=
CGPARENT=
cgroup_parent
[ -n "$CGPARENT" ] || echo "  (no writable memory cgroup: the working set is not measured)"

# fresh NAME BIN: private copies of BIN, its libraries and the dynamic loader in $FRESHDIR/NAME,
# out of the page cache (what a container's first start reads from its image). Sets FRESH, the
# command that runs them. On a disk: tmpfs pages cannot leave the page cache and stay charged
# to the shell that wrote them.
FRESHDIR=$T/fresh
if [ "$(stat -f -c %T "$T")" = tmpfs ]; then
    FRESHDIR=$BENCH_ROOT/build/bench/footprint-fresh.$$
fi
fresh() {
    local d=$FRESHDIR/$1 f loader
    rm -rf "$d"
    mkdir -p "$d"
    cp "$2" "$d/hostdevd"
    for f in $(ldd "$2" | awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}'); do
        cp -L "$f" "$d/"
    done
    loader=$(ldd "$2" | awk '$1 ~ /^\/.*ld-linux/ {print $1}')
    python3 - "$d" <<'EOF'
import os, sys
for name in os.listdir(sys.argv[1]):
    fd = os.open(os.path.join(sys.argv[1], name), os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
EOF
    FRESH=("$d/$(basename "$loader")" --library-path "$d" "$d/hostdevd")
}

# start_agent NAME TREE: the agent of node fp-NAME on tree TREE, in the background ($AGENT), the
# command FRESH (default: ${BENCH_HOSTDEVD:-bin/hostdevd}) with WRAP before it; with CG set, in
# that memory cgroup from its first instruction.
start_agent() {
    local name=$1 n=$2 cmd
    PORT=$(bench_free_port)
    mkdir -p "$T/dev-$name" "$T/kubelet-$name"
    printf 'apiVersion: v1\nkind: Node\nmetadata: {name: fp-%s}\n' "$name" | kubectl apply -f - >/dev/null
    cmd=("${WRAP[@]}" "${FRESH[@]:-${BENCH_HOSTDEVD:-bin/hostdevd}}")
    (
        [ -z "${CG:-}" ] || echo "$BASHPID" >"$CG/cgroup.procs"
        exec "${cmd[@]}" agent --node-name "fp-$name" --kubeconfig "$ADMIN" --sysfs-root "$T/sys-$n" \
            --proc-root "$T/proc" --dev-root "$T/dev-$name" --kubelet-dir "$T/kubelet-$name" \
            --listen "127.0.0.1:$PORT" --uevent-source none >"$T/agent-$name.log" 2>&1
    ) &
    AGENT=$!
}

# working_set: KiB "workingset usage anon file" of memory cgroup $CG, cAdvisor's working set first
working_set() {
    python3 - "$CG" "$CGV" <<'EOF'
import sys
d, v = sys.argv[1], sys.argv[2]
st = {l.split()[0]: int(l.split()[1]) for l in open(d + "/memory.stat")}
if v == "2":
    usage = int(open(d + "/memory.current").read())
    inactive, anon, file = st["inactive_file"], st["anon"], st["file"]
else:
    usage = int(open(d + "/memory.usage_in_bytes").read())
    inactive, anon, file = st["total_inactive_file"], st["total_rss"], st["total_cache"]
print(*(x // 1024 for x in (max(usage - inactive, 0), usage, anon, file)))
EOF
}

# settled NAME: waits until the agent is ready and node fp-NAME has its WANT objects; then SETTLE s.
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

WRAP=()
FRESH=()
stop_agent() {
    kill -TERM "$AGENT"
    wait "$AGENT" || true
    AGENT=
}

# measure NAME N BIN: starts BIN's agent for node fp-NAME on tree N from fresh copies in a memory
# cgroup of its own, waits until it settled, stops it; sets M (KiB): rss hwm anon file pss priv
# and, with a cgroup, ws usage cganon cgfile.
measure() {
    local name=$1 n=$2
    fresh "$name" "$3"
    CG=
    if [ -n "$CGPARENT" ]; then
        CG=$CGPARENT/hostdevd-bench-$$-$name
        mkdir "$CG"
        CGROUPS+=("$CG")
    fi
    start_agent "$name" "$n"
    settled "$name"
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
    ws=
    [ -z "$CG" ] || read -r ws usage cganon cgfile < <(working_set)
    stop_agent
    [ -z "$CG" ] || rmdir "$CG" 2>/dev/null || true
    rm -rf "${FRESHDIR:?}/$name"
    FRESH=()
}

mib() { awk -v k="$1" 'BEGIN {printf "%.1f", k / 1024}'; }
# ref VAR: R, the reference arguments of bench_record for the before-binary's figure VAR (KiB)
ref() {
    R=()
    [ -z "${BENCH_FOOTPRINT_BEFORE:-}" ] || [ -z "${!1:-}" ] ||
        R=("ref=$(mib "${!1}")" "ref_name=before: $(basename "$BENCH_FOOTPRINT_BEFORE")")
}

# the image's environment (PATH aside), as env(1) arguments
mapfile -t IMAGE_ENV < <(sed -n 's/^ENV \([A-Z_][A-Z0-9_]*=[^ ]*\)$/\1/p' Containerfile | grep -v '^PATH=')

bench_plane "$T/cluster"
bench_fake_proc "$T/proc"
echo "=== $S: the agent's resident memory and its cgroup's working set by node size (own Node, TLS to the API server)"
for n in $SIZES; do
    tree "$n"
    # shellcheck disable=SC2034 # read through ref's indirection
    b_rss='' b_anon='' b_file='' b_pss='' b_ws=''
    if [ -n "${BENCH_FOOTPRINT_BEFORE:-}" ]; then
        read -r -a WRAP <<<"env ${BENCH_FOOTPRINT_BEFORE_ENV:-}"
        measure "$n-before" "$n" "$BENCH_FOOTPRINT_BEFORE"
        # shellcheck disable=SC2034
        b_rss=$rss b_anon=$anon b_file=$file b_pss=$pss b_ws=$ws
        echo "  before ($BENCH_FOOTPRINT_BEFORE), $WANT PCIDevices: RSS $(mib "$rss") MiB, file $(mib "$file"), anon $(mib "$anon"), working set ${ws:+$(mib "$ws")} MiB"
    fi
    WRAP=(env "${IMAGE_ENV[@]}")
    measure "$n" "$n" "${BENCH_HOSTDEVD:-bin/hostdevd}"
    WRAP=()
    m=$WANT
    goal=()
    if [ "$n" = 256 ]; then goal=(goal="< 10 MiB" met="$([ "$rss" -lt 10240 ] && echo yes || echo no)"); fi
    ref b_rss
    bench_record section="$S" name="agent RSS, $m PCIDevices" value="$(mib "$rss")" unit=MiB "${goal[@]}" "${R[@]}" \
        how="VmRSS once every object is written and ${SETTLE} s passed; peak (VmHWM) $(mib "$hwm") MiB"
    ref b_file
    bench_record section="$S" name="  of which shared libraries' pages (file-backed), $m PCIDevices" "${R[@]}" \
        value="$(mib "$file")" unit=MiB how="RssFile: code and data of libcurl, OpenSSL, GnuTLS, libc and the rest, shared with every process mapping them"
    ref b_anon
    bench_record section="$S" name="  of which the agent's own memory (anonymous), $m PCIDevices" "${R[@]}" \
        value="$(mib "$anon")" unit=MiB how="RssAnon: heap, stacks, informer caches, TLS state"
    ref b_pss
    bench_record section="$S" name="agent proportional set size (PSS), $m PCIDevices" value="$(mib "$pss")" unit=MiB "${R[@]}" \
        how="smaps_rollup Pss: shared pages divided among the processes that map the same files, so it depends on what else runs (alone, the library pages are private: $(mib "$priv") MiB private)"
    if [ -n "$ws" ]; then
        goal=()
        if [ "$n" = 256 ]; then goal=(goal="< 10 MiB" met="$([ "$ws" -lt 10240 ] && echo yes || echo no)"); fi
        ref b_ws
        bench_record section="$S" name="container working set (the kubelet's figure), $m PCIDevices" value="$(mib "$ws")" unit=MiB "${goal[@]}" "${R[@]}" \
            how="the agent alone in a memory cgroup (v$CGV), started from uncached copies of its files as a fresh container is: usage $(mib "$usage") MiB (anon $(mib "$cganon"), page cache $(mib "$cgfile")) minus inactive page cache, as cAdvisor computes it"
    fi
done

echo "=== $S: the agent's heap (valgrind massif), 256 PCIDevices"
n=256
tree "$n"
kubectl delete node "fp-$n" --ignore-not-found >/dev/null
kubectl delete pcidevices -l "nodename=fp-$n" --ignore-not-found >/dev/null
CG=
WRAP=(env "${IMAGE_ENV[@]}" valgrind --tool=massif --vgdb=yes --massif-out-file="$T/massif.out")
start_agent "$n" "$n"
WRAP=()
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
