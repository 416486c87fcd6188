/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/sriov.c - an SR-IOV PF's VF count (see sriov.h).
 */
#include "node/sriov.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "node/sysfs.h"

static const char *meaning(int r)
{
    switch (r) {
    case -EBUSY:
        return "VFs exist (a non-zero count changes only through 0) or are in use";
    case -ERANGE:
    case -EINVAL:
        return "the PF's driver does not take that number (more than sriov_totalvfs?)";
    case -ENOMEM:
    case -ENOSPC:
        return "no room for that many VFs (bus numbers or MMIO space: see the kernel's log)";
    case -ENOENT:
        return "the device has no sriov_numvfs: it is not an SR-IOV physical function";
    case -EOPNOTSUPP:
    case -ENOSYS:
        return "its driver cannot make VFs (no sriov_configure): load a driver that can";
    default:
        return "see the kernel's log";
    }
}

int node_sriov_numvfs(int root_fd, const char *address)
{
    char path[96];
    long long n = 0;
    (void)snprintf(path, sizeof(path), "bus/pci/devices/%s/sriov_numvfs", address);
    return node_sysfs_read_int(root_fd, path, 10, &n) == 0 && n > 0 && n < 65536 ? (int)n : 0;
}

int node_sriov_set_numvfs(int root_fd, const char *address, int n, struct err *ret_err)
{
    char path[96], value[16];
    (void)snprintf(path, sizeof(path), "bus/pci/devices/%s/sriov_numvfs", address);
    (void)snprintf(value, sizeof(value), "%d", n);
    int r = node_sysfs_write(root_fd, path, value);
    if (r < 0)
        return err_set(ret_err, r, "writing %d to sriov_numvfs of %s failed: %s (%s)", n, address,
                       strerror(-r), meaning(r));
    return 0;
}
