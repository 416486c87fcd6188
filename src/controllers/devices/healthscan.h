/* SPDX-License-Identifier: Apache-2.0 */
/*
 * controllers/devices/healthscan.h - what each PCI scan says of the devices' health, reported
 * to the node's health store (controllers/health/health.h):
 * - AERFatal: a device's AER fatal total (node/pciaer.h) grew past the value this agent first
 *   saw for it (the baseline: taken again when the device comes back after a removal, when its
 *   ids change, and after each report, so that only a new error reports again). Growth while the
 *   agent was not running is not seen: a restart takes the baseline anew.
 * - Removed: a device a PCIDeviceClaim or a DRA claim holds (binding/ledger.h) is gone from the
 *   scan (surprise removal, or the kernel removed it after an error).
 * - The way back from Removed: the device seen again with the vendor and device ids it had when
 *   it went (or, after a restart, those its PCIDevice still shows) is cleared; another device
 *   at that address stays Removed until the administrator's recheck.
 * Also the hostdevd_pci_aer_errors_total{device,severity} counters (the kernel's totals, copied
 * at every scan; a device that goes keeps its last values until the agent restarts).
 *
 * The decisions are pure (healthscan_present, unit-tested); the part runs on the loop, on
 * pcidevices_wanted and this node's PCIDevice events (a Removed taken back), and logs each
 * report and clear.
 */
#pragma once

#include <stdbool.h>

#include "controllers/devices/pcidevice.h"

/* What the part remembers of a device between scans. */
struct healthscan_seen {
    char vendor_id[5], device_id[5]; /* its ids when last seen */
    long long fatal;                 /* the baseline of its AER fatal total; -1: none yet */
    bool gone;                       /* absent from the last scan */
    /* the ids it had when it went (or those its PCIDevice showed when the store took a Removed
     * back after a restart); "" when unknown */
    char removed_vendor[5], removed_device[5];
};

/* What healthscan_present() found (bits). */
enum {
    HEALTHSCAN_AER_FATAL = 1, /* its fatal total grew past the baseline */
    HEALTHSCAN_BACK = 2,      /* a Removed device back with the ids it had */
};

/* A device present in a scan (`s`) against what was seen of it (`seen`; when never seen, `known`
 * is false and `seen` is zeroed with fatal -1). `removed`: the store says it was Removed.
 * Returns the HEALTHSCAN_* bits and updates `seen` (ids, baseline, gone = false; the removal's
 * ids forgotten once it is not Removed); `*ret_before` is the baseline a grown total is reported
 * against. */
unsigned healthscan_present(struct healthscan_seen *seen, bool known,
                            const struct pcidevice_spec *s, bool removed, long long *ret_before);

/* The part (controllers/runtime/part.h). */
extern const struct part_ops healthscan_part;
