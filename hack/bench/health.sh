#!/usr/bin/env bash
# shellcheck disable=SC2317 # (functions run by the EXIT trap)
# hack/bench/health.sh - issue 46: the time from a held device's removal to every consumer
# saying so, on a fake sysfs tree (test/fixtures/sysfs/health-node.txt: e1000e functions already
# on vfio-pci) with the real kube-apiserver and kube-scheduler (hack/cluster.sh) and a real
# kubelet v1.37.1 (hack/kubelet.sh: fake CRI, -v 2) next to `bin/hostdevd agent`
# (--uevent-source udev, --resync 3600, -v 3), and `bin/hostdevd controller` (its service
# account) with KubeVirt v1.9.0's CRD and CR. Two devices are held: HELD_PCI by a
# PCIDeviceClaim (bound; kubelet has it through the agent's device plugin) and HELD_DRA by a
# ResourceClaim the agent's DRA plugin prepared for a running pod (kubelet watches its health,
# NodeWatchResources). A removal is simulated as test/integration/test_aer.sh does it (each
# function's directory and its /sys/bus/pci/devices link moved out of the tree) followed by the
# "remove" uevent the kernel would send, in udevd's format to the udev multicast group
# (test/integration/uevent_send.py; the start of every sample is the moment just before that
# send). Then each consumer's first word of it, stamped where it happens:
#   the agent's log line "Held PCI device is gone; marked unhealthy" (its own klog time)
#   the PCIDevice's Healthy=False reason Removed (an API watch, hack/bench/apiwatch.py)
#   the PCIDevice's Warning Event DeviceRemoved (watch; the first run only: a repeat of the same
#     Event within 10 minutes is a series count the agent writes at most every 30 s)
#   the PCIDeviceClaim: Ready=False DeviceRemoved, passthroughEnabled still true (watch); checked:
#     no claim event since the removal with passthroughEnabled false
#   the device plugin's ListAndWatch with the device Unhealthy: kubelet's "State pushed for
#     device plugin" line (klog time, kubelet -v 2) for the resource; checked: never withdrawn
#     (no resourceCapacity=0)
#   the KubeVirt CR: checked, not timed: the resource's permittedHostDevices entry stays (a
#     bound claim keeps it while its device is Removed; a note, no row)
#   the ResourceSlice: the device leaves the pool (a removed device is not in the scan, so it is
#     withdrawn, not tainted) (watch)
#   the NodeWatchResources report: kubelet's "Sending health update notification for pods" line
#     (kubelet got the list with the device Unhealthy and found the pod that holds it)
#   pod.status.containerStatuses[].allocatedResourcesStatus with the device Unhealthy (watch)
# and, the devices put back (an "add" uevent), the same consumers back to healthy (the claim
# Ready=True again, the Event DeviceReturned in the first run; the CR checked again). A third,
# unheld device (AER_DEV) has its aer_dev_fatal total grown and a "change" uevent (as the
# kernel's AER recovery sends): the agent's log line, Healthy=False AERFatal and the slice's
# taint hostdevd.io/unhealthy; the administrator's recheck clears it for the next run.
# p50, p95 (nearest rank) and max of BENCH_HEALTH_RUNS (10; quick 3). A consumer that does not
# say so within 60 s is a failure to measure.
# Needs: root (a real kubelet; skipped without), bin/hostdevd, make k8s. The kubelet harness
# sets global sysctls: one at a time on a shared machine (flock /tmp/hostdevd-kubelet.lock
# hack/bench.sh health).
#   BENCH_HEALTH_KEEP        a directory to copy the logs, the watch events and the audit log into
#   BENCH_HEALTH_AGENT       another agent binary (e.g. a build of another commit)
#   BENCH_HEALTH_AGENT_ARGS  more agent arguments, after the section's (e.g. "--uevent-source none":
#                            no uevent reaches the agent, and the section cannot measure)
set -uo pipefail
# (eventually, dra_template, dra_pod; nothing of its control plane)
# shellcheck source=test/integration/lib.sh disable=SC1091 # (not in lint's list)
. "$(dirname "${BASH_SOURCE[0]}")/../../test/integration/lib.sh"
# shellcheck source=hack/bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$BENCH_ROOT" || exit 1
S="Device health: a held device removed -> every consumer"
SB="Device health: put back, or the AER fatal count grown"
RUNS=${BENCH_HEALTH_RUNS:-10}
[ "$BENCH_QUICK" != 1 ] || RUNS=${BENCH_HEALTH_RUNS:-3}
NODE=health-node
DRIVER=vfio-pci.hostdevd.io
HELD_PCI=0000:00:04.0
HELD_DRA=0000:00:05.0
AER_DEV=0000:00:07.0
W=$BENCH_ROOT/hack/bench/apiwatch.py
G=devices.harvesterhci.io/v1beta1
die() {
    echo "health: could not measure: $*" >&2
    [ -z "${T:-}" ] || tail -5 "$T/agent.log" >&2
    exit 1
}
if [ "$(id -u)" != 0 ]; then # (recording nothing keeps the figures docs/benchmarks.md has)
    echo "health: skipped: needs root (a real kubelet: hack/kubelet.sh)"
    exit 0
fi
T=$(mktemp -d "${BENCH_TMP:-${TMPDIR:-/tmp}}/bench-health.XXXXXX")
PIDS=()
cleanup() {
    [ ${#PIDS[@]} -eq 0 ] || kill -TERM "${PIDS[@]}" 2>/dev/null
    wait 2>/dev/null
    if [ -n "${BENCH_HEALTH_KEEP:-}" ]; then
        mkdir -p "$BENCH_HEALTH_KEEP"
        cp "$T/agent.log" "$T/controller.log" "$T/watch.jsonl" "$T/cluster/audit.log" ${KUBELET_LOG:+"$KUBELET_LOG"} \
            "$BENCH_HEALTH_KEEP/" 2>/dev/null
    fi
    hack/kubelet.sh down "$T/kubelet" --purge >/dev/null 2>&1
    bench_plane_down "$T/cluster" >/dev/null 2>&1
    rm -rf "$T"
}
trap cleanup EXIT

echo "=== $S: the plane, a kubelet, the agent"
bench_plane "$T/cluster" --with-scheduler
kubectl apply -f manifests/deviceclasses.yaml >/dev/null || die "DeviceClasses"
kubectl apply -f manifests/controller-rbac.yaml >/dev/null || die "controller RBAC"
bench_kubevirt
token=$(kubectl create token hostdevd-controller -n hostdevd-system --duration 2h) || die "controller token"
bench_token_kubeconfig "$token" "$T/controller.kubeconfig"
CPORT=$(bench_free_port)
bin/hostdevd controller --kubeconfig "$T/controller.kubeconfig" --listen "127.0.0.1:$CPORT" \
    >"$T/controller.log" 2>&1 &
PIDS+=($!)
KUBELET_V=2 hack/kubelet.sh up "$T/kubelet" "$T/cluster" "$NODE" >"$T/kubelet-up.log" 2>&1 ||
    die "kubelet: $(tail -5 "$T/kubelet-up.log")"
set -a
# shellcheck disable=SC1091
. "$T/kubelet/env"
set +a
SYS=$T/sys
hack/mk-sysfs-fixture.sh test/fixtures/sysfs/health-node.txt "$SYS" >/dev/null || die "fixture"
mkdir -p "$SYS/module/vfio_iommu_type1" "$T/dev" "$T/out"
bench_fake_proc "$T/proc"
aer_fatal() { # address total: the device's aer_dev_fatal (the other two files stay 0)
    local d=$SYS/devices/pci0000:00/$1
    printf 'Undefined 0\nDLP %s\nTOTAL_ERR_FATAL %s\n' "$2" "$2" >"$d/aer_dev_fatal"
    printf 'Undefined 0\nTOTAL_ERR_NONFATAL 0\n' >"$d/aer_dev_nonfatal"
    printf 'RxErr 0\nTOTAL_ERR_COR 0\n' >"$d/aer_dev_correctable"
}
aer_fatal "$AER_DEV" 0
PORT=$(bench_free_port)
# shellcheck disable=SC2086 # agent arguments split on purpose
"${BENCH_HEALTH_AGENT:-bin/hostdevd}" agent --node-name "$NODE" --kubeconfig "$ADMIN" --sysfs-root "$SYS" \
    --proc-root "$T/proc" --dev-root "$T/dev" --kubelet-dir "$(dirname "$DEVICE_PLUGIN_DIR")" --cdi-dir "$T/cdi" \
    --listen "127.0.0.1:$PORT" --resync 3600 --uevent-source udev -v 3 ${BENCH_HEALTH_AGENT_ARGS:-} >"$T/agent.log" 2>&1 &
PIDS+=($!)
WATCH_LOG=$T/watch.jsonl
: >"$WATCH_LOG"
# wait_event [apiwatch wait options]: the arrival time of the first matching watch event
wait_event() { python3 "$W" wait "$WATCH_LOG" --timeout 60 "$@" | cut -d' ' -f1; }
python3 "$W" watch "$ADMIN" "$WATCH_LOG" "/apis/$G/pcidevices" "/apis/$G/pcideviceclaims" \
    /apis/resource.k8s.io/v1/resourceslices /api/v1/namespaces/default/pods \
    /apis/kubevirt.io/v1/namespaces/kubevirt/kubevirts /apis/events.k8s.io/v1/namespaces/default/events \
    2>"$T/watch.err" &
PIDS+=($!)
ready() { curl -fsS "http://127.0.0.1:$PORT/readyz"; }
eventually 60 ready || die "the agent is not ready"
leading() { curl -fsS "http://127.0.0.1:$CPORT/metrics" | grep -qx "hostdevd_leader 1"; }
eventually 60 leading || die "the controller does not lead: $(tail -5 "$T/controller.log")"
watching() { [ "$(grep -c '"type":"WATCHING"' "$WATCH_LOG")" -ge 6 ]; }
eventually 30 watching || die "watches not started: $(cat "$T/watch.err")"
metric() { curl -fsS "http://127.0.0.1:$PORT/metrics" | awk -v m="$1" '$1 == m {print $2}'; }

name_of() { local a=${1//:/}; echo "$NODE-${a//./}"; }
dev_name() { local a=${1//:/-}; echo "pci-${a//./-}"; }
printf 'apiVersion: %s\nkind: PCIDeviceClaim\nmetadata: {name: %s}\nspec: {address: "%s", nodeName: %s, userName: bench}\n' \
    "$G" "$(name_of "$HELD_PCI")" "$HELD_PCI" "$NODE" | kubectl create -f - >/dev/null || die "PCIDeviceClaim"
bound() { [ "$(kubectl get pcideviceclaim "$(name_of "$HELD_PCI")" -o jsonpath='{.status.passthroughEnabled}')" = true ]; }
eventually 60 bound || die "the PCIDeviceClaim is not bound"
RES=$(kubectl get pcidevice "$(name_of "$HELD_PCI")" -o jsonpath='{.status.resourceName}')
offered() { [ "$(kubectl get node "$NODE" -o json | jq -r --arg r "$RES" '.status.allocatable[$r] // empty')" = 1 ]; }
eventually 60 offered || die "kubelet does not offer $RES"
HAS_ENTRY="any(e.get('resourceName') == '$RES' for e in (get(o, 'spec.configuration.permittedHostDevices.pciHostDevices') or []))"
wait_event --res kubevirts --expr "$HAS_ENTRY" >/dev/null || die "the KubeVirt CR does not list $RES"
{ dra_template nic "$DRIVER" "device.attributes[\"resource.kubernetes.io\"].pciBusID == \"$HELD_DRA\"" &&
    dra_pod vm1 nic; } || die "the pod"
running() { [ "$(kubectl get pod vm1 -o jsonpath='{.status.phase}')" = Running ]; }
eventually 90 running || die "the pod does not run: $(kubectl describe pod vm1 | tail -5)"
streams() { [ "$(metric hostdevd_dra_health_streams)" = 1 ]; }
eventually 60 streams || die "kubelet does not watch the DRA devices' health"

# log_line FILE AFTER STRING...: the time its own header gives the first line of the klog FILE
# after AFTER with every STRING (the agent's log is in UTC, kubelet's in local time)
log_line() {
    local file=$1 after=$2 a=() m
    shift 2
    [ "$file" != "$T/agent.log" ] || a+=(--utc)
    for m in "$@"; do a+=(--match "$m"); done
    python3 "$W" log "$file" --after "$after" "${a[@]}"
}
agent_line() { log_line "$T/agent.log" "$@"; }
kubelet_line() { log_line "$KUBELET_LOG" "$@"; }
ms() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.1f\n", (a - b) * 1000}'; }
DEVS=$SYS/devices/pci0000:00
devpath() { echo "/devices/pci0000:00/$1"; }
take_out() { mv "$DEVS/$1" "$T/out/$1" && mv "$SYS/bus/pci/devices/$1" "$T/out/link-$1"; }
put_back() { mv "$T/out/$1" "$DEVS/$1" && mv "$T/out/link-$1" "$SYS/bus/pci/devices/$1"; }
uevent() { # action address...: prints the time just before the first was sent
    local a p=()
    for a in "${@:2}"; do p+=("$(devpath "$a")"); done
    python3 test/integration/uevent_send.py "$1" "${p[@]}" | sed -n 's/.* at //p'
}
healthy_is() { # status reason: a Python test of a PCIDevice's Healthy condition
    printf "any(c.get('type') == 'Healthy' and c.get('status') == '%s' and c.get('reason') == '%s' for c in get(o, 'status.conditions') or [])" "$1" "$2"
}
IN_POOL="get(o, 'spec.nodeName') == '$NODE' and any(d.get('name') == '$(dev_name "$HELD_DRA")' for d in get(o, 'spec.devices') or [])"
TAINTED="get(o, 'spec.nodeName') == '$NODE' and any(d.get('name') == '$(dev_name "$AER_DEV")' and any(t.get('key') == 'hostdevd.io/unhealthy' for t in d.get('taints') or []) for d in get(o, 'spec.devices') or [])"
pod_health() { # Healthy|Unhealthy
    printf "any(r.get('resourceID', '').endswith('-%s') and r.get('health') == '%s' for c in get(o, 'status.containerStatuses') or [] for s in c.get('allocatedResourcesStatus') or [] for r in s.get('resources') or [])" \
        "$(dev_name "$HELD_DRA")" "$1"
}
wait_event --res pods --name vm1 --expr "$(pod_health Healthy)" >/dev/null || die "the pod does not show its device Healthy"
echo "  claim bound, $RES offered by kubelet, pod vm1 running with $(dev_name "$HELD_DRA") Healthy; $RUNS runs"

# sample NAME T0 T: one sample of figure NAME (ms after T0), in $T/NAME.ms
sample() { ms "$3" "$2" >>"$T/$1.ms"; }
ready_is() { # status [reason]: a Python test of a claim's Ready condition
    printf "any(c.get('type') == 'Ready' and c.get('status') == '%s' and c.get('reason', '') == '%s' for c in get(o, 'status.conditions') or [])" "$1" "${2:-}"
}
CLAIM_REMOVED="get(o, 'status.passthroughEnabled') is True and $(ready_is False DeviceRemoved)"
CLAIM_READY="get(o, 'status.passthroughEnabled') is True and any(c.get('type') == 'Ready' and c.get('status') == 'True' for c in get(o, 'status.conditions') or [])"
event_is() { # reason: a Python test of an Event about the PCIDevice of HELD_PCI
    printf "o.get('reason') == '%s' and get(o, 'regarding.kind') == 'PCIDevice' and get(o, 'regarding.name') == '%s'" "$1" "$(name_of "$HELD_PCI")"
}

# at NAME WHAT COMMAND...: one sample of NAME, ms from T0 (the phase's uevents) to the time
# COMMAND prints; WHAT says what did not happen when it fails (the section cannot measure)
at() {
    local t
    t=$("${@:3}") || die "$2"
    sample "$1" "$T0" "$t"
}
agent_says() { agent_line "$T0" "$@"; }
kubelet_says() { kubelet_line "$T0" "$@"; }
watched() { wait_event --after "$T0" "$@"; }
device_is() { watched --res pcidevices --name "$(name_of "$1")" --expr "$(healthy_is "$2" "$3")"; }
claim_is() { watched --res pcideviceclaims --name "$(name_of "$HELD_PCI")" --expr "$1"; }
pushed() { kubelet_says "State pushed for device plugin" "resource=\"$RES\"" "resourceCapacity=$1"; }
# never WHAT ARGS...: dies with WHAT when an apiwatch.py wait (a watch event since T0) finds a match
# in what has come so far (the rows timed before it leave the controller time to act)
never() {
    ! python3 "$W" wait "$WATCH_LOG" --after "$T0" --timeout 0 "${@:2}" >/dev/null || die "$1"
}
# cr_kept: the KubeVirt CR kept the resource's entry: no watch event since T0 without it, and it
# has it now
cr_kept() {
    never "the KubeVirt CR lost the entry for $RES" --res kubevirts --expr "not ($HAS_ENTRY)"
    kubectl get kubevirt -n kubevirt -o json | jq -e --arg r "$RES" \
        '[.items[].spec.configuration.permittedHostDevices.pciHostDevices[]? | select(.resourceName == $r)] | length == 1' \
        >/dev/null || die "the KubeVirt CR has no entry for $RES"
    echo kept >>"$T/cr_kept"
}

remove_once() {
    local a
    { take_out "$HELD_PCI" && take_out "$HELD_DRA"; } || die "take out"
    T0=$(uevent remove "$HELD_PCI" "$HELD_DRA") || die "uevent remove"
    at uevent "the agent got no uevent" agent_says "Kernel event" 'action="remove"'
    at scan "no rescan" agent_says "Scanned PCI devices"
    for a in "$HELD_PCI" "$HELD_DRA"; do
        at log "no log line for $a" agent_says "Held PCI device is gone; marked unhealthy" "device=\"$a\""
        at pcidevice "no Healthy=False Removed for $a" device_is "$a" False Removed
    done
    [ "$1" != 1 ] || at event "no Event DeviceRemoved" watched --res events --type ADDED --expr "$(event_is DeviceRemoved)"
    at plugin "kubelet got no ListAndWatch message" pushed 1
    at claim "the claim never says DeviceRemoved (passthroughEnabled kept)" claim_is "$CLAIM_REMOVED"
    at slice "$HELD_DRA stays in the slice" watched --res resourceslices --expr "not ($IN_POOL)"
    at report "kubelet got no health report" kubelet_says "Sending health update notification for pods"
    at podstatus "pod status never Unhealthy" watched --res pods --name vm1 --expr "$(pod_health Unhealthy)"
    never "the claim lost passthroughEnabled" --res pcideviceclaims --name "$(name_of "$HELD_PCI")" \
        --expr "get(o, 'status.passthroughEnabled') is not True"
    ! python3 "$W" log "$KUBELET_LOG" --after "$T0" --match "State pushed for device plugin" \
        --match "resource=\"$RES\"" --match resourceCapacity=0 --timeout 0 >/dev/null ||
        die "the device plugin withdrew the device"
    cr_kept
}

put_back_once() {
    { put_back "$HELD_PCI" && put_back "$HELD_DRA"; } || die "put back"
    T0=$(uevent add "$HELD_PCI" "$HELD_DRA") || die "uevent add"
    at back_log "no log line: $HELD_DRA back" \
        agent_says "Removed PCI device is back with the same ids; marked healthy" "device=\"$HELD_DRA\""
    at back_pcidevice "$HELD_PCI not Healthy again" device_is "$HELD_PCI" True Healthy
    [ "$1" != 1 ] || at back_event "no Event DeviceReturned" watched --res events --type ADDED --expr "$(event_is DeviceReturned)"
    at back_claim "the claim is not Ready again" claim_is "$CLAIM_READY"
    at back_plugin "kubelet got no ListAndWatch message (back)" pushed 1
    at back_slice "$HELD_DRA not in the slice again" watched --res resourceslices --expr "$IN_POOL"
    at back_podstatus "pod status not Healthy again" watched --res pods --name vm1 --expr "$(pod_health Healthy)"
    cr_kept
}

aer_once() { # run
    aer_fatal "$AER_DEV" "$1"
    T0=$(uevent change "$AER_DEV") || die "uevent change"
    at aer_log "no AER log line" agent_says "PCI device reported an AER fatal error; marked unhealthy" "device=\"$AER_DEV\""
    at aer_pcidevice "no Healthy=False AERFatal" device_is "$AER_DEV" False AERFatal
    at aer_taint "no taint" watched --res resourceslices --expr "$TAINTED"
    T0=$(date +%s.%N)
    kubectl annotate --overwrite pcidevice "$(name_of "$AER_DEV")" hostdevd.io/recheck-health="$1" >/dev/null || die "recheck"
    watched --res resourceslices --expr "get(o, 'spec.nodeName') == '$NODE' and not ($TAINTED)" >/dev/null ||
        die "the recheck does not clear the taint"
}

for i in $(seq 1 "$RUNS"); do
    remove_once "$i"
    put_back_once "$i"
    aer_once "$i"
    printf '  run %d: log %s, PCIDevice %s, claim %s, ListAndWatch %s, slice %s, health report %s, pod status %s ms; back: claim %s, pod status %s ms; AER: taint %s ms\n' \
        "$i" "$(tail -1 "$T/log.ms")" "$(tail -1 "$T/pcidevice.ms")" "$(tail -1 "$T/claim.ms")" "$(tail -1 "$T/plugin.ms")" \
        "$(tail -1 "$T/slice.ms")" "$(tail -1 "$T/report.ms")" "$(tail -1 "$T/podstatus.ms")" \
        "$(tail -1 "$T/back_claim.ms")" "$(tail -1 "$T/back_podstatus.ms")" "$(tail -1 "$T/aer_taint.ms")"
done
echo "  note: the KubeVirt CR kept $RES's permittedHostDevices entry through every removal and put-back ($(grep -c . "$T/cr_kept") checks; nothing to time)"

p95() { sort -g | awk '{a[NR] = $1} END {if (NR == 0) exit 1; i = int(NR * 0.95); if (i < NR * 0.95) i++; print a[i]}'; }
# record SECTION FILE NAME HOW: p50, p95 and max rows, next to the detection (the agent's log line)
REF=$(bench_median <"$T/log.ms")
record() {
    local n ref=()
    n=$(grep -c . "$T/$2.ms")
    [ -z "${5:-}" ] || ref=(ref="$5" ref_name="$6")
    bench_record section="$1" name="$3: p50" value="$(bench_median <"$T/$2.ms")" unit=ms n="$n" how="$4" "${ref[@]}"
    bench_record section="$1" name="$3: p95" value="$(p95 <"$T/$2.ms")" unit=ms n="$n" how="nearest rank"
    bench_record section="$1" name="$3: max" value="$(bench_max <"$T/$2.ms")" unit=ms n="$n" how="the slowest run"
}
# record1 SECTION FILE NAME HOW: the one sample of FILE as it is (a first-run-only figure)
record1() { bench_record section="$1" name="$3" value="$(head -1 "$T/$2.ms")" unit=ms n=1 how="$4" "${@:5}"; }
DET="the agent's log line"
record "$S" uevent "kernel event received by the agent" "its -v 3 \"Kernel event\" line, klog time; the start of every row: just before the remove uevents were sent (udevd's format, the udev multicast group)"
record "$S" scan "rescan done" "its \"Scanned PCI devices\" line: the uevent debounce (quiet for 250 ms) and one scan of the tree"
record "$S" log "agent's log line (Held PCI device is gone; marked unhealthy)" "klog time of the line, each device (2 a run)" 250 "the uevent debounce"
record "$S" pcidevice "PCIDevice Healthy=False Removed" "its watch event's arrival, each device (2 a run)" "$REF" "$DET"
record1 "$S" event "PCIDevice Event DeviceRemoved (first run)" "the Warning Event's ADDED watch event, the first run only (repeats within 10 minutes are a series count the agent writes at most every 30 s)" ref="$REF" ref_name="$DET"
record "$S" plugin "device plugin: ListAndWatch with it Unhealthy" "kubelet's \"State pushed for device plugin\" line for the resource (klog time, kubelet -v 2)" "$REF" "$DET"
record "$S" claim "PCIDeviceClaim Ready=False DeviceRemoved (passthroughEnabled kept)" "the claim's first watch event with Ready=False reason DeviceRemoved and passthroughEnabled true (never false: checked each run)" "$REF" "$DET"
record "$S" slice "ResourceSlice: the device withdrawn from the pool" "the slice's watch event without it (a removed device is not in the scan: withdrawn, not tainted)" "$REF" "$DET"
record "$S" report "DRA NodeWatchResources report taken by kubelet" "kubelet's \"Sending health update notification for pods\" line (klog time): the list with it Unhealthy, the pod that holds it found" "$REF" "$DET"
record "$S" podstatus "pod.status allocatedResourcesStatus Unhealthy" "the pod's watch event with the device's resourceID Unhealthy (kubelet's status write)" "$REF" "$DET"
record "$SB" back_log "put back: agent's log line (back with the same ids; marked healthy)" "from the add uevents' send"
record "$SB" back_pcidevice "put back: PCIDevice Healthy=True" "its watch event"
record "$SB" back_claim "put back: PCIDeviceClaim Ready=True again" "the claim's watch event with Ready=True (passthroughEnabled true all along)"
record "$SB" back_plugin "put back: ListAndWatch with it Healthy" "kubelet's \"State pushed for device plugin\" line with resourceCapacity=1"
record "$SB" back_slice "put back: the device in the slice again" "the slice's watch event with it"
record "$SB" back_podstatus "put back: pod.status Healthy" "the pod's watch event"
record1 "$SB" back_event "put back: PCIDevice Event DeviceReturned (first run)" "the Event's ADDED watch event, the first run only (repeats within 10 minutes are a series count written at most every 30 s)"
record "$SB" aer_log "AER fatal count grown: agent's log line" "from a change uevent's send (the kernel's AER recovery sends one) after aer_dev_fatal grew, unheld device"
record "$SB" aer_pcidevice "AER fatal count grown: PCIDevice Healthy=False AERFatal" "its watch event"
record "$SB" aer_taint "AER fatal count grown: ResourceSlice taint hostdevd.io/unhealthy=AERFatal:NoSchedule" "the slice's watch event with the taint"
