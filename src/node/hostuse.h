/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/hostuse.h - is a PCI device host-critical? Passing through the disk controller that holds
 * the root filesystem, or the NIC that carries the node's management address, takes the node
 * down (harvester#3199, #2960). A device is host-critical when, following sysfs:
 *   - a block device below it (a disk, a partition of it, or a device-mapper/md device built
 *     on it, through `slaves/`) backs a mounted filesystem or an active swap area; or
 *   - a network interface below it has an IP address, carries a default route, or is a lower
 *     device (bond slave, VLAN parent, bridge port, through `upper_*` links) of an interface
 *     that does.
 *
 * Two halves, so that tests can feed the second with a fake sysfs tree:
 *   node_hostuse_collect() reads what the host uses from the running system: mounts from
 *   <proc>/1/mountinfo (the host's init: the agent runs with hostPID in its DaemonSet; in a
 *   plain process it is the same mount namespace anyway), swap from <proc>/swaps, addresses
 *   from getifaddrs(3) and default routes from <proc>/net/route and <proc>/net/ipv6_route
 *   (the agent runs with hostNetwork).
 *   node_hostuse_check() maps that onto one device through sysfs (relative to a sysfs root fd,
 *   see node/sysfs.h): /sys/dev/block/<maj>:<min> links and /sys/class/net/<if> links, whose
 *   targets contain the PCI address of the device they sit under as a path component.
 *
 * Blocking (reads /proc and sysfs; quick). No logging.
 */
#pragma once

#include <stddef.h>

#include "base/err.h"

#define NODE_HOSTUSE_IFNAME 16 /* IFNAMSIZ */

struct node_hostuse_blk {
    unsigned major, minor;
    char what[128]; /* the mount point ("/", "/var") or "swap" */
};

struct node_hostuse_net {
    char ifname[NODE_HOSTUSE_IFNAME];
    char what[64]; /* "address 10.0.2.15", "default route" */
};

struct node_hostuse {
    struct node_hostuse_blk *blk; /* block devices that back a mount or swap */
    size_t n_blk;
    struct node_hostuse_net *net; /* interfaces with an address (not loopback) or a default route */
    size_t n_net;
};

/* Collects what the host uses. `proc_root` is "/proc" normally. Returns 0 and fills `*ret`
 * (freed with node_hostuse_done), or -errno. Mounts whose source has no real block device
 * (tmpfs, proc, overlay's anonymous 0:N devices) are left out. */
int node_hostuse_collect(const char *proc_root, struct node_hostuse *ret);

void node_hostuse_done(struct node_hostuse *u);

/* What a host-critical device holds. */
enum node_hostuse_kind {
    NODE_HOSTUSE_NONE,
    NODE_HOSTUSE_MOUNT,   /* a block device that backs a mounted filesystem */
    NODE_HOSTUSE_SWAP,    /* a block device that backs an active swap area */
    NODE_HOSTUSE_NETWORK, /* an interface with an address or a default route (or below one) */
};

/*
 * Checks PCI device `address` ("0000:00:1f.2") against `use` (NULL: nothing is used). Returns 0
 * when it is not host-critical (`*ret_kind` = NODE_HOSTUSE_NONE), 1 when it is, with `*ret_kind`
 * saying what it holds and `ret_err->msg` a sentence a user can act on, e.g. "it holds block
 * device 8:0 (sda), which backs the mount /" or "it holds network interface eth0, which has
 * address 10.0.2.15"; or -errno when sysfs cannot be read (-EINVAL for a bad address), with
 * `ret_err` saying so. `ret_kind` and `ret_err` may be NULL. The first finding wins: blocks
 * first, then interfaces.
 */
int node_hostuse_check(int sysfs_root_fd, const char *address, const struct node_hostuse *use,
                       enum node_hostuse_kind *ret_kind, struct err *ret_err);
