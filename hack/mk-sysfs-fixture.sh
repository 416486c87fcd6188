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
# vanishes while it is read), netdev=NAME (a network interface: net/NAME/ and the link class/net/NAME),
# mac=AA:BB:CC:DD:EE:FF (with netdev: net/NAME/address, and addr_assign_type 0, "permanent",
# unless mac_assign=N gives another), dsn=16HEXDIGITS (a PCIe Device Serial Number: config
# grows to the 4096 bytes of PCIe config space, with a capability list holding the PCI Express
# capability at 0x40 and the DSN extended capability at 0x100; not on bridges),
# nvme_serial=STRING (nvme/nvme0/serial; '_' is a space, %XX the byte XX, as for USB strings),
# slot=NAME (bus/pci/slots/NAME/address holds DOMAIN:BUS:DEV; every function of that device
# that gives slot= must give the same NAME, and a NAME names one device).
# Reset and verification on release (node/pcireset.h): reset_method=M[,M...] (the kernel's
# reset methods: reset_method holds them space separated, and an empty reset file takes what is
# written; "none" for an empty list, as after `echo > reset_method`; without the key a device
# has neither file, as when the kernel knows no method), reset_file=0 (reset_method without
# reset, never seen on a kernel: for tests of the readers), live_ids=VVVV:DDDD (the ids the
# first 4 bytes of config answer with, when they are not VENDOR:DEVICE: ffff:ffff for a device
# that does not respond, others for one that came back as another device).
# Exits 2 on a malformed description.
#
# USB devices: lines starting with the word "usb".
#   usb PORTPATH VENDOR:PRODUCT [key=value ...]
#   usb 1-2 046d:c52b parent=0000:00:14.0 class=00 ifclass=03 speed=12 product=USB_Receiver \
#       manufacturer=Logitech serial=ABC123             (one line)
# PORTPATH is the kernel's name, BUS-PORT[.PORT...]. Each bus gets a root hub usbBUS (1d6b:0002,
# devnum 1, its interface BUS-0:1.0) under its host controller, the PCI function given by
# parent=ADDRESS on at least one line of the bus (all that give it must agree; it must be a PCI
# line of the same description). A device lives in the directory of its nearest described
# upstream hub (1-2.3 under 1-2/ when 1-2 is described), else directly under usbBUS, as the
# kernel nests them: devices/pci0000:00/0000:00:14.0/usb1/1-2/1-2.3. Each device has idVendor
# idProduct busnum devnum devpath speed bDeviceClass bcdDevice bConfigurationValue
# bNumInterfaces, product/manufacturer/serial when given, descriptors (the binary device and
# configuration descriptors libusb reads, so lsusb -v works on the tree), a uevent (DEVTYPE=usb_device, BUSNUM,
# DEVNUM, PRODUCT, DEVNAME=bus/usb/BBB/DDD, ...), a subsystem link to bus/usb and one interface
# directory PORTPATH:1.0 (bInterfaceClass ...); bus/usb/devices/NAME links to devices,
# interfaces and root hubs. Keys, all optional: busnum=N (default: the BUS of the port path),
# devnum=N (default: 2, 3, ... per bus in description order), class=HH (bDeviceClass, default
# 00), ifclass=HH (bInterfaceClass, default: the device class, or ff when that is 00),
# speed=MBITS (default 480), product= manufacturer= serial= (strings: '_' stands for a space and
# %XX for the byte XX, e.g. %5f for '_'; %00 is not allowed), omit=NAME[,NAME...] (files or
# directories of the device to leave out, e.g. omit=idVendor or omit=1-2:1.0).
#
# Mediated devices (mdev): lines starting with the word "mdev_type" or "mdev".
#   mdev_type PARENT TYPE available=N [api=vfio-pci] [name=STRING] [description=STRING]
#   mdev UUID PARENT TYPE [iommu=N]
#   mdev_type mtty mtty-2 available=12 name=Dual_port_serial
#   mdev 8f3f6a52-3b4e-4a8e-9d1a-2f6f0c1b7e21 mtty mtty-2 iommu=30
# PARENT is a PCI address described in the same file, or a name (a virtual device at
# devices/virtual/NAME/NAME, as the kernel's mtty sample makes it, with its subsystem link to
# class/NAME). Each parent gets class/mdev_bus/PARENT and, in its directory,
# mdev_supported_types/TYPE/ with available_instances, device_api (default vfio-pci), name and
# description when given (strings as for USB), create (empty: what a test writes stays) and
# devices/. An instance is the directory PARENTDIR/UUID/ with remove (empty), the links
# mdev_type (../mdev_supported_types/TYPE), subsystem (bus/mdev) and iommu_group (iommu=N), and
# the links bus/mdev/devices/UUID and TYPE/devices/UUID to it; its type must be on an earlier
# line. bus/mdev/devices exists when there is any mdev line.
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
declare -A class progif ven dev subv subd rev drv iommu numa irq totalvfs numvfs physfn omit netdev
declare -A mac mac_assign dsn nvme_serial slot slot_addr
declare -A reset_method reset_file live_ids # reset and verification on release
declare -A vfs   # PF address -> its VFs' addresses, space separated, in description order
declare -A slots # DOMAIN:BUS:DEV -> number of functions
declare -a usbs=() # USB port paths, in description order
declare -A uven udev ubus udevnum uclass uifclass uspeed ustr uomit
declare -A bus_pci      # USB bus number -> its host controller's PCI address
declare -A bus_devnum   # USB bus number -> the last devnum given by default
re_port='^[0-9]+-[0-9]+(\.[0-9]+)*$'
re_str='^([^%]|%[0-9a-fA-F]{2})*$'

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
    netdev) [[ $v =~ $re_name && ${#v} -le 15 ]] || die "line $n: bad interface name '$v'"
        netdev[$a]=$v ;;
    mac) v=${v,,}
        [[ $v =~ ^($hex{2}:){5}$hex{2}$ ]] || die "line $n: mac=$v is not AA:BB:CC:DD:EE:FF"
        mac[$a]=$v ;;
    mac_assign) [[ $v =~ $re_uint ]] || die "line $n: mac_assign=$v is not a number"
        mac_assign[$a]=$v ;;
    dsn) v=${v,,}
        [[ $v =~ ^$hex{16}$ ]] || die "line $n: dsn=$v is not 16 hex digits"
        dsn[$a]=$v ;;
    nvme_serial) decode_str "$v" "$n"
        nvme_serial[$a]=$REPLY ;;
    slot) [[ $v =~ $re_name ]] || die "line $n: bad slot name '$v'"
        [ "${slot_addr[$v]:-${a%.*}}" = "${a%.*}" ] || die "line $n: slot $v is another device's"
        slot[$a]=$v slot_addr[$v]=${a%.*} ;;
    reset_method) [[ $v =~ ^[a-z_]+(,[a-z_]+)*$ ]] || die "line $n: reset_method=$v is not M[,M...]"
        reset_method[$a]=$v ;;
    reset_file) [[ $v == 0 || $v == 1 ]] || die "line $n: reset_file=$v is not 0 or 1"
        reset_file[$a]=$v ;;
    live_ids) v=${v,,}
        [[ $v =~ $re_ids ]] || die "line $n: live_ids=$v is not VVVV:DDDD"
        live_ids[$a]=$v ;;
    *) die "line $n: unknown key '$k'" ;;
    esac
}

# A string value: '_' is a space, %XX the byte XX. -> REPLY
decode_str() { # value lineno
    local v=$1
    [[ $v =~ $re_str ]] || die "line $2: '$v': '%' must start %XX"
    [[ $v != *%00* ]] || die "line $2: '$v': %00 is not allowed"
    v=${v//_/ }
    v=${v//\\/\\\\}
    v=${v//%/\\x}
    printf -v REPLY '%b' "$v"
}

parse_usb_key() { # port key value lineno
    local p=$1 k=$2 v=$3 n=$4
    case $k in
    parent) v=${v,,}
        [[ $v =~ $re_addr ]] || die "line $n: parent=$v is not a PCI address"
        [ "${bus_pci[${p%%-*}]:-$v}" = "$v" ] || die "line $n: bus ${p%%-*} has another parent"
        bus_pci[${p%%-*}]=$v ;;
    busnum) [[ $v =~ $re_uint ]] || die "line $n: busnum=$v is not a number"
        ubus[$p]=$v ;;
    devnum) [[ $v =~ $re_uint ]] || die "line $n: devnum=$v is not a number"
        udevnum[$p]=$v ;;
    class) [[ ${v,,} =~ $re_byte ]] || die "line $n: class=$v is not two hex digits"
        uclass[$p]=${v,,} ;;
    ifclass) [[ ${v,,} =~ $re_byte ]] || die "line $n: ifclass=$v is not two hex digits"
        uifclass[$p]=${v,,} ;;
    speed) [[ $v =~ ^[0-9.]+$ ]] || die "line $n: speed=$v is not a number"
        uspeed[$p]=$v ;;
    product | manufacturer | serial) decode_str "$v" "$n"
        ustr[$p/$k]=$REPLY ;;
    omit) uomit[$p]=${v//,/ } ;;
    *) die "line $n: unknown key '$k'" ;;
    esac
}

parse_usb() { # port ids rest lineno
    local p=$1 ids=${2,,} n=$4 kv kvs bus
    [[ $p =~ $re_port ]] || die "line $n: '$p' is not a USB port path (BUS-PORT[.PORT...])"
    [[ $ids =~ $re_ids ]] || die "line $n: '$ids' is not VVVV:PPPP"
    [ -z "${uven[$p]:-}" ] || die "line $n: usb $p appears twice"
    usbs+=("$p")
    uven[$p]=${ids%%:*} udev[$p]=${ids##*:}
    read -ra kvs <<<"$3" || true
    for kv in "${kvs[@]}"; do
        [[ $kv == *=* ]] || die "line $n: '$kv' is not key=value"
        parse_usb_key "$p" "${kv%%=*}" "${kv#*=}" "$n"
    done
    bus=${p%%-*}
    if [ -z "${udevnum[$p]:-}" ]; then
        bus_devnum[$bus]=$((${bus_devnum[$bus]:-1} + 1))
        udevnum[$p]=${bus_devnum[$bus]}
    fi
}

# ---- mdev (parsing) ----
declare -a mparents=() mtypes=() mdevs=() # in description order; mtypes as PARENT/TYPE
declare -A mavail mapi mstr mdev_of miommu
re_uuid='^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$'

parse_mdev_type() { # parent type rest lineno
    local p=$1 t=$2 n=$4 kv kvs k v
    [[ $p =~ $re_addr || $p =~ $re_name ]] || die "line $n: '$p' is not a PCI address or a name"
    [[ $t =~ $re_name ]] || die "line $n: '$t' is not a type id"
    [ -z "${mavail[$p/$t]:-}" ] || die "line $n: mdev_type $p $t appears twice"
    [[ " ${mparents[*]} " == *" $p "* ]] || mparents+=("$p")
    mtypes+=("$p/$t")
    read -ra kvs <<<"$3" || true
    for kv in "${kvs[@]}"; do
        [[ $kv == *=* ]] || die "line $n: '$kv' is not key=value"
        k=${kv%%=*} v=${kv#*=}
        case $k in
        available) [[ $v =~ $re_uint ]] || die "line $n: available=$v is not a number"
            mavail[$p/$t]=$v ;;
        api) [[ $v =~ $re_name ]] || die "line $n: bad device api '$v'"
            mapi[$p/$t]=$v ;;
        name | description) decode_str "$v" "$n"
            mstr[$p/$t/$k]=$REPLY ;;
        *) die "line $n: unknown key '$k'" ;;
        esac
    done
    [ -n "${mavail[$p/$t]:-}" ] || die "line $n: mdev_type needs available=N"
}

parse_mdev() { # word first second rest lineno
    local n=$5 u=$2 p=$3 t kv kvs
    if [ "$1" = mdev_type ]; then
        parse_mdev_type "$2" "$3" "$4" "$n"
        return
    fi
    [[ $u =~ $re_uuid ]] || die "line $n: '$u' is not a lowercase UUID"
    [ -z "${mdev_of[$u]:-}" ] || die "line $n: mdev $u appears twice"
    read -ra kvs <<<"$4" || true
    t=${kvs[0]:-}
    [ -n "${mavail[$p/$t]:-}" ] || die "line $n: no earlier mdev_type $p $t"
    mdevs+=("$u")
    mdev_of[$u]=$p/$t
    for kv in "${kvs[@]:1}"; do
        case $kv in
        iommu=*) [[ ${kv#*=} =~ $re_uint ]] || die "line $n: $kv is not a group number"
            miommu[$u]=$((10#${kv#*=})) ;;
        *) die "line $n: '$kv' is not iommu=N" ;;
        esac
    done
}

parse() {
    local line n=0 a c ids rest kv kvs
    while IFS= read -r line || [ -n "$line" ]; do
        n=$((n + 1))
        line=${line%%#*}
        read -r a c ids rest <<<"$line" || true
        [ -n "$a" ] || continue
        if [ "$a" = usb ]; then
            parse_usb "$c" "$ids" "$rest" "$n"
            continue
        fi
        if [ "$a" = mdev_type ] || [ "$a" = mdev ]; then
            parse_mdev "$a" "$c" "$ids" "$rest" "$n"
            continue
        fi
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
        [ -z "${mac[$a]:-}${mac_assign[$a]:-}" ] || [ -n "${netdev[$a]:-}" ] || die "$a: mac= needs netdev="
        [ -z "${dsn[$a]:-}" ] || [ "${class[$a]}" != 0604 ] || die "$a: dsn= on a bridge"
        [ -n "${physfn[$a]:-}" ] || continue
        [ -n "${class[${physfn[$a]}]:-}" ] || die "$a: physfn ${physfn[$a]} is not described"
        vfs[${physfn[$a]}]+="$a "
    done
    for p in "${mparents[@]}"; do
        [[ ! $p =~ $re_addr ]] || [ -n "${class[$p]:-}" ] || die "mdev parent $p is not described"
    done
    local p b
    for p in "${usbs[@]}"; do
        b=${p%%-*}
        [ -n "${bus_pci[$b]:-}" ] || die "usb $p: no line of bus $b gives parent=ADDRESS"
        [ -n "${class[${bus_pci[$b]}]:-}" ] || die "usb $p: parent ${bus_pci[$b]} is not described"
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
zeros188='' zeros3828='' # made on first use (dsn=)

# 256 bytes of configuration space: the type 0 or type 1 header, then zeros.
write_config() { # address file bar0(8 hex digits)
    local a=$1 f=$2 bar=$3 h='' hdr=0 cmd=0000 pin=00 line status='\x00\x00' capptr='\x00'
    [ -z "${dsn[$a]:-}" ] || status='\x10\x00' capptr='\x40' # a capability list
    [ "${class[$a]}" = 0604 ] && hdr=1
    [ "${slots[${a%.*}]}" -gt 1 ] && hdr=$((hdr | 0x80))
    printf -v hdr '%02x' "$hdr"
    [ -n "${drv[$a]:-}" ] && cmd=0006
    printf -v line '%02x' $((${irq[$a]:-0} & 255))
    [ "${irq[$a]:-0}" != 0 ] && pin=01
    le16 "${ven[$a]}"; h+=$REPLY
    le16 "${dev[$a]}"; h+=$REPLY
    le16 "$cmd"; h+="$REPLY$status"
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
        h+="${zeros12:0:16}$capptr${zeros12:20}"     # ROM, capabilities, reserved
    fi
    h+="\\x$line\\x$pin\\x00\\x00"
    if [ -n "${dsn[$a]:-}" ]; then
        [ -n "$zeros188" ] || printf -v zeros188 '\\x00%.0s' {1..188}
        [ -n "$zeros3828" ] || printf -v zeros3828 '\\x00%.0s' {1..3828}
        h+="\\x10\\x00\\x02\\x00$zeros188"            # PCI Express (v2), the last capability
        h+="\\x03\\x00\\x01\\x00"                        # DSN, version 1, the last extended one
        le32 "${dsn[$a]:8:8}"; h+=$REPLY               # low dword
        le32 "${dsn[$a]:0:8}"; h+="$REPLY$zeros3828"   # high dword
    else
        h+=$zeros192
    fi
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

# reset_method, reset and the ids config answers with (reset_method=, reset_file=, live_ids=).
write_reset() { # address dir
    local a=$1 d=$2 v
    if [ -n "${reset_method[$a]:-}" ]; then
        v=${reset_method[$a]//,/ }
        if [ "$v" = none ]; then : >"$d/reset_method"; else printf '%s\n' "$v" >"$d/reset_method"; fi
        [ "${reset_file[$a]:-1}" = 0 ] || : >"$d/reset"
    fi
    if [ -n "${live_ids[$a]:-}" ]; then
        v=${live_ids[$a]}
        le16 "${v%%:*}"
        local ids=$REPLY
        le16 "${v##*:}"
        # shellcheck disable=SC2059 # the format is built from hex bytes on purpose
        { printf "$ids$REPLY"; tail -c +5 "$d/config"; } >"$d/config.new"
        mv "$d/config.new" "$d/config"
    fi
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
    write_reset "$a" "$d"

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
    if [ -n "${netdev[$a]:-}" ]; then
        mkdir -p "$d/net/${netdev[$a]}" "$out/class/net"
        printf '%s\n' "${netdev[$a]}" >"$d/net/${netdev[$a]}/ifname"
        if [ -n "${mac[$a]:-}" ]; then
            printf '%s\n' "${mac[$a]}" >"$d/net/${netdev[$a]}/address"
            printf '%s\n' "${mac_assign[$a]:-0}" >"$d/net/${netdev[$a]}/addr_assign_type"
        fi
        link "../../$rel/net/${netdev[$a]}" "$out/class/net/${netdev[$a]}"
    fi
    if [ -n "${nvme_serial[$a]+set}" ]; then
        mkdir -p "$d/nvme/nvme0"
        printf '%s\n' "${nvme_serial[$a]}" >"$d/nvme/nvme0/serial"
    fi
    if [ -n "${slot[$a]:-}" ] && [ ! -e "$out/bus/pci/slots/${slot[$a]}" ]; then
        mkdir -p "$out/bus/pci/slots/${slot[$a]}"
        printf '%s\n' "${a%.*}" >"$out/bus/pci/slots/${slot[$a]}/address"
    fi
    if [ -n "${totalvfs[$a]:-}${numvfs[$a]:-}" ]; then
        write_sriov "$a" "$d"
    fi
}

# ---- USB ----

usb_parent() { # port -> REPLY: its nearest described upstream hub, or ""
    local up=$1
    REPLY=''
    while [[ $up == *.* ]]; do
        up=${up%.*}
        if [ -n "${uven[$up]:-}" ]; then
            REPLY=$up
            return
        fi
    done
}

usb_dir() { # port -> REPLY: relative path of its directory
    local p=$1
    usb_parent "$p"
    if [ -n "$REPLY" ]; then
        usb_dir "$REPLY"
    else
        devdir "${bus_pci[${p%%-*}]}"
        REPLY+="/usb${p%%-*}"
    fi
    REPLY+="/$p"
}

ups() { # relative path -> REPLY: "../" once per component
    local rel=$1
    REPLY=''
    while [ -n "$rel" ]; do
        REPLY+=../
        [[ $rel == */* ]] && rel=${rel#*/} || rel=''
    done
}

# usb_descriptors name vid pid class ifclass: the binary `descriptors` attribute (the device
# descriptor, then the active configuration: one interface, one interrupt IN endpoint), which is
# what libusb (lsusb) reads instead of opening the device node. String indexes 1-3 are set for
# the strings the description gives.
usb_descriptors() {
    local name=$1 v=$2 p=$3 m=0 s=0 r=0
    [ -z "${ustr[$name/manufacturer]+set}" ] || m=1
    [ -z "${ustr[$name/product]+set}" ] || s=2
    [ -z "${ustr[$name/serial]+set}" ] || r=3
    # shellcheck disable=SC2059 # the format is built from hex bytes on purpose
    printf "$(printf '\\x%s' 12 01 00 02 "$4" 00 00 40 "${v:2:2}" "${v:0:2}" "${p:2:2}" "${p:0:2}" \
        00 01 0$m 0$s 0$r 01 09 02 19 00 01 01 00 80 32 09 04 00 00 01 "$5" 00 00 00 07 05 81 03 08 00 0a)"
}

# A USB device's or root hub's attributes, its one interface and their links.
write_usb_dev() { # rel name vid pid busnum devnum devpath class ifclass speed interface
    local rel=$1 name=$2 vid=$3 pid=$4 busnum=$5 devnum=$6 devpath=$7 cls=$8 ifc=$9
    local speed=${10} ifname=${11} d=$out/$1 f k
    for f in idVendor:"$vid" idProduct:"$pid" busnum:"$busnum" devnum:"$devnum" \
        devpath:"$devpath" speed:"$speed" bDeviceClass:"$cls" bcdDevice:0100 \
        bConfigurationValue:1 bNumInterfaces:" 1" bDeviceSubClass:00 bDeviceProtocol:00; do
        printf '%s\n' "${f#*:}" >"$d/${f%%:*}"
    done
    for k in product manufacturer serial; do
        [ -z "${ustr[$name/$k]+set}" ] || printf '%s\n' "${ustr[$name/$k]}" >"$d/$k"
    done
    usb_descriptors "$name" "$vid" "$pid" "$cls" "$ifc" >"$d/descriptors"
    printf 'MAJOR=189\nMINOR=%d\nDEVNAME=bus/usb/%03d/%03d\nDEVTYPE=usb_device\nDRIVER=usb\n' \
        $(((busnum - 1) * 128 + devnum - 1)) "$busnum" "$devnum" >"$d/uevent"
    printf 'PRODUCT=%x/%x/100\nTYPE=%d/0/0\nBUSNUM=%03d\nDEVNUM=%03d\n' "0x$vid" "0x$pid" \
        "0x$cls" "$busnum" "$devnum" >>"$d/uevent"
    ups "$rel"
    link "${REPLY}bus/usb" "$d/subsystem"
    link "../../../$rel" "$out/bus/usb/devices/$name"
    local i=$d/$ifname
    mkdir -p "$i"
    for f in bInterfaceClass:"$ifc" bInterfaceSubClass:00 bInterfaceProtocol:00 \
        bInterfaceNumber:00 bAlternateSetting:" 0" bNumEndpoints:01; do
        printf '%s\n' "${f#*:}" >"$i/${f%%:*}"
    done
    printf 'DEVTYPE=usb_interface\nINTERFACE=%d/0/0\n' "0x$ifc" >"$i/uevent"
    link "../${REPLY}bus/usb" "$i/subsystem"
    link "../../../$rel/$ifname" "$out/bus/usb/devices/$ifname"
}

write_usb() {
    local p b rel cls ifc
    declare -A hubs=()
    for p in "${usbs[@]}"; do hubs[${p%%-*}]=1; done
    for b in "${!hubs[@]}"; do
        devdir "${bus_pci[$b]}"
        rel=$REPLY/usb$b
        mkdir -p "$out/$rel"
        ustr[usb$b/product]="xHCI Host Controller"
        ustr[usb$b/manufacturer]="Linux hostdevd xhci-hcd"
        ustr[usb$b/serial]=${bus_pci[$b]}
        write_usb_dev "$rel" "usb$b" 1d6b 0002 "$b" 1 0 09 09 480 "$b-0:1.0"
    done
    for p in "${usbs[@]}"; do
        usb_dir "$p"
        rel=$REPLY
        mkdir -p "$out/$rel"
        cls=${uclass[$p]:-00}
        [ "$cls" = 00 ] && ifc=${uifclass[$p]:-ff} || ifc=${uifclass[$p]:-$cls}
        write_usb_dev "$rel" "$p" "${uven[$p]}" "${udev[$p]}" "${ubus[$p]:-${p%%-*}}" \
            "${udevnum[$p]}" "${p#*-}" "$cls" "$ifc" "${uspeed[$p]:-480}" "$p:1.0"
    done
}

# ---- mdev ----

mparent_dir() { # parent -> REPLY: relative path of its directory
    if [[ $1 =~ $re_addr ]]; then devdir "$1"; else REPLY="devices/virtual/$1/$1"; fi
}

write_mdev() {
    local p t u rel d g
    mkdir -p "$out/class/mdev_bus" "$out/bus/mdev/devices"
    for p in "${mparents[@]}"; do
        mparent_dir "$p"
        mkdir -p "$out/$REPLY"
        link "../../$REPLY" "$out/class/mdev_bus/$p"
        if [[ ! $p =~ $re_addr ]]; then
            mkdir -p "$out/class/$p"
            link "../../../../class/$p" "$out/$REPLY/subsystem"
            link "../../$REPLY" "$out/class/$p/$p"
        fi
    done
    for t in "${mtypes[@]}"; do
        mparent_dir "${t%%/*}"
        d=$out/$REPLY/mdev_supported_types/${t#*/}
        mkdir -p "$d/devices"
        printf '%s\n' "${mavail[$t]}" >"$d/available_instances"
        printf '%s\n' "${mapi[$t]:-vfio-pci}" >"$d/device_api"
        [ -z "${mstr[$t/name]+set}" ] || printf '%s\n' "${mstr[$t/name]}" >"$d/name"
        [ -z "${mstr[$t/description]+set}" ] || printf '%s\n' "${mstr[$t/description]}" >"$d/description"
        : >"$d/create"
    done
    for u in "${mdevs[@]}"; do
        t=${mdev_of[$u]}
        mparent_dir "${t%%/*}"
        rel=$REPLY/$u
        mkdir -p "$out/$rel"
        : >"$out/$rel/remove"
        link "../mdev_supported_types/${t#*/}" "$out/$rel/mdev_type"
        ups "$rel"
        link "${REPLY}bus/mdev" "$out/$rel/subsystem"
        link "../../../$rel" "$out/bus/mdev/devices/$u"
        link "../../../$u" "$out/${rel%/*}/mdev_supported_types/${t#*/}/devices/$u"
        g=${miommu[$u]:-}
        [ -n "$g" ] || continue
        mkdir -p "$out/kernel/iommu_groups/$g/devices"
        [ -e "$out/kernel/iommu_groups/$g/type" ] || echo DMA >"$out/kernel/iommu_groups/$g/type"
        link "${REPLY}kernel/iommu_groups/$g" "$out/$rel/iommu_group"
        link "../../../../$rel" "$out/kernel/iommu_groups/$g/devices/$u"
    done
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

# class/ stays empty: libudev (lsusb) enumerates it and gives up when it is missing.
dirs=("$out/bus/pci/devices" "$out/bus/pci/drivers" "$out/bus/pci/slots" "$out/kernel/iommu_groups" "$out/class")
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
if [ ${#usbs[@]} -gt 0 ]; then
    mkdir -p "$out/bus/usb/devices"
    write_usb
fi
[ ${#mparents[@]} -eq 0 ] || write_mdev
make_symlinks
for p in "${!uomit[@]}"; do
    usb_dir "$p"
    for f in ${uomit[$p]}; do rm -rf "${out:?}/$REPLY/$f"; done
done
for a in "${!omit[@]}"; do
    devdir "$a"
    for f in ${omit[$a]}; do rm -f "$out/$REPLY/$f"; done
done
