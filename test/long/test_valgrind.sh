#!/usr/bin/env bash
# test/long/test_valgrind.sh - the unit and integration suites under valgrind memcheck
# (`make test-long`, not part of make test: about 10x slower than the sanitizer build).
# The plain test build (build/plain: the sanitizer build's flags without the sanitizers, which
# valgrind cannot run under) runs the CUnit suites in memcheck; then each integration suite that
# runs hostdevd, kubetool or grpctool runs with HOSTDEVD_TEST_BIN pointing at wrappers that exec
# them in memcheck (same pid, so the suites' signals and exit checks still apply). Passes when
# every suite passes and every memcheck log says 0 errors: no invalid read or write, no use of
# uninitialised memory, no definitely or indirectly lost block at exit.
#   VALGRIND_SUITES="agent claims ..."   the integration suites (default: all that run our binaries)
SUITE=long-valgrind
# shellcheck source=test/integration/lib.sh
. "$(dirname "$0")/../integration/lib.sh"
cd "$ROOT" || exit 1

VG=$ROOT/build/plain
SUITES=${VALGRIND_SUITES:-kube grpc inventory agent claims usb plugins dra drakubelet controller badinput}
for b in unit-tests hostdevd kubetool grpctool; do
    [ -x "$VG/$b" ] || make -C "$ROOT" "build/plain/$b" >/dev/null || fail "build/plain/$b builds"
done
T=$(mktemp -d "${TMPDIR:-/tmp}/hostdevd-valgrind.XXXXXX")
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/bin" "$T/logs"
MEMCHECK=(valgrind --tool=memcheck --leak-check=full --show-leak-kinds=definite,indirect
    --errors-for-leak-kinds=definite,indirect --track-origins=yes --error-exitcode=99
    --child-silent-after-fork=yes)
ERRORS='^==[0-9]+== (Invalid|Conditional|Use of|Syscall param|Mismatched|[0-9,]+ bytes in .* (definitely|indirectly))'

# memcheck_clean LOGS...: every log ends with "ERROR SUMMARY: 0 errors", or, for a process the
# suite ended with SIGKILL (memcheck writes no summary then), shows no error; prints the others.
memcheck_clean() {
    local f bad=0
    for f in "$@"; do
        grep -q 'ERROR SUMMARY: 0 errors' "$f" && continue
        ! grep -q 'ERROR SUMMARY' "$f" && ! grep -qE "$ERRORS" "$f" && continue
        bad=$((bad + 1))
        echo "  $f:"
        grep -E -A12 "$ERRORS" "$f" | head -40 | sed 's/^/    /'
    done
    [ $bad -eq 0 ]
}

echo "--- unit suites (CUnit) in memcheck"
"${MEMCHECK[@]}" --log-file="$T/logs/unit.log" "$VG/unit-tests" >"$T/unit.out" 2>&1
r=$?
tests=$(awk '$1 == "tests" && NF >= 5 {print $3 " run, " $5 " failed"}' "$T/unit.out")
if [ $r -eq 0 ] && memcheck_clean "$T/logs/unit.log"; then
    pass "unit suites pass in memcheck ($tests), 0 errors, no leak"
else
    fail "unit suites in memcheck (exit $r; $tests)" "$(grep -B2 -A3 FAILED "$T/unit.out" | head -20; memcheck_clean "$T/logs/unit.log")"
fi

# The wrappers log to the suite's own directory (VG_LOGS, set per suite below).
for b in hostdevd kubetool grpctool; do
    printf '#!/bin/sh\nexec %s --log-file="$VG_LOGS/%s.%%p.log" %s/%s "$@"\n' \
        "${MEMCHECK[*]}" "$b" "$VG" "$b" >"$T/bin/$b"
    chmod +x "$T/bin/$b"
done

for s in $SUITES; do
    echo "--- integration suite $s, its hostdevd, kubetool and grpctool in memcheck"
    mkdir -p "$T/logs/$s"
    VG_LOGS=$T/logs/$s HOSTDEVD_TEST_BIN=$T/bin bash "test/integration/test_$s.sh" >"$T/$s.out" 2>&1
    r=$?
    mapfile -t logs < <(find "$T/logs/$s" -name '*.log' | sort)
    summary=$(grep -E "^[a-z-]+: [0-9]+ passed, [0-9]+ failed" "$T/$s.out" | tail -1)
    if [ $r -eq 0 ] && [ ${#logs[@]} -gt 0 ] && memcheck_clean "${logs[@]}"; then
        pass "test_$s passes with ${#logs[@]} processes in memcheck ($summary), 0 errors, no leak"
    else
        fail "test_$s in memcheck (exit $r, ${#logs[@]} processes: $summary)" \
            "$(grep -A2 '^  FAIL\|^failed in' "$T/$s.out" | head -20; memcheck_clean "${logs[@]}")"
    fi
done
finish
