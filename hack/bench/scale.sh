#!/usr/bin/env bash
# hack/bench/scale.sh - many agents against one control plane. For each N (25, 50, 100, 200;
# quick: 25; BENCH_SCALE_NODES overrides) a fresh private control plane with the install's
# RBAC and admission policies, KubeVirt v1.9.0's CRD and CR, the controller (its service
# account) and N agents on this machine, each with its own Node, its own node-bound token of the
# agent's service account (as the DaemonSet's Pods have: APF classifies them as service accounts,
# the policies confine them to their node), its own copy of the 64-device tree
# (test/fixtures/sysfs/node-64.txt; claims write to sysfs) and its own --listen port. Measured,
# all times from the API server's audit log (stageTimestamp), never from sleeping:
#   cold start: all agents started at once until all N x 64 PCIDevices exist, and until the
#     last PCIDevice write; requests (and 429s) meanwhile; API server, etcd and agent memory
#   idle: requests in BENCH_SCALE_IDLE_SECONDS (600, quick 30); writes other than Leases: 0
#   change: 10% of the nodes get a driver changed in their tree and a SIGHUP at once, until the
#     last of their PCIDevices shows it
#   claims: 100 PCIDeviceClaims over the nodes at once, until all are Ready and the KubeVirt
#     CR lists their resource names
# API Priority and Fairness: the install's FlowSchemas and priority levels
# (manifests/flowcontrol.yaml) are in place; for each N of BENCH_SCALE_WITHOUT (200; quick: 25)
# the cold start is measured first without them (the agents in the built-in "service-accounts"
# schema, level workload-low, as before they existed), side by side in the same run. Per cold
# start also: 429s as a fraction of all requests, "Forcing ... watcher close due to
# unresponsiveness" lines in the API server's log, requests per device, API server CPU per
# request, etcd bytes per PCIDevice, open watches, and which priority level served hostdevd.
# BENCH_SCALE_FIRST=with measures those N with the FlowSchemas first (to see the order's effect);
# BENCH_SCALE_PHASES=cold measures only the cold starts (no idle, change or claims phases).
# BENCH_SCALE_KEEP=1 keeps the scratch directory (agents' logs, audit logs) for a look afterwards.
# BENCH_SCALE_IDENTITY=admin runs the agents with the admin's client certificate instead
# (system:masters: exempt from APF and from the policies), for comparison.
# Needs: bin/hostdevd, hack/k8s-build.sh and hack/kubevirt-crds.sh output (make k8s).
set -euo pipefail
# shellcheck source=hack/bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$BENCH_ROOT"
T=$(mktemp -d "${BENCH_TMP:-${TMPDIR:-/tmp}}/bench-scale.XXXXXX")
S="Scale"
if [ "$BENCH_QUICK" = 1 ]; then
    NODES=${BENCH_SCALE_NODES:-25}
    IDLE=${BENCH_SCALE_IDLE_SECONDS:-30}
    WITHOUT=${BENCH_SCALE_WITHOUT-25}
else
    NODES=${BENCH_SCALE_NODES:-25 50 100 200}
    IDLE=${BENCH_SCALE_IDLE_SECONDS:-600}
    WITHOUT=${BENCH_SCALE_WITHOUT-200}
fi
CLAIMS=${BENCH_SCALE_CLAIMS:-100}
FIRST=${BENCH_SCALE_FIRST:-without}
PHASES=${BENCH_SCALE_PHASES:-all}
IDENTITY=${BENCH_SCALE_IDENTITY:-agent}
TIMEOUT=${BENCH_SCALE_TIMEOUT:-900} # for each phase; a phase that takes longer cannot measure
AUDIT_PY=$BENCH_ROOT/hack/bench/audit.py
# Every rotated audit log kept (hack/cluster.sh keeps one by default): at 1,000 nodes the cold
# start's log passed 1 GB, and its request and 429 counts are read from all of it afterwards.
export CLUSTER_AUDIT_BACKUPS=${CLUSTER_AUDIT_BACKUPS:-100}
# Claimable on the fake tree: functions already on vfio-pci, each alone in its IOMMU group
# (hostdevd inventory shows no blockers), Mellanox and Intel VFs alternating.
CLAIMABLE=(0000:3b:00.4 0000:d8:02.4 0000:3b:00.5 0000:d8:02.5 0000:3b:00.6 0000:d8:02.6
    0000:3b:00.7 0000:d8:02.7)
CHANGED_DEV=0000:04:00.1 # igb; the change moves it to vfio-pci

AGENTS=()
CONTROLLER=""
PLANE=""
stop_all() { # the agents and the controller: SIGTERM (they give up their Leases), then SIGKILL
    local p left all=("${AGENTS[@]}")
    [ -z "$CONTROLLER" ] || all+=("$CONTROLLER")
    [ ${#all[@]} -gt 0 ] || return 0
    kill -TERM "${all[@]}" 2>/dev/null || true
    for _ in $(seq 1 150); do
        left=0
        for p in "${all[@]}"; do kill -0 "$p" 2>/dev/null && left=1 && break; done
        [ "$left" = 1 ] || break
        sleep 0.1
    done
    kill -KILL "${all[@]}" 2>/dev/null || true
    wait "${all[@]}" 2>/dev/null || true
    AGENTS=()
    CONTROLLER=""
}
KEEP=${BENCH_SCALE_KEEP:-0} # 1: keep $T (logs, audit logs, trees) for a look afterwards
plane_down() {
    if [ "$KEEP" = 1 ]; then "$BENCH_ROOT/hack/cluster.sh" down "$1"; else bench_plane_down "$1"; fi
}
cleanup() {
    stop_all
    [ -z "$PLANE" ] || plane_down "$PLANE" || true
    if [ "$KEEP" = 1 ]; then echo "scale: kept $T"; else rm -rf "$T"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Each agent holds a few descriptors, the API server two per agent (client and etcd side).
ulimit -n "$(ulimit -Hn)"
max=0
for n in $NODES; do [ "$n" -le "$max" ] || max=$n; done
if [ $((max * 4 + 1000)) -gt "$(ulimit -n)" ]; then
    echo "scale: ulimit -n is $(ulimit -n), too low for $max agents" >&2
    exit 1
fi

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", b - a}'; }
rss_mib() { awk -v k="$(bench_rss_kib "$1")" 'BEGIN {printf "%.1f", k / 1024}'; }
audit() { python3 "$AUDIT_PY" "$@"; }
# field WHO VERB-REGEX RESOURCE-REGEX: the sum over a window summary (audit.py window).
field() { awk -v w="$1" -v v="$2" -v r="$3" '$1 ~ w && $2 ~ v && $3 ~ r {s += $4} END {print s + 0}' "$4"; }
WR='^(create|update|patch|delete|deletecollection)$'
HD='^(agent|controller)$' # the window lines of hostdevd's requests

# The install as `kubectl apply -k manifests/` makes it, without the DaemonSet and Deployment,
# KubeVirt's CRD and a CR with the HostDevices gate, and the controller's kubeconfig.
# APF=without leaves out the FlowSchemas and priority levels too.
APF=with
install() {
    bench_kubevirt
    local drop='DaemonSet|Deployment'
    [ "$APF" = with ] || drop="$drop|FlowSchema|PriorityLevelConfiguration"
    kubectl kustomize manifests/ | awk -v drop="^kind: ($drop)\$" '
        function flush() { if (doc != "" && !wl) printf "---\n%s", doc; doc = ""; wl = 0 }
        /^---$/ { flush(); next }
        $0 ~ drop { wl = 1 }
        { doc = doc $0 "\n" }
        END { flush() }' | kubectl apply -f - >/dev/null
    # The policies take effect asynchronously: wait until an unbound agent token is refused a
    # Lease (dry run), as test_access.sh does.
    local tu
    tu=$(kubectl create token hostdevd-agent -n hostdevd-system --duration 10m)
    for _ in $(seq 1 120); do
        curl -sS --max-time 5 --cacert "$K8S_CA" -H "Authorization: Bearer $tu" -H 'Content-Type: application/json' \
            -X POST "$K8S_SERVER/apis/coordination.k8s.io/v1/namespaces/hostdevd-node-lease/leases?dryRun=All" \
            --data '{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"x"},"spec":{"holderIdentity":"x"}}' |
            grep -q hostdevd-agent-lease && return 0
        sleep 0.5
    done
    echo "scale: the admission policies did not take effect" >&2
    return 1
}

# move_driver SYS ADDRESS DRIVER: the device's driver changed in place, links and uevent, as the
# kernel shows a rebind (the tree is never rebuilt: the agent's claim worker keeps the root open).
move_driver() {
    local sys=$1 dev old link
    dev=$(readlink -f "$sys/bus/pci/devices/$2")
    old=$(basename "$(readlink "$dev/driver")")
    link=$(readlink "$sys/bus/pci/drivers/$old/$2")
    rm "$sys/bus/pci/drivers/$old/$2"
    ln -s "$link" "$sys/bus/pci/drivers/$3/$2"
    ln -sfn "../../../bus/pci/drivers/$3" "$dev/driver"
    sed -i "s/^DRIVER=.*/DRIVER=$3/" "$dev/uevent"
}

node_name() { printf 'scale-%03d' "$1"; }

# N Nodes, and per node a directory: its tree, dev, kubelet dir, kubeconfig (node-bound token).
prepare_nodes() {
    local n=$1 i node d
    for i in $(seq 1 "$n"); do
        printf 'apiVersion: v1\nkind: Node\nmetadata: {name: %s}\n---\n' "$(node_name "$i")"
    done | kubectl create -f - >/dev/null
    # shellcheck disable=SC2016 # (the tokens are made four at a time)
    for i in $(seq 1 "$n"); do
        node=$(node_name "$i")
        d=$T/n/$i
        mkdir -p "$d/dev" "$d/k" "$d/cdi"
        cp -a "$T/template" "$d/sys"
        if [ "$IDENTITY" = admin ]; then
            cp "$ADMIN" "$d/kubeconfig"
        else
            echo "$node $d"
        fi
    done | xargs -r -n 2 -P 4 sh -c 'kubectl create token hostdevd-agent -n hostdevd-system \
        --duration 4h --bound-object-kind Node --bound-object-name "$0" >"$1/token"'
    if [ "$IDENTITY" != admin ]; then
        for i in $(seq 1 "$n"); do bench_token_kubeconfig "$(cat "$T/n/$i/token")" "$T/n/$i/kubeconfig"; done
    fi
}

start_agents() {
    local n=$1 i d ports
    read -r -a ports <<<"$(bench_free_ports "$n")"
    PORTS=("${ports[@]}")
    for i in $(seq 1 "$n"); do
        d=$T/n/$i
        bin/hostdevd agent --node-name "$(node_name "$i")" --kubeconfig "$d/kubeconfig" \
            --sysfs-root "$d/sys" --proc-root "$T/proc" --dev-root "$d/dev" --kubelet-dir "$d/k" \
            --cdi-dir "$d/cdi" --listen "127.0.0.1:${ports[$((i - 1))]}" --uevent-source none \
            >"$d/agent.log" 2>&1 &
        AGENTS+=("$!")
    done
}

# Waits until every agent answers /readyz; prints the time that happened.
wait_agents_ready() {
    local pending=("${PORTS[@]}") next p deadline=$((SECONDS + TIMEOUT))
    while [ ${#pending[@]} -gt 0 ]; do
        next=()
        for p in "${pending[@]}"; do
            curl -fsS --max-time 5 "http://127.0.0.1:$p/readyz" >/dev/null 2>&1 || next+=("$p")
        done
        pending=("${next[@]}")
        [ ${#pending[@]} -eq 0 ] && break
        if [ $SECONDS -ge $deadline ]; then
            echo "scale: ${#pending[@]} agents not ready after ${TIMEOUT} s" >&2
            return 1
        fi
        sleep 0.5
    done
    now
}

agents_rss_mib() {
    local p sum=0
    for p in "${AGENTS[@]}"; do sum=$((sum + $(bench_rss_kib "$p"))); done
    awk -v k="$sum" 'BEGIN {printf "%.0f", k / 1024}'
}
agents_cpu_s() {
    local p
    for p in "${AGENTS[@]}"; do bench_cpu_s "$p"; done | awk '{s += $1} END {printf "%.1f", s}'
}

# etcd's database in use, bytes (its own metric)
etcd_bytes() {
    curl -fsS "$ETCD_ENDPOINT/metrics" | awk '$1 == "etcd_mvcc_db_total_size_in_use_in_bytes" {printf "%d", $2}'
}
# apf_served LEVEL: requests of that priority level dispatched so far (the API server's metric)
apf_served() {
    kubectl get --raw /metrics | awk -v l="priority_level=\"$1\"" \
        '/^apiserver_flowcontrol_dispatched_requests_total/ && index($0, l) {s += $NF} END {printf "%d", s}'
}

# run N with|without: a fresh plane, the install (with or without the FlowSchemas), N agents; the
# run without the FlowSchemas measures the cold start only.
run() {
    local n=$1 L="$1 nodes"
    APF=$2
    [ "$APF" = with ] || L="$n nodes, no FlowSchema"
    PLANE=$T/c$n
    AUDIT=$PLANE/audit.log
    rm -rf "$T/n"
    bench_plane "$PLANE"
    install
    prepare_nodes "$n"
    bench_token_kubeconfig "$(kubectl create token hostdevd-controller -n hostdevd-system --duration 4h)" \
        "$T/controller.kubeconfig"
    local cport
    cport=$(bench_free_port)
    bin/hostdevd controller --kubeconfig "$T/controller.kubeconfig" --listen "127.0.0.1:$cport" \
        >"$T/controller-$n.log" 2>&1 &
    CONTROLLER=$!
    for _ in $(seq 1 300); do curl -fsS "http://127.0.0.1:$cport/readyz" >/dev/null 2>&1 && break; sleep 0.1; done
    local apid etcd
    apid=$(cat "$PLANE/apiserver.pid")
    etcd=$(cat "$PLANE/etcd.pid")

    local level=hostdevd
    [ "$APF" = with ] || level=workload-low
    echo "=== $S: $n agents x 64 PCIDevices ($IDENTITY identity, $APF the FlowSchemas), started at once"
    local want=$((n * 64)) t0 a0 t_exist t_ready t_last t_end e0 s0 w0
    e0=$(etcd_bytes)
    s0=$(apf_served "$level")
    w0=$(grep -c 'watcher close due to unresponsiveness' "$PLANE/apiserver.log" || true)
    a0=$(bench_cpu_s "$apid")
    t0=$(now)
    start_agents "$n"
    t_exist=$(audit follow "$AUDIT" "$want" "$TIMEOUT" pcidevices create "" "$t0") ||
        { echo "scale: the $want PCIDevices did not all appear" >&2; tail -3 "$T/n/1/agent.log" >&2; return 1; }
    t_ready=$(wait_agents_ready) || return 1
    local a1 c1
    a1=$(bench_cpu_s "$apid")
    c1=$(agents_cpu_s)
    sleep 5 # writes after /readyz (ResourceSlices, Events) are counted with the convergence
    t_last=$(audit last "$AUDIT" "$t0" pcidevices "$WR")
    t_end=$(audit last "$AUDIT" "$t0" '(?!leases$).*' "$WR")
    audit window "$AUDIT" "$t0" "$t_end" >"$T/conv-$n"
    sed 's/^/  | /' "$T/conv-$n"
    # API Priority and Fairness: rejections and queue waits by priority level (the agents'
    # service account is one flow of workload-low; admin is exempt)
    kubectl get --raw /metrics | grep -E '^apiserver_flowcontrol_(rejected_requests_total|request_wait_duration_seconds_(sum|count))' |
        grep -E 'hostdevd|workload-low|global-default|exempt|rejected' | sed 's/^/  | apf /' || true
    local closes sample watches served
    closes=$(($(grep -c 'watcher close due to unresponsiveness' "$PLANE/apiserver.log" || true) - w0))
    sample=$(grep 'watcher close due to unresponsiveness' "$PLANE/apiserver.log" | tail -1 | sed 's/^.*\] //' || true)
    [ -z "$sample" ] || echo "  | apiserver: $sample"
    watches=$(kubectl get --raw /metrics | awk '/^apiserver_longrunning_requests\{/ && /verb="WATCH"/ && /resource="pcidevices"/ {s += $NF} END {printf "%d", s}')
    served=$(($(apf_served "$level") - s0))
    local got
    got=$(kubectl get pcidevices -o name | wc -l)
    local goal=() # the goal is set for 100 nodes
    [ "$n" -ne 100 ] || goal=(goal="< 60 s at 100 nodes"
        met="$(awk -v v="$(secs "$t0" "$t_exist")" 'BEGIN {print (v < 60 ? "yes" : "no")}')")
    bench_record section="$S" name="$L: start of all agents -> all $want PCIDevices exist" \
        value="$(secs "$t0" "$t_exist")" unit=s "${goal[@]}" \
        how="audit log: the last first create of the $want PCIDevices (found: $got)"
    bench_record section="$S" name="$L: start -> last PCIDevice write (status included)" \
        value="$(secs "$t0" "$t_last")" unit=s how="audit log"
    bench_record section="$S" name="$L: start -> every agent's /readyz" value="$(secs "$t0" "$t_ready")" unit=s \
        how="polled every 0.5 s"
    bench_record section="$S" name="$L: hostdevd API requests during the cold start" \
        value="$(field '^agent$' . . "$T/conv-$n")" \
        how="audit log, start to the last write other than a Lease; writes: $(field '^agent$' "$WR" . "$T/conv-$n")"
    local all r429 ok_agent cpu
    all=$(field '^any$' '^all$' . "$T/conv-$n")
    r429=$(field '^any$' '^429$' . "$T/conv-$n")
    ok_agent=$(($(field '^agent$' . . "$T/conv-$n") - $(field '^429$' . . "$T/conv-$n")))
    cpu=$(awk -v a="$a0" -v b="$(bench_cpu_s "$apid")" 'BEGIN {printf "%.2f", b - a}')
    bench_record section="$S" name="$L: 429 answers during the cold start" value="$r429" \
        how="audit log, any client; $(awk -v a="$r429" -v b="$all" 'BEGIN {printf "%.1f", (b ? 100 * a / b : 0)}')% of all $all requests; served by the priority level $level: $served requests"
    bench_record section="$S" name="$L: 429 share of the cold start's requests" \
        value="$(awk -v a="$r429" -v b="$all" 'BEGIN {printf "%.1f", (b ? 100 * a / b : 0)}')" unit=% how="audit log, any client"
    bench_record section="$S" name="$L: \"Forcing pcidevices watcher close due to unresponsiveness\" during the cold start" \
        value="$closes" how="kube-apiserver log (-v=1); $watches PCIDevice watches open after it${sample:+; the last: $sample}"
    bench_record section="$S" name="$L: hostdevd requests answered per device, cold start" \
        value="$(awk -v a="$ok_agent" -v b="$want" 'BEGIN {printf "%.2f", a / b}')" \
        how="audit log: the agents' requests other than 429s, start to the last write, over $want devices"
    bench_record section="$S" name="$L: kube-apiserver CPU per request, cold start" \
        value="$(awk -v c="$cpu" -v b="$all" 'BEGIN {printf "%.2f", (b ? 1000 * c / b : 0)}')" unit=ms \
        how="/proc/PID/stat over the cold start ($cpu s, to the last write) over every request of the audit log in it ($all, 429s included)"
    bench_record section="$S" name="$L: etcd bytes per PCIDevice" \
        value="$(awk -v a="$e0" -v b="$(etcd_bytes)" -v n="$want" 'BEGIN {printf "%.0f", (b - a) / n}')" unit=B \
        how="etcd_mvcc_db_total_size_in_use_in_bytes before and after the cold start, over $want PCIDevices (ResourceSlices, Leases and Events included)"
    bench_record section="$S" name="$L: kube-apiserver CPU during the cold start" \
        value="$(awk -v a="$a0" -v b="$a1" 'BEGIN {printf "%.1f", b - a}')" unit=s \
        how="/proc/PID/stat, start to every agent ready; the agents together: $c1 s"
    bench_record section="$S" name="$L: kube-apiserver memory" value="$(rss_mib "$apid")" unit=MiB how="VmRSS after the cold start"
    bench_record section="$S" name="$L: etcd memory" value="$(rss_mib "$etcd")" unit=MiB how="VmRSS after the cold start"
    bench_record section="$S" name="$L: agents' memory, all together" value="$(agents_rss_mib)" unit=MiB \
        how="sum of VmRSS after the cold start"
    if [ "$APF" != with ] || [ "$PHASES" = cold ]; then
        stop_all
        plane_down "$PLANE"
        PLANE=""
        return 0
    fi

    echo "=== $S: $n nodes idle for $IDLE s"
    local i0 i1
    i0=$(now)
    sleep "$IDLE"
    i1=$(now)
    audit window "$AUDIT" "$i0" "$i1" >"$T/idle-$n"
    sed 's/^/  | /' "$T/idle-$n"
    local writes leases
    writes=$(($(field "$HD" "$WR" . "$T/idle-$n") - $(field "$HD" "$WR" '^leases$' "$T/idle-$n")))
    leases=$(field "$HD" "$WR" '^leases$' "$T/idle-$n")
    bench_record section="$S" name="$L: writes in $IDLE idle seconds, Leases aside" value="$writes" \
        goal="0" met="$([ "$writes" = 0 ] && echo yes || echo no)" how="audit log, agents and controller"
    bench_record section="$S" name="$L: API requests in $IDLE idle seconds" value="$(field "$HD" . . "$T/idle-$n")" \
        how="audit log, agents and controller; Lease writes among them: $leases"

    local m=$(((n + 9) / 10)) idx=() i
    for i in $(seq 1 "$m"); do idx+=("$(((i - 1) * n / m + 1))"); done
    echo "=== $S: $m of $n nodes change a device ($CHANGED_DEV to vfio-pci) and rescan at once (SIGHUP)"
    for i in "${idx[@]}"; do move_driver "$T/n/$i/sys" "$CHANGED_DEV" vfio-pci; done
    local h0 h1 dev=${CHANGED_DEV//:/}
    dev=${dev//./}
    h0=$(now)
    for i in "${idx[@]}"; do kill -HUP "${AGENTS[$((i - 1))]}"; done
    h1=$(audit follow "$AUDIT" "$m" "$TIMEOUT" pcidevices patch "-$dev\$" "$h0") ||
        { echo "scale: the changed devices were not all written" >&2; return 1; }
    got=$(kubectl get pcidevices -o jsonpath='{range .items[*]}{.metadata.name} {.status.kernelDriverInUse}{"\n"}{end}' |
        grep -c -- "-$dev vfio-pci$" || true)
    bench_record section="$S" name="$L: $m nodes change a device at once -> all PCIDevices show it" \
        value="$(secs "$h0" "$h1")" unit=s how="SIGHUP to the audit log's last status patch ($got of $m show vfio-pci)"

    local c=$CLAIMS
    [ "$c" -le $((n * ${#CLAIMABLE[@]})) ] || c=$((n * ${#CLAIMABLE[@]}))
    echo "=== $S: $c PCIDeviceClaims over $n nodes at once, with the controller"
    local k node a name
    : >"$T/claims-$n.yaml"
    for k in $(seq 0 $((c - 1))); do
        i=$((k % n))
        a=${CLAIMABLE[$(((i + k / n) % ${#CLAIMABLE[@]}))]}
        node=$(node_name $((i + 1)))
        name=${a//:/}
        name=$node-${name//./}
        printf 'apiVersion: devices.harvesterhci.io/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: %s}\nspec: {address: "%s", nodeName: %s}\n---\n' \
            "$name" "$a" "$node" >>"$T/claims-$n.yaml"
        grep -F "$a" "$T/resources" | awk '{print $2}'
    done | sort -u >"$T/want-$n"
    local k0 deadline=$((SECONDS + TIMEOUT)) ready entries
    k0=$(now)
    kubectl create -f "$T/claims-$n.yaml" >/dev/null
    while :; do
        ready=$(kubectl get pcideviceclaims -o jsonpath='{range .items[*]}{.status.passthroughEnabled} {range .status.conditions[?(@.type=="Ready")]}{.status}{end}{"\n"}{end}' |
            grep -c '^true True$' || true)
        entries=$(kubectl get kubevirt -n kubevirt kubevirt -o jsonpath='{range .spec.configuration.permittedHostDevices.pciHostDevices[*]}{.resourceName}{"\n"}{end}' | sort -u)
        [ "$ready" -eq "$c" ] && [ "$entries" = "$(cat "$T/want-$n")" ] && break
        if [ $SECONDS -ge $deadline ]; then
            echo "scale: $ready of $c claims Ready, CR entries: $entries; not Ready:" >&2
            kubectl get pcideviceclaims -o jsonpath='{range .items[*]}{.metadata.name} {.status.passthroughEnabled} {range .status.conditions[*]}{.type}={.status} {.reason} {.message}; {end}{"\n"}{end}' |
                grep -v ' true Ready=True' | head -5 >&2
            return 1
        fi
        sleep 0.5
    done
    local k1 k2
    k1=$(audit last "$AUDIT" "$k0" pcideviceclaims "$WR")
    k2=$(audit last "$AUDIT" "$k0" kubevirts "$WR")
    [ -n "$k2" ] || k2=$k1
    bench_record section="$S" name="$L: $c claims at once -> all Ready" value="$(secs "$k0" "$k1")" unit=s \
        how="kubectl create of the $c claims to the audit log's last claim write"
    bench_record section="$S" name="$L: $c claims at once -> KubeVirt CR right" \
        value="$(secs "$k0" "$(awk -v a="$k1" -v b="$k2" 'BEGIN {print (a > b ? a : b)}')")" unit=s \
        how="to the later of the last claim write and the controller's last CR write ($(wc -l <"$T/want-$n") entries)"

    stop_all
    plane_down "$PLANE"
    PLANE=""
}

hack/mk-sysfs-fixture.sh test/fixtures/sysfs/node-64.txt "$T/template" >/dev/null
mkdir -p "$T/template/module/vfio_iommu_type1"
bench_fake_proc "$T/proc"
# address -> resource name, for the KubeVirt CR entries the claims need
bin/hostdevd inventory --sysfs-root "$T/template" --proc-root "$T/proc" -o table |
    awk '$1 == "pci" {print $3, $7}' >"$T/resources"
for n in $NODES; do
    modes=with
    for w in $WITHOUT; do
        [ "$w" != "$n" ] || { [ "$FIRST" = with ] && modes="with without" || modes="without with"; }
    done
    for m in $modes; do run "$n" "$m"; done
done
