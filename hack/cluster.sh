#!/usr/bin/env bash
# A real local Kubernetes control plane for tests and the demo: etcd, kube-apiserver (RBAC,
# client-certificate CA, service-account issuer and keys, audit log) and kube-controller-manager
# (garbage collector, namespace, service account, role aggregation, and DRA's resourceclaim and
# device-taint-eviction controllers), and on request kube-scheduler, all on 127.0.0.1 with free
# ports, state and logs in one directory.
#
#   hack/cluster.sh up DIR [--with-scheduler]
#                                          start (idempotent: a healthy plane is left alone, but
#                                          kube-scheduler is started or stopped to match the flag)
#   hack/cluster.sh down DIR [--purge]     stop everything; --purge also removes DIR
#   hack/cluster.sh stop|start|restart DIR etcd|apiserver|controller-manager|scheduler
#   hack/cluster.sh status DIR             exit 0 when the plane's components (those `up` started)
#                                          run and the API is ready
#   hack/cluster.sh env DIR                print the export line
#
# kube-scheduler (--with-scheduler; for DRA allocation tests) runs as system:kube-scheduler
# without leader election, with the default profile (DynamicResources included), serving
# /readyz on a free port (DIR/scheduler.port) that `up` waits on; nothing else schedules pods.
#
# DIR gets: kubeconfig (admin, contexts admin/alice/bob), admin|alice|bob.kubeconfig,
# env (K8S_SERVER, K8S_CA, KUBECONFIG, ...), components (the set `up` started), pki/, etcd/,
# *.log, audit.log.
# Users: admin (group system:masters), alice and bob (group developers), all client certificates.
# CLUSTER_GO_ENV: NAME=VALUE words in every component's environment (make test's suites run the
# plane without Go's garbage collector below a memory limit: hack/run-tests.sh).
# CLUSTER_AUDIT_BACKUPS: rotated audit logs of 200 MB kept (default 1; make bench's scale section
# keeps them all: a cold start of 1,000 agents writes more than 1 GB of audit log, and its
# request counts are read afterwards).
set -euo pipefail

HACK=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ALL_COMPONENTS=(etcd apiserver controller-manager scheduler)
BASE_COMPONENTS=(etcd apiserver controller-manager)
COMPONENTS=("${BASE_COMPONENTS[@]}") # the plane's set: DIR/components once `up` wrote it
START_TIMEOUT=${CLUSTER_START_TIMEOUT:-120}

die() { echo "cluster: $*" >&2; exit 1; }
note() { echo "cluster: $*" >&2; }

bin_dir() {
    if [ -z "${K8S_BIN:-}" ]; then
        K8S_BIN=$("$HACK/k8s-build.sh")
    fi
    echo "$K8S_BIN"
}

# --- processes ---------------------------------------------------------------------------------

binary_of() {
    case "$1" in
    etcd) echo etcd ;;
    apiserver) echo kube-apiserver ;;
    controller-manager) echo kube-controller-manager ;;
    scheduler) echo kube-scheduler ;;
    *) die "unknown component $1 (etcd, apiserver, controller-manager, scheduler)" ;;
    esac
}

# Prints the pid of a running component, or nothing. Checks the binary, so a recycled pid
# never gets signalled.
pid_of() {
    local f="$D/$1.pid" pid
    [ -f "$f" ] || return 0
    pid=$(cat "$f")
    [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] || return 0
    if tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "/$(binary_of "$1") "; then
        echo "$pid"
    fi
}

stop_component() {
    local pid
    pid=$(pid_of "$1")
    rm -f "$D/$1.pid"
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null || return 0
    for _ in $(seq 1 150); do
        kill -0 "$pid" 2>/dev/null || return 0
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
}

# Picks N free TCP ports on 127.0.0.1 (held together while choosing, so they differ).
free_ports() { python3 "$HACK/free-ports.py" "$1"; } # below the ephemeral range: hack/free-ports.py

port_free() {
    python3 -c 'import socket,sys; s=socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1])))' "$1" \
        2>/dev/null
}

choose_ports() {
    if [ -f "$D/ports.env" ]; then
        # shellcheck disable=SC1091
        . "$D/ports.env"
        local ok=1 p
        for p in "$ETCD_PORT" "$ETCD_PEER_PORT" "$API_PORT"; do
            port_free "$p" || ok=0
        done
        [ "$ok" = 1 ] && return 0
    fi
    read -r ETCD_PORT ETCD_PEER_PORT API_PORT <<<"$(free_ports 3)"
    printf 'ETCD_PORT=%s\nETCD_PEER_PORT=%s\nAPI_PORT=%s\n' \
        "$ETCD_PORT" "$ETCD_PEER_PORT" "$API_PORT" >"$D/ports.env"
}

load_ports() {
    [ -f "$D/ports.env" ] || die "$D has no control plane (run: hack/cluster.sh up $D)"
    # shellcheck disable=SC1091
    . "$D/ports.env"
    if [ -f "$D/components" ]; then
        read -r -a COMPONENTS <"$D/components"
    fi
}

# --- PKI and kubeconfigs -----------------------------------------------------------------------

sign() { # name subject extensions
    local p="$D/pki"
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj "$2" -keyout "$p/$1.key" -out "$p/$1.csr" \
        2>/dev/null
    openssl x509 -req -in "$p/$1.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial \
        -days 30 -out "$p/$1.crt" -extfile <(printf '%s\n' "$3") 2>/dev/null
    rm -f "$p/$1.csr"
}

# kube-scheduler's certificate is both its client certificate and the serving one of its
# /readyz (127.0.0.1). Made on demand, so a directory from before the scheduler gets one too.
make_scheduler_cert() {
    [ -f "$D/pki/scheduler.crt" ] && return 0
    sign scheduler "/CN=system:kube-scheduler" "subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=clientAuth,serverAuth
keyUsage=digitalSignature,keyEncipherment"
}

# ECDSA P-256 keys throughout (service-account tokens are ES256): an RSA-2048 key took 0.1-0.3 s
# of CPU to generate, eight per plane, and make test starts about forty planes.
make_pki() {
    local p="$D/pki"
    [ -f "$p/.complete" ] && return 0
    rm -rf "$p"
    mkdir -p "$p"
    chmod 700 "$p"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 30 -subj "/CN=hostdevd-test-ca" \
        -keyout "$p/ca.key" -out "$p/ca.crt" 2>/dev/null
    sign apiserver "/CN=kube-apiserver" "subjectAltName=IP:127.0.0.1,IP:10.0.2.2,IP:10.0.0.1,\
DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc
extendedKeyUsage=serverAuth
keyUsage=digitalSignature,keyEncipherment"
    local client="extendedKeyUsage=clientAuth
keyUsage=digitalSignature,keyEncipherment"
    sign admin "/CN=admin/O=system:masters" "$client"
    sign controller-manager "/CN=system:kube-controller-manager/O=system:masters" "$client"
    sign alice "/CN=alice/O=developers" "$client"
    sign bob "/CN=bob/O=developers" "$client"
    openssl ecparam -name prime256v1 -genkey -noout -out "$p/sa.key" 2>/dev/null
    openssl ec -in "$p/sa.key" -pubout -out "$p/sa.pub" 2>/dev/null
    touch "$p/.complete"
}

b64() { base64 -w0 <"$1"; }

user_entry() { # user
    printf -- '- name: %s\n  user:\n    client-certificate-data: %s\n    client-key-data: %s\n' \
        "$1" "$(b64 "$D/pki/$1.crt")" "$(b64 "$D/pki/$1.key")"
}

context_entry() { # user
    printf -- '- name: %s\n  context:\n    cluster: hostdevd-local\n    user: %s\n' "$1" "$1"
}

kubeconfig() { # current-context user...
    local current=$1 u
    shift
    printf 'apiVersion: v1\nkind: Config\nclusters:\n- name: hostdevd-local\n  cluster:\n'
    printf '    server: https://127.0.0.1:%s\n    certificate-authority-data: %s\n' \
        "$API_PORT" "$(b64 "$D/pki/ca.crt")"
    printf 'users:\n'
    for u in "$@"; do user_entry "$u"; done
    printf 'contexts:\n'
    for u in "$@"; do context_entry "$u"; done
    printf 'current-context: %s\n' "$current"
}

write_kubeconfigs() {
    local u
    (
        umask 077
        kubeconfig admin admin alice bob >"$D/kubeconfig"
        for u in admin alice bob controller-manager; do
            kubeconfig "$u" "$u" >"$D/$u.kubeconfig"
        done
        cat >"$D/env" <<EOF
KUBECONFIG=$D/kubeconfig
K8S_SERVER=https://127.0.0.1:$API_PORT
K8S_CA=$D/pki/ca.crt
K8S_ADMIN_CERT=$D/pki/admin.crt
K8S_ADMIN_KEY=$D/pki/admin.key
K8S_BIN=$(bin_dir)
ETCD_ENDPOINT=http://127.0.0.1:$ETCD_PORT
EOF
    )
}

write_audit_policy() {
    cat >"$D/audit-policy.yaml" <<'EOF'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
EOF
}

# --- components --------------------------------------------------------------------------------

wait_for() { # description command...
    local what=$1 deadline=$((SECONDS + START_TIMEOUT))
    shift
    until "$@" >/dev/null 2>&1; do
        if [ $SECONDS -ge $deadline ]; then
            note "$what did not become ready within ${START_TIMEOUT}s; last log lines:"
            return 1
        fi
        sleep 0.3
    done
}

etcd_healthy() { curl -fsS "http://127.0.0.1:$ETCD_PORT/health" | grep -q '"health":"true"'; }

api_ready() {
    curl -fsS --cacert "$D/pki/ca.crt" --cert "$D/pki/admin.crt" --key "$D/pki/admin.key" \
        "https://127.0.0.1:$API_PORT/readyz" | grep -q '^ok$'
}

kcm_working() {
    # The service account controller creates "default" in every namespace.
    "$(bin_dir)/kubectl" --kubeconfig "$D/admin.kubeconfig" -n default get serviceaccount default
}

launch() { # component args...
    local c=$1 bin
    shift
    bin="$(bin_dir)/$(binary_of "$c")"
    # shellcheck disable=SC2086 # CLUSTER_GO_ENV is a list of NAME=VALUE words
    env ${CLUSTER_GO_ENV:-} "$bin" "$@" >>"$D/$c.log" 2>&1 </dev/null 9>&- &
    echo $! >"$D/$c.pid"
}

start_etcd() {
    mkdir -p "$D/etcd"
    chmod 700 "$D/etcd"
    launch etcd --name hostdevd-test --data-dir "$D/etcd" \
        --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
        --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
        --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
        --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
        --initial-cluster "hostdevd-test=http://127.0.0.1:$ETCD_PEER_PORT" \
        --unsafe-no-fsync=true --log-level=warn
    wait_for etcd etcd_healthy || { tail -20 "$D/etcd.log" >&2; return 1; }
}

start_apiserver() {
    local p="$D/pki"
    launch apiserver --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
        --bind-address 127.0.0.1 --secure-port "$API_PORT" --advertise-address 127.0.0.1 \
        --tls-cert-file "$p/apiserver.crt" --tls-private-key-file "$p/apiserver.key" \
        --client-ca-file "$p/ca.crt" --authorization-mode RBAC \
        --service-account-issuer "https://127.0.0.1:$API_PORT" \
        --service-account-key-file "$p/sa.pub" --service-account-signing-key-file "$p/sa.key" \
        --service-cluster-ip-range 10.0.0.0/24 --allow-privileged=true \
        --endpoint-reconciler-type none --profiling=false \
        --audit-policy-file "$D/audit-policy.yaml" --audit-log-path "$D/audit.log" \
        --audit-log-maxsize 200 --audit-log-maxbackup "${CLUSTER_AUDIT_BACKUPS:-1}" --v=1
    wait_for kube-apiserver api_ready || { tail -20 "$D/apiserver.log" >&2; return 1; }
}

start_controller_manager() {
    launch controller-manager --kubeconfig "$D/controller-manager.kubeconfig" \
        --controllers garbagecollector,namespace,serviceaccount,clusterrole-aggregation,resourceclaim-controller,resourcequota-controller,device-taint-eviction-controller \
        --secure-port 0 --leader-elect=false --use-service-account-credentials=false \
        --concurrent-gc-syncs 5 --v=1
    wait_for kube-controller-manager kcm_working ||
        { tail -20 "$D/controller-manager.log" >&2; return 1; }
}

scheduler_ready() {
    curl -fsS --cacert "$D/pki/ca.crt" "https://127.0.0.1:$(cat "$D/scheduler.port")/readyz" |
        grep -q '^ok$'
}

# /readyz is ok once its informers have synced and its event handlers are registered.
start_scheduler() {
    make_scheduler_cert
    (
        umask 077
        kubeconfig scheduler scheduler >"$D/scheduler.kubeconfig"
    )
    cat >"$D/scheduler-config.yaml" <<EOF
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection: {kubeconfig: $D/scheduler.kubeconfig}
leaderElection: {leaderElect: false}
EOF
    free_ports 1 >"$D/scheduler.port"
    launch scheduler --config "$D/scheduler-config.yaml" \
        --bind-address 127.0.0.1 --secure-port "$(cat "$D/scheduler.port")" \
        --tls-cert-file "$D/pki/scheduler.crt" --tls-private-key-file "$D/pki/scheduler.key" \
        --client-ca-file "$D/pki/ca.crt" --v=1
    wait_for kube-scheduler scheduler_ready || { tail -20 "$D/scheduler.log" >&2; return 1; }
}

start_component() {
    local pid
    pid=$(pid_of "$1")
    [ -z "$pid" ] || return 0
    case "$1" in
    etcd) start_etcd ;;
    apiserver) start_apiserver ;;
    controller-manager) start_controller_manager ;;
    scheduler) start_scheduler ;;
    esac
}

all_running() {
    local c
    for c in "${COMPONENTS[@]}"; do
        [ -n "$(pid_of "$c")" ] || return 1
    done
    api_ready
}

print_usage() {
    cat <<EOF
Local control plane is up: Kubernetes $("$(bin_dir)/kube-apiserver" --version | awk '{print $2}'), \
etcd v$(sed 's/^v//' "$(bin_dir)/etcd.version"), API at https://127.0.0.1:$API_PORT
  export KUBECONFIG=$D/kubeconfig        # admin; also contexts alice and bob (group developers)
  export PATH=$(bin_dir):\$PATH           # kubectl of the same version
  kubectl get --raw /readyz
Logs: $D/{$(IFS=,; echo "${COMPONENTS[*]}"),audit}.log
Stop: hack/cluster.sh down $D
EOF
}

# --- commands ----------------------------------------------------------------------------------

cmd_up() { # [--with-scheduler]
    local want=("${BASE_COMPONENTS[@]}")
    case "${1:-}" in
    --with-scheduler) want+=(scheduler) ;;
    "") ;;
    *) die "unknown option $1 (up DIR [--with-scheduler])" ;;
    esac
    mkdir -p "$D"
    exec 9>"$D/.lock"
    flock 9
    bin_dir >/dev/null
    if [ -f "$D/ports.env" ]; then
        load_ports
        COMPONENTS=("${BASE_COMPONENTS[@]}")
        if all_running; then
            COMPONENTS=("${want[@]}")
            echo "${COMPONENTS[*]}" >"$D/components"
            write_kubeconfigs
            if [ "${#want[@]}" -gt "${#BASE_COMPONENTS[@]}" ]; then
                start_component scheduler || die "could not start kube-scheduler; logs in $D"
            else
                stop_component scheduler
            fi
            print_usage
            return 0
        fi
        note "restarting a partly running control plane in $D"
        cmd_down_locked
    fi
    COMPONENTS=("${want[@]}")
    echo "${COMPONENTS[*]}" >"$D/components"
    local attempt c
    for attempt in 1 2 3; do
        choose_ports
        make_pki
        write_kubeconfigs
        write_audit_policy
        if start_etcd && start_apiserver && start_controller_manager &&
            { [ "${#want[@]}" -eq "${#BASE_COMPONENTS[@]}" ] || start_scheduler; }; then
            print_usage
            return 0
        fi
        cmd_down_locked
        # A port chosen free can be taken before its server binds it (other tests side by side):
        # choose again. Any other failure is final.
        grep -qs "address already in use" "$D"/*.log || break
        note "a port was taken before its server bound it: choosing new ports (attempt $((attempt + 1)))"
        rm -f "$D/ports.env" "$D/scheduler.port"
        for c in "${ALL_COMPONENTS[@]}"; do
            [ ! -f "$D/$c.log" ] || mv "$D/$c.log" "$D/$c.log.$attempt"
        done
    done
    die "could not start the control plane; logs in $D"
}

cmd_down_locked() {
    local i
    for ((i = ${#ALL_COMPONENTS[@]} - 1; i >= 0; i--)); do
        stop_component "${ALL_COMPONENTS[$i]}"
    done
}

cmd_down() {
    [ -d "$D" ] || return 0
    exec 9>"$D/.lock"
    flock 9
    cmd_down_locked
    if [ "${1:-}" = --purge ]; then
        rm -rf "$D"
    fi
}

cmd_component() { # stop|start|restart component
    binary_of "$2" >/dev/null
    load_ports
    case "$1" in
    stop) stop_component "$2" ;;
    start) start_component "$2" ;;
    restart) stop_component "$2" && start_component "$2" ;;
    esac
}

main() {
    [ $# -ge 2 ] || die "usage: hack/cluster.sh up|down|stop|start|restart|status|env DIR [COMPONENT|OPTION]"
    local cmd=$1
    D=$(realpath -m "$2")
    shift 2
    case "$cmd" in
    up) cmd_up "$@" ;;
    down) cmd_down "$@" ;;
    stop | start | restart) [ $# -eq 1 ] || die "$cmd needs a component"; cmd_component "$cmd" "$1" ;;
    status) load_ports; all_running ;;
    env) load_ports; echo "export KUBECONFIG=$D/kubeconfig" ;;
    *) die "unknown command $cmd" ;;
    esac
}

main "$@"
