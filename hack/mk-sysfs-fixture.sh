#!/usr/bin/env bash
# hack/mk-sysfs-fixture.sh DESCRIPTION OUTDIR - builds a fake sysfs tree from a text description.
#
# OUTDIR plays the role of /sys: devices/pci<domain>:<bus>/<bdf>/ directories with the attributes
# Linux has (vendor device class subsystem_vendor subsystem_device revision numa_node irq
# driver_override enable modalias uevent resource config), bus/pci/devices/<bdf> links to them,
# bus/pci/drivers/<drv>/{bind,unbind,new_id,remove_id} with links to their devices,
# bus/pci/drivers_probe, kernel/iommu_groups/<N>/devices/<bdf> links, and per device the links
# driver, iommu_group, subsystem, physfn (VFs) and virtfnN (PFs). Every link is relative, so the
# tree can be moved. OUTDIR is wiped first (only when it is empty or was made by this script).
#
# Description: one PCI function per line; '#' starts a comment.
#   ADDRESS CLASS VENDOR:DEVICE [key=value ...]
#   0000:3b:00.0 0200 15b3:1017 sub=15b3:0020 rev=00 driver=mlx5_core iommu=40 numa=0 \
#       sriov_totalvfs=8 sriov_numvfs=2             (one line)
#   0000:3b:00.2 0200 15b3:1018 driver=mlx5_core iommu=41 numa=0 physfn=0000:3b:00.0
# ADDRESS is DOMAIN:BUS:DEV.FN (domain of 4-8 hex digits); CLASS is base class and subclass (4
# hex digits) or those plus the programming interface (6 digits, e.g. 0c0330). Keys, all
# optional: sub=SVID:SDID (default 0000:0000), rev=HH and progif=HH (default 00), driver=NAME
# (default unbound), iommu=N (default no iommu_group link), numa=N (default -1), irq=N (default
# 0), sriov_totalvfs=N and sriov_numvfs=N (make the device an SR-IOV PF), physfn=ADDRESS (makes
# it a VF of that PF; the PF's virtfnN links follow the order of the VF lines), and
# omit=ATTR[,ATTR...] (attributes or links to leave out, e.g. omit=vendor for a device that
# vanishes while it is read). Exits 2 on a malformed description.
set -euo pipefail

usage() {
    echo "usage: $0 DESCRIPTION OUTDIR" >&2
    exit 2
}
[ $# -eq 2 ] || usage
desc=$1
out=$2
marker=.hostdevd-sysfs-fixture

die() {
    echo "mk-sysfs-fixture: $*" >&2
    exit 2
}

hex='[0-9a-f]'
re_addr="^$hex{4,8}:$hex{2}:[01]$hex\.[0-7]\$"
re_class="^$hex{4}($hex{2})?\$"
re_ids="^$hex{4}:$hex{4}\$"
re_byte="^$hex{2}\$"
re_uint='^[0-9]+$'
re_name='^[A-Za-z0-9_.-]+$'

declare -a addrs=()
declare -A class progif ven dev subv subd rev drv iommu numa irq totalvfs numvfs physfn omit
declare -A vfs   # PF address -> its VFs' addresses, space separated, in description order
declare -A slots # DOMAIN:BUS:DEV -> number of functions

parse_key() { # address key value lineno
    local a=$1 k=$2 v=$3 n=$4
    case $k in sub | rev | progif | physfn) v=${v,,} ;; esac
    case $k in
    sub) [[ $v =~ $re_ids ]] || die "line $n: sub=$v is not VVVV:DDDD"
        subv[$a]=${v%%:*} subd[$a]=${v##*:} ;;
    rev) [[ $v =~ $re_byte ]] || die "line $n: rev=$v is not two hex digits"
        rev[$a]=$v ;;
    progif) [[ $v =~ $re_byte ]] || die "line $n: progif=$v is not two hex digits"
        progif[$a]=$v ;;
    driver) [[ $v =~ $re_name ]] || die "line $n: bad driver name '$v'"
        drv[$a]=$v ;;
    iommu) [[ $v =~ $re_uint ]] || die "line $n: iommu=$v is not a group number"
        iommu[$a]=$((10#$v)) ;;
    numa) [[ $v =~ $re_uint || $v == -1 ]] || die "line $n: numa=$v is not a node"
        numa[$a]=$v ;;
    irq) [[ $v =~ $re_uint ]] || die "line $n: irq=$v is not a number"
        irq[$a]=$v ;;
    sriov_totalvfs) [[ $v =~ $re_uint ]] || die "line $n: sriov_totalvfs=$v is not a number"
        totalvfs[$a]=$v ;;
    sriov_numvfs) [[ $v =~ $re_uint ]] || die "line $n: sriov_numvfs=$v is not a number"
        numvfs[$a]=$v ;;
    physfn) [[ $v =~ $re_addr ]] || die "line $n: physfn=$v is not a PCI address"
        physfn[$a]=$v ;;
    omit) omit[$a]=${v//,/ } ;;
    *) die "line $n: unknown key '$k'" ;;
    esac
}

parse() {
    local line n=0 a c ids rest kv kvs
    while IFS= read -r line || [ -n "$line" ]; do
        n=$((n + 1))
        line=${line%%#*}
        read -r a c ids rest <<<"$line" || true
        [ -n "$a" ] || continue
        a=${a,,} c=${c,,} ids=${ids,,}
        [[ $a =~ $re_addr ]] || die "line $n: '$a' is not a PCI address (DDDD:BB:DD.F)"
        [[ $c =~ $re_class ]] || die "line $n: '$c' is not a class (4 or 6 hex digits)"
        [[ $ids =~ $re_ids ]] || die "line $n: '$ids' is not VVVV:DDDD"
        [ -z "${class[$a]:-}" ] || die "line $n: $a appears twice"
        addrs+=("$a")
        slots[${a%.*}]=$((${slots[${a%.*}]:-0} + 1))
        class[$a]=${c:0:4} progif[$a]=${c:4:2} ven[$a]=${ids%%:*} dev[$a]=${ids##*:}
        read -ra kvs <<<"$rest" || true
        for kv in "${kvs[@]}"; do
            [[ $kv == *=* ]] || die "line $n: '$kv' is not key=value"
            parse_key "$a" "${kv%%=*}" "${kv#*=}" "$n"
        done
    done <"$desc"
    for a in "${addrs[@]}"; do
        [ -n "${physfn[$a]:-}" ] || continue
        [ -n "${class[${physfn[$a]}]:-}" ] || die "$a: physfn ${physfn[$a]} is not described"
        vfs[${physfn[$a]}]+="$a "
    done
}

# Little-endian printf escapes of a 16-bit (4 hex digits) or 32-bit (8 hex digits) value.
le16() { REPLY="\\x${1:2:2}\\x${1:0:2}"; }
le32() { REPLY="\\x${1:6:2}\\x${1:4:2}\\x${1:2:2}\\x${1:0:2}"; }

# Runs of zero bytes as printf escapes (built once; command substitutions fork).
printf -v zeros8 '\\x00%.0s' {1..8}
printf -v zeros12 '\\x00%.0s' {1..12}
printf -v zeros24 '\\x00%.0s' {1..24}
printf -v zeros32 '\\x00%.0s' {1..32}
printf -v zeros192 '\\x00%.0s' {1..192}

# 256 bytes of configuration space: the type 0 or type 1 header, then zeros.
write_config() { # address file bar0(8 hex digits)
    local a=$1 f=$2 bar=$3 h='' hdr=0 cmd=0000 pin=00 line
    [ "${class[$a]}" = 0604 ] && hdr=1
    [ "${slots[${a%.*}]}" -gt 1 ] && hdr=$((hdr | 0x80))
    printf -v hdr '%02x' "$hdr"
    [ -n "${drv[$a]:-}" ] && cmd=0006
    printf -v line '%02x' $((${irq[$a]:-0} & 255))
    [ "${irq[$a]:-0}" != 0 ] && pin=01
    le16 "${ven[$a]}"; h+=$REPLY
    le16 "${dev[$a]}"; h+=$REPLY
    le16 "$cmd"; h+="$REPLY\\x00\\x00"
    h+="\\x${rev[$a]:-00}\\x${progif[$a]:-00}\\x${class[$a]:2:2}\\x${class[$a]:0:2}"
    h+="\\x10\\x00\\x$hdr\\x00"
    if [ "$hdr" = 01 ] || [ "$hdr" = 81 ]; then
        h+=$zeros8                                   # BAR0-1
        h+="\\x${a:$((${#a} - 7)):2}\\x00\\x00\\x00" # primary bus; secondary unknown
        h+=$zeros32                                  # windows .. capability pointer
    else
        le32 "$bar"; h+=$REPLY
        h+=$zeros24                                  # BAR1-5, CardBus CIS
        le16 "${subv[$a]:-0000}"; h+=$REPLY
        le16 "${subd[$a]:-0000}"; h+=$REPLY
        h+=$zeros12                                  # ROM, capabilities, reserved
    fi
    h+="\\x$line\\x$pin\\x00\\x00$zeros192"
    printf "$h" >"$f"
}

# The resource file: one line per resource; 13 for endpoints (BARs, ROM, IOV), 17 for bridges.
write_resource() { # address file bar0
    local a=$1 f=$2 bar=$3 n=13 i r=''
    local z='0x0000000000000000 0x0000000000000000 0x0000000000000000'
    [ "${class[$a]}" = 0604 ] && n=17
    if [ "$n" = 17 ]; then
        r+="$z"$'\n'
    else
        printf -v r '0x00000000%s 0x00000000%08x 0x0000000000040200\n' "$bar" $((0x$bar + 0xfffff))
    fi
    for ((i = 1; i < n; i++)); do r+="$z"$'\n'; done
    printf '%s' "$r" >"$f"
}

declare -a link_targets=() link_names=() dirs=()

link() { # target name
    link_targets+=("$1")
    link_names+=("$2")
}

devdir() { # address -> relative path of its directory
    REPLY="devices/pci${1%:*.*}/$1"
}

relpeer() { # from-address to-address -> REPLY: link target from one device dir to the other
    if [ "${1%:*.*}" = "${2%:*.*}" ]; then
        REPLY="../$2"
    else
        REPLY="../../pci${2%:*.*}/$2"
    fi
}

write_attrs() { # address dir
    local a=$1 d=$2 sv=${subv[$a]:-0000} sd=${subd[$a]:-0000} c=${class[$a]}${progif[$a]:-00}
    local alias pc uevent='' enable=0
    printf '0x%s\n' "${ven[$a]}" >"$d/vendor"
    printf '0x%s\n' "${dev[$a]}" >"$d/device"
    printf '0x%s\n' "$sv" >"$d/subsystem_vendor"
    printf '0x%s\n' "$sd" >"$d/subsystem_device"
    printf '0x%s\n' "$c" >"$d/class"
    printf '0x%s\n' "${rev[$a]:-00}" >"$d/revision"
    printf '%s\n' "${irq[$a]:-0}" >"$d/irq"
    printf '%s\n' "${numa[$a]:--1}" >"$d/numa_node"
    printf '(null)\n' >"$d/driver_override"
    [ -n "${drv[$a]:-}" ] && enable=1
    printf '%s\n' "$enable" >"$d/enable"
    local V=${ven[$a]^^} D=${dev[$a]^^} SV=${sv^^} SD=${sd^^} C=${c^^}
    alias="pci:v0000${V}d0000${D}sv0000${SV}sd0000${SD}bc${C:0:2}sc${C:2:2}i${C:4:2}"
    printf '%s\n' "$alias" >"$d/modalias"
    [ -n "${drv[$a]:-}" ] && uevent+="DRIVER=${drv[$a]}"$'\n'
    printf -v pc '%04X' $((0x$c))
    uevent+="PCI_CLASS=$pc"$'\n'"PCI_ID=$V:$D"$'\n'"PCI_SUBSYS_ID=$SV:$SD"$'\n'
    uevent+="PCI_SLOT_NAME=$a"$'\n'"MODALIAS=$alias"$'\n'
    printf '%s' "$uevent" >"$d/uevent"
}

write_sriov() { # address dir
    local a=$1 d=$2 vf first='' i=0
    printf '%s\n' "${totalvfs[$a]:-0}" >"$d/sriov_totalvfs"
    printf '%s\n' "${numvfs[$a]:-0}" >"$d/sriov_numvfs"
    printf '1\n' >"$d/sriov_offset"
    printf '1\n' >"$d/sriov_stride"
    printf '1\n' >"$d/sriov_drivers_autoprobe"
    for vf in ${vfs[$a]:-}; do
        [ -n "$first" ] || first=$vf
        relpeer "$a" "$vf"
        link "$REPLY" "$d/virtfn$i"
        i=$((i + 1))
    done
    if [ -n "$first" ]; then printf '%s\n' "${dev[$first]}"; else echo 0; fi >"$d/sriov_vf_device"
}

write_device() { # address index
    local a=$1 idx=$2 d rel bar
    devdir "$a"
    rel=$REPLY
    d=$out/$rel
    printf -v bar '%08x' $((0xe0000000 + idx * 0x100000))
    write_attrs "$a" "$d"
    write_resource "$a" "$d/resource" "$bar"
    write_config "$a" "$d/config" "$bar"

    link "../../../$rel" "$out/bus/pci/devices/$a"
    link "../../../bus/pci" "$d/subsystem"
    if [ -n "${drv[$a]:-}" ]; then
        link "../../../bus/pci/drivers/${drv[$a]}" "$d/driver"
        link "../../../../$rel" "$out/bus/pci/drivers/${drv[$a]}/$a"
    fi
    if [ -n "${iommu[$a]:-}" ]; then
        link "../../../kernel/iommu_groups/${iommu[$a]}" "$d/iommu_group"
        link "../../../../$rel" "$out/kernel/iommu_groups/${iommu[$a]}/devices/$a"
    fi
    if [ -n "${physfn[$a]:-}" ]; then
        relpeer "$a" "${physfn[$a]}"
        link "$REPLY" "$d/physfn"
    fi
    if [ -n "${totalvfs[$a]:-}${numvfs[$a]:-}" ]; then
        write_sriov "$a" "$d"
    fi
}

make_symlinks() {
    if command -v python3 >/dev/null; then
        local i
        for i in "${!link_targets[@]}"; do
            printf '%s\0%s\0' "${link_targets[$i]}" "${link_names[$i]}"
        done | python3 -c '
import os, sys
f = sys.stdin.buffer.read().split(b"\0")
for target, name in zip(f[0::2], f[1::2]):
    os.symlink(target, name)'
    else
        local i
        for i in "${!link_targets[@]}"; do ln -s "${link_targets[$i]}" "${link_names[$i]}"; done
    fi
}

[ -f "$desc" ] || die "no such description: $desc"
parse
case $out in
'' | / | /sys | /sys/*) die "refusing to use $out" ;;
esac
if [ -d "$out" ] && [ -n "$(ls -A "$out")" ] && [ ! -e "$out/$marker" ]; then
    die "$out is not empty and was not made by this script; refusing to wipe it"
fi
rm -rf "$out"
mkdir -p "$out"
out=$(cd "$out" && pwd)
: >"$out/$marker"

dirs=("$out/bus/pci/devices" "$out/bus/pci/drivers" "$out/bus/pci/slots" "$out/kernel/iommu_groups")
declare -A drivers groups
for a in "${addrs[@]}"; do
    devdir "$a"
    dirs+=("$out/$REPLY")
    [ -z "${drv[$a]:-}" ] || drivers[${drv[$a]}]=1
    [ -z "${iommu[$a]:-}" ] || groups[${iommu[$a]}]=1
done
for d in "${!drivers[@]}"; do dirs+=("$out/bus/pci/drivers/$d"); done
for g in "${!groups[@]}"; do dirs+=("$out/kernel/iommu_groups/$g/devices"); done
mkdir -p "${dirs[@]}"

for f in drivers_probe rescan; do : >"$out/bus/pci/$f"; done
echo 1 >"$out/bus/pci/drivers_autoprobe"
for d in "${!drivers[@]}"; do
    for f in bind unbind new_id remove_id uevent; do : >"$out/bus/pci/drivers/$d/$f"; done
done
for g in "${!groups[@]}"; do
    echo DMA >"$out/kernel/iommu_groups/$g/type"
    : >"$out/kernel/iommu_groups/$g/reserved_regions"
done

i=0
for a in "${addrs[@]}"; do
    write_device "$a" "$i"
    i=$((i + 1))
done
make_symlinks
for a in "${!omit[@]}"; do
    devdir "$a"
    for f in ${omit[$a]}; do rm -f "$out/$REPLY/$f"; done
done
