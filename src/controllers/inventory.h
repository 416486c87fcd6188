/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/inventory.h - the agent's PCI inventory: scans sysfs (node/pci.c) into the
 * desired PCIDevice of every function (bridges left out) and hands each successful scan to
 * its owner. Scans at start, every resync period, on SIGHUP (the process's rescan hook) and
 * after kernel uevents, debounced: a burst of them (a driver probing many functions) becomes
 * one rescan once they have been quiet for 250 ms, at most 2 s after the first. A failed scan
 * keeps the previous inventory. Logs; registers the hostdevd_pci_* and hostdevd_uevent*
 * metrics.
 */
#pragma once

#include <stdbool.h>

struct ev_loop;
struct map;
struct metrics;
struct inventory;

struct inventory_config {
    struct ev_loop *loop;
    struct metrics *metrics;
    const char *node_name;     /* borrowed, as the strings below */
    const char *sysfs_root;    /* "/sys" */
    const char *proc_root;     /* "/proc" */
    const char *pci_ids;       /* NULL: libpci's */
    double resync;             /* seconds between full rescans */
    const char *uevent_source; /* "kernel", "udev" or "none" */
    /* Takes the desired objects of a scan (name -> struct pcidevice_spec). */
    void (*on_scan)(struct map *want, void *userdata);
    void *userdata;
};

/* Opens PCI access. Returns 0 and the inventory, or a negative errno after logging why. */
int inventory_new(const struct inventory_config *cfg, struct inventory **ret);
/* Scans now and starts the resync timer and the uevent monitor. */
void inventory_start(struct inventory *inv);
/* Scans now; `why` is logged ("start", "resync", "SIGHUP", "uevent"). */
void inventory_scan(struct inventory *inv, const char *why);

/* Process part hooks (controllers/process.h); userdata is the inventory. */
void inventory_rescan(void *userdata);
void inventory_stop(void *userdata);
void inventory_free(void *userdata);
