#!/usr/bin/env bash
# Runs the test suites that exist, each even if an earlier one failed, and ends with the time of
# every suite and one line "tests: N passed, N failed" over all of them. Exits non-zero if any
# suite failed.
#   hack/run-tests.sh [unit|integration|e2e|all|long]
#
# Suites run side by side, HOSTDEVD_TEST_JOBS at a time (default: the cores plus two; 1 runs
# them one after another). Each suite has its own control plane on free ports and its own
# directories, so most share the machine without noticing; those that cannot say so in their
# header with a line "# test-lock: NAME": no more than the lock's limit of the suites naming it
# run at once (kubelet, 1: the kubelet harness sets global sysctls that test_kubelet.sh checks
# are restored; qemu, HOSTDEVD_TEST_QEMU_JOBS or 2: the e2e suites' TCG guests, which wait far
# more than they compute, but each takes a core while it boots). The longest suites start first, by the times of the previous run (build/results/times.tsv), else
# the qemu suites first and then by size. A suite's output is printed whole when it ends.
#
# The summary lists each suite's wall time and CPU time (its processes' CPU, from a cgroup of its
# own when this machine lets us make one), so the next regression is visible; build/results/
# times.tsv keeps them. Expects the binaries built (make test does that first). "long" (make
# test-long) runs the scripts in test/long/, which take minutes each, one at a time; "all"
# leaves them out.
# shellcheck disable=SC2317 # run_unit, run_fuzz_replay and cg_cleanup are called through variables and traps
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
what=${1:-all}
results=build/results
logs=$results/logs
rc=0
T0=$SECONDS

run_unit() {
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        build/asan/unit-tests >"$results/unit.log" 2>&1
    local r=$?
    cat "$results/unit.log"
    # CUnit's summary row: "tests  Total Ran Passed Failed Inactive".
    awk '$1 == "tests" && NF >= 5 {print $4, $5}' "$results/unit.log" >"$results/unit.count"
    [ -s "$results/unit.count" ] || echo "0 1" >"$results/unit.count"
    [ "$r" -eq 0 ] || { echo "unit: runner exited $r"; return 1; }
}

# Replays every committed fuzz corpus (and crash reproducer) through the sanitizer build.
run_fuzz_replay() {
    local bin name p=0 f=0
    for bin in build/asan/fuzz-replay-*; do
        [ -x "$bin" ] || continue
        name=${bin#build/asan/fuzz-replay-}
        echo "--- fuzz corpus replay: $name"
        if ASAN_OPTIONS=detect_leaks=1 "$bin" "test/fuzz/corpus/$name"; then
            p=$((p + 1))
        else
            f=$((f + 1))
        fi
    done
    echo "$p $f" >"$results/fuzz.count"
    [ "$f" -eq 0 ]
}

# --- CPU time per suite: a cgroup of its own (cgroup v2, else v1's cpuacct) -------------------
CG=""
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
    CG=/sys/fs/cgroup/hostdevd-tests.$$
elif [ -d /sys/fs/cgroup/cpuacct ]; then
    CG=/sys/fs/cgroup/cpuacct/hostdevd-tests.$$
fi
mkdir "$CG" 2>/dev/null || CG=""

# cg_enter NAME: moves this (sub)shell into NAME's cgroup; everything it starts is counted there.
cg_enter() {
    [ -n "$CG" ] || return 0
    mkdir -p "$CG/$1" 2>/dev/null && echo "$BASHPID" >"$CG/$1/cgroup.procs" 2>/dev/null
}

# cg_cpu NAME: the CPU seconds NAME's cgroup used ("-" when there is none).
cg_cpu() {
    local d=$CG/$1
    if [ -f "$d/cpu.stat" ]; then
        awk '$1 == "usage_usec" {printf "%.0f", $2 / 1e6}' "$d/cpu.stat"
    elif [ -f "$d/cpuacct.usage" ]; then
        awk '{printf "%.0f", $1 / 1e9}' "$d/cpuacct.usage"
    else
        echo -
    fi
}

cg_cleanup() {
    [ -n "$CG" ] || return 0
    local d
    for d in "$CG"/*/; do [ -d "$d" ] && rmdir "$d" 2>/dev/null; done
    rmdir "$CG" 2>/dev/null || true
}
trap cg_cleanup EXIT

# --- the jobs ----------------------------------------------------------------------------------
# One job per suite: NAMES[i] (what the summary calls it), CMDS[i] (a script, or a function of
# this file), LABELS[i] (the === line), LOCKS[i] (its test-lock, or empty).
NAMES=() CMDS=() LABELS=() LOCKS=()
add_job() { # NAME CMD LABEL LOCK
    NAMES+=("$1")
    CMDS+=("$2")
    LABELS+=("$3")
    LOCKS+=("$4")
}

# add_scripts DIR LABEL PREFIX DEFAULT_LOCK: every DIR/test_*.sh as a job.
add_scripts() {
    local t name lock
    for t in "$1"/test_*.sh; do
        [ -f "$t" ] || continue
        name=$3$(basename "$t" .sh)
        name=${name/test_/}
        lock=$(sed -n 's/^# test-lock: *\([a-z0-9-]*\).*/\1/p' "$t" | head -1)
        add_job "$name" "$t" "$2: $t" "${lock:-$4}"
    done
}

mkdir -p "$results" "$logs"
# The python3 of the tests is Debian's (hack/deps.sh installs it and python3-yaml), first on the
# PATH of every suite. A python3 found before it (a version manager's shim: pyenv's runs bash and
# `pyenv exec` and imports its site's packages, 0.17 s of CPU a call against 0.02 s; a run makes
# 1,300 calls, most of them test/e2e/guestctl.py) cost make test about 200 s of CPU.
if [ -x /usr/bin/python3 ]; then
    mkdir -p build/python
    ln -sfn /usr/bin/python3 build/python/python3
    export PATH="$PWD/build/python:$PATH"
fi
# Each suite's control plane (hack/cluster.sh) without Go's garbage collector until 1 GiB: a test's
# API server lives a minute or two and never gets there; it spent 17% less CPU (5.9 s against
# 7.1 s for a start, 40 objects and 20 s idle; 3 runs each), kube-controller-manager a third
# less, for about 550 MB instead of 290 MB of memory each.
export CLUSTER_GO_ENV=${CLUSTER_GO_ENV-GOGC=off GOMEMLIMIT=1GiB}
rm -f "$results"/*.count "$logs"/*.log
case "$what" in
unit | all)
    add_job unit run_unit "unit tests (CUnit, ASan+UBSan)" ""
    add_job fuzz-replay run_fuzz_replay "fuzz corpus replay (every corpus, ASan+UBSan)" ""
    ;;
esac
case "$what" in
unit | integration | e2e | all | long) ;;
*)
    echo "usage: $0 [unit|integration|e2e|all|long]" >&2
    exit 2
    ;;
esac
case "$what" in
integration | all) add_scripts test/integration "integration (real etcd + kube-apiserver + kube-controller-manager)" "" "" ;;
esac
case "$what" in
e2e | all) add_scripts test/e2e "end to end (a qemu node with Debian's kernel + the control plane)" e2e- qemu ;;
long) add_scripts test/long "long (minutes of idle or load against the control plane)" long- "" ;;
esac

# Cores plus two: the suites wait more than they compute (a Lease to expire, a watch to time out,
# a TCG guest), so three at a time on 2 cores kept the cores 54% busy (647 s of suites, issue 44);
# four kept them 74% busy and took 465 s, every check passing (two clean-clone runs, back to back).
JOBS=${HOSTDEVD_TEST_JOBS:-$(($(nproc) + 2))}
[ "$what" != long ] || JOBS=${HOSTDEVD_TEST_JOBS:-1} # long checks measure idle and load
[ "$JOBS" -ge 1 ] 2>/dev/null || JOBS=1

# The order: longest first by the previous run's wall times, else (a clean clone) by those of
# test/suite-times.tsv (a run's times.tsv, committed: without it a clean clone started the unit
# runner and the demo, 62 s and 135 s, last, and they were the run's tail); a suite in neither (a
# new suite) by its lock (qemu first: they run one at a time, so they start early) and size.
declare -A PREV=()
times=$results/times.tsv
[ -f "$times" ] || times=test/suite-times.tsv
if [ -f "$times" ]; then
    while IFS=$'\t' read -r n w _; do
        [[ "$w" =~ ^[0-9]+$ ]] && PREV[$n]=$w
    done <"$times"
fi
ORDER=()
while read -r _ i; do ORDER+=("$i"); done < <(
    for i in "${!NAMES[@]}"; do
        c=${CMDS[$i]}
        if [ -n "${PREV[${NAMES[$i]}]:-}" ]; then
            k=$((PREV[${NAMES[$i]}] * 1000))
        elif [ "${LOCKS[$i]}" = qemu ]; then
            k=900000
        elif [ -f "$c" ]; then
            k=$(wc -c <"$c")
        else
            k=0
        fi
        echo "$k $i"
    done | sort -k1,1nr -k2,2n
)

# run_job I: runs job I with its output in its log; its wall and CPU seconds and status go to
# $logs/NAME.time.
run_job() {
    local i=$1 name=${NAMES[$1]} t0=$SECONDS r
    cg_enter "$name"
    echo "$((SECONDS - T0))" >"$logs/$name.start"
    {
        echo "=== ${LABELS[$i]}"
        if [ -f "${CMDS[$i]}" ]; then
            bash "${CMDS[$i]}"
        else
            "${CMDS[$i]}"
        fi
    } >"$logs/$name.log" 2>&1
    r=$?
    printf '%s\t%s\t%s\t%s\n' "$((SECONDS - t0))" "$(cg_cpu "$name")" "$r" \
        "$(cat "$logs/$name.start")" >"$logs/$name.time"
    return $r
}

declare -A RUNNING=() HELD=() LIMIT=([qemu]=${HOSTDEVD_TEST_QEMU_JOBS:-2})
started=0
declare -A STARTED=()
can_start() {
    local l=${LOCKS[$1]}
    [ -z "$l" ] || [ "${HELD[$l]:-0}" -lt "${LIMIT[$l]:-1}" ]
}
# The qemu suites' node image (kernel + initramfs with the agent) is built once for all of them.
for l in "${LOCKS[@]}"; do
    [ "$l" = qemu ] || continue
    if hack/qemu-node.sh build "$results/qemu-image" bin/hostdevd >"$logs/qemu-image.build" 2>&1; then
        export E2E_IMAGE=$PWD/$results/qemu-image
    else
        cat "$logs/qemu-image.build" # each suite builds its own and says why it cannot
    fi
    break
done
echo "running ${#NAMES[@]} suites, $JOBS at a time (HOSTDEVD_TEST_JOBS)"
# the machine's CPU (every process, not only the suites') from here to the end: how full the
# cores were kept (/proc/stat: user nice system idle iowait irq softirq steal)
cpu_ticks() { awk '$1 == "cpu" {print $2 + $3 + $4 + $7 + $8 + $9, $5 + $6}' /proc/stat; }
read -r BUSY0 IDLE0 < <(cpu_ticks)
S0=$SECONDS
while [ $started -lt ${#ORDER[@]} ] || [ ${#RUNNING[@]} -gt 0 ]; do
    while [ ${#RUNNING[@]} -lt "$JOBS" ]; do
        pick=""
        for i in "${ORDER[@]}"; do
            [ -z "${STARTED[$i]:-}" ] && can_start "$i" && {
                pick=$i
                break
            }
        done
        [ -n "$pick" ] || break
        STARTED[$pick]=started
        started=$((started + 1))
        [ -z "${LOCKS[$pick]}" ] || HELD[${LOCKS[$pick]}]=$((${HELD[${LOCKS[$pick]}]:-0} + 1))
        run_job "$pick" &
        RUNNING[$!]=$pick
    done
    [ ${#RUNNING[@]} -gt 0 ] || break
    wait -n -p fin "${!RUNNING[@]}"
    r=$?
    i=${RUNNING[$fin]}
    unset "RUNNING[$fin]"
    [ -z "${LOCKS[$i]}" ] || HELD[${LOCKS[$i]}]=$((HELD[${LOCKS[$i]}] - 1))
    cat "$logs/${NAMES[$i]}.log"
    [ $r -eq 0 ] || rc=1
done

# --- the summary -------------------------------------------------------------------------------
WALL=$((SECONDS - T0))
{
    echo
    echo "time per suite (wall s, CPU s of its processes), longest first:"
    for i in "${!NAMES[@]}"; do
        n=${NAMES[$i]}
        IFS=$'\t' read -r w c r st <"$logs/$n.time" 2>/dev/null || { w=0 c=- r="?" st=-; }
        printf '%s\t%s\t%s\t%s\t%s\n' "$n" "$w" "$c" "$r" "$st"
    done | sort -t$'\t' -k2,2nr >"$results/times.tsv"
    awk -F'\t' '{printf "  %-22s %5s s  cpu %5s s%s\n", $1, $2, $3, ($4 == "0" ? "" : "  (exit " $4 ")")}' \
        "$results/times.tsv"
    sum=$(awk -F'\t' '{s += $2} END {print s + 0}' "$results/times.tsv")
    cpu=$(awk -F'\t' '$3 ~ /^[0-9]+$/ {s += $3} END {print s + 0}' "$results/times.tsv")
    # where the waiting goes: control planes started (hack/cluster.sh) and qemu boots, as the
    # suites print them ("control plane up in 5s", "boots (4.7s)", "rebooted (7.1s)")
    grep -hoE "control plane up in [0-9]+s|(boots|rebooted)[^(]*\([0-9.]+s\)|back after [0-9.]+s" \
        "$logs"/*.log 2>/dev/null | sed -E 's/\(([0-9.]+)s\)/\1/; s/([0-9.]+)s$/\1/' |
        awk '/control plane/ {n++; t += $NF; next} {b++; bt += $NF}
             END {printf "  control planes started: %d, %.0f s in all; qemu boots: %d, %.0f s in all\n", n, t, b, bt}'
    echo "  all suites: $WALL s wall with $JOBS at a time (one after another: $sum s; CPU $cpu s on $(nproc) cores)"
    read -r busy idle < <(cpu_ticks)
    # (of the suites of 10 s or more: the short ones are started last on purpose, to fill gaps)
    last=$(awk -F'\t' '$2 >= 10 && $5 ~ /^[0-9]+$/ && $5 > m {m = $5} END {print m + 0}' "$results/times.tsv")
    awk -v b=$((busy - BUSY0)) -v i=$((idle - IDLE0)) -v s=$((SECONDS - S0)) -v l="$last" -v w="$WALL" \
        'BEGIN {printf "  the machine: cores %.0f%% busy over the %d s of suites; the last suite of 10 s or more started at %d s, %d s before the end\n", (b + i ? 100 * b / (b + i) : 0), s, l, w - l}'
}

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
