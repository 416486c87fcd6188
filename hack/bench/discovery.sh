#!/usr/bin/env bash
# hack/bench/discovery.sh - discovery, whole process against whole process (hyperfine): what the
# agent would publish (`hostdevd inventory -o json`: process start, pci.ids/usb.ids, the scan,
# every object's status printed) against `lspci -D -vmm` on the 1024-function tree and against
# `lsusb -v` on the USB server tree (lsusb runs in a private mount namespace with the tree bound
# at /sys, as libusb reads only /sys; hostdevd reads the same /sys there). Also the agent's
# in-process scan (build/release/pcibench), for the cost without process start and output.
# Needs: bin/hostdevd build/release/pcibench, hyperfine, pciutils, usbutils, udev (hwdb for names).
set -euo pipefail
# shellcheck source=hack/bench/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$BENCH_ROOT"
T=$(mktemp -d "${BENCH_TMP:-${TMPDIR:-/tmp}}/bench-discovery.XXXXXX")
trap 'rm -rf "$T"' EXIT
S="Discovery"
runs=30
[ "$BENCH_QUICK" != 1 ] || runs=10

echo "=== $S: hostdevd inventory against lspci -D -vmm, 1024 PCI functions"
hack/mk-sysfs-fixture.sh test/fixtures/sysfs/large-1024.txt "$T/sys-1024" >/dev/null
hack/mk-sysfs-fixture.sh test/fixtures/sysfs/usb-server.txt "$T/sys-usb" >/dev/null
n_pci=$(bin/hostdevd inventory --sysfs-root "$T/sys-1024" --proc-root /nonexistent -o json 2>/dev/null |
    python3 -c 'import json,sys; print(sum(1 for o in json.load(sys.stdin)["items"] if o["kind"] == "PCIDevice"))')
hyperfine -N --style basic --warmup 3 --runs "$runs" --export-json "$T/pci.json" \
    -n hostdevd "bin/hostdevd inventory --sysfs-root $T/sys-1024 --proc-root /nonexistent -o json" \
    -n lspci "lspci -D -vmm -A linux-sysfs -O sysfs.path=$T/sys-1024/bus/pci" >"$T/pci.out"
grep -E '^(Benchmark|  Time)' "$T/pci.out" | sed 's/^/  /'
stat_ms() { # json name field
    python3 -c 'import json,sys; r={x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}; print("%.2f" % (r[sys.argv[2]][sys.argv[3]] * 1000))' "$@"
}
bench_record section="$S" name="PCI: hostdevd inventory -o json, 1024-function tree ($n_pci objects), median" \
    value="$(stat_ms "$T/pci.json" hostdevd median)" unit=ms ref="$(stat_ms "$T/pci.json" lspci median)" \
    ref_name="lspci -D -vmm (pciutils $(lspci --version | awk '{print $3}'))" n="$runs" \
    how="hyperfine -N, $runs runs after 3 warm-ups; whole processes: start, ids database, scan, output"

# The goal (issue 34): the whole process at most half of lspci's time, as a ratio of the two
# measured side by side in one run; the CPU time (user + system, hyperfine's means) too.
read -r wall_ratio cpu_ratio < <(python3 -c '
import json, sys
r = {x["command"]: x for x in json.load(open(sys.argv[1]))["results"]}
h, l = r["hostdevd"], r["lspci"]
print("%.2f %.2f" % (h["median"] / l["median"], (h["user"] + h["system"]) / (l["user"] + l["system"])))' "$T/pci.json")
echo "  ratio to lspci: wall $wall_ratio, CPU $cpu_ratio"
bench_record section="$S" name="PCI: hostdevd inventory -o json against lspci -D -vmm, 1024-function tree: wall time, ratio of the medians" \
    value="$wall_ratio" unit="×" goal="≤ 0.5× lspci -D -vmm" \
    met="$(python3 -c 'import sys; print("yes" if float(sys.argv[1]) <= 0.5 else "no")' "$wall_ratio")" n="$runs" \
    how="the hyperfine run above: hostdevd's median over lspci's, measured side by side"
bench_record section="$S" name="PCI: hostdevd inventory -o json against lspci -D -vmm, 1024-function tree: CPU time (user + system), ratio" \
    value="$cpu_ratio" unit="×" n="$runs" \
    how="the hyperfine run above: hostdevd's mean user + system time over lspci's"
if command -v strace >/dev/null; then
    calls() { strace -f -c -o "$T/strace.txt" "$@" >/dev/null 2>&1; awk '$NF == "total" {print $4}' "$T/strace.txt"; }
    h_calls=$(calls bin/hostdevd inventory --sysfs-root "$T/sys-1024" --proc-root /nonexistent -o json)
    l_calls=$(calls lspci -D -vmm -A linux-sysfs -O sysfs.path="$T/sys-1024/bus/pci")
    echo "  system calls: hostdevd $h_calls, lspci $l_calls"
    bench_record section="$S" name="PCI: system calls of hostdevd inventory -o json, 1024-function tree" \
        value="$h_calls" unit=calls ref="$l_calls" ref_name="lspci -D -vmm" n=1 \
        how="strace -f -c, one run of each (process start included)"
fi

echo "=== $S: hostdevd inventory against lsusb -v, USB server tree"
n_usb=$(grep -c '^usb' test/fixtures/sysfs/usb-server.txt)
n_fn=$(grep -cE '^[0-9a-f]{4}' test/fixtures/sysfs/usb-server.txt)
# shellcheck disable=SC2016 # expanded by the inner shell
unshare -m --propagation private bash -c '
    set -e
    mount --bind "$1" /sys
    mount -t tmpfs -o mode=755 none /dev
    mknod -m 666 /dev/null c 1 3
    mkdir -p /dev/bus/usb
    export SYSTEMD_DEVICE_VERIFY_SYSFS=0 # the tree is not sysfs: tell libudev to read it anyway
    lsusb -v >"$3/lsusb.txt" 2>/dev/null
    hyperfine -N --style basic --warmup 3 --runs "$2" --export-json "$3/usb.json" \
        -n hostdevd "$4 inventory --sysfs-root /sys --proc-root /nonexistent -o json" \
        -n lsusb "lsusb -v" >"$3/usb.out"
' bench "$T/sys-usb" "$runs" "$T" "$BENCH_ROOT/bin/hostdevd"
grep -E '^(Benchmark|  Time)' "$T/usb.out" | sed 's/^/  /'
seen=$(grep -c '^Bus ' "$T/lsusb.txt")
[ "$seen" -gt "$n_usb" ] || { echo "lsusb saw $seen devices on the tree, expected root hubs and $n_usb" >&2; exit 1; }
bench_record section="$S" name="USB: hostdevd inventory -o json, USB server tree ($n_usb USB devices; $n_fn PCI functions scanned too), median" \
    value="$(stat_ms "$T/usb.json" hostdevd median)" unit=ms ref="$(stat_ms "$T/usb.json" lsusb median)" \
    ref_name="lsusb -v (usbutils $(dpkg-query -W -f '${Version}' usbutils), $seen devices with root hubs)" n="$runs" \
    how="hyperfine -N in a mount namespace with the tree at /sys, $runs runs after 3 warm-ups"

echo "=== $S: the agent's scan in process (no process start, no output)"
build/release/pcibench "$T/sys-1024" 21 | tee "$T/inproc.txt" | sed 's/^/  /'
ms=$(grep -oE 'median [0-9.]+ ms' "$T/inproc.txt" | head -1 | awk '{print $2}')
[ -n "$ms" ] || { echo "pcibench printed no median" >&2; exit 1; }
bench_record section="$S" name="PCI: one inventory scan in the agent's process, 1024-function tree, median" \
    value="$ms" unit=ms n=21 how="build/release/pcibench: the agent's scan code timed in process, 21 runs"
