/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/sriov.h - an SR-IOV physical function's VF count: read it, and write sriov_numvfs with
 * the kernel's refusals in words. (The count, the total and each VF's index are read by the PCI
 * scan: node/pci.h; the VFs' network settings are node/vflink.h.)
 *
 * Blocking (the write): the kernel creates or removes the VFs inside it and probes their driver
 * (seconds on real hardware), so run it off the event loop. No logging.
 */
#pragma once

#include "base/err.h"

/* The VFs SR-IOV PF `address` has now (its sriov_numvfs); 0 for any other device, or when it
 * cannot be read. Quick (one read). */
int node_sriov_numvfs(int root_fd, const char *address);

/*
 * Writes `n` to bus/pci/devices/<address>/sriov_numvfs below `root_fd` (node/sysfs.h). Returns
 * 0, or the kernel's -errno with `ret_err` saying what it means: -EBUSY (VFs exist: a non-zero
 * count changes only through 0), -ERANGE or -EINVAL (more than sriov_totalvfs, or the driver
 * refuses the number), -ENOMEM or -ENOSPC (no bus numbers or MMIO space for that many: see the
 * kernel's log), -ENOENT (not an SR-IOV device), -EOPNOTSUPP/-ENOSYS (its driver cannot make VFs).
 */
int node_sriov_set_numvfs(int root_fd, const char *address, int n, struct err *ret_err);
