#!/usr/bin/env bash
# hack/gen-large-fixture.sh - prints the description of a large two-socket server with exactly
# 1024 PCI functions (the format of hack/mk-sysfs-fixture.sh). Deterministic; its output is
# committed as test/fixtures/sysfs/large-1024.txt:
#   hack/gen-large-fixture.sh >test/fixtures/sysfs/large-1024.txt
# The mix: chipset functions, uncore registers of both sockets, PCIe root ports, GPUs (some with
# HD audio functions sharing their IOMMU group), NVMe drives (some behind Intel VMD in domain
# 10000, without IOMMU groups), a QuickAssist card, and SR-IOV NICs (ConnectX-5, X710, E810)
# whose virtual functions fill the rest, some of them on vfio-pci and a few unbound.
set -euo pipefail

total=1024
count=0
group=100
lines=()

emit() { # address class ids keys...
    local a=$1 c=$2 i=$3
    shift 3
    printf -v REPLY '%-14s %-6s %s' "$a" "$c" "$i"
    [ $# -eq 0 ] || REPLY+=" $*"
    lines+=("$REPLY")
    count=$((count + 1))
}

next_group() {
    group=$((group + 1))
}

chipset() {
    emit 0000:00:00.0 0600 8086:2020 sub=15d9:095d rev=04 iommu=0 numa=0
    emit 0000:00:14.0 0c0330 8086:a1af sub=15d9:095d rev=09 driver=xhci_hcd iommu=3 numa=0 irq=16
    emit 0000:00:16.0 0780 8086:a1ba sub=15d9:095d rev=09 driver=mei_me iommu=4 numa=0 irq=17
    emit 0000:00:17.0 010601 8086:a182 sub=15d9:095d rev=09 driver=ahci iommu=5 numa=0 irq=18
    emit 0000:00:1c.0 0604 8086:a190 rev=f9 driver=pcieport iommu=9 numa=0 irq=24
    emit 0000:00:1f.0 0601 8086:a1c1 sub=15d9:095d rev=09 iommu=11 numa=0
    emit 0000:00:1f.2 0580 8086:a1a1 sub=15d9:095d rev=09 iommu=11 numa=0
    emit 0000:00:1f.4 0c05 8086:a1a3 sub=15d9:095d rev=09 driver=i801_smbus iommu=11 numa=0
    emit 0000:00:1f.5 0c80 8086:a1a4 sub=15d9:095d rev=09 driver=intel-spi iommu=11 numa=0
    emit 0000:02:00.0 0604 1a03:1150 rev=04 iommu=12 numa=0
    emit 0000:03:00.0 0300 1a03:2000 sub=15d9:095d rev=41 driver=ast iommu=12 numa=0 irq=19
}

# Uncore register functions: 8 functions in each of `slots` slots of two buses per socket.
uncore() { # socket first-bus
    local s=$1 b=$2 bus slot fn k=0 drv
    local ids=(2014 2015 2016 2018 2025 2026 2034 2035 2036 2040 2041 2042 2043 2054 2055 2056
        2057 2058 2059 2066 2068 2069 206a 206e 206f 2080 2081 2088)
    for bus in $b $((b + 1)); do
        for slot in 0 1 2 3 4 5 6 7 8 9 10 11; do
            next_group
            for fn in 0 1 2 3 4 5 6 7; do
                drv=
                [ "${ids[k % ${#ids[@]}]}" = 2040 ] && drv=driver=skx_uncore
                printf -v REPLY '0000:%02x:%02x.%d' "$bus" "$slot" "$fn"
                emit "$REPLY" 0880 "8086:${ids[k % ${#ids[@]}]}" sub=15d9:095d rev=04 $drv \
                    iommu=$group numa=$s
                k=$((k + 1))
            done
        done
    done
}

root_port() { # socket bus [port id]
    local id=${3:-2030}
    next_group
    printf -v REPLY '0000:%02x:00.0' "$2"
    emit "$REPLY" 0604 "8086:$id" rev=04 driver=pcieport iommu=$group numa=$1
}

gpu() { # socket bus kind(t4|ga102)
    local a
    root_port "$1" $(($2 - 1))
    next_group
    printf -v a '0000:%02x:00' "$2"
    if [ "$3" = t4 ]; then
        emit "$a.0" 0302 10de:1eb8 sub=10de:12a2 rev=a1 driver=nvidia iommu=$group numa=$1
    else
        emit "$a.0" 0300 10de:2204 sub=10de:1454 rev=a1 driver=vfio-pci iommu=$group numa=$1
        emit "$a.1" 0403 10de:1aef sub=10de:1454 rev=a1 driver=vfio-pci iommu=$group numa=$1
    fi
}

nvme() { # socket bus
    root_port "$1" $(($2 - 1)) 2032
    next_group
    printf -v REPLY '0000:%02x:00.0' "$2"
    emit "$REPLY" 010802 144d:a808 sub=144d:a801 driver=nvme iommu=$group numa=$1
}

vmd() { # socket vmd-bus drives
    local i
    next_group
    printf -v REPLY '0000:%02x:05.5' "$2"
    emit "$REPLY" 0104 8086:201d sub=8086:0000 rev=04 driver=vmd iommu=$group numa=$1
    for ((i = 1; i <= $3; i++)); do
        printf -v REPLY '10000:%02x:00.0' "$i"
        emit "$REPLY" 010802 8086:0a54 sub=8086:4802 driver=nvme numa=$1
    done
}

# An SR-IOV NIC on `bus`: one PF per VF count given, at functions 0.., then the VFs of each PF
# in routing-ID order after the PFs (function numbers run on into the next slots, as on real
# hardware). Every 8th VF is on vfio-pci and every 31st unbound.
nic() { # socket bus kind vfs-of-pf0 [vfs-of-pf1 ...]
    local s=$1 bus=$2 kind=$3 p i rid=0 pf drv
    shift 3
    local counts=("$@") pfid vfid sub pfdrv vfdrv total
    case $kind in
    cx5) pfid=15b3:1017 vfid=15b3:1018 sub=15b3:0020 pfdrv=mlx5_core vfdrv=mlx5_core total=127 ;;
    x710) pfid=8086:1572 vfid=8086:154c sub=8086:0004 pfdrv=i40e vfdrv=iavf total=32 ;;
    e810) pfid=8086:1592 vfid=8086:1889 sub=8086:0002 pfdrv=ice vfdrv=iavf total=256 ;;
    esac
    root_port "$s" $((bus - 1))
    for p in "${!counts[@]}"; do
        next_group
        printf -v pf '0000:%02x:00.%d' "$bus" "$p"
        emit "$pf" 0200 "$pfid" sub=$sub rev=00 driver=$pfdrv iommu=$group numa=$s \
            sriov_totalvfs=$total sriov_numvfs="${counts[p]}"
    done
    rid=${#counts[@]}
    for p in "${!counts[@]}"; do
        printf -v pf '0000:%02x:00.%d' "$bus" "$p"
        for ((i = 0; i < counts[p]; i++)); do
            drv=driver=$vfdrv
            [ $((i % 8)) -eq 7 ] && drv=driver=vfio-pci
            [ $((i % 31)) -eq 30 ] && drv=
            next_group
            printf -v REPLY '0000:%02x:%02x.%d' "$bus" $((rid / 8)) $((rid % 8))
            emit "$REPLY" 0200 "$vfid" sub=$sub rev=00 $drv iommu=$group numa=$s physfn="$pf"
            rid=$((rid + 1))
        done
    done
}

chipset
uncore 0 0x14
uncore 1 0x85
gpu 0 0x18 ga102
gpu 0 0x1a ga102
gpu 0 0x1c t4
gpu 0 0x1e t4
gpu 1 0xa0 ga102
gpu 1 0xa2 t4
gpu 1 0xa4 t4
gpu 1 0xa6 t4
nvme 0 0x31
nvme 0 0x33
nvme 1 0xc1
nvme 1 0xc3
vmd 0 0x5d 4
root_port 1 0xd9
next_group
emit 0000:da:00.0 0b40 8086:37c8 sub=8086:35c5 rev=04 iommu=$group numa=1
nic 0 0x3b x710 16 16 16 16
nic 1 0xd8 x710 16 16 16 16
nic 1 0xb1 e810 64 64
# Three dual-port ConnectX-5 cards take the rest: each costs a root port and two PFs, and the
# remaining functions are spread over their six PFs as VFs.
vfs=$((total - count - 3 * 3))
v=()
for p in 0 1 2 3 4 5; do v+=($((vfs / 6 + (p < vfs % 6 ? 1 : 0)))); done
nic 0 0x41 cx5 "${v[0]}" "${v[1]}"
nic 0 0x61 cx5 "${v[2]}" "${v[3]}"
nic 1 0xe1 cx5 "${v[4]}" "${v[5]}"

echo "# Generated by hack/gen-large-fixture.sh; do not edit. $count PCI functions."
echo "# ADDRESS     CLASS  VENDOR:DEVICE keys (see hack/mk-sysfs-fixture.sh)"
printf '%s\n' "${lines[@]}"
[ "$count" -eq "$total" ] || {
    echo "gen-large-fixture: made $count functions, not $total" >&2
    exit 1
}
