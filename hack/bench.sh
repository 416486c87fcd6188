#!/usr/bin/env bash
# hack/bench.sh [--quick] [SECTION...] - make bench / make bench-quick: runs the benchmark
# sections (hack/bench/<section>.sh, each with its own private control plane or qemu node when it
# needs one) and writes their figures as tables into docs/benchmarks.md (--quick:
# build/bench/benchmarks.md, for use while developing), one block per section between markers
# that keep the prose around them; sections not run keep the figures they had. Figures are printed, never asserted: the run fails only when a section could not
# measure (the report is written with what the others measured).
#   BENCH_SECTIONS  sections in order (default: all, the order below)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
QUICK=0
if [ "${1:-}" = --quick ]; then
    QUICK=1
    shift
fi
ALL="discovery rescan footprint idle kubeclient latency health scale ctlmem anchor"
SECTIONS=${*:-${BENCH_SECTIONS:-$ALL}}
mkdir -p build/bench
OUTDIR=build/bench/records$([ "$QUICK" = 1 ] && echo -quick)
rm -rf "$OUTDIR"
mkdir -p "$OUTDIR"
TARGET=docs/benchmarks.md
[ "$QUICK" = 0 ] || TARGET=build/bench/benchmarks.md
[ "$QUICK" = 0 ] || [ -e "$TARGET" ] || cp docs/benchmarks.md "$TARGET" 2>/dev/null || true
export BENCH_QUICK=$QUICK
failed=()
measured=()
t0=$SECONDS
settings=$(env | grep -E '^BENCH_[A-Z_]+=' | grep -vE '^BENCH_(OUT|QUICK|[A-Z_]*_KEEP)=' | sort | tr '\n' ' ')
for s in $SECTIONS; do
    f=hack/bench/$s.sh
    if [ ! -x "$f" ]; then
        echo "bench: no section $s ($f)" >&2
        failed+=("$s")
        continue
    fi
    ts=$SECONDS
    load=$(cut -d' ' -f1-3 /proc/loadavg)
    export BENCH_OUT=$PWD/$OUTDIR/$s.jsonl
    : >"$BENCH_OUT"
    if ! "$f"; then
        echo "bench: section $s could not measure (see above)" >&2
        failed+=("$s")
    fi
    note="Load average at the start: $load; the section took $((SECONDS - ts)) s.${settings:+ Settings: $settings}"
    # a section that recorded nothing keeps the figures it had
    [ ! -s "$BENCH_OUT" ] || measured+=("$s=$BENCH_OUT:$note")
    echo "--- $s: $((SECONDS - ts)) s"
done
# shellcheck source=hack/bench/lib.sh
. hack/bench/lib.sh
hack/bench-report.py "$TARGET" "${measured[@]}" --order "$ALL" --machine "$(bench_machine)" \
    --commit "$(git describe --always --dirty 2>/dev/null || echo unknown)" --date "$(date -u +%F)" \
    --mode "$([ "$QUICK" = 1 ] && echo "make bench-quick" || echo "make bench")"
echo "bench: $(cat "$OUTDIR"/*.jsonl | wc -l) figures of ${#measured[@]} sections in $((SECONDS - t0)) s -> $TARGET"
if [ ${#failed[@]} -gt 0 ]; then
    echo "bench: could not measure: ${failed[*]}" >&2
    exit 1
fi
