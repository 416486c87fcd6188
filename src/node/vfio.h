/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/vfio.h - vfio-pci binding and restoring of one PCI device, level-triggered.
 *
 * Nothing here remembers anything: node_vfio_observe() reads what sysfs shows of a device
 * (driver link, driver_override, IOMMU group), node_vfio_next() decides the one step that moves
 * it towards a goal (pure, unit-tested), node_vfio_apply() carries that step out with a single
 * sysfs write. node_vfio_converge() loops observe -> next -> apply until the goal is reached,
 * so a crash or a reboot between any two steps is repaired by calling it again.
 *
 *   bind:    driver_override = vfio-pci; unbind the current driver; drivers_probe; verify the
 *            driver link is vfio-pci. Never new_id (it would grab every identical device).
 *   restore: clear driver_override; unbind vfio-pci; drivers_probe; if the original driver
 *            did not take the device, bind it explicitly through drivers/<orig>/bind; verify.
 *            With no original driver, the device is left unbound. Verified means on a host
 *            driver (the original, or another that took it first); a device left unbound
 *            while an original driver was wanted is a restore that did not take effect (-EIO).
 *            With vfio-pci as the original (vfio-pci.ids=, or an override the admin wrote), a
 *            device on vfio-pci is left as it is, driver_override included; an unbound one goes
 *            back by the bind's steps; one on a host driver stays there.
 *
 * Safety (node_vfio_group_members, node_vfio_member_blocks): every other member of the
 * device's IOMMU group must be on vfio-pci or claimed as well, bridges excepted (class 0x0604,
 * or bound to pcieport); the group is VFIO's unit of ownership. node_vfio_member_essential()
 * tells a member the host cannot give up (an ISA/LPC bridge, an SMBus controller, a host
 * bridge, or a host-critical device, node/hostuse.h): asking to claim it too would be wrong,
 * the device cannot be passed through safely in this slot. node_vfio_group_busy() tells whether
 * /dev/vfio/<group> is open (a VM holds it): unbinding then blocks in the kernel until the VM
 * lets go, so restore waits.
 *
 * A driver link counts only when it leads to bus/pci/drivers/<name> inside the root, an
 * iommu_group link only when it leads to kernel/iommu_groups/<N> (node_sysfs_read_link_in()).
 *
 * Paths are relative to a sysfs root fd (node/sysfs.h). Blocking: writes to unbind and
 * drivers_probe run driver remove/probe paths and can take seconds, so run this on the
 * worker thread. No logging.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "node/hostuse.h"
#include "node/pci.h"

#define NODE_VFIO_DRIVER "vfio-pci"

struct node_vfio_dev {
    char address[NODE_PCI_ADDRESS_SIZE];
    bool present;      /* false: no such device (removed, or a wrong address) */
    char driver[64];   /* "" when unbound */
    char override[64]; /* driver_override, "" when unset ("(null)" in sysfs) */
    int iommu_group;   /* -1 when none */
    uint32_t class_id; /* the class attribute, 0x020000 */
};

enum node_vfio_goal {
    NODE_VFIO_BIND,
    NODE_VFIO_RESTORE,
};

enum node_vfio_step {
    NODE_VFIO_DONE,
    NODE_VFIO_SET_OVERRIDE,   /* driver_override <- "vfio-pci" */
    NODE_VFIO_UNBIND,         /* drivers/<current>/unbind <- address */
    NODE_VFIO_PROBE,          /* drivers_probe <- address */
    NODE_VFIO_CLEAR_OVERRIDE, /* driver_override <- "\n" */
    NODE_VFIO_BIND_ORIGINAL,  /* drivers/<original>/bind <- address */
    NODE_VFIO_STUCK,          /* nothing left to try: the caller reports what sysfs shows */
};

/* Reads device `address`. Returns 0 (with present=false when it does not exist) or -errno
 * (-ELOOP for an iommu_group link that loops, ...). A driver link that does not lead to a
 * directory of bus/pci/drivers is no driver. */
int node_vfio_observe(int root_fd, const char *address, struct node_vfio_dev *ret);

/*
 * The next step towards `goal`. `original` is the driver to restore ("" for none). `tried` is
 * the set of steps already carried out in this convergence (bit 1 << step): a probe that did
 * not bind is not repeated, and restore falls back to an explicit bind once.
 */
enum node_vfio_step node_vfio_next(const struct node_vfio_dev *d, enum node_vfio_goal goal,
                                   const char *original, unsigned tried);

/* "set-override", "unbind", "probe", "clear-override", "bind-original", "done", "stuck". */
const char *node_vfio_step_name(enum node_vfio_step step);

/* Carries out one step on device `d` with one sysfs write. Returns 0 or the kernel's -errno. */
int node_vfio_apply(int root_fd, const struct node_vfio_dev *d, enum node_vfio_step step,
                    const char *original);

/* Called after each step that succeeded, with the goal and step names ("bind", "unbind"). */
typedef void (*node_vfio_step_fn)(const char *goal, const char *step, void *arg);

/*
 * Moves device `address` to `goal` and verifies it. Returns 0 with `*ret` the final state, or
 * -errno with `ret_err` (may be NULL) saying which step failed and what sysfs shows (-ENODEV: the
 * device is gone; -EIO: the driver link is not what the goal needs after every step was tried).
 */
int node_vfio_converge(int root_fd, const char *address, enum node_vfio_goal goal,
                       const char *original, node_vfio_step_fn after_step, void *arg,
                       struct node_vfio_dev *ret, struct err *ret_err);

/* Lists the members of IOMMU group `group` (observed as above), sorted by address. Returns 0
 * with `*ret`/`*ret_n` (free() the array) or -errno. */
int node_vfio_group_members(int root_fd, int group, struct node_vfio_dev **ret, size_t *ret_n);

/* Whether a group member stands in the way, i.e. is not the device itself, not a bridge, not
 * on vfio-pci and not claimed (`claimed(address, arg)` true). */
bool node_vfio_member_blocks(const struct node_vfio_dev *member, const char *address,
                             bool (*claimed)(const char *address, void *arg), void *arg);

/*
 * Whether group member `m` is one the host cannot give up: 1 for an ISA/LPC bridge (class
 * 0x0601: the platform's legacy devices, TPM, firmware flash hang off it), an SMBus controller
 * (0x0c05: sensors, memory SPD), a host bridge (0x0600: the root complex itself), or a device
 * that is host-critical by `use` (NULL: not checked), with `ret_err->msg` saying what it is
 * ("0000:00:1f.0 is an ISA/LPC bridge, which the host cannot give up"); 0 otherwise; -errno
 * when the host-use check cannot read sysfs. `ret_err` may be NULL. Ask it of members that
 * block (node_vfio_member_blocks()); one on vfio-pci already has been given up.
 */
/* What a device of class `class_id` (0x060100) is when the platform needs it (host bridge,
 * ISA/LPC bridge, SMBus controller): such a device never goes to vfio-pci, as the claimed device
 * or as a member of its group. NULL for any other class. */
const char *node_vfio_platform_class(uint32_t class_id);

int node_vfio_member_essential(int root_fd, const struct node_vfio_dev *m,
                               const struct node_hostuse *use, struct err *ret_err);

/* 1 when /dev/vfio/<group> below `dev_root` is open elsewhere (EBUSY), 0 when it is free or
 * absent, -errno otherwise. Opens and closes the group node at once. */
int node_vfio_group_busy(const char *dev_root, int group);

/* Who holds /dev/vfio/<group>: node_holder_find() (node/holder.h) of that path and of the node
 * below `dev_root`. Call it for a group known busy, not to poll. */
int node_vfio_group_holder(const char *dev_root, const char *proc_root, int group, char *buf,
                           size_t size);
