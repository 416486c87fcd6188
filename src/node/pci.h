/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/pci.h - PCI device discovery: libpci on a configurable sysfs root, names from pci.ids.
 *
 * A `struct node_pci` lives as long as the agent: it holds the sysfs root (an fd and the path
 * libpci is pointed at) and one libpci context used only for name lookups, which loads pci.ids
 * once. node_pci_scan() makes a fresh libpci context for every scan (pci_scan_bus() appends to
 * the device list, so a reused context would list every device twice) and takes identity and
 * class from libpci, the driver, IOMMU group, NUMA node and SR-IOV facts from sysfs (node/sysfs).
 *
 * libpci's error callback is declared noreturn and its default calls exit(1); it fires when a
 * mandatory attribute (vendor, device, class) cannot be read, e.g. when a VF disappears while
 * sriov_numvfs changes. Ours records the message and siglongjmp()s back into the scan, which
 * cleans up its context and returns -EIO with the message; the caller retries later.
 *
 * This is the only file that includes <pci/pci.h>. Blocking (sysfs reads; a 1024-function
 * scan takes milliseconds), so run it where blocking is allowed. No logging. A `struct
 * node_pci` is used by one thread at a time; scans on different threads are independent.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Room for the longest address, "ffffffff:ff:1f.7" (an 8-digit domain), and its NUL. */
#define NODE_PCI_ADDRESS_SIZE 17

struct node_pci_dev {
    char address[NODE_PCI_ADDRESS_SIZE]; /* "0000:00:1f.6"; the domain has 4 to 8 hex digits */
    uint16_t vendor_id, device_id, subsystem_vendor_id, subsystem_device_id;
    uint16_t class_id; /* base class << 8 | subclass, e.g. 0x0200 */
    uint8_t prog_if, revision;
    char vendor_name[128]; /* from pci.ids; "" when unknown */
    char device_name[256]; /* "" when unknown */
    char class_name[128];  /* the subclass name, else the class name; "" when unknown */
    char driver[64];       /* "" when unbound */
    int iommu_group;       /* -1 when none */
    int numa_node;         /* -1 when unknown */
    char physfn[NODE_PCI_ADDRESS_SIZE]; /* the PF's address for an SR-IOV VF, else "" */
    int sriov_totalvfs, sriov_numvfs;   /* -1 unless an SR-IOV PF */
    bool is_bridge;                     /* class 0x0604 */
};

struct node_pci;

/* The error message of a failed scan: libpci's, or which attribute could not be read. */
struct node_pci_err {
    char message[256];
};

/*
 * Opens the sysfs root `sysfs_root` (NULL = "/sys") and loads the names from `ids_path`
 * (NULL = libpci's default, /usr/share/misc/pci.ids on Debian; the udev hwdb is never used, so
 * names come from that one file). Returns 0 and sets `*ret`, -ENOENT (or another -errno) when
 * the root or the pci.ids file cannot be opened, -EINVAL when pci.ids cannot be parsed, or
 * -ENOMEM.
 */
int node_pci_new(const char *sysfs_root, const char *ids_path, struct node_pci **ret);

/* Frees `p` (takes NULL); returns NULL. */
struct node_pci *node_pci_free(struct node_pci *p);

/*
 * Lists the PCI functions below the root, sorted by (domain, bus, device, function). On success
 * returns 0 and sets `*ret_devs` (an array the caller frees with node_pci_devs_free(); NULL when
 * there are none) and `*ret_count`. On failure returns -EIO when libpci failed (a device
 * vanished mid-scan, an unreadable root) or the -errno of a sysfs attribute that exists but
 * cannot be read or parsed, -ENOMEM, and fills `err` (may be NULL) with the reason.
 */
int node_pci_scan(struct node_pci *p, struct node_pci_dev **ret_devs, size_t *ret_count,
                  struct node_pci_err *err);

/* Frees an array from node_pci_scan(). Takes NULL. */
void node_pci_devs_free(struct node_pci_dev *devs);
