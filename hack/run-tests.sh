#!/usr/bin/env bash
# Runs the test suites that exist, each even if an earlier one failed, and ends with one line
# "tests: N passed, N failed" over all of them. Exits non-zero if any suite failed.
#   hack/run-tests.sh [unit|integration|e2e|all|long]
# Expects the binaries built (make test does that first). "long" (make test-long) runs the
# scripts in test/long/, which take minutes each; "all" leaves them out.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
what=${1:-all}
results=build/results
rc=0

run_unit() {
    echo "=== unit tests (CUnit, ASan+UBSan)"
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        build/asan/unit-tests >"$results/unit.log" 2>&1
    local r=$?
    cat "$results/unit.log"
    # CUnit's summary row: "tests  Total Ran Passed Failed Inactive".
    awk '$1 == "tests" && NF >= 5 {print $4, $5}' "$results/unit.log" >"$results/unit.count"
    [ -s "$results/unit.count" ] || echo "0 1" >"$results/unit.count"
    [ $r -eq 0 ] || { echo "unit: runner exited $r"; rc=1; }
}

# Replays every committed fuzz corpus (and crash reproducer) through the sanitizer build.
run_fuzz_replay() {
    local bin name p=0 f=0
    for bin in build/asan/fuzz-replay-*; do
        [ -x "$bin" ] || continue
        name=${bin#build/asan/fuzz-replay-}
        echo "=== fuzz corpus replay: $name"
        if ASAN_OPTIONS=detect_leaks=1 "$bin" "test/fuzz/corpus/$name"; then
            p=$((p + 1))
        else
            f=$((f + 1))
            rc=1
        fi
    done
    echo "$p $f" >"$results/fuzz.count"
}

# run_scripts DIR LABEL: every DIR/test_*.sh, each even if an earlier one failed.
run_scripts() {
    local t
    for t in "$1"/test_*.sh; do
        echo "=== $2: $t"
        bash "$t" || rc=1
    done
}

run_integration() { run_scripts test/integration "integration (real etcd + kube-apiserver + kube-controller-manager)"; }
# hack/qemu-node.sh installs qemu and fetches the kernel package through apt the first time.
run_e2e() { run_scripts test/e2e "end to end (a qemu node with Debian's kernel + the control plane)"; }
run_long() { run_scripts test/long "long (minutes of idle or load against the control plane)"; }

mkdir -p "$results"
rm -f "$results"/*.count
case "$what" in
unit) run_unit; run_fuzz_replay ;;
integration) run_integration ;;
e2e) run_e2e ;;
all) run_unit; run_fuzz_replay; run_integration; run_e2e ;;
long) run_long ;;
*) echo "usage: $0 [unit|integration|e2e|all|long]" >&2; exit 2 ;;
esac

passed=0 failed=0
for f in "$results"/*.count; do
    [ -f "$f" ] || continue
    read -r p fl <"$f"
    passed=$((passed + p))
    failed=$((failed + fl))
done
[ $failed -eq 0 ] || rc=1
[ $((passed + failed)) -gt 0 ] || { echo "no test ran"; rc=1; }
echo
echo "tests: $passed passed, $failed failed"
exit $rc
