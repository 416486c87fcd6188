#!/bin/sh
# /etc/rc.boot of the qemu test node (hack/qemu-guest/etc/rc.boot), busybox init's sysinit
# step: runs once at every boot, before the control loop and the agent supervisor start.
# Drivers of the node's devices (not vfio: the agent loads it), network, hostname.
# /etc/hostdevd/image.env (written by hack/qemu-node.sh build): BOOT_MODULES.
# /etc/hostdevd/node.env (written by hack/qemu-node.sh boot, per boot): NODE_NAME,
# EXTRA_BOOT_MODULES (boot --sriov: igb igbvf), LAUNCHER (boot --launcher: 1), ...
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
NODE_NAME=qnode
# shellcheck source=/dev/null
. /etc/hostdevd/image.env
# shellcheck source=/dev/null
[ -f /etc/hostdevd/node.env ] && . /etc/hostdevd/node.env
echo /sbin/modprobe >/proc/sys/kernel/modprobe
# shellcheck disable=SC2086 # a list of module names
for m in $BOOT_MODULES ${EXTRA_BOOT_MODULES:-}; do
    modprobe "$m" || echo "rc.boot: modprobe $m failed"
done
hostname "$NODE_NAME"
printf '127.0.0.1 localhost\n10.0.2.15 %s\n' "$NODE_NAME" >/etc/hosts
ip link set lo up
# The management NIC is the virtio-net at 00:02.0, whatever its name.
MGMT=
for n in /sys/bus/pci/devices/0000:00:02.0/virtio*/net/*; do [ -e "$n" ] && MGMT=${n##*/}; done
if [ -n "$MGMT" ]; then
    ip link set "$MGMT" up
    ip addr add 10.0.2.15/24 dev "$MGMT"
    ip route add default via 10.0.2.2
    echo "$MGMT" >/run/mgmt-if
else
    echo "rc.boot: no management NIC at 0000:00:02.0"
fi
echo "nameserver 10.0.2.3" >/etc/resolv.conf
[ "${LAUNCHER:-0}" != 1 ] || launcher-run mount || echo "rc.boot: launcher-run mount failed"
cut -d' ' -f1 /proc/uptime >/run/boot-done
echo "rc.boot: node $NODE_NAME up (mgmt ${MGMT:-none}) after $(cat /run/boot-done)s"
