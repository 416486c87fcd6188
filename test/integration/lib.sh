# shellcheck shell=bash
# test/integration/lib.sh - assertions and a private control plane for integration tests.
#
# A test sources this file, calls cluster_start (a fresh control plane in a temporary directory,
# always stopped and removed on exit), runs expect_* checks, and ends with `finish`, which
# prints "<suite>: N passed, N failed" and exits non-zero on any failure.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SUITE=${SUITE:-$(basename "$0" .sh)}
# The binaries under test: the sanitizer build, or what HOSTDEVD_TEST_BIN names (make test-long
# runs the suites with valgrind wrappers of the plain build there: test/long/test_valgrind.sh).
TEST_BIN=${HOSTDEVD_TEST_BIN:-$ROOT/build/asan}
PASSED=0
FAILED=0
FAILURES=()
OUT=""
TEST_DIR=""
KUBELET_UP=""

pass() {
    PASSED=$((PASSED + 1))
    printf '  ok   %s\n' "$1"
}

fail() { # description detail
    FAILED=$((FAILED + 1))
    FAILURES+=("$1")
    printf '  FAIL %s\n' "$1"
    [ -z "${2:-}" ] || printf '%s\n' "$2" | sed 's/^/       | /' | head -20
}

# expect_ok DESCRIPTION COMMAND...: the command succeeds. Its output is left in $OUT.
expect_ok() {
    local what=$1
    shift
    if OUT=$("$@" 2>&1); then
        pass "$what"
    else
        fail "$what" "$OUT"
    fi
}

# expect_reject DESCRIPTION PATTERN COMMAND...: the command fails, and its output contains the
# fixed string PATTERN (the message must say what is wrong).
expect_reject() {
    local what=$1 pattern=$2
    shift 2
    if OUT=$("$@" 2>&1); then
        fail "$what" "accepted, but should have been rejected with: $pattern"
    elif [[ "$OUT" != *"$pattern"* ]]; then
        fail "$what" "rejected, but the message lacks \"$pattern\":"$'\n'"$OUT"
    else
        pass "$what"
    fi
}

# expect_contains DESCRIPTION TEXT PATTERN...: TEXT contains every fixed-string PATTERN.
expect_contains() {
    local what=$1 text=$2 p
    shift 2
    for p in "$@"; do
        if [[ "$text" != *"$p"* ]]; then
            fail "$what" "missing \"$p\" in:"$'\n'"$text"
            return
        fi
    done
    pass "$what"
}

# kubectl and helm without their garbage collector (GOGC=off, bounded by GOMEMLIMIT): a call
# lives a fraction of a second and the collector took a fifth of its CPU; make test makes about
# 2800 kubectl calls. Exported, so the suites' bash subshells and scripts use them too (a
# `timeout kubectl ...` runs the binary as it is).
# HOSTDEVD_TEST_TRACE=FILE (an absolute path) appends a line per kubectl call and per
# `eventually` (where, how long, how it ended) to FILE: where make test's CPU and waits go.
kubectl() {
    [ -z "${HOSTDEVD_TEST_TRACE:-}" ] || echo "kubectl ${0##*/} $*" >>"$HOSTDEVD_TEST_TRACE"
    GOGC=off GOMEMLIMIT=512MiB command kubectl "$@"
}
helm() { GOGC=off GOMEMLIMIT=512MiB command helm "$@"; }
export -f kubectl helm

# eventually SECONDS COMMAND...: retries the command until it succeeds or time runs out.
# It looks again after 0.2 s, then less and less often, at most once a second: a quick change is
# seen at once, and a long wait (a qemu node's reboot) runs one kubectl or guest command a
# second instead of two (make test's CPU, not its waits, sets its time on 2 cores).
eventually() {
    # (names of its own: the command runs in its scope, and a predicate that sets a global `r`
    # or `i` would set these instead)
    local _ev_end=$((SECONDS + $1)) _ev_pause=(0.2 0.3 0.5 0.7) _ev_i=0 _ev_t0=$SECONDS _ev_rc=0
    shift
    until "$@" >/dev/null 2>&1; do
        [ $SECONDS -lt $_ev_end ] || { _ev_rc=1; break; }
        sleep "${_ev_pause[_ev_i]:-1}"
        _ev_i=$((_ev_i + 1))
    done
    [ -z "${HOSTDEVD_TEST_TRACE:-}" ] || echo "eventually ${BASH_SOURCE[1]##*/}:${BASH_LINENO[0]}" \
        "$((SECONDS - _ev_t0))s tries=$((_ev_i + 1)) rc=$_ev_rc $1" >>"$HOSTDEVD_TEST_TRACE"
    return $_ev_rc
}

# track PID...: background processes of the test (agents, controllers), killed when the test
# ends, however it ends (a failed check that calls finish early included), before the control
# plane goes.
TRACKED=()
track() { TRACKED+=("$@"); }

cluster_stop() {
    local p
    for p in "${TRACKED[@]}"; do # still ours (not a reused pid): a hostdevd process
        grep -qa hostdevd "/proc/$p/cmdline" 2>/dev/null && kill -KILL "$p" 2>/dev/null
    done
    [ -n "$TEST_DIR" ] || return 0
    [ -z "$KUBELET_UP" ] || "$ROOT/hack/kubelet.sh" down "$TEST_DIR/kubelet" || true
    if [ "$FAILED" -gt 0 ] && [ -n "${KEEP_FAILED_STATE:-}" ]; then
        "$ROOT/hack/cluster.sh" down "$TEST_DIR/cluster"
        echo "state kept in $TEST_DIR"
        return 0
    fi
    "$ROOT/hack/cluster.sh" down "$TEST_DIR/cluster" --purge
    rm -rf "$TEST_DIR"
}

# cluster_start [--with-scheduler]: starts a private control plane and points KUBECONFIG and
# PATH (kubectl) at it. --with-scheduler adds kube-scheduler (hack/cluster.sh), for tests whose
# pods are scheduled (DRA allocation); without it nothing schedules pods (set spec.nodeName).
cluster_start() {
    TEST_DIR=$(mktemp -d "${TMPDIR:-/tmp}/hostdevd-$SUITE.XXXXXX")
    trap cluster_stop EXIT
    trap 'exit 130' INT TERM
    local t0=$SECONDS
    if ! "$ROOT/hack/cluster.sh" up "$TEST_DIR/cluster" "$@" >"$TEST_DIR/up.log" 2>&1; then
        cat "$TEST_DIR/up.log"
        fail "control plane starts"
        finish
    fi
    set -a
    # shellcheck disable=SC1091
    . "$TEST_DIR/cluster/env"
    set +a
    export PATH="$K8S_BIN:$PATH"
    echo "  control plane up in $((SECONDS - t0))s ($K8S_SERVER)"
}

# A real kubelet (hack/kubelet.sh: fake CRI, own mount namespace; needs root) registered as Node
# NAME (default kubelet-node) with the private control plane, Ready; its env (KUBELET_NODE,
# DEVICE_PLUGIN_DIR, CRI_RECORD, KUBELET_PID, KUBELET_LOG, ...) exported. Stopped on exit.
kubelet_start() {
    KUBELET_UP=1
    if ! "$ROOT/hack/kubelet.sh" up "$TEST_DIR/kubelet" "$TEST_DIR/cluster" "${1:-kubelet-node}" \
        >"$TEST_DIR/kubelet-up.log" 2>&1; then
        fail "kubelet starts and its Node gets Ready" "$(cat "$TEST_DIR/kubelet-up.log")"
        finish
    fi
    set -a
    # shellcheck disable=SC1091
    . "$TEST_DIR/kubelet/env"
    set +a
}

# fake_proc DIR: a /proc for an agent on a fake sysfs tree: nothing mounted from its devices, no
# swap, no routes (what the host-critical checks read).
fake_proc() {
    mkdir -p "$1/1" "$1/net"
    printf '22 1 0:21 / / rw - tmpfs tmpfs rw\n' >"$1/1/mountinfo"
    printf 'Filename\tType\tSize\tUsed\tPriority\n' >"$1/swaps"
    printf 'Iface\tDestination\tGateway\n' >"$1/net/route"
    : >"$1/net/ipv6_route"
}

# A free TCP port on 127.0.0.1 (for an agent's --listen).
free_port() { python3 "$ROOT/hack/free-ports.py"; } # below the ephemeral range (its comment says why)

# The project's CRDs, installed and Established.
# The CRDs and the project's namespaces (hostdevd-system; hostdevd-node-lease, where agents
# keep their heartbeats).
install_crds() {
    kubectl apply -f "$ROOT/manifests/namespace.yaml" >/dev/null &&
        kubectl apply -k "$ROOT/crds/" >/dev/null &&
        kubectl wait --for condition=Established --timeout 60s crd --all >/dev/null
}

# --- requests as a user or a service account (test_access.sh, test_helm.sh) ---

# kubectl as the holder of a bearer token only (no client certificate from $KUBECONFIG).
kt() { # token kubectl-args...
    local token=$1
    shift
    kubectl --kubeconfig=/dev/null --server="$K8S_SERVER" --certificate-authority="$K8S_CA" \
        --token="$token" "$@"
}

# One API request as the agent makes it: JSON merge patches (also on /status), creates and
# deletes, with no GET first (kubectl patch would read /status, which the agent may not).
# Prints the object; on an HTTP error prints the Status message and the code, and fails.
api() { # token method path [json]
    local token=$1 method=$2 path=$3 body=${4:-} type=application/json out code
    [ "$method" != PATCH ] || type=application/merge-patch+json
    out=$(curl -sS --max-time 20 --cacert "$K8S_CA" -w '\n%{http_code}' \
        -H "Authorization: Bearer $token" -H "Content-Type: $type" -X "$method" \
        ${body:+--data "$body"} "$K8S_SERVER$path") || return 1
    code=${out##*$'\n'}
    out=${out%$'\n'*}
    if [[ "$code" == 2?? ]]; then
        printf '%s\n' "$out"
        return 0
    fi
    printf '%s (HTTP %s)\n' "$(jq -r '.message // empty' <<<"$out" 2>/dev/null || printf '%s' "$out")" "$code"
    return 1
}

# The command fails with a denial from the named admission policy.
denied_by() { # policy command...
    local policy=$1 out
    shift
    out=$("$@" 2>&1) && return 1
    [[ "$out" == *"ValidatingAdmissionPolicy '$policy'"* ]]
}

# install_kubevirt PERMITTED: KubeVirt v1.9.0's own kubevirts CRD (hack/kubevirt-crds.sh) and
# the KubeVirt CR kubevirt/kubevirt with the HostDevices feature gate and
# spec.configuration.permittedHostDevices = PERMITTED (YAML flow: the foreign entries).
install_kubevirt() {
    local crds
    crds=$("$ROOT/hack/kubevirt-crds.sh") &&
        kubectl create -f "$crds/kubevirts.kubevirt.io.yaml" >/dev/null || return 1
    # (kubectl wait fails at once, "accessor error", when the new CRD has no status yet: retried)
    eventually 60 kubectl wait --for condition=Established --timeout 10s crd/kubevirts.kubevirt.io ||
        return 1
    kubectl create namespace kubevirt >/dev/null &&
        kubectl create -f - >/dev/null <<EOF
apiVersion: kubevirt.io/v1
kind: KubeVirt
metadata: {name: kubevirt, namespace: kubevirt}
spec:
  configuration:
    developerConfiguration: {featureGates: [HostDevices]}
    permittedHostDevices: $1
EOF
}

# A Node object NAME (nothing runs it; agents need it for their ownerReferences and tokens).
create_node() {
    kapi POST /api/v1/nodes "$(printf 'apiVersion: v1\nkind: Node\nmetadata: {name: %s}\n' "$1")" >/dev/null
}

# kapi METHOD PATH [BODY [CONTENT-TYPE]]: one request to the test's API server as admin, by curl
# (BODY YAML or JSON, application/yaml unless CONTENT-TYPE says otherwise); the answer on stdout,
# an HTTP error fails it. For the fixtures the suites write by the hundred: a kubectl call costs
# 90 ms of CPU before it sends anything (its start-up), curl 5 ms.
kapi() {
    local a=(-fsS --cacert "$K8S_CA" --cert "$K8S_ADMIN_CERT" --key "$K8S_ADMIN_KEY" -X "$1")
    [ $# -lt 3 ] || a+=(-H "Content-Type: ${4:-application/yaml}" --data-binary "$3")
    curl "${a[@]}" "$K8S_SERVER$2"
}
# kget KIND NAME JQ: a devices.harvesterhci.io object's field (KIND as kubectl takes it: pcidevice,
# usbdeviceclaim, ...) by curl and jq, for the fields tests poll; nothing for a missing field or
# object, as kubectl's jsonpath. kexists KIND NAME: the object exists.
kget() { kapi GET "/apis/devices.harvesterhci.io/v1beta1/${1}s/$2" 2>/dev/null | jq -r "$3 | select(. != null)"; }
kexists() { kapi GET "/apis/devices.harvesterhci.io/v1beta1/${1}s/$2" >/dev/null 2>&1; }
# kapi_status PLURAL NAME JSON: a merge patch of a devices.harvesterhci.io object's status.
kapi_status() {
    kapi PATCH "/apis/devices.harvesterhci.io/v1beta1/$1/$2/status" "$3" application/merge-patch+json
}

# dra_template NAME CLASS CEL [REQUEST]: a ResourceClaimTemplate in the default namespace whose
# request REQUEST (default nic) asks for one device of DeviceClass CLASS that CEL selects.
dra_template() {
    kubectl apply -f - >/dev/null <<EOF
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: $1, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: ${4:-nic}
        exactly:
          deviceClassName: $2
          selectors:
          - cel: {expression: '$3'}
EOF
}
# dra_pod NAME TEMPLATE [REQUEST]: a Pod in the default namespace (hostNetwork, busybox, every
# taint tolerated) whose container has a claim made from TEMPLATE, named REQUEST (default nic).
dra_pod() {
    kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Pod
metadata: {name: $1, namespace: default}
spec:
  automountServiceAccountToken: false
  hostNetwork: true
  tolerations: [{operator: Exists}]
  resourceClaims: [{name: ${3:-nic}, resourceClaimTemplateName: $2}]
  containers:
  - name: c
    image: busybox
    resources: {claims: [{name: ${3:-nic}}]}
EOF
}

# sa_kubeconfig NAMESPACE SERVICEACCOUNT FILE [SERVER]: a kubeconfig for the private control
# plane with a token of that ServiceAccount (2 h), as its Pod would have; for processes run on
# the host. SERVER (default $K8S_SERVER) is another way to the API server (a proxy).
sa_kubeconfig() {
    local token
    token=$(kubectl create token "$2" -n "$1" --duration 2h) || return 1
    (
        umask 077
        cat >"$3" <<EOF
apiVersion: v1
kind: Config
clusters:
- {name: local, cluster: {server: "${4:-$K8S_SERVER}", certificate-authority: "$K8S_CA"}}
users:
- {name: $2, user: {token: "$token"}}
contexts:
- {name: local, context: {cluster: local, user: $2}}
current-context: local
EOF
    )
}

# audit_summary AUDIT_LOG [SKIP_LINES]: hostdevd's completed requests (user agent hostdevd/...)
# after the first SKIP_LINES lines of the API server's audit log, one line per kind of request:
# "WHO RESOURCE[/SUBRESOURCE] VERB CODE COUNT", WHO "controller" for the hostdevd-controller
# service account, "agent" for anyone else (the agent's service account, or admin in tests).
audit_summary() {
    python3 - "$1" "${2:-0}" <<'EOF'
import collections, itertools, json, sys
n = collections.Counter()
for line in itertools.islice(open(sys.argv[1]), int(sys.argv[2]), None):
    e = json.loads(line)
    if e.get("stage") != "ResponseComplete" or not e.get("userAgent", "").startswith("hostdevd/"):
        continue
    who = "controller" if e["user"]["username"].endswith(":hostdevd-controller") else "agent"
    o = e.get("objectRef", {})
    res = o.get("resource", e.get("requestURI", "?")) + ("/" + o["subresource"] if o.get("subresource") else "")
    n[(who, res, e["verb"], e.get("responseStatus", {}).get("code", 0))] += 1
for k, v in sorted(n.items()):
    print(*k, v)
EOF
}

# audit_quiet AUDIT_LOG SECONDS: hostdevd wrote nothing but Leases in the last SECONDS (its last
# such write completed longer ago than that, by the API server's clock).
audit_quiet() {
    python3 - "$1" "$2" <<'EOF'
import datetime, json, sys
last = 0.0
for line in open(sys.argv[1]):
    e = json.loads(line)
    if e.get("stage") == "ResponseComplete" and e.get("userAgent", "").startswith("hostdevd/") \
            and e.get("verb") in ("create", "update", "patch", "delete", "deletecollection") \
            and e.get("objectRef", {}).get("resource") != "leases":
        last = datetime.datetime.fromisoformat(e["stageTimestamp"].replace("Z", "+00:00")).timestamp()
sys.exit(datetime.datetime.now(datetime.timezone.utc).timestamp() - last < float(sys.argv[2]))
EOF
}

# agent_heartbeat NODE DURATION: NODE's agent's heartbeat Lease (hostdevd-node-lease/NODE), as
# the agent renews it, fresh now for DURATION seconds (for tests of the controller without agents).
agent_heartbeat() {
    printf 'apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {name: %s, namespace: hostdevd-node-lease}\nspec: {holderIdentity: %s, leaseDurationSeconds: %s, renewTime: "%s"}\n' \
        "$1" "$1" "$2" "$(date -u +%FT%T.000000Z)" | kubectl apply -f - >/dev/null
}

# Devices and claims as an agent leaves them (for tests of the controller without agents).
# agent_device pci|usb NODE IDX VENDOR DEVICE [RESOURCE]: a PCIDevice at 0000:00:0<IDX>.0 with its
# status (RESOURCE), or a USBDevice on port 1-<IDX> (resource kubevirt.io/<name>); prints the name.
agent_device() {
    local name g=devices.harvesterhci.io
    if [ "$1" = pci ]; then
        name=$2-0000000${3}0
        kapi POST /apis/$g/v1beta1/pcidevices "$(printf 'apiVersion: %s/v1beta1\nkind: PCIDevice\nmetadata: {name: %s, labels: {nodename: %s}}\nspec: {}\n' "$g" "$name" "$2")" >/dev/null
        kapi_status pcidevices "$name" "{\"status\":{\"address\":\"0000:00:0$3.0\",\"vendorId\":\"$4\",\"deviceId\":\"$5\",\"classId\":\"0200\",\"nodeName\":\"$2\",\"resourceName\":\"$6\"}}" >/dev/null
    else
        name=$2-$4-$5-1-$3
        kapi POST /apis/$g/v1beta1/usbdevices "$(printf 'apiVersion: %s/v1beta1\nkind: USBDevice\nmetadata: {name: %s, labels: {nodename: %s}}\n' "$g" "$name" "$2")" >/dev/null
        kapi_status usbdevices "$name" "{\"status\":{\"vendorID\":\"$4\",\"productID\":\"$5\",\"nodeName\":\"$2\",\"portPath\":\"1-$3\",\"resourceName\":\"kubevirt.io/$name\"}}" >/dev/null
    fi
    echo "$name"
}

# agent_claim pci NAME NODE [DISABLE_POOLING] | agent_claim usb NAME: the claim of a device that
# agent_device made (a USB claim with the agent's finalizer already on).
agent_claim() {
    local g=devices.harvesterhci.io
    if [ "$1" = pci ]; then
        local idx=${2##*-0000000}
        kapi POST /apis/$g/v1beta1/pcideviceclaims "$(printf 'apiVersion: %s/v1beta1\nkind: PCIDeviceClaim\nmetadata: {name: %s}\nspec: {address: "0000:00:0%s.0", nodeName: %s, disableResourcePooling: %s}\n' \
            "$g" "$2" "${idx%0}" "$3" "${4:-false}")" >/dev/null
    else
        kapi POST /apis/$g/v1beta1/usbdeviceclaims "$(printf 'apiVersion: %s/v1beta1\nkind: USBDeviceClaim\nmetadata: {name: %s, finalizers: [%s/release-usb]}\nspec: {}\n' \
            "$g" "$2" "$g")" >/dev/null
    fi
}

# agent_vgpu NODE NAME UUID TYPE-ID [TYPE-NAME [GROUP]]: an enabled VGPUDevice whose mdev instance
# exists, its status as its agent writes it (vGPUConfigured, resourceName from the type id as
# objects/mdevobj.h makes it, the parent's types in status.mdevTypes; no TYPE-NAME: a type without
# a name file). agent_vgpu_removed NAME: its status once the agent has removed the instance.
agent_vgpu() {
    local g=devices.harvesterhci.io res name=
    res=$g/$(tr 'A-Z_' 'a-z-' <<<"$4")
    [ -n "${5:-}" ] && name=",\"name\":\"$5\""
    kapi POST /apis/$g/v1beta1/vgpudevices "$(printf 'apiVersion: %s/v1beta1\nkind: VGPUDevice\nmetadata: {name: %s, labels: {nodename: %s}}\nspec: {nodeName: %s, address: mtty, parentGPUDeviceAddress: mtty, vGPUTypeName: "%s", enabled: true}\n' \
        "$g" "$2" "$1" "$1" "$4")" >/dev/null &&
        kapi_status vgpudevices "$2" "{\"status\":{\"uuid\":\"$3\",
            \"vGPUStatus\":\"vGPUConfigured\",\"configureVGPUTypeName\":\"$4\",\"resourceName\":\"$res\",
            \"iommuGroup\":\"${6:-30}\",\"mdevTypes\":[{\"id\":\"$4\"$name,\"available\":3}]}}" >/dev/null
}
agent_vgpu_removed() {
    kapi_status vgpudevices "$1" '{"status":{"uuid":"","vGPUStatus":""}}' >/dev/null
}

# fake_vmm GROUP: a "VMM" holding the suite's fake /dev/vfio/GROUP ($DEV/vfio/GROUP): a pty held
# with TIOCEXCL (the agent's open gets EBUSY, as from a vfio group a VMM holds), named
# qemu-system-x86 with the group open by the fake /proc ($TEST_DIR/proc). In the background,
# tracked; HOLDER is its pid; SIGTERM lets go (the files removed, as a process's are at exit).
fake_vmm() {
    python3 - "$DEV/vfio/$1" "$TEST_DIR/proc" "$1" >"$TEST_DIR/holder.log" 2>&1 <<'EOF' &
import fcntl, os, signal, sys, termios
path, proc = sys.argv[1], os.path.join(sys.argv[2], str(os.getpid()))
m, s = os.openpty()
os.symlink(os.ttyname(s), path)
fd = os.open(path, os.O_RDWR | os.O_NOCTTY)
fcntl.ioctl(fd, termios.TIOCEXCL)
os.close(s)
os.makedirs(proc + "/fd")
os.symlink("/dev/vfio/" + sys.argv[3], proc + "/fd/17")
with open(proc + "/comm", "w") as f:
    f.write("qemu-system-x86\n")
def let_go(*_):
    for p in (proc + "/fd/17", proc + "/comm", path):
        os.unlink(p)
    os._exit(0)
signal.signal(signal.SIGTERM, let_go)
while True:
    signal.pause()
EOF
    HOLDER=$!
    track "$HOLDER"
}

# --- the agent on a fake tree (the suites' $AGENT, $NODE, $SYS, $PORT) ---

# agent_run [--without-sys-admin] ARGUMENTS...: `$AGENT agent` (the sanitizer build) as Node
# $NODE on the fake sysfs tree $SYS, /readyz and /metrics on 127.0.0.1:$PORT, in the background,
# tracked, its pid in AGENT_PID, its output appended to $TEST_DIR/agent.log; the suite's own
# arguments follow (kubeconfig, roots, resync, uevent source, verbosity). --without-sys-admin:
# without CAP_SYS_ADMIN, as the DaemonSet's agent (a tty opened with TIOCEXCL then refuses it
# with EBUSY: the suites' stand-in for a /dev/vfio/<group> a VM holds).
agent_run() {
    local wrap=()
    if [ "${1:-}" = --without-sys-admin ]; then
        wrap=(setpriv --bounding-set -sys_admin --inh-caps -sys_admin --)
        shift
    fi
    "${wrap[@]}" "$AGENT" agent --node-name "$NODE" --sysfs-root "$SYS" \
        --listen "127.0.0.1:$PORT" "$@" >>"$TEST_DIR/agent.log" 2>&1 &
    AGENT_PID=$!
    track "$AGENT_PID"
}

# stop_agent DESCRIPTION: SIGTERM to the agent of agent_run; passes when it exits 0 (under ASan:
# no leak), else fails with its log's end. Not in a subshell: `wait` works for the shell's own
# children only.
stop_agent() {
    kill -TERM "$AGENT_PID" 2>/dev/null
    wait "$AGENT_PID"
    local rc=$?
    if [ $rc -eq 0 ]; then pass "$1"; else fail "$1" "exit $rc; $(tail -20 "$TEST_DIR/agent.log")"; fi
}

# agent_ready pci|usb NAME: the claim's status as its agent writes it once the device is ready.
agent_ready() {
    local now cond
    now=$(date -u +%FT%TZ)
    cond="{\"type\":\"Ready\",\"status\":\"True\",\"reason\":\"R\",\"message\":\"m\",\"lastTransitionTime\":\"$now\",\"observedGeneration\":1}"
    if [ "$1" = pci ]; then
        kapi_status pcideviceclaims "$2" "{\"status\":{\"passthroughEnabled\":true,\"conditions\":[$cond]}}" >/dev/null
    else
        kapi_status usbdeviceclaims "$2" "{\"status\":{\"conditions\":[$cond]}}" >/dev/null
    fi
}

finish() {
    if [ "$FAILED" -gt 0 ]; then
        printf 'failed in %s:\n' "$SUITE"
        printf '  - %s\n' "${FAILURES[@]}"
    fi
    printf '%s: %d passed, %d failed\n' "$SUITE" "$PASSED" "$FAILED"
    mkdir -p "$ROOT/build/results"
    printf '%d %d\n' "$PASSED" "$FAILED" >"$ROOT/build/results/$SUITE.count"
    [ "$FAILED" -eq 0 ]
    exit
}
