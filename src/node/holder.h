/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/holder.h - which process holds a device node open: a VMM on /dev/vfio/<group> (a
 * PCIDeviceClaim's or a DRA claim's device), on /dev/bus/usb/BBB/DDD (a USBDeviceClaim's). The
 * agent names it when it refuses to take a device back from a running VM.
 *
 * Reads <proc>/<pid>/fd of every process (the agent runs with hostPID in its DaemonSet) and
 * compares each descriptor's link text with the path (a process in a container sees the device
 * at the path the device plugin or the CDI spec gave it, which is the host's path), and the
 * device it is on with the device node's number: a process in a chroot or another mount
 * namespace (KubeVirt's launcher as the qemu node runs it: /launcher/dev/vfio/3) is named too.
 * Blocking;
 * no logging. Costs a readlink per descriptor of the node: ask it when a device is known to be
 * in use (node_vfio_group_busy()) or about to be taken back (a deleted USBDeviceClaim's device),
 * not on every reconcile.
 */
#pragma once

#include <stddef.h>

/* The first process below `proc_root` with a descriptor on `path` (the host's spelling,
 * "/dev/vfio/3"), or on the character device `node` is (the agent's path to it, below its dev
 * root; NULL: the path's text only), as "<comm> (pid N)" in `buf`. Returns 1 when one is found,
 * 0 when none is (or none is readable: no permission), -errno when `proc_root` cannot be read. */
int node_holder_find(const char *proc_root, const char *path, const char *node, char *buf,
                     size_t size);
