#!/usr/bin/env bash
# A real kubelet for tests, registered with a control plane from hack/cluster.sh and running pods
# on test/fakecri (an in-memory CRI runtime that records every CreateContainer), so device
# plugins can be tried against the real kubelet. Needs root.
#
#   hack/kubelet.sh up DIR CLUSTER_DIR [NODE]  start fakecri and kubelet (node NODE, default
#                                              kubelet-node); wait until the Node is Ready.
#                                              Idempotent: a healthy pair is left alone.
#   hack/kubelet.sh restart DIR                SIGTERM kubelet, start it again (fakecri keeps its
#                                              pods), wait for a Ready heartbeat newer than before
#   hack/kubelet.sh down DIR [--purge]         stop both, restore the sysctls, unmount leftovers
#   hack/kubelet.sh status DIR                 exit 0 when both run and the Node is Ready
#
# Containment: kubelet runs in its own mount namespace (unshare --mount --propagation private)
# with DIR/varlib bound on /var/lib and DIR/varlog on /var/log, because its device-plugin
# directory is the constant /var/lib/kubelet/device-plugins whatever --root-dir says. It also
# sets global sysctls (vm.overcommit_memory, kernel.panic, kernel.panic_on_oops); the values from
# before the first of any concurrently running harnesses are saved in $STATE and restored when the
# last one goes down.
#
# DIR/env (KEY=value lines): KUBELET_NODE, DEVICE_PLUGIN_DIR (the host's path of kubelet's
# device-plugin directory, where kubelet.sock is), PLUGINS_REGISTRY_DIR, CRI_RECORD (one JSON line
# per CreateContainer), KUBELET_PID, KUBELET_LOG, FAKECRI_PID, FAKECRI_LOG, FAKECRI_SOCKET,
# KUBELET_ROOT, KUBELET_KUBECONFIG, CLUSTER_DIR.
set -euo pipefail

HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
START_TIMEOUT=${KUBELET_START_TIMEOUT:-60}
STOP_TIMEOUT=${KUBELET_STOP_TIMEOUT:-20}
VERBOSITY=${KUBELET_V:-1}
STATE=${HOSTDEVD_KUBELET_STATE:-/run/hostdevd-kubelet}
SYSCTLS=(vm.overcommit_memory kernel.panic kernel.panic_on_oops)

ms_since() { echo $((($(date +%s%N) - $1) / 1000000)); }
die() { echo "kubelet.sh: $*" >&2; exit 1; }
note() { echo "kubelet.sh: $*" >&2; }

# --- processes ---------------------------------------------------------------------------------

# Prints the pid in $D/NAME.pid if that process is alive (not a zombie) and runs BINARY, or
# nothing, so a recycled pid never gets signalled.
pid_of() { # name binary
    local f="$D/$1.pid" pid
    [ -f "$f" ] || return 0
    pid=$(cat "$f")
    [ -n "$pid" ] && alive "$pid" || return 0
    if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "/$2 "; then
        echo "$pid"
    fi
}

# A process is alive while /proc/PID exists and is not a zombie: PID 1 here reaps orphans only
# every few seconds, so `kill -0` would wait on the dead.
alive() {
    local state
    state=$(awk '/^State:/{print $2}' "/proc/$1/status" 2>/dev/null) || return 1
    [ -n "$state" ] && [ "$state" != Z ] && [ "$state" != X ]
}

stop_process() { # name binary
    local pid deadline
    pid=$(pid_of "$1" "$2")
    rm -f "$D/$1.pid"
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    deadline=$((SECONDS + STOP_TIMEOUT))
    while alive "$pid" && [ $SECONDS -lt $deadline ]; do sleep 0.05; done
    if alive "$pid"; then
        note "$1 (pid $pid) ignored SIGTERM for ${STOP_TIMEOUT}s; killing it"
        kill -KILL "$pid" 2>/dev/null || true
        while alive "$pid"; do sleep 0.05; done
    fi
}

# Waits until FILE exists and is not empty (a pid written by the started process itself).
wait_file() { # file seconds
    local deadline=$((SECONDS + $2))
    until [ -s "$1" ]; do
        [ $SECONDS -lt $deadline ] || return 1
        sleep 0.02
    done
}

free_ports() {
    python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

# --- sysctls -----------------------------------------------------------------------------------

# $STATE/users/ has one file per harness directory holding the sysctls; $STATE/sysctl.saved
# the values from before the first of them. Users whose directory is gone are dropped.
sysctl_users() {
    local u
    for u in "$STATE"/users/*; do
        [ -f "$u" ] || continue
        if [ -d "$(cat "$u")" ]; then echo "$u"; else rm -f "$u"; fi
    done
}

sysctl_acquire() {
    local key s
    key=$(printf '%s' "$D" | sha256sum | cut -c1-16)
    mkdir -p "$STATE/users"
    (
        flock 8
        if [ -z "$(sysctl_users)" ] || [ ! -f "$STATE/sysctl.saved" ]; then
            for s in "${SYSCTLS[@]}"; do
                printf '%s=%s\n' "$s" "$(sysctl -n "$s")"
            done >"$STATE/sysctl.saved.tmp"
            mv "$STATE/sysctl.saved.tmp" "$STATE/sysctl.saved"
        fi
        echo "$D" >"$STATE/users/$key"
    ) 8>"$STATE/.lock"
}

sysctl_release() {
    local key line
    key=$(printf '%s' "$D" | sha256sum | cut -c1-16)
    [ -f "$STATE/users/$key" ] || return 0
    (
        flock 8
        rm -f "$STATE/users/$key"
        if [ -z "$(sysctl_users)" ] && [ -f "$STATE/sysctl.saved" ]; then
            while read -r line; do
                sysctl -q -w "$line" >/dev/null
            done <"$STATE/sysctl.saved"
            rm -f "$STATE/sysctl.saved"
        fi
    ) 8>"$STATE/.lock"
}

# --- configuration -----------------------------------------------------------------------------

load_cluster() {
    [ -f "$CLUSTER_DIR/env" ] || die "$CLUSTER_DIR has no control plane (run: hack/cluster.sh up DIR)"
    # shellcheck disable=SC1091
    . "$CLUSTER_DIR/env"
    [ -x "$K8S_BIN/kubelet" ] || K8S_BIN=$("$HACK/k8s-build.sh")
    [ -x "$K8S_BIN/kubelet" ] || die "no kubelet in $K8S_BIN"
    KUBECTL=("$K8S_BIN/kubectl" --kubeconfig "$CLUSTER_DIR/admin.kubeconfig"
        --cache-dir "$D/.kube-cache")
}

load_state() {
    [ -f "$D/state" ] || die "$D has no kubelet (run: hack/kubelet.sh up $D CLUSTER_DIR)"
    # shellcheck disable=SC1091
    . "$D/state"
    load_cluster
}

# The kubelet's identity: a client certificate system:node:NODE (groups system:nodes and
# system:masters, as the apiserver has no Node authorizer) signed by the cluster's CA, so the
# audit log tells kubelet's requests apart from the tests' admin ones.
make_kubeconfig() {
    local p="$CLUSTER_DIR/pki" k="$D/pki"
    if ! [ -f "$k/node.crt" ] || [ "$(cat "$k/node.name" 2>/dev/null)" != "$NODE" ] ||
        ! openssl verify -CAfile "$p/ca.crt" "$k/node.crt" >/dev/null 2>&1; then
        mkdir -p "$k"
        chmod 700 "$k"
        openssl req -new -newkey rsa:2048 -nodes -subj "/O=system:nodes/O=system:masters/CN=system:node:$NODE" \
            -keyout "$k/node.key" -out "$k/node.csr" 2>/dev/null
        openssl x509 -req -in "$k/node.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial \
            -CAserial "$k/ca.srl" -days 30 -out "$k/node.crt" 2>/dev/null \
            -extfile <(printf 'extendedKeyUsage=clientAuth\nkeyUsage=digitalSignature,keyEncipherment\n')
        rm -f "$k/node.csr"
        echo "$NODE" >"$k/node.name"
    fi
    (
        umask 077
        cat >"$D/kubelet.kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: hostdevd-local
  cluster:
    server: $K8S_SERVER
    certificate-authority: $p/ca.crt
users:
- name: kubelet
  user:
    client-certificate: $k/node.crt
    client-key: $k/node.key
contexts:
- name: kubelet
  context: {cluster: hostdevd-local, user: kubelet}
current-context: kubelet
EOF
    )
}

write_config() {
    local port healthz
    read -r port healthz <<<"$(free_ports 2)"
    cat >"$D/config.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://$D/run/fakecri.sock
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
cgroupsPerQOS: false
enforceNodeAllocatable: []
address: 127.0.0.1
port: $port
healthzBindAddress: 127.0.0.1
healthzPort: $healthz
readOnlyPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: $CLUSTER_DIR/pki/ca.crt}
authorization: {mode: AlwaysAllow}
podLogsDir: /var/log/pods
volumePluginDir: $D/volume-plugins
evictionHard: {memory.available: 1Mi, nodefs.available: 1%, nodefs.inodesFree: 1%, imagefs.available: 1%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
nodeStatusUpdateFrequency: 1s
nodeStatusReportFrequency: 1m
EOF
    echo "$healthz" >"$D/healthz.port"
}

write_env() {
    cat >"$D/env" <<EOF
KUBELET_NODE=$NODE
DEVICE_PLUGIN_DIR=$D/varlib/kubelet/device-plugins
PLUGINS_REGISTRY_DIR=$D/varlib/kubelet/plugins_registry
KUBELET_ROOT=$D/varlib/kubelet
CRI_RECORD=$D/cri-record.jsonl
KUBELET_PID=$(pid_of kubelet kubelet)
KUBELET_LOG=$D/kubelet.log
FAKECRI_PID=$(pid_of fakecri fakecri)
FAKECRI_LOG=$D/fakecri.log
FAKECRI_SOCKET=$D/run/fakecri.sock
KUBELET_KUBECONFIG=$D/kubelet.kubeconfig
CLUSTER_DIR=$CLUSTER_DIR
EOF
}

# --- components --------------------------------------------------------------------------------

start_fakecri() {
    local bin
    [ -z "$(pid_of fakecri fakecri)" ] || return 0
    bin=$("$HACK/fakecri-build.sh")/fakecri
    mkdir -p "$D/run"
    rm -f "$D/run/fakecri.sock" "$D/fakecri.pid"
    touch "$D/cri-record.jsonl"
    setsid "$bin" --socket "$D/run/fakecri.sock" --record "$D/cri-record.jsonl" \
        >>"$D/fakecri.log" 2>&1 </dev/null 8>&- 9>&- &
    echo $! >"$D/fakecri.pid"
    local deadline=$((SECONDS + 10))
    until [ -S "$D/run/fakecri.sock" ]; do
        if ! alive "$!" || [ $SECONDS -ge $deadline ]; then
            tail -20 "$D/fakecri.log" >&2
            die "fakecri did not start"
        fi
        sleep 0.02
    done
}

# kubelet in a private mount namespace: the inner shell binds the directories, writes its own
# pid (unshare without --fork and exec keep it: that pid is kubelet's) and execs kubelet.
start_kubelet() {
    [ -z "$(pid_of kubelet kubelet)" ] || return 0
    mkdir -p "$D/varlib" "$D/varlog" "$D/volume-plugins"
    rm -f "$D/kubelet.pid"
    echo "=== kubelet start $(date -u +%FT%T.%NZ)" >>"$D/kubelet.log"
    # shellcheck disable=SC2016 # expanded by the inner shell
    setsid unshare --mount --propagation private -- /bin/sh -c '
        mount --bind "$1" /var/lib && mount --bind "$2" /var/log || exit 97
        echo $$ >"$3"
        shift 3
        exec "$@"' kubelet-ns "$D/varlib" "$D/varlog" "$D/kubelet.pid" \
        "$K8S_BIN/kubelet" --config "$D/config.yaml" --kubeconfig "$D/kubelet.kubeconfig" \
        --hostname-override "$NODE" --root-dir /var/lib/kubelet --v "$VERBOSITY" \
        >>"$D/kubelet.log" 2>&1 </dev/null 8>&- 9>&- &
    wait_file "$D/kubelet.pid" 10 || { log_tail; die "kubelet did not start"; }
}

# The end of kubelet's log, without the line it repeats ten times a second before registering.
log_tail() {
    note "last lines of $D/kubelet.log:"
    grep -v 'Unable to register mirror pod' "$D/kubelet.log" | tail -25 >&2
}

# Prints "STATUS HEARTBEAT" of the Node's Ready condition (empty before registration).
ready_condition() {
    "${KUBECTL[@]}" get node "$NODE" --request-timeout 5s \
        -o jsonpath='{range .status.conditions[?(@.type=="Ready")]}{.status} {.lastHeartbeatTime}{end}' \
        2>/dev/null || true
}

# Waits until the Node is Ready with a heartbeat later than $1 (an RFC 3339 time, or empty).
wait_ready() { # after
    local deadline=$((SECONDS + START_TIMEOUT)) cond pid
    pid=$(cat "$D/kubelet.pid")
    while :; do
        cond=$(ready_condition)
        if [ "${cond%% *}" = True ] && [[ "${cond#* }" > "$1" ]]; then
            return 0
        fi
        if ! alive "$pid"; then
            note "kubelet exited"
            log_tail
            return 1
        fi
        if [ $SECONDS -ge $deadline ]; then
            note "Node $NODE not Ready (${cond:-not registered}) within ${START_TIMEOUT}s"
            log_tail
            return 1
        fi
        sleep 0.2
    done
}

# Mounts left under DIR, or of DIR's directories on /var/lib and /var/log (only if the private
# propagation failed), lazily unmounted, deepest first.
unmount_leftovers() {
    local m
    awk -v d="$D" '$5 == d || index($5, d "/") == 1 ||
        (($5 == "/var/lib" || $5 == "/var/log") && index($4, d "/var") > 0) {print $5}' \
        /proc/self/mountinfo | sort -r | while read -r m; do
        note "unmounting leftover $m"
        umount -l "$m" || true
    done
}

# --- commands ----------------------------------------------------------------------------------

running() {
    [ -n "$(pid_of fakecri fakecri)" ] && [ -n "$(pid_of kubelet kubelet)" ] &&
        [ "$(ready_condition | cut -d' ' -f1)" = True ]
}

cmd_up() {
    [ "$(id -u)" -eq 0 ] || die "needs root (mount namespace, bind mounts, kubelet's sysctls)"
    mkdir -p "$D"
    exec 9>"$D/.lock"
    flock 9
    load_cluster
    if [ -f "$D/state" ]; then
        if running; then
            write_env
            return 0
        fi
        if [ -n "$(pid_of fakecri fakecri)$(pid_of kubelet kubelet)" ]; then
            note "restarting a partly running kubelet in $D"
        fi
        cmd_down_locked
    fi
    printf 'CLUSTER_DIR=%q\nNODE=%q\n' "$CLUSTER_DIR" "$NODE" >"$D/state"
    make_kubeconfig
    write_config
    sysctl_acquire
    local t0
    t0=$(date +%s%N)
    start_fakecri
    start_kubelet
    wait_ready "" || { cmd_down_locked; die "kubelet did not get Ready; logs in $D"; }
    write_env
    note "Node $NODE Ready $(ms_since "$t0") ms after start; env in $D/env"
}

cmd_restart() {
    exec 9>"$D/.lock"
    flock 9
    load_state
    local before t0
    t0=$(date +%s%N)
    stop_process kubelet kubelet
    before=$(ready_condition)
    before=${before#* }
    # Heartbeats have one-second resolution: start in a later second than the last one.
    while [ "$(date -u +%FT%TZ)" = "$before" ]; do sleep 0.05; done
    start_fakecri
    start_kubelet
    wait_ready "$before" || die "kubelet did not get Ready again; logs in $D"
    write_env
    note "kubelet restarted, Node $NODE Ready again in $(ms_since "$t0") ms"
}

cmd_down_locked() {
    stop_process kubelet kubelet
    stop_process fakecri fakecri
    unmount_leftovers
    sysctl_release
}

cmd_down() {
    [ -d "$D" ] || return 0
    exec 9>"$D/.lock"
    flock 9
    cmd_down_locked
    if [ "${1:-}" = --purge ]; then
        rm -rf "$D"
    else
        rm -f "$D/env"
    fi
}

cmd_status() {
    load_state
    running
}

main() {
    [ $# -ge 2 ] || die "usage: hack/kubelet.sh up DIR CLUSTER_DIR [NODE] | restart|down|status DIR"
    local cmd=$1
    D=$(realpath -m "$2")
    shift 2
    case "$cmd" in
    up)
        [ $# -ge 1 ] || die "up needs the control plane's directory (hack/cluster.sh up DIR)"
        CLUSTER_DIR=$(realpath -m "$1")
        NODE=${2:-kubelet-node}
        cmd_up
        ;;
    restart) cmd_restart ;;
    down) cmd_down "$@" ;;
    status) cmd_status ;;
    *) die "unknown command $cmd" ;;
    esac
}

main "$@"
