/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/blockers.h - why a PCI device cannot be passed through safely now: the PCIDevice's
 * status.passthroughBlockers (crds/pcidevices.yaml), found with the checks a claim makes
 * (node/vfio.h for the IOMMU group, node/hostuse.h for host use), so that the inventory shows
 * in advance what a claim would be refused for.
 *
 *   NoIOMMUGroup       the device has no IOMMU group (IOMMU off or unsupported)
 *   IOMMUGroupShared   other members of its group stay on host drivers (bridges and members on
 *                      vfio-pci excepted, and those `is_claimed` says are claimed)
 *   MountedFilesystem  it holds a block device that backs a mounted filesystem
 *   Swap               it holds a block device that backs an active swap area
 *   HostNetwork        it holds a network interface with an address or the default route
 *   SRIOVEnabled       it is an SR-IOV physical function with virtual functions (sriov_numvfs)
 *
 * Messages say what was found and what to do, for people. Reads sysfs below a root fd
 * (node/sysfs.h); blocking (quick reads). No logging.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"
#include "node/hostuse.h"
#include "node/pci.h"

/* The most blockers one device can have: a group reason and a host-use reason, with room. */
#define NODE_BLOCKERS_MAX 4

struct node_blocker {
    char reason[32];   /* one of the CRD's enum, e.g. "IOMMUGroupShared" */
    char message[512]; /* what was found and what to do */
};

/*
 * The blockers of device `address`, whose IOMMU group is `iommu_group` (-1 for none) and driver
 * `driver` ("" when unbound), against what the host uses (`use`, from node_hostuse_collect();
 * NULL: not checked). A device on vfio-pci is not checked for host use (the host has let it go
 * already). `is_claimed(address, arg)` (may be NULL: nothing is claimed) says which other group
 * members are claimed too, as node_vfio_member_blocks() takes it. Writes up to `max` blockers to
 * `ret` and returns how many there are (0: it can be passed through now), or -errno with
 * `ret_err` (may be NULL) saying what could not be read; `ret` is then left alone.
 */
int node_blockers_for(int sysfs_fd, const char *address, int iommu_group, const char *driver,
                      const struct node_hostuse *use,
                      bool (*is_claimed)(const char *address, void *arg), void *arg,
                      struct node_blocker *ret, size_t max, struct err *ret_err);

/*
 * As node_blockers_for(), for device `d` of `scan` (a scan just made, which owns `d`): what the
 * scan read whole (no problem noted) is not read again, i.e. the class, driver and IOMMU group
 * of the group's members and the device's SR-IOV VF count. The group's member list is still
 * read from sysfs, and a member the scan skipped or read with a problem is read as
 * node_blockers_for() reads it, so that one unreadable device still stands in the way.
 */
int node_blockers_for_scanned(int sysfs_fd, const struct node_pci_scan_result *scan,
                              const struct node_pci_dev *d, const struct node_hostuse *use,
                              bool (*is_claimed)(const char *address, void *arg), void *arg,
                              struct node_blocker *ret, size_t max, struct err *ret_err);
