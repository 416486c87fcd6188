# shellcheck shell=bash
# test/integration/lib.sh - assertions and a private control plane for integration tests.
#
# A test sources this file, calls cluster_start (a fresh control plane in a temporary directory,
# always stopped and removed on exit), runs expect_* checks, and ends with `finish`, which
# prints "<suite>: N passed, N failed" and exits non-zero on any failure.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SUITE=${SUITE:-$(basename "$0" .sh)}
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

# eventually SECONDS COMMAND...: retries the command until it succeeds or time runs out.
eventually() {
    local deadline=$((SECONDS + $1))
    shift
    until "$@" >/dev/null 2>&1; do
        [ $SECONDS -lt $deadline ] || return 1
        sleep 0.5
    done
}

cluster_stop() {
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

# Starts a private control plane and points KUBECONFIG and PATH (kubectl) at it.
cluster_start() {
    TEST_DIR=$(mktemp -d "${TMPDIR:-/tmp}/hostdevd-$SUITE.XXXXXX")
    trap cluster_stop EXIT
    trap 'exit 130' INT TERM
    local t0=$SECONDS
    if ! "$ROOT/hack/cluster.sh" up "$TEST_DIR/cluster" >"$TEST_DIR/up.log" 2>&1; then
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

# The project's CRDs, installed and Established.
# The CRDs and the project's namespaces (hostdevd-system; hostdevd-node-lease, where agents
# keep their heartbeats).
install_crds() {
    kubectl apply -f "$ROOT/manifests/namespace.yaml" >/dev/null &&
        kubectl apply -k "$ROOT/crds/" >/dev/null &&
        kubectl wait --for condition=Established --timeout 60s crd --all >/dev/null
}

# A Node object NAME (nothing runs it; agents need it for their ownerReferences and tokens).
create_node() {
    printf 'apiVersion: v1\nkind: Node\nmetadata: {name: %s}\n' "$1" | kubectl create -f - >/dev/null
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
