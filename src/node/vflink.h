/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/vflink.h - the per-VF settings of an SR-IOV PF's network interface (MAC address, VLAN
 * and priority, spoof checking, trust), read and written over rtnetlink as `ip link show` and
 * `ip link set dev PF vf N ...` do. The only file that includes libmnl.
 *
 * node_vflink_list() sends RTM_GETLINK with IFLA_EXT_MASK RTEXT_FILTER_VF and reads the reply's
 * IFLA_VFINFO_LIST; node_vflink_set() sends one RTM_SETLINK per setting so that a driver refusing
 * one of them is named for that one. Each call opens its own NETLINK_ROUTE socket (SOCK_CLOEXEC)
 * with a receive timeout of NODE_VFLINK_TIMEOUT_S seconds, asks for an acknowledgement and the
 * kernel's extended ack message (NETLINK_EXT_ACK), and closes it. Blocking (a driver's
 * ndo_set_vf_* may talk to its firmware): callers run it off the event loop. No logging; errors
 * are -errno with a sentence in `ret_err`.
 *
 * The reply parser (node_vflink_parse) takes bytes and checks every attribute's bounds; the MAC
 * helpers and node_vflink_satisfied() are pure, for the reconciler and for tests.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

#define NODE_VFLINK_TIMEOUT_S 5
/* "aa:bb:cc:dd:ee:ff" and its NUL. */
#define NODE_VFLINK_MAC_STR 18

/* One VF as the PF's driver reports it. */
struct node_vflink {
    int index;
    uint8_t mac[6];
    int vlan, qos;       /* 0: none */
    int spoofchk, trust; /* 0 or 1, -1 when the driver does not report it */
    int link_state;      /* IFLA_VF_LINK_STATE_AUTO, _ENABLE, _DISABLE; -1 unknown */
};

/* What to set on VF `index`: a field < 0 (a MAC with has_mac false) is left as it is. vlan and
 * qos are one setting for the kernel: vlan >= 0 with qos < 0 writes qos 0; qos >= 0 needs
 * vlan >= 0, and qos > 0 a vlan other than 0. */
struct node_vflink_want {
    int index;
    bool has_mac;
    uint8_t mac[6];
    int vlan, qos, spoofchk, trust;
};

/*
 * The VFs of interface `ifname`, in the kernel's order, into `ret` (room for `max`); `*ret_n` is
 * their number (0 for an interface without VFs or without a PCI device: dummy, veth). Returns 0,
 * -ENODEV when there is no such interface, -E2BIG when it has more than `max` VFs, -EBADMSG for
 * a malformed reply, -ETIMEDOUT when netlink does not answer in time, or another -errno.
 */
int node_vflink_list(const char *ifname, struct node_vflink *ret, size_t max, size_t *ret_n,
                     struct err *ret_err);

/*
 * Sets what `w` asks on one VF of `ifname`, in the order mac, vlan (with qos), spoofchk, trust,
 * one RTM_SETLINK each; stops at the first refusal. `driver` (the PF's driver as sysfs names it,
 * NULL when unknown) only words the messages. Returns 0 or:
 *   -EINVAL without asking the kernel when `w` is out of range (node_vflink_want_check);
 *   -EOPNOTSUPP when the driver has no such setting: "the igb driver of enp0s5 does not support
 *     trust on a VF";
 *   the kernel's -errno otherwise (-EINVAL for a VF index the PF does not have, -ENODEV for an
 *     absent interface): "the igb driver of enp0s5 refused vlan 10 qos 3 on VF 2: <the kernel's
 *     extack message or errno text>".
 */
int node_vflink_set(const char *ifname, const char *driver, const struct node_vflink_want *w,
                    struct err *ret_err);

/*
 * Parses `len` bytes of netlink messages holding the RTM_NEWLINK answer to
 * node_vflink_list()'s request (what one recv() gives): its VFs go to `ret` as there. Messages
 * of other types are skipped; an NLMSG_ERROR with an error returns that error ("the kernel
 * answered: <its extack message or errno text>"). Returns 0 with `*ret_n`, -E2BIG (more than
 * `max` VFs), -EBADMSG (truncated or malformed: a message, an attribute or a VF's attribute
 * shorter than its type needs, no RTM_NEWLINK at all), or the kernel's -errno. Never reads
 * outside the buffer.
 */
int node_vflink_parse(const void *buf, size_t len, struct node_vflink *ret, size_t max,
                      size_t *ret_n, struct err *ret_err);

/* Whether `w` is within the kernel's ranges: index >= 0, vlan 0..4095, qos 0..7 and only with a
 * vlan (see struct node_vflink_want), spoofchk and trust -1, 0 or 1, a unicast non-zero MAC.
 * Returns 0 or -EINVAL with a sentence naming the field and what to write. */
int node_vflink_want_check(const struct node_vflink_want *w, struct err *ret_err);

/* Whether `have` (same index) already has everything `w` asks, so that nothing is written. */
bool node_vflink_satisfied(const struct node_vflink *have, const struct node_vflink_want *w);

/*
 * Parses "aa:bb:cc:dd:ee:ff" (six pairs of hex digits, either case, ':' between them, nothing
 * else). Returns 0 with `mac`, or -EINVAL with a sentence saying what to write: for a malformed
 * string, a multicast address (the first byte odd) or all zeros.
 */
int node_vflink_mac_parse(const char *s, uint8_t mac[6], struct err *ret_err);

/* Writes `mac` as "aa:bb:cc:dd:ee:ff" (lowercase) into `buf` (NODE_VFLINK_MAC_STR bytes). */
void node_vflink_mac_format(const uint8_t mac[6], char buf[NODE_VFLINK_MAC_STR]);
