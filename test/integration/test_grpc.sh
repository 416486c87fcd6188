#!/usr/bin/env bash
# test/integration/test_grpc.sh - src/kubelet/grpc against real gRPC (grpc-go, test/grpcpeer): a
# grpc-go client calls our server (unary, a server stream of N in order, an error status and
# message, an unknown method, a cancelled stream), and our client calls a grpc-go server (OK,
# an error, an unknown method). Prints the median unary round trip both ways (release build,
# not asserted). Needs no control plane.
SUITE=grpc
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/lib.sh"
cd "$ROOT"

export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
GT=$TEST_BIN/grpctool
GT_REL=$ROOT/build/release/grpctool
if ! PEER=$(hack/grpcpeer-build.sh); then
    fail "grpc-go peer builds (hack/grpcpeer-build.sh)"
    finish
fi
TEST_DIR=$(mktemp -d "${TMPDIR:-/tmp}/hostdevd-grpc.XXXXXX")
PIDS=()
cleanup() {
    local p
    for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$TEST_DIR"
}
trap cleanup EXIT

# start_bg LOG COMMAND...: runs the command in the background and waits for "serving" in LOG.
start_bg() {
    local log=$1
    shift
    "$@" >"$log" 2>&1 &
    PIDS+=($!)
    eventually 10 grep -q serving "$log"
}

C_SOCK=$TEST_DIR/c.sock
GO_SOCK=$TEST_DIR/go.sock

echo "--- grpc-go client -> our server"
start_bg "$TEST_DIR/c.log" "$GT" serve "$C_SOCK" || fail "our server starts" "$(cat "$TEST_DIR/c.log")"
OUT=$("$PEER" unary "$C_SOCK" /t.T/Echo hello 2>&1)
expect_contains "unary echo" "$OUT" 'resp="hello"' 'code=0 msg=""'
OUT=$("$PEER" stream "$C_SOCK" /t.T/Stream 50 2>&1)
want=$(for i in $(seq 0 49); do printf 'msg="%d"\n' "$i"; done; echo 'code=0 msg=""')
if [ "$OUT" = "$want" ]; then pass "server stream of 50 messages in order, then OK"; else
    fail "server stream of 50 messages in order, then OK" "$OUT"; fi
OUT=$("$PEER" stream "$C_SOCK" /t.T/Stream 20000 2>&1)
expect_contains "server stream of 20000 (past the 64 KB windows)" "$OUT" \
    "messages=20000 inorder=true" 'code=0 msg=""'
OUT=$("$PEER" unary "$C_SOCK" /t.T/Echo @big:1000000 2>&1)
expect_contains "1 MB echo both ways" "$OUT" "resp_len=1000000 equal=true" 'code=0 msg=""'
OUT=$("$PEER" unary "$C_SOCK" /t.T/Echo @big:4194305 2>&1)
expect_contains "a message over 4 MiB is refused" "$OUT" "code=8"
OUT=$("$PEER" unary "$C_SOCK" /t.T/Fail 'no: 100% "sure" é' 2>&1)
expect_contains "error status and message seen by grpc-go" "$OUT" 'code=3 msg="no: 100% \"sure\" é"'
OUT=$("$PEER" unary "$C_SOCK" /t.T/Nope x 2>&1)
expect_contains "unknown method is UNIMPLEMENTED" "$OUT" 'code=12' '/t.T/Nope'
OUT=$("$PEER" cancel "$C_SOCK" /t.T/Hold x 2>&1)
expect_contains "grpc-go cancels a stream after its first message" "$OUT" 'msg="first"' cancelled
if eventually 5 grep -q "cancelled /t.T/Hold" "$TEST_DIR/c.log"; then
    pass "our server ran the cancel callback"
else
    fail "our server ran the cancel callback" "$(cat "$TEST_DIR/c.log")"
fi

echo "--- our client -> grpc-go server"
start_bg "$TEST_DIR/go.log" "$PEER" serve "$GO_SOCK" || fail "grpc-go server starts" "$(cat "$TEST_DIR/go.log")"
expect_ok "unary call" "$GT" call "$GO_SOCK" /t.T/Echo hi
expect_contains "unary response from grpc-go" "$OUT" 'resp="go:hi"' 'code=0 msg=""'
expect_ok "1 MB call" "$GT" call "$GO_SOCK" /t.T/Echo @big:1000000
expect_contains "1 MB response from grpc-go" "$OUT" "resp_len=1000003 tail_equal=true" "code=0"
expect_ok "error call" "$GT" call "$GO_SOCK" /t.T/Fail x
expect_contains "grpc-go's error status and message decoded" "$OUT" \
    "code=3 msg=\"go says no: 100% \"sure\""
expect_ok "unknown method call" "$GT" call "$GO_SOCK" /t.T/Nope x
expect_contains "grpc-go's UNIMPLEMENTED" "$OUT" "code=12"

echo "--- round trips (median of 200 unary calls; release build)"
start_bg "$TEST_DIR/rel.log" "$GT_REL" serve "$TEST_DIR/rel.sock"
OUT=$("$PEER" bench "$TEST_DIR/rel.sock" /t.T/Echo 200 2>&1)
expect_contains "grpc-go client -> our server, one connection" "$OUT" "calls=200"
printf '       %s\n' "$OUT"
OUT=$("$GT_REL" bench "$GO_SOCK" /t.T/Echo 200 2>&1)
expect_contains "our client -> grpc-go server, a connection per call" "$OUT" "calls=200"
printf '       %s\n' "$OUT"
OUT=$("$GT_REL" bench "$TEST_DIR/rel.sock" /t.T/Echo 200 2>&1)
expect_contains "our client -> our server, a connection per call" "$OUT" "calls=200"
printf '       %s\n' "$OUT"

echo "--- shutdown"
kill "${PIDS[0]}"
wait "${PIDS[0]}"
rc=$?
expect_contains "our server stops on SIGTERM with no call open" \
    "$(cat "$TEST_DIR/c.log")" "stopped with 0 calls open"
if [ $rc -eq 0 ] && ! grep -q Sanitizer "$TEST_DIR/c.log"; then pass "our server exits 0, ASan clean"
else fail "our server exits 0, ASan clean" "exit $rc"$'\n'"$(cat "$TEST_DIR/c.log")"; fi
if [ -e "$C_SOCK" ]; then fail "our server removed its socket"; else pass "our server removed its socket"; fi
finish
