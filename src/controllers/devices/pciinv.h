/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/devices/pciinv.h - the agent's PCI inventory in memory: the last scan's result
 * (node/pci.h) and the desired PCIDevice of each function (bridges left out), kept between scans
 * so that a change of some devices (kernel uevents) is read and described again for those
 * devices and the neighbours the change touches only:
 * - read again (node_pci_rescan_devices): the devices of the uevents, the PF each hangs off
 *   (before and after), and a VF whose index its PF's links now give otherwise;
 * - described again (the spec, its blockers): each device read again, the members of its IOMMU
 *   group before and after (their IOMMUGroupShared blocker names its driver), and the VFs of a PF
 *   read again whose network interface changed (their parent SRIOVNetworkDevice's name).
 * The result then equals a full scan's, when nothing else changed (unit-tested on fixture trees:
 * test/unit/test_pcirescan.c). A change is not local, and a full scan is made instead, when a
 * device read again is or was a bridge (its subordinate devices), when an address is not one as
 * the kernel names PCI functions, when a VF read again turns out to hang off a PF that was not
 * read, and before any scan succeeded. What sysfs does not announce with a uevent of the device
 * (AER counters, a mount or route of the host's, a network interface renamed) is seen by the
 * next full scan (start, resync, SIGHUP) only, for the devices not read again.
 * Logs each device's problem once (until it changes). Blocking (sysfs reads); loop thread.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "base/err.h"

struct map;
struct node_pci_scan_result;
struct pciinv;

struct pciinv_config {
    const char *node_name;
    const char *sysfs_root; /* NULL: /sys */
    const char *proc_root;  /* for the host-use blockers */
    const char *pci_ids;    /* NULL: libpci's */
};

/* Opens PCI access (node_pci_new). Returns 0 and sets `*ret`, or -errno. */
int pciinv_new(const struct pciinv_config *cfg, struct pciinv **ret);

/* Takes NULL; returns NULL. */
struct pciinv *pciinv_free(struct pciinv *inv);

/* Scans everything and describes every function again. Returns 0, or -errno with `ret_err` set
 * (the previous inventory kept). */
int pciinv_scan(struct pciinv *inv, struct err *ret_err);

/* Brings the inventory up to date for a change of the PCI functions `addresses` (n of them, the
 * sysnames of pci uevents; repeats are fine). Returns 1 when it read and described again only what
 * the change touches, 0 when it scanned everything instead (`ret_err` then says why: see above),
 * -errno as pciinv_scan(). */
int pciinv_update(struct pciinv *inv, const char *const *addresses, size_t n, struct err *ret_err);

/* A copy of the desired PCIDevices: name -> struct pcidevice_spec, a map of
 * pcidevices_new_want(); NULL on OOM. */
struct map *pciinv_want(const struct pciinv *inv);

/* The PCI entries the last scan or update skipped (their identity unreadable): a set, keys
 * only (map_new(NULL)); NULL on OOM. */
struct map *pciinv_unreadable(const struct pciinv *inv);

/* The scan result the inventory holds (empty before a scan). */
const struct node_pci_scan_result *pciinv_result(const struct pciinv *inv);

/* What is published, counted. */
struct pciinv_tally {
    unsigned long devices, bridges, on_vfio, on_host, unbound, no_iommu;
};
void pciinv_count(const struct pciinv *inv, struct pciinv_tally *ret);

/* What the last pciinv_scan or pciinv_update did: functions read, specs made. */
struct pciinv_work {
    size_t read, described;
};
void pciinv_last_work(const struct pciinv *inv, struct pciinv_work *ret);

/* One log line per device and problem, not per rescan: a warning `what` for `key` with `why`,
 * logged again only when `why` changes (`reported`: key -> the problem last logged, its values
 * freed by the map). The USB side of the inventory uses it too. */
void pciinv_report_once(struct map *reported, const char *key, const char *what, const char *why);
