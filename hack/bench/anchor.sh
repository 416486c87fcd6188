#!/usr/bin/env bash
# hack/bench/anchor.sh - the anchor, side by side: harvester/pcidevices' node agent (built by
# hack/anchor-build.sh at a pinned release) and hostdevd's agent, one after the other, each alone
# on its own fresh control plane, on the same 64-device node tree (test/fixtures/sysfs/node-64.txt),
# no claims. For each: PCIDevice objects published, time from process start until every one
# exists with a status (the API server's audit timestamps of each object's first status write),
# RSS after settling and peak (VmHWM), CPU and API requests by verb over an idle window (full
# 600 s, quick 30 s; BENCH_ANCHOR_IDLE_SECONDS) extrapolated to an hour (audit log, one per
# audit ID, by user agent: pcidevices/... and hostdevd/...), and the binary's size.
#
# The anchor cannot be pointed at a fake tree (it hard-codes /sys/kernel/iommu_groups,
# /sys/bus/..., /dev/bus/usb, /host/proc/1/ns/net and loads modules), so it runs confined: a
# private mount namespace, a tmpfs root with the tree bound at /sys, a tmpfs /dev (null, zero,
# random, urandom, an empty bus/usb), /host/proc/1/ns/net bound to the current network
# namespace, a read-only /proc (netlink opens /proc/self/task/TID/ns/net), pci.ids, no
# /lib/modules, chroot, CAP_SYS_MODULE out of the bounding set; the tree is checked unchanged
# afterwards. Its plane gets what it waits for: the foreign CRDs
# (KubeVirt's VirtualMachineInstance and KubeVirt, VlanConfig, from modules of its own go.mod;
# VirtualMachine as a minimal open-schema stand-in), namespace harvester-system and the Node.
# It creates its own devices.harvesterhci.io CRDs (ours are not installed on its plane).
# When the anchor cannot be built or run, the reason is recorded and our side is measured
# alone; the section fails only when our side could not be measured.
# The anchor comes from hack/anchor-build.sh (ANCHOR_VERSION; ANCHOR_GIT, a git copy of the
# repository, when the Go module proxy does not serve the module), built once and cached.
# Needs: bin/hostdevd, hack/k8s-build.sh output (make k8s), Go (hack/go.sh) for the anchor, root.
set -euo pipefail
# shellcheck source=hack/bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$BENCH_ROOT"
T=$(mktemp -d "${BENCH_TMP:-${TMPDIR:-/tmp}}/bench-anchor.XXXXXX")
PIDS=()
PLANES=()
cleanup() {
    [ ${#PIDS[@]} -eq 0 ] || kill -TERM "${PIDS[@]}" 2>/dev/null || true
    for p in "${PLANES[@]}"; do bench_plane_down "$p" >/dev/null 2>&1 || true; done
    rm -rf "$T"
}
trap cleanup EXIT
S="The anchor, side by side"
WINDOW=${BENCH_ANCHOR_IDLE_SECONDS:-600}
[ "$BENCH_QUICK" != 1 ] || WINDOW=${BENCH_ANCHOR_IDLE_SECONDS:-30}
SETTLE=${BENCH_ANCHOR_SETTLE_SECONDS:-30}
[ "$BENCH_QUICK" != 1 ] || SETTLE=${BENCH_ANCHOR_SETTLE_SECONDS:-10}
NODE=anchor-64
ANCHOR_VERSION=${ANCHOR_VERSION:-v1.8.1}
export ANCHOR_VERSION
REF_NAME="harvester/pcidevices $ANCHOR_VERSION, built here"

# The tree both sides read: the anchor needs bus/usb/devices, hostdevd the vfio module's
# directory; both made before the tree's manifest is taken.
hack/mk-sysfs-fixture.sh test/fixtures/sysfs/node-64.txt "$T/sys" >/dev/null
mkdir -p "$T/sys/bus/usb/devices" "$T/sys/module/vfio_iommu_type1"
manifest() { # tree: one line per entry (type, mode, size, link target or content hash)
    python3 - "$1" <<'EOF'
import hashlib, os, stat, sys
top = sys.argv[1]
for d, dirs, files in os.walk(top):
    dirs.sort()
    for n in [""] + sorted(files + [x for x in dirs if os.path.islink(os.path.join(d, x))]):
        p = os.path.join(d, n) if n else d
        st = os.lstat(p)
        if stat.S_ISLNK(st.st_mode):
            what = "-> " + os.readlink(p)
        elif stat.S_ISREG(st.st_mode):
            what = hashlib.sha256(open(p, "rb").read()).hexdigest()
        else:
            what = ""
        print(os.path.relpath(p, top), oct(st.st_mode), st.st_size, what)
EOF
}
manifest "$T/sys" >"$T/sys.manifest"

# plane DIR: a fresh control plane with nothing of ours; exports what bench_plane exports.
plane() {
    "$BENCH_ROOT/hack/cluster.sh" up "$1" >/dev/null
    PLANES+=("$1")
    set -a
    # shellcheck disable=SC1091
    . "$1/env"
    set +a
    export PATH="$K8S_BIN:$PATH" ADMIN=$1/admin.kubeconfig
}
established() { # crd...
    local c
    for c in "$@"; do
        for _ in $(seq 1 100); do
            kubectl wait --for condition=Established --timeout 10s "crd/$c" >/dev/null 2>&1 && break
            sleep 0.2
        done
        kubectl wait --for condition=Established --timeout 1s "crd/$c" >/dev/null
    done
}
node() { printf 'apiVersion: v1\nkind: Node\nmetadata: {name: %s}\n' "$NODE" | kubectl create -f - >/dev/null; }

# settle PID: wait until the PCIDevices all have a status and their number has not changed for
# 20 s (at most 600 s, while PID runs); prints the number.
settle() {
    local n last=-1 since=$SECONDS deadline=$((SECONDS + 600))
    while [ $SECONDS -lt $deadline ] && kill -0 "$1" 2>/dev/null; do
        n=$(kubectl get pcidevices -o json 2>/dev/null | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
print(len(items) if items and all((i.get("status") or {}).get("address") for i in items) else -1)' \
            2>/dev/null || echo -1)
        if [ "$n" != "$last" ]; then last=$n since=$SECONDS; fi
        if [ "$n" -gt 0 ] && [ $((SECONDS - since)) -ge 20 ]; then echo "$n"; return 0; fi
        sleep 1
    done
    return 1
}

# first_status AUDIT T0: seconds from T0 (epoch) until the last of the PCIDevices now present got
# its first successful status write (a create when one never came).
first_status() {
    kubectl get pcidevices -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' >"$T/names"
    python3 - "$1" "$2" "$T/names" <<'EOF'
import datetime, json, sys
names = set(open(sys.argv[3]).read().split())
first, created = {}, {}
for line in open(sys.argv[1]):
    e = json.loads(line)
    o = e.get("objectRef", {})
    if e.get("stage") != "ResponseComplete" or o.get("resource") != "pcidevices" or o.get("name") not in names:
        continue
    if not 200 <= e.get("responseStatus", {}).get("code", 0) < 300:
        continue
    t = datetime.datetime.fromisoformat(e["stageTimestamp"].replace("Z", "+00:00")).timestamp()
    if o.get("subresource") == "status" and e["verb"] in ("update", "patch"):
        first.setdefault(o["name"], t)
    elif e["verb"] == "create" and not o.get("subresource"):
        created.setdefault(o["name"], t)
t = max(first.get(n, created.get(n, float("inf"))) for n in names)
print("%.1f" % (t - float(sys.argv[2])))
EOF
}

# idle PID AUDIT UA-PREFIX OUT: settles, then measures the window: OUT gets cpu, rss_kib, hwm_kib
# and "verb resource count" lines for the requests by user agents starting with UA-PREFIX.
idle() {
    local pid=$1 audit=$2 ua=$3 out=$4 mark c0 c1
    sleep "$SETTLE"
    mark=$(wc -l <"$audit")
    c0=$(bench_cpu_s "$pid")
    sleep "$WINDOW"
    c1=$(bench_cpu_s "$pid")
    kill -0 "$pid" 2>/dev/null || { echo "the process ended during the window" >&2; return 1; }
    {
        echo "cpu $(awk -v a="$c0" -v b="$c1" 'BEGIN {print b - a}')"
        echo "rss_kib $(bench_rss_kib "$pid")"
        echo "hwm_kib $(awk '/^VmHWM/ {print $2}' "/proc/$pid/status")"
        echo "threads $(awk '/^Threads/ {print $2}' "/proc/$pid/status")"
        python3 - "$audit" "$mark" "$ua" <<'EOF'
import collections, itertools, json, sys
n, seen = collections.Counter(), set()
for line in itertools.islice(open(sys.argv[1]), int(sys.argv[2]), None):
    e = json.loads(line)
    if e.get("stage") != "ResponseComplete" or not e.get("userAgent", "").startswith(sys.argv[3]):
        continue
    if e["auditID"] in seen:
        continue
    seen.add(e["auditID"])
    o = e.get("objectRef", {})
    r = o.get("resource", "?") + ("/" + o["subresource"] if o.get("subresource") else "")
    n[(e["verb"], r)] += 1
for (verb, r), c in sorted(n.items()):
    print("req", verb, r, c)
EOF
    } >"$out"
}

# --- the anchor --------------------------------------------------------------------------------
anchor_why= # why the anchor was not measured, when it was not
echo "=== $S: harvester/pcidevices $ANCHOR_VERSION on the 64-device tree, confined, its own plane"
if ! ANCHOR=$(hack/anchor-build.sh 2>"$T/anchor-build.log"); then
    anchor_why="could not build harvester/pcidevices $ANCHOR_VERSION: $(grep -E '^anchor-build:|error|cannot' "$T/anchor-build.log" | tail -1)"
elif ! command -v unshare setpriv chroot >/dev/null || [ "$(id -u)" != 0 ]; then
    anchor_why="the confinement needs root, unshare, setpriv and chroot"
elif ss -Hltn 'sport = :8443' | grep -q .; then
    anchor_why="port 8443 is in use (the anchor's webhook listens there, hard-coded, on every address)"
fi
if [ -z "$anchor_why" ]; then
    echo "  source: $(cat "$ANCHOR/source")"
    plane "$T/anchor-plane"
    kubectl create namespace harvester-system >/dev/null
    kubectl create -f "$ANCHOR/crds/" >/dev/null
    # KubeVirt's VirtualMachine: no module of its go.mod ships the CRD; a minimal stand-in.
    kubectl create -f - >/dev/null <<'EOF'
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: virtualmachines.kubevirt.io}
spec:
  group: kubevirt.io
  scope: Namespaced
  names: {kind: VirtualMachine, listKind: VirtualMachineList, plural: virtualmachines, singular: virtualmachine, shortNames: [vm, vms]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
EOF
    established virtualmachines.kubevirt.io virtualmachineinstances.kubevirt.io kubevirts.kubevirt.io \
        vlanconfigs.network.harvesterhci.io
    node
    mkdir -p "$T/root"
    cp "$ADMIN" "$T/anchor.kubeconfig"
    t0=$(date +%s.%N)
    # One PID from here to the anchor: unshare, bash, env, setpriv and chroot each exec the next.
    # shellcheck disable=SC2016 # expanded by the inner shell
    unshare -m --propagation private bash -c '
        set -e
        R=$1
        mount -t tmpfs -o mode=755 anchor-root "$R"
        mkdir -p "$R/sys" "$R/dev" "$R/proc" "$R/tmp" "$R/host/proc/1/ns" "$R/usr/share/misc"
        mount --bind "$2" "$R/sys"
        mount -t proc -o ro,nosuid,nodev,noexec anchor-proc "$R/proc"
        mount -t tmpfs -o mode=755 anchor-dev "$R/dev"
        mknod -m 666 "$R/dev/null" c 1 3
        mknod -m 666 "$R/dev/zero" c 1 5
        mknod -m 666 "$R/dev/random" c 1 8
        mknod -m 666 "$R/dev/urandom" c 1 9
        mkdir -p "$R/dev/bus/usb"
        touch "$R/host/proc/1/ns/net" "$R/pcidevices"
        mount --bind /proc/self/ns/net "$R/host/proc/1/ns/net"
        mount --bind "$3" "$R/pcidevices"
        mount -o remount,bind,ro "$R/pcidevices"
        cp "$4" "$R/kubeconfig"
        cp /usr/share/misc/pci.ids "$R/usr/share/misc/pci.ids"
        exec env -i NODE_NAME="$5" GHW_DISABLE_WARNINGS=1 HOME=/tmp \
            "$6" --bounding-set -sys_module "$7" "$R" /pcidevices --kubeconfig /kubeconfig
    ' anchor "$T/root" "$T/sys" "$ANCHOR/pcidevices" "$T/anchor.kubeconfig" "$NODE" \
        "$(command -v setpriv)" "$(command -v chroot)" >"$T/anchor.log" 2>&1 &
    APID=$!
    PIDS+=("$APID")
    if ! n_a=$(settle "$APID") || ! kill -0 "$APID" 2>/dev/null; then
        anchor_why="it published no settled set of PCIDevices (within 600 s, or it exited): $(grep -iE 'error|fatal|fail' "$T/anchor.log" | tail -1 | cut -c1-200)"
    else
        a_time=$(first_status "$T/anchor-plane/audit.log" "$t0")
        sort "$T/names" >"$T/names.anchor"
        echo "  $n_a PCIDevices, all with status $a_time s after start; settling ${SETTLE} s, then ${WINDOW} s idle"
        idle "$APID" "$T/anchor-plane/audit.log" pcidevices "$T/anchor.idle" || anchor_why="it stopped during the idle window"
    fi
    kill -TERM "$APID" 2>/dev/null || true
    wait "$APID" 2>/dev/null || true
    PIDS=()
    if manifest "$T/sys" | cmp -s - "$T/sys.manifest"; then
        echo "  the tree is unchanged ($(wc -l <"$T/sys.manifest") entries: contents, modes, links)"
    else
        echo "  the anchor changed the tree:" >&2
        manifest "$T/sys" | diff "$T/sys.manifest" - | head -20 >&2
        anchor_why="it changed the fixture tree (see the log); figures discarded"
    fi
    kubectl get crd -o name | grep -c devices.harvesterhci.io | sed 's/^/  devices.harvesterhci.io CRDs it created: /'
    bench_plane_down "$T/anchor-plane" >/dev/null
    PLANES=()
    [ -z "$anchor_why" ] || tail -5 "$T/anchor.log" | sed 's/^/  | /' >&2
fi
if [ -n "$anchor_why" ]; then
    echo "  the anchor was not measured: $anchor_why" >&2
    bench_record section="$S" name="harvester/pcidevices $ANCHOR_VERSION: not measured" value="-" \
        how="$anchor_why"
fi

# --- hostdevd ----------------------------------------------------------------------------------
echo "=== $S: hostdevd's agent on the same tree, its own plane"
bench_plane "$T/hostdevd-plane"
PLANES+=("$T/hostdevd-plane")
node
bench_fake_proc "$T/proc"
mkdir -p "$T/dev" "$T/kubelet"
APORT=$(bench_free_port)
t0=$(date +%s.%N)
bin/hostdevd agent --node-name "$NODE" --kubeconfig "$ADMIN" --sysfs-root "$T/sys" --proc-root "$T/proc" \
    --dev-root "$T/dev" --kubelet-dir "$T/kubelet" --listen "127.0.0.1:$APORT" --uevent-source none \
    >"$T/hostdevd.log" 2>&1 &
HPID=$!
PIDS+=("$HPID")
n_h=$(settle "$HPID") || { echo "hostdevd published no settled PCIDevices" >&2; tail -5 "$T/hostdevd.log" >&2; exit 1; }
h_time=$(first_status "$T/hostdevd-plane/audit.log" "$t0")
echo "  $n_h PCIDevices, all with status $h_time s after start; settling ${SETTLE} s, then ${WINDOW} s idle"
if [ -s "$T/names.anchor" ]; then
    sort "$T/names" | comm -3 "$T/names.anchor" - | sed "s/^\t/  only hostdevd: /; s/^$NODE-/  only the anchor: $NODE-/"
fi
idle "$HPID" "$T/hostdevd-plane/audit.log" hostdevd/ "$T/hostdevd.idle" || { tail -5 "$T/hostdevd.log" >&2; exit 1; }

# --- the records -------------------------------------------------------------------------------
[ -z "$anchor_why" ] || : >"$T/anchor.idle"
get() { awk -v k="$2" '$1 == k {print $2}' "$1"; }
ref() { # ref=... ref_name=... when the anchor was measured
    [ -n "$anchor_why" ] || printf '%s\n' "ref=$1" "ref_name=$REF_NAME"
}
rec() { # name value unit anchor-value how
    local r
    mapfile -t r < <(ref "$4")
    bench_record section="$S" name="$1" value="$2" unit="$3" "${r[@]}" how="$5"
}
per_hour() { awk -v w="$WINDOW" -v x="${1:-0}" 'BEGIN {printf "%.0f", x * 3600 / w}'; }
mib() { awk -v k="${1:-0}" 'BEGIN {printf "%.1f", k / 1024}'; }
if [ -z "$anchor_why" ]; then
    echo "  requests in the ${WINDOW} s window (anchor | hostdevd):"
    grep '^req' "$T/anchor.idle" | sed 's/^req/  | anchor  /' || true
fi
grep '^req' "$T/hostdevd.idle" | sed 's/^req/  | hostdevd/' || true
rec "PCIDevice objects published (node-64 tree, no claims)" "$n_h" objects "${n_a:-}" \
    "kubectl get pcidevices once settled; the tree has 64 publishable functions and 11 bridges"
rec "time from process start until every PCIDevice exists with status" "$h_time" s "${a_time:-}" \
    "API server audit log: the first successful status write of each object, the last of them, from the exec"
rec "RSS after settling, end of the idle window" "$(mib "$(get "$T/hostdevd.idle" rss_kib)")" MiB \
    "$(mib "$(get "$T/anchor.idle" rss_kib)")" "/proc/PID/status VmRSS after ${SETTLE} s settling and ${WINDOW} s idle"
rec "peak RSS (VmHWM)" "$(mib "$(get "$T/hostdevd.idle" hwm_kib)")" MiB \
    "$(mib "$(get "$T/anchor.idle" hwm_kib)")" "/proc/PID/status VmHWM at the end of the idle window"
rec "CPU per idle hour" "$(awk -v c="$(get "$T/hostdevd.idle" cpu)" -v w="$WINDOW" 'BEGIN {printf "%.2f", c * 3600 / w}')" s \
    "$(awk -v c="$(get "$T/anchor.idle" cpu)" -v w="$WINDOW" 'BEGIN {printf "%.2f", c * 3600 / w}')" \
    "/proc/PID/stat utime+stime over the ${WINDOW} s window, extrapolated"
verbs() { awk '$1 == "req" {print $2}' "$T/anchor.idle" "$T/hostdevd.idle" | sort -u; }
sum() { awk -v v="$2" '$1 == "req" && (v == "" || $2 == v) {s += $4} END {print s + 0}' "$1"; }
rec "API requests per idle hour, all" "$(per_hour "$(sum "$T/hostdevd.idle" "")")" /h \
    "$(per_hour "$(sum "$T/anchor.idle" "")")" \
    "audit log, ResponseComplete, one per audit ID, user agent hostdevd/ or pcidevices, ${WINDOW} s window extrapolated"
for v in $(verbs); do
    rec "API requests per idle hour: $v" "$(per_hour "$(sum "$T/hostdevd.idle" "$v")")" /h \
        "$(per_hour "$(sum "$T/anchor.idle" "$v")")" "as above, verb $v (a watch counts once when it ends)"
done
a_size=
[ -z "$anchor_why" ] && a_size=$(mib "$(($(stat -c %s "$ANCHOR/pcidevices") / 1024))")
rec "binary size" "$(mib "$(($(stat -c %s bin/hostdevd) / 1024))")" MiB "$a_size" \
    "bin/hostdevd (dynamically linked: libcurl, libpci, libudev, ... not counted) against the anchor's static binary (-s)"
