#!/usr/bin/env bash
# hack/bench/rescan.sh - what a uevent burst costs the agent's PCI inventory (issue 47): an update
# that reads and describes again only the functions it names, their PFs and the neighbours it
# touches (controllers/devices/pciinv), against the full rescan every PCI uevent made before
# (the scan, every PCIDevice's spec and blockers), on the 1024-function tree, with host use read
# from a fake /proc (no mounts, swap or routes on the tree's devices), in process
# (build/release/pcibench --inventory): one device's driver change (a GPU function whose IOMMU
# group holds its audio function), one VF's driver change (its PF has 64 VFs), and a burst of
# the 64 VFs of that PF. CPU time and wall time of full scans and updates run alternately in one
# process; system calls with strace -c as differences of runs (one full scan; two; one and an
# update). The update reads what the same change would make it read: the tree is not changed
# between runs (the unit tests in test/unit/test_pcirescan.c check that updates for real changes
# equal full scans).
# Needs: build/release/pcibench, strace.
set -euo pipefail
# shellcheck source=hack/bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$BENCH_ROOT"
T=$(mktemp -d "${BENCH_TMP:-${TMPDIR:-/tmp}}/bench-rescan.XXXXXX")
trap 'rm -rf "$T"' EXIT
S="Incremental rescans"
runs=15
[ "$BENCH_QUICK" != 1 ] || runs=5

hack/mk-sysfs-fixture.sh test/fixtures/sysfs/large-1024.txt "$T/sys" >/dev/null
bench_fake_proc "$T/proc"
GPU=0000:18:00.0
PF=0000:b1:00.0
mapfile -t VFS < <(awk -v pf="physfn=$PF" '$0 ~ pf {print $1}' test/fixtures/sysfs/large-1024.txt)
[ "${#VFS[@]}" = 64 ] || { echo "expected 64 VFs of $PF in the tree, found ${#VFS[@]}" >&2; exit 1; }
bench=(build/release/pcibench --inventory "$T/sys" "$T/proc")
calls() { # FULL UPDATES ADDRESS...: system calls of the whole run
    strace -f -c -o "$T/strace.txt" "${bench[@]}" "$@" >/dev/null
    awk '$NF == "total" {print $4}' "$T/strace.txt"
}
base=$(calls 0 0)
full_calls=$(($(calls 1 0) - base))
echo "=== $S: 1024-function tree; one full rescan: $full_calls system calls"

# case NAME WHAT ADDRESS...
case_() {
    local name=$1 what=$2
    shift 2
    local upd_calls out
    upd_calls=$(($(calls 0 1 "$@") - base))
    out=$("${bench[@]}" "$runs" "$runs" "$@")
    awk '{print "  " $0}' <<<"$out"
    read -r f_wall f_cpu < <(sed -n 's/^full scan: median \([0-9.]*\) ms wall, CPU \([0-9.]*\) ms.*/\1 \2/p' <<<"$out")
    read -r u_wall u_cpu u_read u_desc < <(sed -n 's/^update: median \([0-9.]*\) ms wall, CPU \([0-9.]*\) ms.*read \([0-9]*\) functions, described \([0-9]*\)/\1 \2 \3 \4/p' <<<"$out")
    echo "  $name: system calls $upd_calls against $full_calls"
    bench_record section="$S" name="$what: system calls of the update (read $u_read functions, described $u_desc)" \
        value="$upd_calls" unit=calls ref="$full_calls" ref_name="a full rescan, as every PCI uevent made before" n=1 \
        how="strace -f -c of pcibench --inventory: (one scan and one update) less (one scan)"
    bench_record section="$S" name="$what: CPU time (user + system) of the update, mean" \
        value="$u_cpu" unit=ms ref="$f_cpu" ref_name="a full rescan, alternating with the updates" n="$runs" \
        how="getrusage around each run in pcibench --inventory, full rescans and updates alternating in one process"
    bench_record section="$S" name="$what: wall time of the update, median" \
        value="$u_wall" unit=ms ref="$f_wall" ref_name="a full rescan, alternating with the updates" n="$runs" \
        how="the same runs"
}
case_ gpu "One device's driver change ($GPU, a GPU function; its group holds its audio function)" "$GPU"
case_ vf "One VF's driver change (${VFS[3]}; its PF has 64 VFs, whose links are read again)" "${VFS[3]}"
case_ burst "A burst of 64 VFs appearing (the uevents of the VFs of $PF)" "${VFS[@]}"
