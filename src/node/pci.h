/* SPDX-License-Identifier: Apache-2.0 */
/*
 * node/pci.h - PCI device discovery: libpci on a configurable sysfs root, names from pci.ids.
 *
 * A `struct node_pci` lives as long as the agent: it holds the sysfs root (an fd and the path
 * libpci is pointed at) and one libpci context used only for name lookups, which loads pci.ids
 * once. node_pci_scan() lists bus/pci/devices itself (through the root fd, node/sysfs), makes a
 * fresh libpci context for every scan, asks it for each listed device (pci_get_dev) and takes
 * identity, class and the Device Serial Number (config space) from libpci, the driver, IOMMU
 * group, NUMA node, SR-IOV facts, the PCI root (from the device's link in bus/pci/devices), the
 * physical slot and the function's own serial (node/pciident) and the AER error totals
 * (node/pciaer) from sysfs.
 *
 * One bad device never hides the others. An entry of bus/pci/devices whose name is not a PCI
 * address, that is not a directory (a regular file, a dangling link, a link loop), or whose
 * identity (vendor, device, class) libpci cannot read is skipped and described in the result's
 * `skipped` list. A device whose other facts cannot be read (an oversized or malformed
 * attribute, a link that loops or leads outside its directory) is listed with what could be
 * read and a `problem` sentence; the facts it lacks take their "none" values.
 *
 * libpci's error callback is declared noreturn and its default calls exit(1). Ours records the
 * message and siglongjmp()s back: around one device's fill_info, the device is skipped; around
 * the rest of the scan (setup), the scan fails with -EIO and the message.
 *
 * This is the only file that includes <pci/pci.h>. Blocking (sysfs reads; a 1024-function
 * scan takes milliseconds), so run it where blocking is allowed. No logging. A `struct
 * node_pci` is used by one thread at a time; scans on different threads are independent.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/err.h"
#include "node/pciaer.h"
#include "node/pciident.h"
#include "node/sysfs.h"

/* Room for the longest address, "ffffffff:ff:1f.7" (an 8-digit domain), and its NUL. */
#define NODE_PCI_ADDRESS_SIZE 17

/* A network interface's name and its NUL (the kernel's IFNAMSIZ). */
#define NODE_PCI_NETDEV_SIZE 16

struct node_pci_dev {
    char address[NODE_PCI_ADDRESS_SIZE]; /* "0000:00:1f.6"; the domain has 4 to 8 hex digits */
    uint16_t vendor_id, device_id, subsystem_vendor_id, subsystem_device_id;
    uint16_t class_id; /* base class << 8 | subclass, e.g. 0x0200 */
    uint8_t prog_if, revision;
    char vendor_name[128]; /* from pci.ids; "" when unknown */
    char device_name[256]; /* "" when unknown */
    char class_name[128];  /* the subclass name, else the class name; "" when unknown */
    char driver[64];       /* "" when unbound (or the link does not lead to bus/pci/drivers/) */
    int iommu_group;       /* -1 when none */
    int numa_node;         /* -1 when unknown */
    /* The PCI root the device hangs off, "pci<domain>:<bus>" ("pci0000:00"): the first
     * element of that form in the device's real path (devices/pci0000:00/0000:00:1c.0/...);
     * "" when unknown */
    char pcie_root[24];
    char physfn[NODE_PCI_ADDRESS_SIZE]; /* the PF's address for an SR-IOV VF, else "" */
    /* -1 unless an SR-IOV PF, or when unreadable (sriov_numvfs also when above sriov_totalvfs:
     * one of them is wrong); at most 65535 (the kernel's are 16-bit) */
    int sriov_totalvfs, sriov_numvfs;
    /* A VF's N in its PF's virtfnN link, else -1 (a VF, one with physfn, whose index cannot be
     * read has a problem that says so) */
    int sriov_vf_index;
    /* An SR-IOV PF's network interface (the first entry of its net/ directory), else "" */
    char netdev[NODE_PCI_NETDEV_SIZE];
    /* What identifies it when its address changes (node/pciident.h): the PCIe Device Serial
     * Number ("00-11-22-33-44-55-66-77", the same on every function of a card), else a network
     * function's permanent MAC address, else an NVMe controller's serial; "" (source NONE) when
     * it has none that can be read. The DSN needs all of config space, which sysfs gives only to
     * root (others read 64 bytes). */
    char serial[NODE_PCIIDENT_SERIAL_SIZE];
    enum node_pciident_source serial_source;
    /* The physical slot it sits in (the name of its bus/pci/slots entry), else "" */
    char slot[NODE_PCIIDENT_SLOT_SIZE];
    bool is_bridge; /* class 0x0604 */
    /* Its AER error totals (node/pciaer.h), each -1 when it has none (bridges: not read) */
    struct node_pciaer aer;
    /* What could not be read, for people ("numa_node: malformed; iommu_group: symbolic link
     * loop"); "" when everything could. */
    char problem[256];
};

/* What a scan found. Owned by the caller; freed with node_pci_scan_result_done(). */
struct node_pci_scan_result {
    struct node_pci_dev *devs; /* sorted by (domain, bus, device, function); NULL when none */
    size_t n_devs;
    struct node_sysfs_skip *skipped; /* sorted by name (strcmp); NULL when none */
    size_t n_skipped;
};

struct node_pci;

/*
 * Opens the sysfs root `sysfs_root` (NULL = "/sys") and loads the names from `ids_path`
 * (NULL = libpci's default, /usr/share/misc/pci.ids on Debian; the udev hwdb is never used, so
 * names come from that one file). Returns 0 and sets `*ret`, -ENOENT (or another -errno) when
 * the root or the pci.ids file cannot be opened, -EINVAL when pci.ids cannot be parsed, or
 * -ENOMEM. pci.ids is read again by a later scan only for ids not seen before (the names of
 * those seen are kept); a scan that cannot read it then gives those devices empty names and a
 * problem that says so.
 */
int node_pci_new(const char *sysfs_root, const char *ids_path, struct node_pci **ret);

/* Frees `p` (takes NULL); returns NULL. */
struct node_pci *node_pci_free(struct node_pci *p);

/*
 * Lists the PCI functions below the root. On success returns 0 and fills `*ret` (devices that
 * could be read, possibly with a problem each, and entries that were skipped). Fails only when
 * the scan as a whole cannot be made: -errno when bus/pci/devices cannot be listed, -EIO when
 * libpci failed to set up, -ENOMEM; `ret_err` (may be NULL) then says why.
 */
int node_pci_scan(struct node_pci *p, struct node_pci_scan_result *ret, struct err *ret_err);

/*
 * Brings `res`, the result of an earlier scan, up to date for a change of the devices
 * `addresses` (n of them; those of uevents): reads again each of them and the PF each hangs off
 * (before and after), takes out those gone from bus/pci/devices, and gives each VF of a PF read
 * again its index from that PF's virtfnN links (a VF whose index they now give otherwise is read
 * again too). Everything else is kept as it was, so `res` then equals what node_pci_scan()
 * would give when nothing else changed. The links of the devices are looked up from the root
 * (no map of bus/pci/drivers and kernel/iommu_groups is made). On success returns 0, leaves
 * the addresses read again (those given among them, present or not) in `*ret_read` (malloc'd,
 * `*ret_n_read` of them; may be NULL). Fails, leaving `res` as it was, with -EINVAL when an
 * address is not one as the kernel names PCI devices, -EAGAIN when a VF read again hangs off a
 * PF that was not (not a local change), -EIO when libpci failed, -ENOMEM, -errno: the caller
 * scans everything then.
 */
int node_pci_rescan_devices(struct node_pci *p, struct node_pci_scan_result *res,
                            const char *const *addresses, size_t n,
                            char (**ret_read)[NODE_PCI_ADDRESS_SIZE], size_t *ret_n_read,
                            struct err *ret_err);

/* Frees what a scan result holds and zeroes it. Takes NULL. */
void node_pci_scan_result_done(struct node_pci_scan_result *r);

/* The device at `address` in a scan's result (a binary search in its order), NULL when the
 * result has none (or `address` is not a PCI address as the kernel names devices). */
const struct node_pci_dev *node_pci_scan_find(const struct node_pci_scan_result *r,
                                              const char *address);
