#!/usr/bin/env bash
# Runs libFuzzer targets: hack/fuzz.sh RUNS NAME...  Each starts from its committed corpus
# (test/fuzz/corpus/NAME, read-only) and writes new inputs to build/fuzz/corpus-NAME; a crash
# is written to build/fuzz/ and fails the run. Prints executions and speed per target.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
runs=$1
shift
rc=0
for name in "$@"; do
    mkdir -p "build/fuzz/corpus-$name"
    log="build/fuzz/$name.log"
    t0=$(date +%s.%N)
    "build/fuzz/fuzz_$name" -runs="$runs" -max_len=65536 -print_final_stats=1 \
        -artifact_prefix="build/fuzz/$name-" "build/fuzz/corpus-$name" "test/fuzz/corpus/$name" \
        >"$log" 2>&1
    r=$?
    t1=$(date +%s.%N)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    printf 'fuzz %-12s %10s executions in %6.1fs  exit %d\n' "$name" "${execs:-?}" \
        "$(echo "$t1 - $t0" | bc)" "$r"
    [ $r -eq 0 ] || { tail -30 "$log"; rc=1; }
done
exit $rc
