#!/usr/bin/env bash
# A real kubelet for tests, registered with a control plane from hack/cluster.sh, in one of two
# modes (KUBELET_RUNTIME at `up`, remembered until `down`):
#
#   fake        (default) pods run on test/fakecri, an in-memory CRI runtime that records every
#               CreateContainer and starts nothing, so device plugins can be tried against the
#               real kubelet in a second.
#   containerd  pods run for real: containerd 2 (hack/containerd-build.sh) with its CRI plugin,
#               Debian's runc and CNI plugins (bridge, host-local, loopback), the sandbox image
#               hack/testbox-image.sh makes (no registry is ever asked: import images with
#               $CTR images import, see DIR/env). See "The containerd node" below.
#
# Needs root.
#
#   hack/kubelet.sh up DIR CLUSTER_DIR [NODE]  start the runtime and kubelet (node NODE, default
#                                              kubelet-node); wait until the Node is Ready.
#                                              Idempotent: a healthy node is left alone.
#   hack/kubelet.sh restart DIR                SIGTERM kubelet, start it again (the runtime keeps
#                                              its pods), wait for a Ready heartbeat newer than before
#   hack/kubelet.sh down DIR [--purge]         stop everything, restore the sysctls, unmount leftovers
#   hack/kubelet.sh status DIR                 exit 0 when everything runs and the Node is Ready
#
# KUBELET_ROOT_DIR at `up` (remembered until `down`; default /var/lib/kubelet, must be under
# /var/lib/) is kubelet's --root-dir: a node whose kubelet keeps its plugins elsewhere. Its
# device-plugin directory stays /var/lib/kubelet/device-plugins, as kubelet's is a constant.
#
# Containment: kubelet runs in its own mount namespace (unshare --mount --propagation private)
# with DIR/varlib bound on /var/lib and DIR/varlog on /var/log, because its device-plugin
# directory is the constant /var/lib/kubelet/device-plugins whatever --root-dir says. It also
# sets global sysctls (vm.overcommit_memory, kernel.panic, kernel.panic_on_oops); the values from
# before the first of any concurrently running harnesses are saved in $STATE and restored when the
# last one goes down.
#
# The containerd node: kubelet, containerd and its shims share one mount namespace and one network
# namespace of their own, held by a small process (DIR/node.pid; enter it with
# `nsenter -t $NODE_NS_PID -m -n`). In it DIR/varlib is /var/lib, DIR/varlog /var/log and
# DIR/noderun /run (so /var/run/cdi, /run/udev, runc's and CNI's state are the node's own), lo is
# up and holds the node's IP (NODE_IP) and the address of the `kubernetes` Service (not a dummy
# interface: the kernel may have no dummy module). Nothing reaches the host's network: the CNI bridge, the pods' veths and whatever
# iptables rules kubelet and the plugins make live in that namespace and vanish with it. The API
# server (127.0.0.1 on the host) is carried in by socat: one on the host listening on
# DIR/apiserver.sock, two in the node listening on 127.0.0.1:<its port> (kubelet's kubeconfig)
# and on the Service's address and port (what pods' in-cluster configuration dials: no
# kube-proxy is needed). hostNetwork pods share the node's namespace, so the "host" network an
# agent sees there is the node's, not the machine's. /sys, /dev, /lib/modules and /proc are the
# machine's. containerd's root, state and socket are under DIR/containerd, its config
# (DIR/containerd/config.toml) is `containerd config default` with the paths, the sandbox image,
# cgroupfs (kubelet's cgroupDriver), no NRI, no AppArmor changed, and restrict_oom_score_adj on:
# kubelet asks for -998 for sandboxes and below 0 for critical pods, and a root without
# CAP_SYS_RESOURCE (as in a container, or this machine) may not lower a process's
# oom_score_adj, so runc failed every sandbox ("failed to update /proc/self/oom_score_adj:
# Permission denied"); restricted, no container gets a lower value than containerd's own. Containers' cgroups are made by
# runc under /k8s.io in each hierarchy; `down` kills every task, deletes it and its container,
# stops containerd and the rest, and removes what it left of /k8s.io.
#
# DIR/env (KEY=value lines): KUBELET_RUNTIME, KUBELET_NODE, DEVICE_PLUGIN_DIR (the host's path of kubelet's
# device-plugin directory, where kubelet.sock is), PLUGINS_REGISTRY_DIR, CRI_RECORD (one JSON line
# per CreateContainer), KUBELET_PID, KUBELET_LOG, FAKECRI_PID, FAKECRI_LOG, FAKECRI_SOCKET,
# KUBELET_ROOT, KUBELET_KUBECONFIG, CLUSTER_DIR; in the containerd mode also
# CONTAINERD_PID, CONTAINERD_LOG, CONTAINERD_SOCKET, CTR (a ctr command line for the k8s.io
# namespace), NODE_NS_PID, NODE_IP, SANDBOX_IMAGE (the test box image: busybox, `sleep` for ever).
set -euo pipefail

HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
START_TIMEOUT=${KUBELET_START_TIMEOUT:-60}
STOP_TIMEOUT=${KUBELET_STOP_TIMEOUT:-20}
VERBOSITY=${KUBELET_V:-1}
STATE=${HOSTDEVD_KUBELET_STATE:-/run/hostdevd-kubelet}
SYSCTLS=(vm.overcommit_memory kernel.panic kernel.panic_on_oops)
# The containerd node's own address (on its lo) and its pods' subnet; both
# exist only in the node's network namespace.
NODE_IP=10.245.0.1
POD_SUBNET=10.244.0.0/24

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

free_ports() { python3 "$HACK/free-ports.py" "$1"; } # below the ephemeral range: hack/free-ports.py

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
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "/O=system:nodes/O=system:masters/CN=system:node:$NODE" \
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
containerRuntimeEndpoint: unix://$(runtime_socket)
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

runtime_socket() {
    if [ "$RUNTIME" = containerd ]; then echo "$D/containerd/containerd.sock"; else echo "$D/run/fakecri.sock"; fi
}

write_env() {
    cat >"$D/env" <<EOF
KUBELET_RUNTIME=$RUNTIME
KUBELET_NODE=$NODE
DEVICE_PLUGIN_DIR=$D/varlib/kubelet/device-plugins
PLUGINS_REGISTRY_DIR=$D/varlib/${ROOT_DIR#/var/lib/}/plugins_registry
KUBELET_ROOT=$D/varlib/${ROOT_DIR#/var/lib/}
CRI_RECORD=$D/cri-record.jsonl
KUBELET_PID=$(pid_of kubelet kubelet)
KUBELET_LOG=$D/kubelet.log
FAKECRI_PID=$(pid_of fakecri fakecri)
FAKECRI_LOG=$D/fakecri.log
FAKECRI_SOCKET=$D/run/fakecri.sock
KUBELET_KUBECONFIG=$D/kubelet.kubeconfig
CLUSTER_DIR=$CLUSTER_DIR
EOF
    if [ "$RUNTIME" = containerd ]; then
        cat >>"$D/env" <<EOF
CONTAINERD_PID=$(pid_of containerd containerd)
CONTAINERD_LOG=$D/containerd.log
CONTAINERD_SOCKET=$D/containerd/containerd.sock
CTR="$CONTAINERD_BIN/ctr --address $D/containerd/containerd.sock -n k8s.io"
NODE_NS_PID=$(pid_of node sh)
NODE_IP=$NODE_IP
SANDBOX_IMAGE=$SANDBOX_IMAGE
EOF
    fi
}

# --- the containerd node -----------------------------------------------------------------------

# The binaries and the sandbox image (built or found in their caches).
containerd_tools() {
    CONTAINERD_BIN=$("$HACK/containerd-build.sh")
    read -r TESTBOX_ARCHIVE SANDBOX_IMAGE <<<"$("$HACK/testbox-image.sh")"
}

# The node's namespaces, held by a shell that sets them up (mounts, lo, node0, the socats that
# carry the API server in) and then waits; its pid is DIR/node.pid. The host's end of the
# API server's way in is a socat of its own (DIR/apiproxy.pid).
start_node() {
    local api_port svc_ip svc_port
    [ -z "$(pid_of node sh)" ] && [ -z "$(pid_of apiproxy socat)" ] || return 0
    stop_node
    api_port=${K8S_SERVER##*:}
    read -r svc_ip svc_port <<<"$("${KUBECTL[@]}" get service kubernetes -n default \
        -o jsonpath='{.spec.clusterIP} {.spec.ports[0].port}')"
    if [ -z "$svc_ip" ] || [ -z "$svc_port" ]; then die "no Service default/kubernetes"; fi
    mkdir -p "$D/varlib" "$D/varlog" "$D/noderun"
    rm -f "$D/apiserver.sock" "$D/node.pid" "$D/apiproxy.pid"
    setsid "$(command -v socat)" "UNIX-LISTEN:$D/apiserver.sock,fork,mode=600" "TCP:127.0.0.1:$api_port" \
        >>"$D/apiproxy.log" 2>&1 </dev/null 8>&- 9>&- &
    echo $! >"$D/apiproxy.pid"
    # shellcheck disable=SC2016 # expanded by the inner shell
    setsid unshare --mount --net --propagation private --fork -- /bin/sh -c '
        set -e
        D=$1
        mount --bind "$D/varlib" /var/lib
        mount --bind "$D/varlog" /var/log
        mount --bind "$D/noderun" /run
        ip link set lo up
        ip addr add "$2/32" dev lo
        ip addr add "$4/32" dev lo
        socat "TCP-LISTEN:$3,bind=127.0.0.1,fork,reuseaddr" "UNIX-CONNECT:$D/apiserver.sock" &
        p1=$!
        socat "TCP-LISTEN:$5,bind=$4,fork,reuseaddr" "UNIX-CONNECT:$D/apiserver.sock" &
        trap "kill $p1 $! 2>/dev/null; exit 0" TERM
        echo $$ >"$D/node.pid"
        wait' node-ns "$D" "$NODE_IP" "$api_port" "$svc_ip" "$svc_port" \
        >>"$D/node.log" 2>&1 </dev/null 8>&- 9>&- &
    wait_file "$D/node.pid" 10 || { tail -20 "$D/node.log" >&2; die "the node's namespaces did not start"; }
}

stop_node() {
    stop_process node sh
    stop_process apiproxy socat
    rm -f "$D/apiserver.sock"
}

# Runs COMMAND in the node's namespaces, as a daemon whose pid (the command's own: nsenter and
# the shell exec) goes to DIR/NAME.pid.
node_daemon() { # name log command...
    local name=$1 log=$2
    shift 2
    rm -f "$D/$name.pid"
    # shellcheck disable=SC2016 # expanded by the inner shell
    setsid nsenter -t "$(pid_of node sh)" --mount --net -- /bin/sh -c '
        echo $$ >"$1"
        shift
        exec "$@"' "$name" "$D/$name.pid" "$@" >>"$log" 2>&1 </dev/null 8>&- 9>&- &
    wait_file "$D/$name.pid" 10 || die "$name did not start"
}

write_containerd_config() {
    local c="$D/containerd"
    mkdir -p "$c" "$D/cni/net.d"
    "$CONTAINERD_BIN/containerd" config default 2>/dev/null | sed \
        -e "s|^root = .*|root = '$c/root'|" \
        -e "s|^state = .*|state = '$c/state'|" \
        -e "s|^imports = .*|imports = []|" \
        -e "s|^\( *sandbox = \).*|\1'$SANDBOX_IMAGE'|" \
        -e "s|^\( *disable_apparmor = \).*|\1true|" \
        -e "s|^\( *restrict_oom_score_adj = \).*|\1true|" \
        -e "s|^\( *cdi_spec_dirs = \).*|\1['/var/run/cdi']|" \
        -e "s|^\( *BinaryName = \).*|\1'$(command -v runc)'|" \
        -e "s|^\( *SystemdCgroup = \).*|\1false|" \
        -e "s|^\( *bin_dirs = \).*|\1['/usr/lib/cni']|" \
        -e "s|^\( *conf_dir = \).*|\1'$D/cni/net.d'|" \
        -e "/nri.v1.nri'\]/,/^$/s|^\( *disable = \).*|\1true|" \
        -e "/server.v1.grpc'\]/,/^$/s|^\( *address = \).*|\1'$c/containerd.sock'|" \
        -e "/server.v1.ttrpc'\]/,/^$/s|^\( *address = \).*|\1'$c/containerd.sock.ttrpc'|" \
        -e "/internal.v1.opt'\]/,/^$/s|^\( *path = \).*|\1'$c/opt'|" \
        >"$c/config.toml"
    # Each changed line must be there: a containerd whose default config moved would otherwise
    # run with the machine's paths.
    local want
    for want in "root = '$c/root'" "sandbox = '$SANDBOX_IMAGE'" "address = '$c/containerd.sock'" \
        "address = '$c/containerd.sock.ttrpc'" "path = '$c/opt'" \
        "conf_dir = '$D/cni/net.d'" "SystemdCgroup = false" "disable_apparmor = true" \
        "restrict_oom_score_adj = true"; do
        grep -qF "$want" "$c/config.toml" || die "containerd's default config changed: no \"$want\" in $c/config.toml"
    done
    cat >"$D/cni/net.d/10-hostdevd.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "hostdevd-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$POD_SUBNET"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    }
  ]
}
EOF
}

ctr_() { "$CONTAINERD_BIN/ctr" --address "$D/containerd/containerd.sock" -n k8s.io "$@"; }

start_containerd() {
    [ -z "$(pid_of containerd containerd)" ] || return 0
    write_containerd_config
    rm -f "$D/containerd/containerd.sock"
    echo "=== containerd start $(date -u +%FT%T.%NZ)" >>"$D/containerd.log"
    node_daemon containerd "$D/containerd.log" env "PATH=$CONTAINERD_BIN:$PATH" \
        "$CONTAINERD_BIN/containerd" --config "$D/containerd/config.toml"
    local deadline=$((SECONDS + 30))
    until ctr_ version >/dev/null 2>&1; do
        if [ -z "$(pid_of containerd containerd)" ] || [ $SECONDS -ge $deadline ]; then
            tail -20 "$D/containerd.log" >&2
            die "containerd did not start"
        fi
        sleep 0.1
    done
    local out
    out=$(ctr_ images import "$TESTBOX_ARCHIVE" 2>&1) || die "ctr cannot import $TESTBOX_ARCHIVE: $out"
}

# Every task killed and deleted (--force) with its container (runc removes the container's cgroups, the
# shim exits), then containerd stopped, then whatever still runs in the node's network or mount
# namespace (shims of tasks containerd lost, the socats), then the node itself.
stop_containerd() {
    local id pid p ns_net='' ns_mnt=''
    if [ -n "$(pid_of containerd containerd)" ]; then
        for id in $(ctr_ tasks ls -q 2>/dev/null); do
            ctr_ tasks delete --force "$id" >/dev/null 2>&1 || true
        done
        for id in $(ctr_ containers ls -q 2>/dev/null); do
            ctr_ containers delete "$id" >/dev/null 2>&1 || true
        done
    fi
    stop_process containerd containerd
    pid=$(pid_of node sh)
    if [ -n "$pid" ]; then
        ns_net=$(readlink "/proc/$pid/ns/net")
        ns_mnt=$(readlink "/proc/$pid/ns/mnt")
    fi
    stop_node
    [ -n "$pid" ] || { remove_cgroups; return 0; }
    for p in /proc/[0-9]*; do
        if [ "$(readlink "$p/ns/net" 2>/dev/null)" = "$ns_net" ] ||
            [ "$(readlink "$p/ns/mnt" 2>/dev/null)" = "$ns_mnt" ]; then
            note "killing $(tr '\0' ' ' <"$p/cmdline" 2>/dev/null | cut -c1-80) (pid ${p#/proc/}), left in the node"
            kill -KILL "${p#/proc/}" 2>/dev/null || true
        fi
    done
    remove_cgroups
}

# What runc leaves of the containers' cgroup parent /k8s.io in each v1 hierarchy (and the
# unified one): empty directories, removed deepest first; a directory still holding a process
# (another node's containers) stays.
remove_cgroups() {
    local h
    for h in /sys/fs/cgroup/*/k8s.io /sys/fs/cgroup/k8s.io; do
        [ -d "$h" ] || continue
        find "$h" -depth -type d -exec rmdir {} + 2>/dev/null || true
    done
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
    if [ "$RUNTIME" = containerd ]; then
        # The node's namespaces have /var/lib and /var/log bound already.
        node_daemon kubelet "$D/kubelet.log" "$K8S_BIN/kubelet" --config "$D/config.yaml" \
            --kubeconfig "$D/kubelet.kubeconfig" --hostname-override "$NODE" --node-ip "$NODE_IP" \
            --root-dir "$ROOT_DIR" --v "$VERBOSITY"
        return 0
    fi
    # shellcheck disable=SC2016 # expanded by the inner shell
    setsid unshare --mount --propagation private -- /bin/sh -c '
        mount --bind "$1" /var/lib && mount --bind "$2" /var/log || exit 97
        echo $$ >"$3"
        shift 3
        exec "$@"' kubelet-ns "$D/varlib" "$D/varlog" "$D/kubelet.pid" \
        "$K8S_BIN/kubelet" --config "$D/config.yaml" --kubeconfig "$D/kubelet.kubeconfig" \
        --hostname-override "$NODE" --root-dir "$ROOT_DIR" --v "$VERBOSITY" \
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
    if [ "$RUNTIME" = containerd ]; then
        [ -n "$(pid_of node sh)" ] && [ -n "$(pid_of apiproxy socat)" ] &&
            [ -n "$(pid_of containerd containerd)" ] || return 1
    else
        [ -n "$(pid_of fakecri fakecri)" ] || return 1
    fi
    [ -n "$(pid_of kubelet kubelet)" ] && [ "$(ready_condition | cut -d' ' -f1)" = True ]
}

# Some process of this directory's node still runs.
any_running() {
    [ -n "$(pid_of fakecri fakecri)$(pid_of kubelet kubelet)$(pid_of containerd containerd)$(pid_of node sh)$(pid_of apiproxy socat)" ]
}

start_runtime() {
    if [ "$RUNTIME" = containerd ]; then
        containerd_tools
        start_node
        start_containerd
    else
        start_fakecri
    fi
}

cmd_up() {
    [ "$(id -u)" -eq 0 ] || die "needs root (mount namespace, bind mounts, kubelet's sysctls)"
    mkdir -p "$D"
    exec 9>"$D/.lock"
    flock 9
    load_cluster
    if [ -f "$D/state" ]; then
        local want=$RUNTIME
        # shellcheck disable=SC1091
        RUNTIME=fake ROOT_DIR=/var/lib/kubelet . "$D/state"
        if [ "$RUNTIME" = "$want" ] && [ "$ROOT_DIR" = "$want_root" ] && running; then
            [ "$RUNTIME" != containerd ] || containerd_tools
            write_env
            return 0
        fi
        if any_running; then
            note "restarting a partly running kubelet in $D"
        fi
        [ "$RUNTIME" != containerd ] || containerd_tools
        cmd_down_locked
        RUNTIME=$want
    fi
    ROOT_DIR=$want_root
    printf 'CLUSTER_DIR=%q\nNODE=%q\nRUNTIME=%q\nROOT_DIR=%q\n' "$CLUSTER_DIR" "$NODE" "$RUNTIME" "$ROOT_DIR" >"$D/state"
    make_kubeconfig
    write_config
    sysctl_acquire
    local t0
    t0=$(date +%s%N)
    # Whatever fails on the way (a die) takes down what was started.
    trap cmd_down_locked EXIT
    start_runtime
    start_kubelet
    wait_ready "" || die "kubelet did not get Ready; logs in $D"
    trap - EXIT
    write_env
    note "Node $NODE Ready $(ms_since "$t0") ms after start ($RUNTIME runtime); env in $D/env"
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
    start_runtime
    start_kubelet
    wait_ready "$before" || die "kubelet did not get Ready again; logs in $D"
    write_env
    note "kubelet restarted, Node $NODE Ready again in $(ms_since "$t0") ms"
}

cmd_down_locked() {
    stop_process kubelet kubelet
    stop_process fakecri fakecri
    if [ "$RUNTIME" = containerd ]; then
        [ -n "${CONTAINERD_BIN:-}" ] || CONTAINERD_BIN=$("$HACK/containerd-build.sh")
        stop_containerd
    fi
    unmount_leftovers
    sysctl_release
}

cmd_down() {
    [ -d "$D" ] || return 0
    exec 9>"$D/.lock"
    flock 9
    RUNTIME=fake
    # shellcheck disable=SC1091
    [ ! -f "$D/state" ] || . "$D/state"
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
    RUNTIME=${KUBELET_RUNTIME:-fake}
    ROOT_DIR=/var/lib/kubelet
    want_root=${KUBELET_ROOT_DIR:-/var/lib/kubelet}
    want_root=${want_root%/}
    case "$want_root" in /var/lib/?*) ;; *) die "KUBELET_ROOT_DIR=$want_root: a directory under /var/lib/" ;; esac
    case "$RUNTIME" in fake | containerd) ;; *) die "KUBELET_RUNTIME=$RUNTIME: fake or containerd" ;; esac
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
