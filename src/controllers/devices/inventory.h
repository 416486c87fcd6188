/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/devices/inventory.h - the agent's inventory: scans sysfs into the desired PCIDevice
 * of every PCI function (node/pci.c; bridges left out) and the desired USBDevice of every USB
 * device (node/usb.c; root hubs left out), and hands each successful scan to its owner. Scans
 * at start, every resync period, on SIGHUP (the process's rescan hook) and after kernel uevents
 * (one monitor of every subsystem; pci and usb events rescan theirs, mediated-device events are
 * handed on: inventory_mdevs_changed; the rest are dropped), debounced: a burst of them (a driver
 * probing many functions, a hub with its devices) becomes one rescan of the subsystems it touched
 * once they have been quiet for 250 ms, at most 2 s after the first. A failed scan keeps the
 * previous inventory. Logs; registers the hostdevd_pci_*, hostdevd_usb_* and hostdevd_uevent*
 * metrics.
 */
#pragma once

#include "controllers/runtime/part.h"

#include <stdbool.h>

struct ev_loop;
struct map;
struct metrics;
struct inventory;

struct inventory_config {
    struct part_env env;       /* loop, API client, metrics, node and its paths (runtime/part.h) */
    const char *pci_ids;       /* NULL: libpci's */
    const char *usb_ids;       /* NULL: /usr/share/misc/usb.ids */
    double resync;             /* seconds between full rescans */
    const char *uevent_source; /* "kernel", "udev" or "none" */
    bool usb;                  /* scan USB devices too */
};

/* What a scan emits (runtime/manager.h), with a struct devobjs_scan (devices/devobjs.h):
 * pcidevices_scanned (name -> struct pcidevice_spec; `unreadable`: the PCI addresses of the
 * devices present but skipped because their identity could not be read, whose objects are to
 * be kept) and usbdevices_scanned (name -> struct usbdevice_spec; the port paths skipped). */

/* Emitted by a part whose node writes change the devices (SR-IOV VFs come and go): scans now,
 * `data` is the why that is logged (a string constant). */
struct topic;
extern const struct topic inventory_rescan_wanted;

/* Emitted (with NULL) after a burst of kernel uevents that say the node's mediated devices changed
 * and asked for no PCI scan: an mdev parent registered or unregistered (the kernel's "change"
 * with MDEV_STATE on the parent device, of any subsystem: a virtual parent such as mtty is no
 * PCI device) or an instance came or went (subsystem mdev). A PCI scan is not followed by it:
 * whoever scans the mdevs watches pcidevices_wanted too. */
extern const struct topic inventory_mdevs_changed;

/* Opens PCI access. Returns 0 and the inventory, or a negative errno after logging why. */
int inventory_new(const struct inventory_config *cfg, struct inventory **ret);
/* Scans now; `why` is logged ("start", "resync", "SIGHUP", "uevent"). */
void inventory_scan(struct inventory *inv, const char *why);

/* Frees the inventory (also its part hook). Takes NULL. */
void inventory_free(void *userdata);

/* The part (controllers/runtime/part.h): start, stop, drain and free, as its own; `self` is
 * what inventory_new returned. */
extern const struct part_ops inventory_part;
