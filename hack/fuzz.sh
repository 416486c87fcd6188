#!/usr/bin/env bash
# Runs libFuzzer targets: hack/fuzz.sh RUNS NAME...  Each starts from its committed corpus
# (test/fuzz/corpus/NAME, read-only) and writes new inputs to build/fuzz/corpus-NAME; a crash
# is written to build/fuzz/ and fails the run. test/fuzz/NAME.dict, when there is one, is the
# target's dictionary; FUZZ_MAX_LEN (default 65536) caps an input; FUZZ_SECONDS, when set, stops
# a target after that long even if it has not made RUNS executions (the summary says how many).
# Prints executions, seconds and executions per second per target, and keeps each target's
# last result in build/fuzz/results/NAME; build/fuzz/summary.txt is the table of all of them.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
runs=$1
shift
rc=0
mkdir -p build/fuzz/results

# summary: a markdown table of every target's last run.
summary() {
    {
        echo "| target | executions | seconds | exec/s | result |"
        echo "|---|---:|---:|---:|---|"
        cat build/fuzz/results/* 2>/dev/null
    } >build/fuzz/summary.txt
}

for name in "$@"; do
    mkdir -p "build/fuzz/corpus-$name"
    log="build/fuzz/$name.log"
    opts=()
    [ -f "test/fuzz/$name.dict" ] && opts+=(-dict="test/fuzz/$name.dict")
    [ -n "${FUZZ_SECONDS:-}" ] && opts+=(-max_total_time="$FUZZ_SECONDS")
    t0=$(date +%s.%N)
    "build/fuzz/fuzz_$name" -runs="$runs" -max_len="${FUZZ_MAX_LEN:-65536}" "${opts[@]}" \
        -print_final_stats=1 -artifact_prefix="build/fuzz/$name-" \
        "build/fuzz/corpus-$name" "test/fuzz/corpus/$name" >"$log" 2>&1
    r=$?
    t1=$(date +%s.%N)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    secs=$(echo "$t1 - $t0" | bc)
    speed=$(echo "${execs:-0} / $secs" | bc)
    result=ok
    [ "${execs:-0}" -ge "$runs" ] || result="stopped at ${FUZZ_SECONDS:-?} s"
    # libFuzzer exits 72 when interrupted (SIGINT): stopped, nothing found.
    [ $r -eq 72 ] && r=0 && result="interrupted"
    [ $r -eq 0 ] || result="exit $r: $(grep -m1 -oE '(ERROR|runtime error): .*' "$log")"
    printf 'fuzz %-12s %10s executions in %7.1fs  %7s exec/s  %s\n' "$name" "${execs:-?}" \
        "$secs" "$speed" "$result"
    printf '| %s | %s | %.1f | %s | %s |\n' "$name" "${execs:-?}" "$secs" "$speed" "$result" \
        >"build/fuzz/results/$name"
    summary
    [ $r -eq 0 ] || { tail -30 "$log"; rc=1; }
done
echo "summary: build/fuzz/summary.txt"
exit $rc
